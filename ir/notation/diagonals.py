"""Diagonal uses of operands (``A(i,i)``) whose storage cannot look a coordinate up.

Once ``i`` is bound by one level, a later level that stores ``i`` again must find it;
levels that only iterate (no ``locate`` function) cannot. Such a use becomes
``sum_d(A(i,d) * E(i,d))``, where ``E`` is a hidden operand: the diagonal pattern, a
coordinate list of (i, i) valued True. Its implicit zeros annihilate, so only A's stored
diagonal entries count (inf or NaN elsewhere in A stay out, as in a trace over stored
entries), and the intersection walks A's part under each ``i`` once.
The pattern's values are bound on each call (llvsparse/calls/diagonals.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from ...formats.registry import get_level
from ..errors import ScheduleError
from . import syntax as nt
from .operators import ADD, MUL


class StoredLevel(Protocol):
    """What a diagonal use asks of a format's level: its kind and the mode it stores."""

    kind: str
    mode: int | None


class Layout(Protocol):
    """A format as this rewrite reads it (``llvsparse.Format``): its levels in order."""

    levels: Sequence[StoredLevel]


class DiagonalUse(NamedTuple):
    """Where a pattern operand comes from: the index it spans, the operand it meets and
    that operand's two modes indexed by it."""

    var: str
    tensor: str
    modes: tuple[int, int]


def separate_diagonals(assignment: nt.Assignment, formats: dict[str, Layout]
                       ) -> tuple[nt.Assignment, dict[str, DiagonalUse]]:
    """``assignment`` with every diagonal use that needs it rewritten, and each new
    pattern operand's name with where it comes from."""
    taken = nt.names_in_use(assignment) | set(formats)
    patterns: dict[str, DiagonalUse] = {}

    def rewrite(access: nt.Access) -> nt.Expr:
        mode = _unlocatable_repeat(access, formats[access.tensor])
        if mode is None:
            return access
        if access.complement:
            raise ScheduleError(f"{nt.format_expr(access)}: a complement of a use with a "
                                "repeated index is not supported on this format")
        var = access.indices[mode]
        inner = nt.IndexVar(nt.fresh_name(var.name, taken))
        pattern = nt.fresh_name("diagonal", taken)
        patterns[pattern] = DiagonalUse(var.name, access.tensor,
                                        (access.indices.index(var), mode))
        indices = tuple(inner if m == mode else v for m, v in enumerate(access.indices))
        product = nt.Call(MUL, (rewrite(nt.Access(access.tensor, indices)),
                                nt.Access(pattern, (var, inner))))
        return nt.Reduction(ADD, inner, product, hidden=True)

    rhs = nt.map_accesses(assignment.rhs, rewrite)
    return (assignment if not patterns else nt.Assignment(assignment.lhs, rhs)), patterns


def _unlocatable_repeat(access: nt.Access, fmt: Layout) -> int | None:
    """The mode whose repeated index a level must find but cannot (the later of the two
    levels storing it), or None."""
    if len(set(access.indices)) == len(access.indices):
        return None
    seen: set[nt.IndexVar] = set()
    for level in fmt.levels:
        if level.mode is None:
            continue
        var = access.indices[level.mode]
        if var in seen and "locate" not in get_level(level.kind).functions:
            return level.mode
        seen.add(var)
    return None
