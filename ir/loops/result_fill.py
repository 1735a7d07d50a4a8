"""Fill values in a kernel: the result's (its expression evaluated where no operand
stores an entry, paper 004 section 3.3, from the operands' fill values in their types)
and what a loop adds up where a term is absent."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import count
from typing import TYPE_CHECKING

import numpy as np

from ..concrete.algebra import FillOf, expr_fill, same_value
from ..concrete.expressions import Apply, Const, Expr, Operand, Sum
from ..notation import syntax as nt
from ..types import TensorType

if TYPE_CHECKING:
    from ..schedule.scheduler import Nest


def result_fill(assignment: nt.Assignment, types: dict[str, TensorType], dtype: str,
                declared: float = 0.0) -> float:
    """The result's fill value in ``dtype``: ``A(i) + 1`` has fill 1 and keeps A's
    pattern; a fill that ``dtype`` cannot hold (NaN in an int64 result) is refused. A
    dense operand stores every entry, so its fill is never read: ``A(i,j) / d(j)`` has
    fill 0 (A absent), not 0 / 0. Where every entry is computed, the output's
    ``declared`` fill stands (a copy of a fill-inf dense view into a dense format)."""
    uids = count()

    def convert(expr: nt.Expr) -> Expr:
        if isinstance(expr, nt.Access):
            return Operand(expr.tensor, tuple(str(v) for v in expr.indices), next(uids),
                           expr.complement)
        if isinstance(expr, nt.Literal):
            return Const(float(expr.value))
        if isinstance(expr, nt.Call):
            return Apply(expr.op, tuple(convert(a) for a in expr.args))
        assert isinstance(expr, nt.Reduction)
        return Sum(expr.var.name, convert(expr.body), expr.op, expr.hidden)

    def fill_of(op: Operand) -> float | None:
        """An operand that stores every entry is never absent: no fill of its counts."""
        ttype = types[op.tensor]
        return None if all(level.full for level in ttype.levels) else ttype.fill

    value = expr_fill(convert(assignment.rhs), fill_of)
    if value is None:  # every point is computed (a dense operand, a sum of a term absent
        value = declared  # at a value other than 0): no fill is ever read

    kind = np.dtype(dtype).kind
    if kind == "b":
        return float(bool(value))
    if kind in "iu":
        if not np.isfinite(value) or value != int(value):
            raise ValueError(f"the result's fill value would be {value} (the expression "
                             f"where no operand stores an entry), which a {dtype} result "
                             "cannot hold")
        return float(int(value))
    return float(np.dtype(dtype).type(value))


@dataclass(frozen=True)
class NestSums:
    """What a nest tells about whether its loops add up the fill of coordinates where
    their expression is absent (see absent_adds), from the scheduler's nest: the loop IR
    builds each loop's lattice and cases with it."""

    accumulate: bool  # the statement adds into its output (+=)
    out_vars: tuple[str, ...]
    derived_parts: frozenset[str]  # loop indices that make up an output index
    order: tuple[str, ...]
    first: bool  # the first nest: it writes what the output holds where its term is absent
    background: float  # what an unwritten output entry holds (a full output is zeroed)
    several: bool  # later nests add to what the first wrote

    @classmethod
    def of(cls, nest: Nest, nests: list[Nest], out: TensorType,
           derived: bool = True) -> NestSums:
        """``derived``: whether the nest's derived output indices count (a workspace's
        producers scatter, and their parts do not)."""
        parts = frozenset(part for _, parts in nest.assign.derived for part, _ in parts) \
            if derived else frozenset()
        background = 0.0 if all(level.full for level in out.levels) else out.fill
        return cls(nest.assign.accumulate, nest.assign.vars, parts, nest.order,
                   nest is nests[0], background, len(nests) > 1)


def absent_adds(sums: NestSums, var: str, expr: Expr, fill_of: FillOf) -> float | None:
    """What a coordinate of ``var``'s loop where ``expr`` is absent contributes, or
    None where that is nothing. Where values are added up (by this loop or another
    of the nest, or into an output an earlier statement wrote), it is ``expr``'s fill
    unless 0: sum_j(A(i,j) + 2) adds 2 there. The first statement writes its fill
    wherever an unwritten entry would read otherwise (a dense output is zeroed by the
    caller, and duplicates of a coordinate list add into it; a split statement's first
    term, min(3, 3 + A(i)) before + B(i,j), has fill 3 where the whole has none), and
    wherever later statements add to it."""
    fill = expr_fill(expr, fill_of)
    if fill is None:
        return None
    if sums.accumulate or any(v not in sums.out_vars and v not in sums.derived_parts
                              for v in (var, *sums.order)):
        return None if fill == 0 else fill
    if not sums.first:
        return None
    differs = not same_value(fill, sums.background)  # NaN is NaN's own fill
    return fill if differs or (sums.several and fill != 0) else None


def body_fill(body: Expr, types: dict[str, TensorType]) -> float:
    """What a reduction's body is where none of its operands stores an entry (0 where
    that depends on extents): what a missed coordinate contributes."""
    fill = expr_fill(body, lambda op: types[op.tensor].fill)
    return 0.0 if fill is None else fill
