"""Diagonal uses of operands (``A(i,i)``) whose storage cannot look a coordinate up.

Once ``i`` is bound by one level, a later level that stores ``i`` again must find it;
levels that only iterate (compressed, singleton, offset, ...) cannot. Such a use becomes
``sum_d(A(i,d) * E(i,d))``, where ``E`` is a hidden operand: the diagonal pattern, a
coordinate list of (i, i) valued True. Its implicit zeros annihilate, so only A's stored
diagonal entries count (inf or NaN elsewhere in A stay out, as in a trace over stored
entries), and the intersection walks A's part under each ``i`` once. For the same
reason ``E`` needs only the (i, i) that A stores: it is built from A's stored entries,
O(stored entries) rather than O(rows) (a trace of a 2**31-row matrix with 3 entries
built 2**31 coordinates, and ended in numpy's MemoryError after minutes).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import notation as nt
from .format import Format, named_format
from .formats.registry import get_level
from .operators import ADD, MUL


class DiagonalUse(NamedTuple):
    """Where a pattern operand comes from: the index it spans, the operand it meets and
    that operand's two modes indexed by it."""

    var: str
    tensor: str
    modes: tuple[int, int]


def separate_diagonals(assignment: nt.Assignment, formats: dict[str, Format]
                       ) -> tuple[nt.Assignment, dict[str, DiagonalUse]]:
    """``assignment`` with every diagonal use that needs it rewritten, and each new
    pattern operand's name with where it comes from."""
    taken = nt.names_in_use(assignment) | set(formats)
    patterns: dict[str, DiagonalUse] = {}

    def rewrite(access: nt.Access) -> nt.Expr:
        mode = _unlocatable_repeat(access, formats[access.tensor])
        if mode is None:
            return access
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


def _unlocatable_repeat(access: nt.Access, fmt: Format) -> int | None:
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


PATTERN_FORMAT = named_format("coo", 2)


def diagonal_pattern(tensor, use: DiagonalUse, size: int, index_dtype: str):
    """The ``size`` x ``size`` diagonal pattern at the coordinates where ``tensor``
    stores an entry whose two modes of ``use`` agree, as a packed tensor; remembered
    while the tensor's index arrays are sealed and the same."""
    from .tensor import Tensor

    state = tensor._sealed_state()
    key = (use.modes, size, index_dtype)
    memo = tensor.__dict__.get("_diagonal_memo")
    if state is not None and memo is not None and memo[0] == state and memo[1] == key:
        return memo[2]
    coords, _ = tensor._stored_entries()
    first, second = coords[use.modes[0]], coords[use.modes[1]]
    diagonal = np.unique(first[first == second])
    pattern = Tensor.from_coo(np.stack([diagonal, diagonal]),
                              np.ones(len(diagonal), dtype=bool), (size, size), PATTERN_FORMAT,
                              dtype="bool", index_dtype=index_dtype)
    if state is not None:
        tensor._diagonal_memo = (state, key, pattern)
    return pattern
