"""From index notation to concrete index notation, given the operands' tensor types."""

from __future__ import annotations

from itertools import count

from ..errors import ScheduleError
from ..notation import syntax as nt
from ..notation.operators import ADD
from ..types import TensorType
from . import affine
from .expressions import Apply, Assign, Const, Expr, Operand, Sum


def storage_vars(tensor: str, indices: tuple[str, ...], ttype: TensorType, uid: int,
                 blocked: dict[int, str] | None = None) -> tuple[tuple[str, ...], list[str]]:
    """One variable per storage level; storage-only levels get fresh variables (returned
    too, to be summed over). Blocked levels take the names ``blocked`` gives them by level
    (ir/concrete/affine.py derives their mode's index from them, and sums them)."""
    level_vars, fresh = [], []
    for k, level in enumerate(ttype.levels):
        if level.block:
            if blocked is None or k not in blocked:
                raise ScheduleError(f"{tensor}: blocked levels are not supported here")
            level_vars.append(blocked[k])
        elif level.mode is None:
            var = f"{tensor}{uid}_{k}"
            fresh.append(var)
            level_vars.append(var)
        else:
            level_vars.append(indices[level.mode])
    return tuple(level_vars), fresh


def to_concrete(assignment: nt.Assignment, types: dict[str, TensorType]) -> Assign:
    """Concrete index notation of ``assignment``. Repeated reads of one tensor at the
    same indices are one operand (one uid, one iterator) unless it has storage-only or
    blocked levels (their hidden sums are per use): a sum of n uses of A(i) is then one
    loop over A, not a union of n operands with 2**n cases."""
    uids = count()
    plan = affine.plan(assignment, types)
    derived: dict[str, list[tuple[str, int]]] = {
        d.index: list(d.parts) for d in plan.derivations}
    shared: dict[tuple[str, tuple[str, ...], bool], Operand] = {}

    def convert(expr: nt.Expr) -> Expr:
        if isinstance(expr, nt.Access):
            names = plan.names.get(id(expr)) or tuple(v.name for v in expr.indices)
            walked = plan.walked.get(id(expr), [])
            if (expr.tensor, names, expr.complement) in shared:
                return shared[expr.tensor, names, expr.complement]
            uid = next(uids)
            level_vars, hidden = storage_vars(expr.tensor, names, types[expr.tensor], uid,
                                              plan.levels.get(id(expr)))
            hidden = walked + hidden
            if hidden and expr.complement:
                raise ScheduleError(f"!{expr.tensor}: a complement needs a tensor without "
                                    "storage-only or blocked levels")
            node: Expr = Operand(expr.tensor, level_vars, uid, expr.complement)
            if not hidden:
                shared[expr.tensor, names, expr.complement] = node
            for var in reversed(hidden):
                node = Sum(var, node, hidden=True)
            return node
        if isinstance(expr, nt.Literal):
            return Const(expr.value)
        if isinstance(expr, nt.Call):
            return Apply(expr.op, tuple(convert(a) for a in expr.args))
        assert isinstance(expr, nt.Reduction)
        body = convert(expr.body)
        if expr.var.name in derived:
            if expr.op is not ADD:  # the loops' += would replace max, min-plus, ...
                raise ScheduleError(f"{expr.op.name}({expr.var.name}, ...) reduces an index "
                                    "of blocked levels (or one derived from a walked "
                                    "operand's coordinates), whose loops only sum; convert "
                                    "the blocked operand to an unblocked format")
            return body  # summed by the loops over the coordinates it is derived from
        return Sum(expr.var.name, body, expr.op, hidden=expr.hidden)

    lhs = assignment.lhs
    names = tuple(v.name for v in lhs.indices)
    out_vars, hidden = storage_vars(lhs.tensor, names, types[lhs.tensor], next(uids))
    if hidden:
        raise ScheduleError(f"output {lhs.tensor} has storage-only levels; "
                            "it cannot be assembled")
    rhs = convert(affine.hoist_sums(assignment.rhs) if plan.inverted else assignment.rhs)
    frozen = tuple((index, tuple(parts)) for index, parts in derived.items())
    return Assign(lhs.tensor, out_vars, rhs, derived=frozen,
                  offsets=tuple((d.index, d.offset) for d in plan.derivations if d.offset),
                  guards=tuple((d.index, *d.guard) for d in plan.derivations
                               if d.guard is not None),
                  divisors=tuple((d.index, d.divisor) for d in plan.derivations
                                 if d.divisor != 1))
