"""From index notation to concrete index notation, given the operands' tensor types."""

from __future__ import annotations

from itertools import count

from llvsparse import notation as nt

from .cin import Apply, Assign, Const, Expr, Operand, Sum
from .schedule import ScheduleError
from .types import TensorType


def storage_vars(tensor: str, indices: tuple[str, ...], ttype: TensorType,
                 uid: int) -> tuple[tuple[str, ...], list[str]]:
    """One variable per storage level; hidden levels get fresh variables (returned too)."""
    level_vars, hidden = [], []
    for k, level in enumerate(ttype.levels):
        if level.mode is None:
            var = f"{tensor}{uid}_{k}"
            hidden.append(var)
            level_vars.append(var)
        else:
            level_vars.append(indices[level.mode])
    return tuple(level_vars), hidden


def to_concrete(assignment: nt.Assignment, types: dict[str, TensorType]) -> Assign:
    uids = count()

    def convert(expr: nt.Expr) -> Expr:
        if isinstance(expr, nt.Access):
            uid = next(uids)
            names = tuple(v.name for v in expr.indices)
            level_vars, hidden = storage_vars(expr.tensor, names, types[expr.tensor], uid)
            node: Expr = Operand(expr.tensor, level_vars, uid)
            for var in reversed(hidden):
                node = Sum(var, node)
            return node
        if isinstance(expr, nt.Literal):
            return Const(expr.value)
        if isinstance(expr, nt.Call):
            return Apply(expr.op, tuple(convert(a) for a in expr.args))
        assert isinstance(expr, nt.Reduction)
        return Sum(expr.var.name, convert(expr.body), expr.op)

    lhs = assignment.lhs
    names = tuple(v.name for v in lhs.indices)
    out_vars, hidden = storage_vars(lhs.tensor, names, types[lhs.tensor], next(uids))
    if hidden:
        raise ScheduleError(f"output {lhs.tensor} has storage-only levels; "
                            "it cannot be assembled")
    return Assign(lhs.tensor, out_vars, convert(assignment.rhs))
