"""Turn an assignment into concrete statements with loop orders.

Loop orders follow storage: a level that cannot ``locate`` can only be reached after all
its ancestors' variables are bound, so each such level orders its ancestors' variables
before its own. Outputs assembled by appending additionally need their variables
outermost and in level order. When no order exists, an additive right-hand side whose
output can take random inserts is split into a sequence of ``+=`` statements.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..concrete.expressions import (
    Apply,
    Assign,
    Const,
    Expr,
    Operand,
    Sum,
    expr_vars,
    hoist_sums,
    operands,
    peel_sums,
)
from ..errors import ScheduleError
from ..notation.operators import ADD, MUL, NEG, SUB, Operator
from ..types import TensorType, unordered_append_output

if TYPE_CHECKING:
    from .precompute import Precompute
    from .workspace_schedule import WorkspacePlan


class ScatteredOutputError(ScheduleError):
    """The operands agree on a loop order, but it produces the output's entries out of
    the order its appended levels keep: assembling it needs a workspace."""


@dataclass(frozen=True)
class Nest:
    """One statement ready for lowering: its loop order and the body under the sums."""

    assign: Assign
    order: tuple[str, ...]
    body: Expr
    workspace: WorkspacePlan | None = None  # the output's entries go through a temporary
    precomputes: tuple[Precompute, ...] = ()  # operands read through a temporary
    reduce_op: Operator | None = None  # the output reduced by it from outside (scatter_reduce)


def order_loops(loop_vars: list[str], exprs_operands: list[Operand],
                types: dict[str, TensorType], bound: set[str],
                before: list[tuple[str, str]] = (), prefer: list[str] = (),
                derived: dict[str, tuple[tuple[str, int], ...]] | None = None,
                sparse_first: bool = False,
                soft: list[tuple[str, str]] = ()) -> list[str]:
    """Topologically order ``loop_vars`` under the storage constraints of the operands.

    An index derived from blocked levels counts as bound once its parts are. Among the
    orders the constraints allow, indices follow each operand's (and ``soft``'s) storage
    order where they can, so memory is walked in the order it is laid out (ELL's slots
    before rows, a row-major dense operand row by row). Then, with ``sparse_first``
    (outputs that take scattered updates), an index some operand must iterate goes before
    one only dense levels index: SpMM and MTTKRP get TACO's i,k,j order. A level that
    can locate may follow a level of a nested sum's index: the sum's loop, run inside,
    locates it at the index bound outside.
    """
    derived = derived or {}
    edges: set[tuple[str, str]] = set(before)
    for op in exprs_operands:
        levels = types[op.tensor].levels
        for k, var in enumerate(op.vars):
            if var not in loop_vars:
                continue
            for earlier in op.vars[:k]:
                parts = [p for p, _ in derived.get(earlier, ()) if p in loop_vars]
                if earlier in derived:
                    if not levels[k].can_locate:
                        edges.update((part, var) for part in parts)
                elif earlier in loop_vars and not levels[k].can_locate:
                    edges.add((earlier, var))
                elif earlier not in loop_vars and earlier not in bound \
                        and not levels[k].can_locate:
                    raise ScheduleError(
                        f"{op.tensor}: level {k} (index {var}) is reached only after index "
                        f"{earlier}, which is bound in an inner loop")
    iterated = {var for op in exprs_operands
                for var, level in zip(op.vars, types[op.tensor].levels)
                if not level.can_locate}
    preferred = set(soft)
    for op in exprs_operands:
        chain = [v for v in op.vars if v in loop_vars]
        preferred.update((a, b) for a, b in itertools.pairwise(chain) if a != b)
    rank = {v: (not (sparse_first and v in iterated),
                prefer.index(v) if v in prefer else len(prefer) + loop_vars.index(v))
            for v in loop_vars}
    remaining = list(loop_vars)
    order: list[str] = []
    while remaining:
        ready = [v for v in remaining
                 if not any(a in remaining and b == v for a, b in edges if a != v)]
        if not ready:
            cycle = ", ".join(sorted(remaining))
            raise ScheduleError(f"the storage orders of the operands conflict over indices "
                                f"{cycle} (operands whose levels store them in opposite orders: "
                                "a row-major A(i,j) with a column-major B(i,j), or with a "
                                "row-major B(j,i)); convert one operand or use an output that "
                                "takes inserts")
        def waiting(var: str) -> int:
            return sum(1 for a, b in preferred if b == var and a in remaining and a != var)

        pick = min(ready, key=lambda v: (waiting(v), rank[v]))
        order.append(pick)
        remaining.remove(pick)
    return order


def _needs_ordered_output(out: TensorType) -> bool:
    return any(level.can_append for level in out.levels) and not unordered_append_output(out.levels)


def schedule(assign: Assign, types: dict[str, TensorType], split: bool = False,
             exact_sums: bool = False) -> list[Nest]:
    """Loop orders for ``assign``, splitting it into several statements when needed.

    ``split`` forces the split (used when one nest schedules but cannot be lowered, e.g.
    a union of unordered levels). ``exact_sums``: refuse to move factors into a sum the
    user placed (see ``_schedule_one``), so that the caller tries converted operands
    first.
    """
    guarded = {index for index, _, _ in assign.guards}  # affine; blocked ones are not
    # Blocked levels' loops visit stored blocks only: refused before any split (the
    # kernel converts the operand). An affine term is lowered as a statement of its own
    # where the output takes its terms one at a time (below).
    _check_blocked_products(assign.rhs, {index: parts for index, parts in assign.derived
                                         if index not in guarded})
    try:
        _check_blocked_products(assign.rhs, dict(assign.derived), guarded)
        if split:
            raise ScheduleError("the statement cannot be lowered as one loop nest")
        return [_schedule_one(assign, types, exact_sums)]
    except ScheduleError:
        out = types[assign.tensor]
        terms = additive_terms(assign.rhs)
        if len(terms) < 2 or not all(level.can_insert for level in out.levels):
            raise
        # a term that is +'s identity adds nothing; lowered alone it would store it at
        # every coordinate (``0 + C(i+j)``, a broadcast term replaced by its fill)
        terms = [t for t in terms if not (isinstance(t, Const) and t.value == ADD.identity)
                 ] or terms[:1]
        nests = []
        hidden = [_hidden_sums(term) for term in terms]
        everywhere = set().union(*hidden)
        for k, term in enumerate(terms):
            used = expr_vars(term)
            # an index derived from this term's walked or blocked coordinates, or one its
            # operands are located at from loop variables (B(i+1): t = i + 1); never one
            # derived from another term's coordinates (B(i) + C(i+j): i = x - j is C's)
            derived = tuple((index, parts) for index, parts in assign.derived
                            if any(p in hidden[k] for p, _ in parts)
                            or (index in used and not any(p in everywhere for p, _ in parts)))
            kept = {index for index, _ in derived}
            _check_blocked_products(term, dict(derived), guarded)
            part = replace(assign, rhs=term, accumulate=assign.accumulate or k > 0,
                           derived=derived,
                           offsets=tuple(o for o in assign.offsets if o[0] in kept),
                           guards=tuple(g for g in assign.guards if g[0] in kept),
                           divisors=tuple(d for d in assign.divisors if d[0] in kept))
            nests.append(_schedule_one(part, types, exact_sums))
        return nests


def _hidden_sums(expr: Expr) -> set[str]:
    """The variables of ``expr``'s hidden sums: a walked operand's coordinates and blocked
    levels' variables, from which indices are derived."""
    if isinstance(expr, Sum):
        return ({expr.var} if expr.hidden else set()) | _hidden_sums(expr.body)
    if isinstance(expr, Apply):
        return set().union(*(_hidden_sums(a) for a in expr.args))
    return set()


def additive_terms(expr: Expr) -> list[Expr]:
    """The terms of a sum or difference, a subtrahend's negated."""
    if isinstance(expr, Apply) and expr.op is ADD:
        return additive_terms(expr.args[0]) + additive_terms(expr.args[1])
    if isinstance(expr, Apply) and expr.op is SUB:
        negated = [hoist_sums(Apply(NEG, (t,)), exact=True) for t in additive_terms(expr.args[1])]
        return additive_terms(expr.args[0]) + negated
    return [expr]


def _schedule_one(assign: Assign, types: dict[str, TensorType], exact_sums: bool = False
                  ) -> Nest:
    """One loop nest that keeps each sum where the user placed it, so that a factor
    outside ``sum_j(...)`` multiplies the finished sum; if the sum's loops cannot nest
    under the factors' (an operand's storage reaches the sum's index before theirs, as
    in MTTKRP's ``sum_k(B(i,k,l) * C(k,j)) * D(l,j)``), the factors move into the sum,
    unless ``exact_sums``: a factor moved in no longer meets an empty sum (inf times a
    sum over no stored entry is NaN, not 0)."""
    exact = hoist_sums(assign.rhs, exact=True)
    try:
        return _schedule_rhs(assign, exact, types)
    except ScheduleError:
        hoisted = hoist_sums(assign.rhs)
        if hoisted == exact or exact_sums and any(
                not all(level.full for level in types[op.tensor].levels)
                for op in _factors_of_sums(exact)):
            raise
        return _schedule_rhs(assign, hoisted, types)


def _factors_of_sums(expr: Expr) -> list[Operand]:
    """The operands that multiply a sum the user placed (what ``hoist_sums`` would move
    into it). A sparse one is cheap to keep outside (the sum is computed only where it
    stores an entry), so a converted operand is preferred to moving it in; a dense one
    would make the sum computed at every coordinate (MTTKRP's D(l,j)), so it moves."""
    if isinstance(expr, Sum):
        return _factors_of_sums(expr.body)
    if not isinstance(expr, Apply):
        return []
    found = [op for a in expr.args for op in _factors_of_sums(a)]
    if expr.op is MUL and any(isinstance(a, Sum) and a.op is ADD and not a.hidden
                              for a in expr.args):
        found += [op for a in expr.args if not isinstance(a, Sum) for op in operands(a)]
    return found


def _schedule_rhs(assign: Assign, rhs: Expr, types: dict[str, TensorType]) -> Nest:
    summed, body = peel_sums(rhs)
    out_type = types[assign.tensor]
    derived = {index for index, _ in assign.derived}
    out_vars = [v for v in assign.vars if v not in derived]
    loop_vars = out_vars + [v for v in summed if v not in out_vars and v not in derived]
    before: list[tuple[str, str]] = []
    appends = any(not level.can_locate and not level.can_insert for level in out_type.levels)
    if (appends or _needs_ordered_output(out_type)) and derived & set(assign.vars):
        if {g[0] for g in assign.guards} & set(assign.vars):  # an affine subscript's
            raise ScatteredOutputError(f"the output {assign.tensor} is indexed by indices "
                                       "derived from a walked operand's coordinates")
        raise ScheduleError(f"the output {assign.tensor} is assembled by appending, but its "
                            "indices come from blocked levels: use an output whose levels "
                            "take inserts")
    if _needs_ordered_output(out_type):
        before += list(itertools.pairwise(out_vars))
        before += [(o, s) for o in out_vars for s in summed]
    else:
        for k, level in enumerate(out_type.levels):
            if not level.can_locate and not level.can_insert:
                before += [(v, out_vars[k]) for v in out_vars[:k]]
    ops = operands(body)
    asked = [v for v in assign.loop_order if v in loop_vars]
    before += list(itertools.pairwise(asked))
    try:
        order = order_loops(loop_vars, ops, types, set(), before, prefer=out_vars,
                            soft=list(itertools.pairwise(out_vars)),
                            sparse_first=all(lv.can_insert for lv in out_type.levels),
                            derived=dict(assign.derived))
    except ScheduleError as error:
        if asked and _orders_without(asked, loop_vars, ops, types, before, assign):
            raise ScheduleError(f"the schedule's loop order ({', '.join(asked)}) cannot be "
                                f"kept: {error}") from None
        if _needs_ordered_output(out_type):
            _refuse_scattered(assign, loop_vars, ops, types)
            raise ScheduleError(
                f"{error}. The output {assign.tensor} is assembled by appending, which needs "
                "its indices outermost and in level order: this expression needs a workspace "
                "(not supported yet) or an output whose levels take inserts"
            ) from None
        raise
    return Nest(assign, tuple(order), body)


def _orders_without(asked: list[str], loop_vars: list[str], ops: list[Operand],
                    types: dict[str, TensorType], before: list[tuple[str, str]],
                    assign: Assign) -> bool:
    """Whether the loops could be ordered but for the order the schedule asked for."""
    edges = set(itertools.pairwise(asked))
    try:
        order_loops(loop_vars, ops, types, set(), [e for e in before if e not in edges],
                    derived=dict(assign.derived))
    except ScheduleError:
        return False
    return True


def _refuse_scattered(assign: Assign, loop_vars: list[str], ops, types) -> None:
    """Raise ScatteredOutputError when the operands alone can be ordered: then only the
    output's order is in the way (a sparse product walks i, k, j and appends C(i,j)
    by column within a row once per k), and the message should say so, not that operands
    conflict."""
    try:
        order = order_loops(loop_vars, ops, types, set(), [], derived=dict(assign.derived))
    except ScheduleError:
        return
    out_vars = ", ".join(v for v in assign.vars)
    raise ScatteredOutputError(
        f"the output {assign.tensor} would receive its entries scattered: the operands' "
        f"storage orders need the loops in order {', '.join(order)}, and {assign.tensor} "
        f"is assembled by appending, which takes entries in order of ({out_vars}) only, "
        "each once; that needs a workspace (not supported yet)") from None


def _check_blocked_products(body: Expr, derived: dict[str, tuple[tuple[str, int], ...]],
                            guarded: frozenset[str] | set[str] = frozenset()) -> None:
    """The loops run over the blocked operand's stored blocks only, so it must multiply
    everything else: operands indexed by its indices are only located there, never
    iterated, and a term added beside it (``C(i,j) + 2``) would be missed outside its
    blocks. Likewise an operand at affine subscripts (its derived indices ``guarded``):
    its loops visit only in-range coordinates, or its stored ones where it is walked."""
    if not derived:
        return
    blocked = {var for index, parts in derived.items() if index not in guarded
               for var, _ in parts}
    affine = {var for index, parts in derived.items() if index in guarded
              for var, _ in parts} | (set(derived) & set(guarded))

    def walk(expr: Expr, through_products: bool) -> None:
        if isinstance(expr, Operand):
            if through_products:
                return
            if set(expr.vars) & blocked:
                raise ScheduleError(f"{expr.tensor} has blocked levels, so its loops visit "
                                    "only its stored blocks: it must multiply the rest of "
                                    "the expression, not be added to it (convert it to an "
                                    "unblocked format)")
            if set(expr.vars) & (affine | set(derived)):
                raise ScheduleError(
                    f"{expr.tensor} is indexed by indices of blocked levels or affine "
                    "subscripts outside a product (it must multiply the rest: out of range "
                    "it reads nothing), or is added beside such an operand where the output "
                    "cannot take the terms one at a time")
        elif isinstance(expr, Apply):
            product = expr.op is MUL or (expr.op is NEG and through_products)
            for arg in expr.args:
                walk(arg, through_products and product)
        elif isinstance(expr, Sum):
            walk(expr.body, through_products)

    walk(body, True)
