"""The scheduler's choices as rewrites of concrete index notation.

A statement starts as one assignment (``assignment``: the output's access, the
expression with its sums as written); each choice rewrites it: ``in_loops`` puts it under
its loops in the order chosen (a sum left inside an expression, ``y(i) = sum_j(A(i,j) *
x(j)) + z(i)``, becomes what code generation makes of it: a scalar temporary filled by
its own loops, under a ``where``); a split additive statement is a ``sequence`` of such
nests; ``through_workspace`` reduces the nests into the output's workspace;
``with_precomputes`` reads operands through operand workspaces. Each is a function from
a statement to a statement, so each can be printed and tested without generating code.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..concrete.expressions import Apply, Expr, Sum, hoist_sums, operands, peel_sums
from ..concrete.expressions import Assign as CinAssign
from ..concrete.statements import (
    Access,
    Affine,
    Assign,
    Forall,
    IndexExpr,
    IndexVar,
    Precompute,
    Sequence,
    Source,
    Stmt,
    TensorVar,
    Where,
    replaced,
    sequence,
    sequence_parts,
)
from ..errors import ScheduleError
from ..notation.operators import ADD, Operator
from ..types import TensorType
from .loop_order import order_loops

if TYPE_CHECKING:
    from .workspace_plan import WorkspacePlan


def output_access(assign: CinAssign) -> Access:
    """The assigned tensor's access; an index computed from blocked levels' variables
    becomes the affine expression that computes it."""
    derived = dict(assign.derived)
    offsets, divisors = dict(assign.offsets), dict(assign.divisors)
    indices: list[IndexExpr] = []
    for var in assign.vars:
        if var in derived:
            indices.append(Affine(tuple((IndexVar(p), m) for p, m in derived[var]),
                                  offsets.get(var, 0), divisors.get(var, 1)))
        else:
            indices.append(IndexVar(var))
    return Access(assign.tensor, tuple(indices))


def assignment(assign: CinAssign, body: Expr, reduce_op: Operator | None = None) -> Assign:
    """``assign`` computing ``body`` (its right-hand side with the sums the loops run
    peeled off), before any loop: it reduces by ``reduce_op`` (a scattered reduction's),
    else by + where sums were peeled or the statement adds to the output."""
    summed, _ = peel_sums(hoist_sums(assign.rhs))
    op = reduce_op or (ADD if summed or assign.accumulate else None)
    return Assign(output_access(assign), op, body, Source(assign, body))


def declared(stmt: Stmt) -> set[str]:
    """The names of the temporaries ``stmt`` declares."""
    if isinstance(stmt, Forall):
        return declared(stmt.body)
    if isinstance(stmt, Where):
        return {t.name for t in stmt.temporaries} | declared(stmt.consumer) \
            | declared(stmt.producer)
    if isinstance(stmt, Sequence):
        return declared(stmt.first) | declared(stmt.then)
    return set()


def in_loops(stmt: Assign, order: tuple[str, ...], types: dict[str, TensorType],
             taken: set[str] | frozenset[str] = frozenset()) -> Stmt:
    """``forall(v1, ... forall(vn, stmt))`` in loop ``order``, each sum left in the
    expression read through a scalar temporary (named apart from ``types`` and
    ``taken``), filled by its loops under a ``where``."""
    like = types[stmt.source.assign.tensor] if stmt.source is not None \
        else types[stmt.access.name]
    temporaries = _Temporaries(types, taken)
    result = temporaries.assign(stmt.access, stmt.reduce_op, stmt.expr, set(order), like,
                                stmt.source)
    for var in reversed(order):
        result = Forall(IndexVar(var), result)
    return result


class _Temporaries:
    """Lifts sums into scalar temporaries named ``t``, ``t1``, ..."""

    def __init__(self, types: dict[str, TensorType], taken: set[str] | frozenset[str]) -> None:
        self.types = types
        self.taken = set(types) | set(taken)

    def temporary(self, like: TensorType) -> TensorVar:
        name, k = "t", 0
        while name in self.taken:
            k += 1
            name = f"t{k}"
        self.taken.add(name)
        return TensorVar(name, TensorType((), 0, like.dtype, like.index_dtype))

    def assign(self, access: Access, reduce_op: Operator | None, expr: Expr, bound: set[str],
               like: TensorType, source: Source | None = None) -> Stmt:
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

        stmt: Stmt = Assign(access, reduce_op, lift(expr), source)
        if producers:
            stmt = Where(stmt, sequence(producers), tuple(temporaries))
        return stmt


def through_workspace(stmt: Stmt, plan: WorkspacePlan) -> Stmt:
    """``forall(hoisted, where(consumer, producers))``: each nest of ``stmt`` reduces
    into the workspace under the loops it shares (``plan.hoisted``), and the consumer
    copies the workspace's entries into the output (paper 002)."""
    ws = Access(plan.temporary, tuple(IndexVar(v) for v in plan.vars))
    producers: list[Stmt] = []
    for part in sequence_parts(stmt):
        loops = []
        while isinstance(part, Forall):
            loops.append(part)
            part = part.body
        if [f.index.name for f in loops[:len(plan.hoisted)]] != list(plan.hoisted):
            raise ValueError(f"a nest's loops do not start with the hoisted "
                             f"{', '.join(plan.hoisted)}")
        producer = _into(part, ws)
        for loop in reversed(loops[len(plan.hoisted):]):
            producer = Forall(loop.index, producer, loop.tags)
        producers.append(producer)
    source = _nest_assign(sequence_parts(stmt)[0]).source
    assert source is not None
    # The workspace's entries name the output's indices, derived ones included.
    consumer: Stmt = Assign(Access(source.assign.tensor, tuple(
        IndexVar(v) for v in source.assign.vars)), None, ws)
    for var in reversed(plan.vars):
        consumer = Forall(IndexVar(var), consumer)
    result: Stmt = Where(consumer, sequence(producers), (plan.temporary,))
    for var in reversed(plan.hoisted):
        result = Forall(IndexVar(var), result)
    return result


def _nest_assign(stmt: Stmt) -> Assign:
    while not isinstance(stmt, Assign):
        stmt = stmt.body if isinstance(stmt, Forall) else stmt.consumer  # type: ignore[union-attr]
    return stmt


def _into(stmt: Stmt, ws: Access) -> Stmt:
    """A nest's assignment adding into the workspace instead of writing the output."""
    if isinstance(stmt, Assign):
        return replace(stmt, access=ws, reduce_op=ADD)
    if isinstance(stmt, Where):
        return replace(stmt, consumer=_into(stmt.consumer, ws))
    raise TypeError("a nest ends in one assignment (or a where reading scalar temporaries)")


def with_precomputes(stmt: Stmt, plans: tuple[Precompute, ...]) -> Stmt:
    """One nest reading operands through operand workspaces: each temporary filled
    (``where``) before the loop its operand is invariant in; a sum workspace's loops
    reduce its factors into the row in the producer, and the consumer reads the row."""
    if isinstance(stmt, Forall):
        var = stmt.index.name
        sums = [p for p in plans if p.at == var and p.expr is not None]
        if sums:  # where(consumer, the sum's loops reducing into the row)
            inner: Stmt = stmt
            for _ in sums[0].summed:  # run by the producer instead
                assert isinstance(inner, Forall)
                inner = inner.body
            return Where(with_precomputes(inner, plans),
                         sequence([_sum_producer(p) for p in sums]),
                         tuple(p.declared for p in sums))
        body: Stmt = Forall(stmt.index, with_precomputes(stmt.body, plans), stmt.tags)
        copies = [p for p in plans if p.at == var and p.expr is None]
        if not copies:
            return body
        fills = [Forall(IndexVar(p.var), Assign(Access(p.temporary, (IndexVar(p.var),)),
                                                None, p.operand)) for p in copies]
        return Where(body, sequence(fills), tuple(p.declared for p in copies))
    if isinstance(stmt, Where):
        return replace(stmt, consumer=with_precomputes(stmt.consumer, plans))
    if not isinstance(stmt, Assign):
        raise TypeError("with_precomputes rewrites one loop nest")
    expr = stmt.expr
    for plan in plans:
        expr = replaced(expr, plan)
    return replace(stmt, expr=expr)


def _sum_producer(plan: Precompute) -> Stmt:
    """A sum workspace's producer: its loops reducing its factors into the row."""
    stmt: Stmt = Assign(Access(plan.temporary, (IndexVar(plan.var),)), ADD,
                        plan.expr if plan.expr is not None else plan.operand)
    for var in reversed((*plan.summed, plan.var)):
        stmt = Forall(IndexVar(var), stmt)
    return stmt
