"""Whether a program's work is bounded by what its operands store (issue 32).

A loop over an index's universe is paid by the index's extent. That is the bound where
the result may hold every coordinate (a union with a constant, a dense output walked
anyway), but not where the loop runs only because an operand holds the index at a level
below one whose index is not bound yet: the loop then walks the extent once per entry
of the levels inside it, to locate into that operand (``max(A(i,j), A(i,j))`` over a
row-major A with a locating column level, into a column-major output: columns x rows).
Lowering (plan/lowering.py) then prefers a plan with the operand converted.
"""

from __future__ import annotations

from ..concrete.expressions import operands
from ..types import TensorType
from .nodes import Bind, Block, Loop, Merge, Node, Program, children, named_levels


def unbounded_walk(program: Program, types: dict[str, TensorType]) -> str | None:
    """Why ``program`` walks an index's extent to locate into a level whose parents'
    indices are not all bound there, or None."""
    return _walk(program.root, frozenset(), types)


def _walk(node: Node, bound: frozenset[str], types: dict[str, TensorType]) -> str | None:
    if isinstance(node, Block):
        for item in node.items:
            if (reason := _walk(item, bound, types)) is not None:
                return reason
            if isinstance(item, Bind):
                bound |= {item.index}
        return None
    if isinstance(node, (Loop, Merge)):
        if any(ref.universe for ref in named_levels(node)) and node.expr is not None:
            reason = _discordant(node.index, node.expr, bound, types)
            if reason is not None:
                return reason
        bound |= {node.index}
    return next((r for child in children(node) if (r := _walk(child, bound, types))
                 is not None), None)


def _discordant(index: str, expr: object, bound: frozenset[str],
                types: dict[str, TensorType]) -> str | None:
    for op in operands(expr):
        if op.complement or index not in op.vars or op.tensor not in types:
            continue  # (a temporary lowering added has no type here)
        k = op.vars.index(index)
        if types[op.tensor].levels[k].full or all(v in bound for v in op.vars[:k]):
            continue
        return (f"index {index} is looped over its extent to locate it in level {k} of "
                f"{op.tensor}, whose index {next(v for v in op.vars[:k] if v not in bound)} "
                "is not bound yet")
    return None


def merged_tops(program: Program, types: dict[str, TensorType]) -> list[str]:
    """Operands whose top level, unique and unable to locate, is merged inside another
    loop: each iteration of that loop walks (or gallops through) the level again (DCSR
    SpGEMM merges each row's k list against all of B's rows). With the level full, the
    loop inside would locate instead; converting it costs its extent once per call."""
    found: list[str] = []

    def visit(node: Node, nested: bool) -> None:
        if isinstance(node, Merge) and nested:
            for ref in node.iterators:
                # A temporary lowering added (an operand workspace) has no type here.
                level = None if ref.universe or ref.tensor not in types else \
                    types[ref.tensor].levels[ref.level]
                if ref.level == 0 and level is not None and not level.can_locate \
                        and level.unique and ref.tensor not in found:
                    found.append(ref.tensor)
        inside = nested or isinstance(node, (Loop, Merge))
        for child in children(node):
            visit(child, inside)

    visit(program.root, False)
    return found
