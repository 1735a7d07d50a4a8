"""Which output mode threads may split a kernel's work along."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..concrete.expressions import operands
from ..types import TensorType

if TYPE_CHECKING:
    from .scheduler import Nest


def dense_like(out_type: TensorType) -> bool:
    """Levels that are full, insert-only, array-free and sized by their extents: storage
    allocated up front from the shape."""
    return all(lv.full and lv.can_insert and not lv.definition.arrays
               and lv.definition.sized_by_extent for lv in out_type.levels)


def parallel_mode(nests: list[Nest], types: dict[str, TensorType], out: str) -> int | None:
    """The output mode threads may split: the output's first index (every loop over it is
    clamped to a thread's rows; loops outside it run whole in each thread), into a
    dense-like output, so each thread writes only its own rows and the output can be
    allocated up front. (Sparse outputs that threads assemble in phases get their first
    mode where the kernel is built.)

    Loops outside the split index may only walk storage-only levels (diagonals, slots):
    each thread then runs its rows of every diagonal, a contiguous run clamped by its
    bounds (banded SpMV on 2 threads: 1.6x). Under a loop over another index (a
    column-major operand) every thread would walk all of that operand's entries.
    """
    if len(nests) != 1 or not nests[0].order or not nests[0].assign.vars:
        return None
    nest = nests[0]
    split = nest.assign.vars[0]
    if nest.assign.derived or split not in nest.order:
        return None
    outer = set(nest.order[:nest.order.index(split)])
    for op in operands(nest.body):
        levels = types[op.tensor].levels
        if any(var in outer and level.mode is not None for var, level in zip(op.vars, levels)):
            return None
    out_type = types[out]
    return out_type.levels[0].mode if dense_like(out_type) else None
