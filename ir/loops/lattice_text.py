"""The ``lattice`` stage of ``llvsparse dump``: each loop's iteration lattice, as its
program's loop nodes carry it (``Chosen.lattice``), one line per lattice in program order.

A lattice's points are lowered into consecutive loop nodes (a merge and the loops over
its tails), so a line is written where a node's lattice differs from the one before.
Under the line, the fast forms the passes chose that change how many coordinates one
step visits.
"""

from __future__ import annotations

from ..concrete.algebra import region_text
from ..concrete.expressions import Operand, operands
from ..concrete.lattice import Iter, Lattice
from ..types import TensorType
from .nodes import Clear, LoopNode, Program, loops_of, named_levels, target_name, walk


def lattice_text(program: Program, types: dict[str, TensorType]) -> str:
    """One line per lattice of ``program``: its index, its points (the levels each
    co-iterates), the expression it computes and that expression's region."""
    loops = [n for n in loops_of(program.root) if n.chosen is not None]
    names = _operand_names(loops)
    lines: list[str] = []
    previous: Lattice | None = None
    cleared = {target_name(n.name): n.value for n in walk(program.root) if isinstance(n, Clear)}

    def fill_of(op: Operand) -> float:  # an operand's, or a temporary's (as it is cleared)
        return types[op.tensor].fill if op.tensor in types else cleared[op.tensor]

    for node in loops:
        lattice = node.chosen.lattice
        if lattice is not previous:
            region = region_text(node.expr, fill_of, lambda op: op.tensor)
            lines.append(f"{node.index}: {_points(lattice, names)}    over {node.expr}    "
                         f"region {region}")
        if node.jam:
            lanes = ", then ".join(str(n) for n in node.jam)
            lines.append(f"{node.index}: {lanes} positions per step (jammed)")
        if node.other is not None and node.other.pairs:
            lines.append(f"{node.index}: the two halves side by side, their sums in step "
                         "(paired, other form)")
        previous = lattice
    return "\n".join(lines)


def _operand_names(loops: list[LoopNode]) -> dict[int, str]:
    """Each operand's tensor, by the operand's number (what a lattice's points name)."""
    names = {ref.uid: ref.tensor for node in loops for ref in named_levels(node)
             if not ref.universe}
    for node in loops:
        names.update({op.uid: op.tensor for op in operands(node.expr)
                      if isinstance(op, Operand)})
    return names


def _points(lattice: Lattice, names: dict[int, str]) -> str:
    def name(it: Iter) -> str:
        return "U" if it.is_universe else f"{names[it.uid]}.{it.level}"
    return " > ".join("{" + ", ".join(sorted(name(i) for i in point)) + "}"
                      for point in lattice.points)

