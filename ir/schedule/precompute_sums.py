"""Sum workspaces: a product's factors that share a summed loop, reduced into a dense
row once per coordinate of the loops outside it (paper 002's MTTKRP,
``A(i,:) += B(i,k,l) * (D(l,:) * C(k,:))``; paper 001's ``precompute(expr, j, j, w)``).

The nest ``forall(i, k, l, j) A(i,j) += B(i,k,l) * D(l,j) * C(k,j)`` multiplies by
``C(k,j)`` once per stored ``B(i,k,l)`` and coordinate ``j``, though ``C(k,j)`` does not
depend on ``l``. Reducing the factors that do into a row first,

    forall(i, k, where(forall(j, A(i,j) += w(j) * C(k,j)),
                       forall(l, j, w(j) += B(i,k,l) * D(l,j))))

multiplies by ``C`` once per stored fibre ``B(i,k,:)``: the work is the product's
iterations times the factors in the sum, plus the fibres times ``J`` times the factors
outside it, never more than before (a fibre holds at least one entry). The row is a
full level of its own (precompute.py ``SUM_ROW_LEVEL``): a value per coordinate of
``j``, 0 where nothing was added, so no marks; the consumer reads every coordinate and
sets it back to 0.

When it applies (``plan_sum``): a nest reducing by + a product of operands (no sum
left inside, no output workspace, no derived index), whose last loop ``j`` is an output
index; the loops just before ``j`` that the output does not have (``l``) are the sum's,
and the factors that use none of them (``C(k,j)``, the consumer's) are non-empty and
every level of theirs is full, so the consumer's loop over ``j`` reads every entry the
producer marked. One factor of the sum indexes ``j`` last (its mode sizes the row).
The product is the one the finite variant runs (finite_sums.py: a sum the user placed
with a factor outside it keeps IEEE results only in the exact plan, which moves nothing).

When it is chosen: where a caller forces it (``precompute=True``, a schedule's
``precompute`` of the sum's factors over ``j``). The rule leaves it out: it saves a
multiply per stored entry and coordinate of the row, but the row's load and store per
term cost more than that beside the plain nest, whose jammed loop keeps the output row
in registers over 8 entries (1.05-1.9x the plain nest's CPU time on every bench tensor,
1-9 entries per fibre, in two runs; 0.89-1.1x at 8-16: tools/bench_mttkrp_forms.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..concrete.expressions import Apply, Expr, Operand, Sum, nodes
from ..notation.operators import ADD, MUL
from ..types import TensorType
from .scheduler import Nest

# Why a nest does not split where a sum the user placed stays inside its product (the
# exact plan, for operands holding inf or NaN: finite_sums.py).
PLACED = "a sum is placed inside its product (an operand holds inf or NaN)"


@dataclass(frozen=True)
class SumShape:
    """A nest's product split for a sum workspace: ``summed`` loops (between ``at`` and
    the row's index ``var``), the factors using them (``inner``) and the rest (``outer``);
    ``sizing``: the inner factor indexed by ``var`` last."""

    at: str
    var: str
    summed: tuple[str, ...]
    inner: tuple[Expr, ...]
    outer: tuple[Expr, ...]
    sizing: Operand


def factors(expr: Expr) -> list[Expr] | None:
    """The factors of a product of operands (flattened), or None where ``expr`` is not
    one (a sum, a constant, another operator, a complement)."""
    if isinstance(expr, Operand):
        return None if expr.complement else [expr]
    if not isinstance(expr, Apply) or expr.op is not MUL:
        return None
    found: list[Expr] = []
    for arg in expr.args:
        inner = factors(arg)
        if inner is None:
            return None
        found += inner
    return found


def product(parts: tuple[Expr, ...]) -> Expr:
    """The left-nested product of ``parts``."""
    result = parts[0]
    for part in parts[1:]:
        result = Apply(MUL, (result, part))
    return result


def sum_shape(nest: Nest, types: dict[str, TensorType]) -> SumShape | str:
    """How ``nest`` splits for a sum workspace, or why it does not (see the module
    docstring)."""
    order, assign = nest.order, nest.assign
    if nest.workspace is not None or assign.derived or nest.reduce_op not in (None, ADD):
        return "the nest has an output workspace, a derived index or a reduction other than +"
    if len(order) < 3 or order[-1] not in assign.vars or order[-2] in assign.vars:
        return "its last loop is no output index under a summed loop"
    if any(isinstance(node, Sum) for node in nodes(nest.body)):
        return PLACED
    parts = factors(nest.body)
    if parts is None or not all(lv.can_insert for lv in types[assign.tensor].levels):
        return "its body is no product of operands into an output that takes inserts"
    var = order[-1]
    start = len(order) - 2
    while start > 0 and order[start - 1] not in assign.vars:
        start -= 1
    # The largest run of summed loops before var that leaves a factor outside the sum.
    for p in range(start, len(order) - 1):
        summed = order[p:-1]
        inner = tuple(f for f in parts if set(summed) & set(f.vars))
        outer = tuple(f for f in parts if not set(summed) & set(f.vars))
        if not outer or not inner:
            continue
        if not all(lv.full for f in outer for lv in types[f.tensor].levels):
            return f"a factor outside the sum ({outer[0]}) is not dense"
        sizing = next((f for f in inner if f.vars and f.vars[-1] == var
                       and types[f.tensor].levels[-1].mode is not None), None)
        if sizing is None or len(set(sizing.vars)) != len(sizing.vars):
            return f"no factor of the sum is indexed by {var} last"
        return SumShape(summed[0], var, summed, inner, outer, sizing)
    return "every factor uses the summed loops"
