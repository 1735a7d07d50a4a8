"""Reductions by operators other than + that scatter into a dense output.

``y(j) = min(i, W(i,j) + d(i))`` with W stored by rows cannot fold its minimum inside
the loop over j (a fold in a temporary, lower_loops): W's rows put i outside j. Where
that nest is refused, the reduction's loops may instead run outside the output's, each
value reduced into ``y(j)`` by the operator (``y(j) = min(y(j), value)``), the output
first set to the operator's identity (backends/llvm/scatter_reduce.py). This is exact only where every coordinate the loops skip would
contribute the identity: the operator skips absent coordinates (a semiring's sum), or
the body's fill value (its value where its operands store nothing) is the identity
(W's fill inf under min-plus). Otherwise the fold's count of skipped coordinates is
needed per output entry, and the nest is left refused (an operand is converted).
Identity and fill come from the operator's declared properties, never its name.
"""

from __future__ import annotations

from ..concrete.algebra import expr_fill, same_value
from ..concrete.expressions import Assign, Sum, operands
from ..errors import ScheduleError
from ..notation.operators import ADD
from ..types import TensorType
from .scheduler import Nest, order_loops


def scattered_reduction(assign: Assign, types: dict[str, TensorType]) -> Nest | None:
    """The nest reducing ``assign``'s right-hand side (a reduction by an operator other
    than +) into its dense output from outside the output's loops, or None where the
    rule above does not allow it or no such order exists."""
    rhs, out = assign.rhs, types[assign.tensor]
    if not isinstance(rhs, Sum) or rhs.op is ADD or not rhs.op.is_monoid or assign.derived \
            or assign.accumulate or not out.levels \
            or not all(lv.can_insert and lv.full for lv in out.levels):
        return None
    op, summed, body = rhs.op, [], rhs
    while isinstance(body, Sum) and body.op is op:
        summed.append(body.var)
        body = body.body
    fill = expr_fill(body, lambda o: types[o.tensor].fill)
    if not (op.skips_absent or (fill is not None and same_value(fill, op.identity))):
        return None
    out_vars = list(assign.vars)
    loop_vars = out_vars + [v for v in summed if v not in out_vars]
    try:
        order = order_loops(loop_vars, operands(body), types, set(), prefer=out_vars,
                            sparse_first=True)
    except ScheduleError:
        return None
    last_out = max(order.index(v) for v in out_vars)
    if not any(order.index(v) < last_out for v in summed):
        return None  # the output's loops outermost: the fold's nest, refused already
    return Nest(assign, tuple(order), body, reduce_op=op)
