"""Where code generation stands in the loop IR, where it walks statements itself.

A nest is emitted node by node (emit_nodes.py); a workspace's nests, and the sums inside
their expressions, are still walked by their emitters (workspace_lower, values,
monoid), which at each loop take the loop IR's node for it: the lattice, the point each
loop runs, the levels it iterates and locates, the cases with their expressions, and
the notes. Their scope is the body being emitted (a nest, then the case of the loop
around it), and a loop is the nearest node in that scope over the same index computing
the same expression, whose lattice's levels are the ones the emitter has reached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ...ir.cin import Expr, Operand, operands
from ...ir.lattice import Iter
from ...ir.loops import Block, Loop, LoopNode, Merge, Node, children
from ...ir.schedule import InternalCompilerError


class LoopCursor:
    """The scope the emitter is in, narrowed as it enters a case's body."""

    def __init__(self, scope: Node) -> None:
        self.scope = scope

    @contextmanager
    def inside(self, scope: Node) -> Iterator[None]:
        """Emit within ``scope`` (a case's body), then return to the enclosing one."""
        outer, self.scope = self.scope, scope
        try:
            yield
        finally:
            self.scope = outer

    def loops(self, var: str, expr: Expr, find: Callable[[Operand], Iter | None]
              ) -> list[LoopNode]:
        """The nodes, one per lattice point in order, of the loop over ``var`` computing
        ``expr`` where ``find`` gives each operand's next level: the nearest in scope."""
        reached = {it for op in operands(expr) if (it := find(op)) is not None}
        for group in _groups(self.scope, var, expr):
            lattice = group[0].chosen.lattice
            levels = {it for point in lattice.points for it in point if not it.is_universe}
            if levels <= reached:
                return group
        raise InternalCompilerError(f"the loop IR has no loop over {var} computing {expr} "
                                    "where code generation reached it")


def _groups(scope: Node, var: str, expr: Expr) -> Iterator[list[LoopNode]]:
    """Loops over ``var`` computing ``expr`` in ``scope``, nearest first, each with the
    loops of its lattice's other points (siblings built together)."""
    level = [scope]
    while level:
        following: list[Node] = []
        for node in level:
            if _matches(node, var, expr):
                yield [node]
                continue
            if isinstance(node, Block):
                group = [item for item in node.items if _matches(item, var, expr)]
                if group:
                    yield _one_lattice(group)
            following += children(node)
        level = following


def _matches(node: Node, var: str, expr: Expr) -> bool:
    return isinstance(node, (Loop, Merge)) and node.index == var and node.expr == expr \
        and node.chosen is not None


def _one_lattice(group: list[LoopNode]) -> list[LoopNode]:
    """The first node's loops: those built from its lattice."""
    lattice = group[0].chosen.lattice
    return [node for node in group if node.chosen.lattice is lattice]
