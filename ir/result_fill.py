"""The fill value of a kernel's result: its expression evaluated where no operand stores
an entry (paper 004 section 3.3), from the operands' fill values in their types."""

from __future__ import annotations

from itertools import count

import numpy as np

from llvsparse import notation as nt

from .cin import Apply, Const, Expr, Operand, Sum
from .lattice import expr_fill
from .types import TensorType


def result_fill(assignment: nt.Assignment, types: dict[str, TensorType], dtype: str) -> float:
    """The result's fill value in ``dtype``: ``A(i) + 1`` has fill 1 and keeps A's
    pattern; a fill that ``dtype`` cannot hold (NaN in an int64 result) is refused."""
    uids = count()

    def convert(expr: nt.Expr) -> Expr:
        if isinstance(expr, nt.Access):
            return Operand(expr.tensor, tuple(v.name for v in expr.indices), next(uids),
                           expr.complement)
        if isinstance(expr, nt.Literal):
            return Const(float(expr.value))
        if isinstance(expr, nt.Call):
            return Apply(expr.op, tuple(convert(a) for a in expr.args))
        assert isinstance(expr, nt.Reduction)
        return Sum(expr.var.name, convert(expr.body), expr.op, expr.hidden)

    value = expr_fill(convert(assignment.rhs), lambda op: types[op.tensor].fill)
    if value is None:  # a sum of a term absent at a value other than 0: computed everywhere
        return 0.0
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
