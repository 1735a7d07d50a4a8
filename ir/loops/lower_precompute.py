"""The loop IR of nests that read operands through operand workspaces (ir/schedule/precompute.py),
as precompute_lower emits them: each temporary allocated before its nest's loops; before
the loop a plan names, the operand's slice inserted into it by the operand's own loop;
that loop over the expression reading the temporary; then the slice's coordinates
clearing it again.

A sum workspace (precompute_sums.py) replaces the loop its plan names: the sum's loops
reduce its factors into the row, then the loop over the row's index runs the consumer
and sets each entry back to 0; both keep the nest's site, so passes choose fast forms for
them (the sum's loop is jammed as the plain nest's is).

The scatter and clear loops are given a site that copies (a loop of their own, outside
the nest's order, adding into a temporary): no pass chooses a fast form for them, and only
the thread rows' tag applies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..concrete.expressions import Expr, operands
from ..concrete.statements import Access, Forall, IndexVar, Stmt, Where, sequence_parts
from ..notation.operators import ADD
from ..schedule.precompute import Precompute, replaced
from ..schedule.scheduler import Nest
from ..types import TensorType
from .from_schedule import statement_facts, statement_of
from .lower import NestLowering, State
from .nodes import Accumulate, Allocate, Block, Clear, Insert, Node, Program


def lower_precomputed(stmt: Stmt, types: dict[str, TensorType], output: str,
                      nests: list[Nest]) -> Program:
    """The loop IR of ``stmt`` (``statement_of(nests)``)."""
    lowering = _Lowering(types, output, nests)
    parts = sequence_parts(stmt)
    roots = tuple(lowering.lower_nest(k, part) for k, part in enumerate(parts))
    root = roots[0] if len(roots) == 1 else Block(roots)
    return Program(root, output, types[output].levels, len(roots), types[output].fill,
                   statements=statement_facts(nests))


def without_precomputes(stmt: Stmt, plans: tuple[Precompute, ...]) -> Stmt:
    """A nest's statement with its operand workspaces' ``where``s taken out again (the
    consumer, which reads the temporaries, kept)."""
    temporaries = {p.temporary for p in plans}
    if isinstance(stmt, Forall):
        return replace(stmt, body=without_precomputes(stmt.body, plans))
    if isinstance(stmt, Where) and set(stmt.temporaries) <= temporaries:
        return without_precomputes(stmt.consumer, plans)
    return stmt


class _Lowering(NestLowering):
    def __init__(self, types: dict[str, TensorType], output: str, nests: list[Nest]) -> None:
        super().__init__(types, output, nests)
        self.plans: tuple[Precompute, ...] = ()

    def lower_nest(self, number: int, stmt: Stmt) -> Node:
        nest = self.nests[number]
        self.plans = nest.precomputes
        for plan in self.plans:
            self.types = {**self.types, plan.temporary.name: plan.temporary.type}
            self.operands[plan.replacement.uid] = plan.replacement
        allocations = tuple(Allocate(p.temporary.name, p.temporary.dtype,
                                     f"a value per coordinate of {p.var}, kept at 0"
                                     if p.expr is not None else
                                     f"a value and a mark per coordinate of {p.var}")
                            for p in self.plans)
        plain = without_precomputes(stmt, self.plans)
        if any(p.expr is not None for p in self.plans):  # the nest's own loops, the sum's too
            plain = statement_of([replace(nest, precomputes=())], self.types)
        body = self.nest(number, plain, nest.body)
        return Block((*allocations, body)) if allocations else body

    def var(self, var: str, expr: Expr, state: State, depth: int,
            body: Callable[[Expr, State], Node]) -> Node:
        for plan in self.plans:
            op = plan.operand
            if plan.expr is not None:
                if plan.at == var:
                    return self._sum_row(plan, state)
                continue
            if plan.at == var and state.levels(op.uid) == len(op.vars) - 1 and \
                    any(o.uid == op.uid for o in operands(expr)):
                return self._around(plan, var, expr, state, depth, body)
        return super().var(var, expr, state, depth, body)

    def _around(self, plan: Precompute, var: str, expr: Expr, state: State, depth: int,
                body: Callable[[Expr, State], Node]) -> Node:
        temp = Access(plan.temporary, (IndexVar(plan.var),))
        site = self.site
        self.site = replace(site, scatter=True, accumulate=True, copies=True)
        scatter = super().var(plan.var, plan.operand, state, -1,
                              lambda e, s: Insert(temp, e))
        clear = super().var(plan.var, plan.operand, state, -1,
                            lambda e, s: Clear(temp, plan.temporary.type.fill))
        self.site = site
        return Block((scatter, self.var(var, replaced(expr, plan), state, depth, body), clear))

    def _sum_row(self, plan: Precompute, state: State) -> Node:
        """A sum workspace (precompute_sums.py): the sum's loops reducing its factors
        into the row, then the loop over the row's index computing the consumer and
        setting each entry it read back to 0 (the row and the consumer's factors are
        full: it reads every coordinate)."""
        temp = Access(plan.temporary, (IndexVar(plan.var),))
        site = self.site
        self.site = replace(site, scatter=True, accumulate=True)
        producer = self._reduce((*plan.summed, plan.var), plan.expr, state, temp)
        self.site = site
        depth = site.order.index(plan.var)
        fill = plan.temporary.type.fill

        def consume(expr: Expr, inner: State) -> Node:
            return Block((self.loops(site.order, depth + 1, expr, inner), Clear(temp, fill)))
        consumer = super().var(plan.var, plan.consumer, state, depth, consume)
        return Block((producer, consumer))

    def _reduce(self, vars_: tuple[str, ...], expr: Expr, state: State, temp: Access) -> Node:
        if not vars_:
            return Accumulate(temp, "+", expr, ADD)
        return super().var(vars_[0], expr, state, self.site.order.index(vars_[0]),
                           lambda e, s: self._reduce(vars_[1:], e, s, temp))
