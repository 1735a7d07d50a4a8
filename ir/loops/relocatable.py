"""Whether a level's append functions still write the right arrays when its positions
are counted from zero in a private buffer rather than from a thread's true offset.

Threads that assemble one sparse output may each append their rows' entries into buffers
of their own, counted from position 0, and the buffers are then concatenated in row
order. That gives the serial arrays only if the level's append functions are
*relocatable*: what they store into the appended arrays (those without an initial value)
sits at the entry's own position ``p``, and what they store into the other arrays (the
positions array, one cell per parent row) depends on positions only through a segment's
length ``p_end - p_begin``, at a cell the parent row owns (``p_parent`` plus a constant),
so threads never write the same cell. Compressed (``crd[p] = i``;
``pos[p_parent + 1] = p_end - p_begin``) qualifies; a level that stores absolute
positions does not, and its outputs keep another strategy.

The check is syntactic and errs on refusal: loops, reads of arrays and any other use of
a position make a function not relocatable.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from ...formats.loader import LevelDef

# The positions each append function receives that move with a thread's offset.
_MOVING = {"append_coord": frozenset({"p"}), "append_edges": frozenset({"p_begin", "p_end"})}
_ARGUMENTS = frozenset({"p", "p_begin", "p_end", "p_parent"})  # never reassigned


def appends_relocatably(level: LevelDef) -> bool:
    """Whether ``level``'s append_coord and append_edges are relocatable (module doc)."""
    appended = {name for name, array in level.arrays.items() if array.init is None}
    for name, moving in _MOVING.items():
        function = level.functions.get(name)
        if function is not None and not _Checker(moving, appended).block(function.body):
            return False
    return True


class _Checker:
    """One function's statements, tracking which locals hold moving positions."""

    def __init__(self, moving: frozenset[str], appended: set[str]):
        self.moving, self.appended = set(moving), appended
        self.positions = frozenset(moving)  # the arguments themselves

    def block(self, statements: Iterable[ast.stmt]) -> bool:
        return all(self.statement(s) for s in statements)

    def statement(self, node: ast.stmt) -> bool:
        if isinstance(node, ast.Pass):
            return True
        if isinstance(node, ast.If):
            return self.fixed(node.test) and self.block(node.body) and self.block(node.orelse)
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            return self.store(node.targets[0], node.value)
        return False  # loops, augmented stores, anything else: refuse

    def store(self, target: ast.expr, value: ast.expr) -> bool:
        if isinstance(target, ast.Name):
            if target.id in _ARGUMENTS:
                return False
            if not self.fixed(value):  # once moving, always (branches may differ)
                self.moving.add(target.id)
            return True
        if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)):
            return False
        if not self.fixed(value):
            return False
        if target.value.id in self.appended:  # a private buffer: the entry's own position
            return isinstance(target.slice, ast.Name) and target.slice.id in self.positions
        return _row_cell(target.slice)

    def fixed(self, node: ast.expr) -> bool:
        """Whether ``node`` is the same wherever the thread's positions start."""
        if _is_length(node):
            return True
        if isinstance(node, ast.Name):
            return node.id not in self.moving
        if isinstance(node, ast.Subscript):  # another thread may be writing that cell
            return False
        return all(self.fixed(child) for child in ast.iter_child_nodes(node)
                   if isinstance(child, ast.expr))


def _is_length(node: ast.expr) -> bool:
    """``p_end - p_begin``: a segment's length, the same from any offset."""
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)
            and isinstance(node.left, ast.Name) and node.left.id == "p_end"
            and isinstance(node.right, ast.Name) and node.right.id == "p_begin")


def _row_cell(index: ast.expr) -> bool:
    """``p_parent`` or ``p_parent ± constant``: a cell only the parent row writes."""
    if isinstance(index, ast.Name):
        return index.id == "p_parent"
    return (isinstance(index, ast.BinOp) and isinstance(index.op, ast.Add | ast.Sub)
            and isinstance(index.left, ast.Name) and index.left.id == "p_parent"
            and isinstance(index.right, ast.Constant) and isinstance(index.right.value, int))
