"""Build concrete index notation statements from the scheduler's nests.

The scheduler decides loop orders, splits additive statements and peels sums; this
turns those decisions into one statement tree (a sequence of loop nests), the form the
rest of the compiler can print, rewrite (workspaces) and, later, lower.
"""

from __future__ import annotations

from llvsparse.operators import ADD

from .cin import hoist_sums, peel_sums
from .schedule import Nest
from .statements import Access, Affine, Assign, Forall, IndexExpr, IndexVar, Stmt, sequence


def output_access(nest: Nest) -> Access:
    """The assigned tensor's access; an index computed from blocked levels' variables
    becomes the affine expression that computes it."""
    derived = dict(nest.assign.derived)
    indices: list[IndexExpr] = []
    for var in nest.assign.vars:
        if var in derived:
            indices.append(Affine(tuple((IndexVar(p), m) for p, m in derived[var])))
        else:
            indices.append(IndexVar(var))
    return Access(nest.assign.tensor, tuple(indices))


def nest_statement(nest: Nest) -> Stmt:
    """``forall(v1, ... forall(vn, out(...) op= body))`` in the nest's loop order.

    The sums the scheduler peeled became loops, so the assignment reduces with addition;
    so does a split statement after the first (it adds its term to the result).
    """
    summed, _ = peel_sums(hoist_sums(nest.assign.rhs))
    reduce_op = ADD if summed or nest.assign.accumulate else None
    stmt: Stmt = Assign(output_access(nest), reduce_op, nest.body)
    for var in reversed(nest.order):
        stmt = Forall(IndexVar(var), stmt)
    return stmt


def statement_of(nests: list[Nest]) -> Stmt:
    """The whole kernel: its nests in order (a sequence for a split statement)."""
    return sequence([nest_statement(n) for n in nests])
