"""A user's schedule written into concrete notation, and checked against the nests.

The scheduler orders the original indices' loops (keeping the order a ``reorder``
asked for); each directive then names derived loops over them. This rewrites the
statement so that ``kernel.concrete`` shows them: a loop over ``i`` split in two becomes
``forall(i0 = split_outer(i, 32):cpu_thread:no_races, forall(i1 = split_inner(i, 32),
...))``, a fused pair one loop ``f = fuse(i, j)``. A split keeps the coordinates' order
and a fusion of two nested loops visits the same pairs in the same order, so the loops
the backend runs are the original ones; the parallel loop's chunks follow the derived
loop (llvsparse's runtime cuts the coordinates as the plan's ``Chunks`` say).
"""

from __future__ import annotations

from ..concrete.statements import Derived, Forall, IndexExpr, IndexVar, Sequence, Stmt, Where
from ..errors import ScheduleError
from .resolved import SchedulePlan


def derived_index(plan: SchedulePlan, name: str) -> IndexExpr:
    """``name`` with its provenance back to the original indices."""
    origin = plan.origins.get(name)
    if origin is None:
        return IndexVar(name)
    param = () if origin.param is None else (origin.param,)
    return Derived(name, origin.kind, tuple(derived_index(plan, p) for p in origin.parents),
                   param)


def _covering(plan: SchedulePlan, original: str) -> tuple[list[str], bool]:
    """The scheduled loops that run ``original``'s coordinates, and whether ``original``
    heads them (False: fused into the loop of an outer index)."""
    loops, heads = [], True
    for loop in plan.loops:
        roots = plan.covered(loop)
        if original in roots:
            loops.append(loop)
            heads = heads and roots[0] == original
    return loops, heads


def scheduled_statement(stmt: Stmt, plan: SchedulePlan) -> Stmt:
    """``stmt`` with each scheduled loop in place of the original loop it runs."""
    if isinstance(stmt, Forall):
        body = scheduled_statement(stmt.body, plan)
        name = stmt.index.name
        loops, heads = _covering(plan, name)
        if not loops:
            return Forall(stmt.index, body, stmt.tags)
        if not heads:
            return body
        if name in dict(plan.tiles):  # a tile's inner loop runs innermost (the reorder)
            inner = loops.pop()
            body = _innermost(body, lambda s: Forall(derived_index(plan, inner), s,
                                                     _tags(plan, inner)))
        for loop in reversed(loops):
            body = Forall(derived_index(plan, loop), body, _tags(plan, loop))
        return body
    if isinstance(stmt, Where):
        return Where(scheduled_statement(stmt.consumer, plan),
                     scheduled_statement(stmt.producer, plan), stmt.temporaries)
    if isinstance(stmt, Sequence):
        return Sequence(scheduled_statement(stmt.first, plan),
                        scheduled_statement(stmt.then, plan))
    return stmt


def _innermost(stmt: Stmt, wrap) -> Stmt:
    """``stmt`` with ``wrap`` applied inside its innermost loop."""
    if isinstance(stmt, Forall):
        return Forall(stmt.index, _innermost(stmt.body, wrap), stmt.tags)
    return wrap(stmt)


def _tags(plan: SchedulePlan, loop: str) -> tuple[str, ...]:
    for parallel in (plan.parallel, *plan.gpu):
        if parallel is not None and parallel.name == loop:
            return (parallel.unit, parallel.races)
    return ()


def check_nest_order(plan: SchedulePlan, order: tuple[str, ...]) -> None:
    """The scheduler kept what the schedule needs: the reordered indices in their order,
    a fused pair adjacent, the parallel index outermost. ScheduleError otherwise (a
    storage order or an output's assembly the scheduler had to follow instead)."""
    asked = [v for v in plan.order if v in order]
    kept = [v for v in order if v in asked]
    if kept != asked:
        raise ScheduleError(f"the loops run in order {', '.join(order)}, not the schedule's "
                            f"{', '.join(asked)}: the operands' storage or the output's "
                            "assembly fixes it")
    for origin in plan.origins.values():
        if origin.kind == "fuse":
            roots = [r for p in origin.parents for r in plan.covered(p)]
            at = [order.index(r) for r in roots if r in order]
            if at and at != list(range(at[0], at[0] + len(at))):
                raise ScheduleError(f"fuse({', '.join(origin.parents)}): the loops over "
                                    f"{', '.join(roots)} are not adjacent in order "
                                    f"{', '.join(order)}")
    if plan.parallel is not None and plan.parallel.kind == "rows" and order \
            and order[0] != plan.parallel.index:
        raise ScheduleError(f"the parallel loop over {plan.parallel.index} is not outermost "
                            f"(loops: {', '.join(order)})")
