"""Build concrete index notation statements from the scheduler's nests.

The scheduler decides loop orders, splits additive statements and peels sums; this
turns those decisions into one statement tree (a sequence of loop nests), the form the
rest of the compiler can print, rewrite (workspaces) and, later, lower. A sum left
inside an expression (``y(i) = sum_j(A(i,j) * x(j)) + z(i)``) becomes what code
generation makes of it: a scalar temporary filled by its own loops, under a ``where``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..concrete.expressions import Apply, Expr, Sum, hoist_sums, operands, peel_sums
from ..concrete.statements import (
    Access,
    Affine,
    Assign,
    Forall,
    IndexExpr,
    IndexVar,
    Stmt,
    TensorVar,
    Where,
    sequence,
)
from ..errors import ScheduleError
from ..notation.operators import ADD, Operator
from ..schedule.precompute import Precompute, replaced
from ..schedule.scheduler import Nest, order_loops
from ..types import TensorType
from .nodes import Statement

if TYPE_CHECKING:
    from ..schedule.workspace_schedule import WorkspacePlan


def output_access(nest: Nest) -> Access:
    """The assigned tensor's access; an index computed from blocked levels' variables
    becomes the affine expression that computes it."""
    derived = dict(nest.assign.derived)
    offsets, divisors = dict(nest.assign.offsets), dict(nest.assign.divisors)
    indices: list[IndexExpr] = []
    for var in nest.assign.vars:
        if var in derived:
            indices.append(Affine(tuple((IndexVar(p), m) for p, m in derived[var]),
                                  offsets.get(var, 0), divisors.get(var, 1)))
        else:
            indices.append(IndexVar(var))
    return Access(nest.assign.tensor, tuple(indices))


class _Builder:
    """Builds one kernel's statements, naming scalar temporaries ``t``, ``t1``, ..."""

    def __init__(self, types: dict[str, TensorType]) -> None:
        self.types = types
        self.taken = set(types)

    def temporary(self, like: TensorType) -> TensorVar:
        name, k = "t", 0
        while name in self.taken:
            k += 1
            name = f"t{k}"
        self.taken.add(name)
        return TensorVar(name, TensorType((), 0, like.dtype, like.index_dtype))

    def nest(self, nest: Nest) -> Stmt:
        """``forall(v1, ... forall(vn, out(...) op= body))`` in the nest's loop order.

        The sums the scheduler peeled became loops, so the assignment reduces with
        addition; so does a split statement after the first (it adds its term).
        """
        summed, _ = peel_sums(hoist_sums(nest.assign.rhs))
        reduce_op = nest.reduce_op or (ADD if summed or nest.assign.accumulate else None)
        out = self.types[nest.assign.tensor]
        body = nest.body
        for plan in nest.precomputes:  # read through operand workspaces (precompute.py)
            body = replaced(body, plan)
        stmt = self.assign(output_access(nest), reduce_op, body, set(nest.order), out)
        summed = {v for p in nest.precomputes for v in p.summed}
        for var in reversed(nest.order):
            sums = [p for p in nest.precomputes if p.at == var and p.expr is not None]
            if sums:  # where(consumer, the sum's loops reducing into the row)
                stmt = Where(stmt, sequence([_sum_producer(p) for p in sums]),
                             tuple(p.temporary for p in sums))
            if var in summed:
                continue
            stmt = Forall(IndexVar(var), stmt)
            plans = [p for p in nest.precomputes if p.at == var and p.expr is None]
            if plans:  # each temporary filled before the loop its operand is invariant in
                copies = [Forall(IndexVar(p.var), Assign(Access(p.temporary, (IndexVar(p.var),)),
                                                        None, p.operand)) for p in plans]
                stmt = Where(stmt, sequence(copies), tuple(p.temporary for p in plans))
        return stmt

    def assign(self, access: Access, reduce_op: Operator | None, expr: Expr, bound: set[str],
               like: TensorType) -> Stmt:
        """``access op= expr``, under a ``where`` for each sum left in ``expr``."""
        producers: list[Stmt] = []
        temporaries: list[TensorVar] = []

        def lift(e: Expr) -> Expr:
            if isinstance(e, Apply):
                return Apply(e.op, tuple(lift(a) for a in e.args))
            if not isinstance(e, Sum):
                return e
            vars_, body = peel_sums(e)
            if not vars_:  # a reduction by another operator: one loop
                vars_, body = [e.var], e.body
            try:  # the order code generation picks for the sum's own loops
                order = order_loops(vars_, operands(body), self.types, set(bound))
            except ScheduleError:  # it binds more at that point (blocked parts): as written
                order = vars_
            temp = self.temporary(like)
            inner: Stmt = self.assign(Access(temp, ()), e.op, body, bound | set(order), like)
            for var in reversed(order):
                inner = Forall(IndexVar(var), inner)
            producers.append(inner)
            temporaries.append(temp)
            return Access(temp, ())

        stmt: Stmt = Assign(access, reduce_op, lift(expr))
        if producers:
            stmt = Where(stmt, sequence(producers), tuple(temporaries))
        return stmt


def _sum_producer(plan: Precompute) -> Stmt:
    """A sum workspace's producer: its loops reducing its factors into the row."""
    stmt: Stmt = Assign(Access(plan.temporary, (IndexVar(plan.var),)), ADD,
                        plan.expr if plan.expr is not None else plan.operand)
    for var in reversed((*plan.summed, plan.var)):
        stmt = Forall(IndexVar(var), stmt)
    return stmt


def statement_of(nests: list[Nest], types: dict[str, TensorType]) -> Stmt:
    """The whole kernel: its nests in order (a sequence for a split statement)."""
    builder = _Builder(types)
    if nests and nests[0].workspace is not None:
        return _through_workspace(builder, nests, nests[0].workspace)
    return sequence([builder.nest(n) for n in nests])


def _through_workspace(builder: _Builder, nests: list[Nest], plan: WorkspacePlan) -> Stmt:
    """``forall(hoisted, where(consumer, producers))``: the nests reduce into the
    workspace, whose entries the consumer copies into the output (paper 002)."""
    builder.taken.add(plan.temporary.name)
    ws = Access(plan.temporary, tuple(IndexVar(v) for v in plan.vars))
    producers: list[Stmt] = []
    for nest in nests:
        inner = nest.order[len(plan.hoisted):]
        stmt = builder.assign(ws, ADD, nest.body, set(nest.order), builder.types[
            nest.assign.tensor])
        for var in reversed(inner):
            stmt = Forall(IndexVar(var), stmt)
        producers.append(stmt)
    # The workspace's entries name the output's indices, derived ones included.
    consumer: Stmt = Assign(Access(nests[0].assign.tensor, tuple(
        IndexVar(v) for v in nests[0].assign.vars)), None, ws)
    for var in reversed(plan.vars):
        consumer = Forall(IndexVar(var), consumer)
    result: Stmt = Where(consumer, sequence(producers), (plan.temporary,))
    for var in reversed(plan.hoisted):
        result = Forall(IndexVar(var), result)
    return result


def statement_facts(nests: list[Nest]) -> tuple[Statement, ...]:
    """What code generation needs of each nest beside its loops (loops.Statement): the
    nests themselves stay in planning."""
    return tuple(_facts(nest) for nest in nests)


def _facts(nest: Nest) -> Statement:
    assign = nest.assign
    return Statement(assign.vars, nest.order, tuple(operands(nest.body)), assign.accumulate,
                     nest.reduce_op, nest.precomputes, nest.workspace)
