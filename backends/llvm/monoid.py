"""Reductions by operators other than +: min-plus, or-and, max, product, user monoids.

A sum keeps its fast paths in codegen (running sums, jammed and paired rows). Any other
monoid folds its body here, from the operator's identity, over the coordinates the
body's iteration region visits. A coordinate outside that region holds the body's fill
value, 0, which is folded in once if any coordinate was missed (0 folded twice is 0
again: a monoid keeps 0 from 0 and 0, see Operator.is_monoid); a semiring's reduction
(``skips_absent``) skips such coordinates, which hold its zero.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir.cin import Sum, operands
from . import scalars
from .emit_base import I64, ONE, ZERO, Ctx

if TYPE_CHECKING:
    from .codegen import KernelCompiler


def fold(kc: KernelCompiler, expr: Sum, ctx: Ctx) -> ir.Value:
    """The value of ``expr`` (a reduction over one variable) at ``ctx``."""
    op, b = expr.op, kc.b
    for use in operands(expr.body):
        kc.operands[use.uid] = use
    acc = kc.alloca(scalars.compute_type(kc.dtype), f"{op.name}.acc")
    count = kc.alloca(I64, f"{op.name}.count")
    b.store(scalars.constant(kc.dtype, op.identity), acc)
    b.store(ZERO, count)

    def leaf(value: ir.Value, _ctx: Ctx) -> None:
        kc.b.store(scalars.apply_op(kc.b, op, [kc.b.load(acc), value], kc.dtype), acc)
        kc.b.store(kc.b.add(kc.b.load(count), ONE), count)

    kc.emit_var(expr.var, expr.body, ctx, lambda c, e: leaf(kc.value(e, c), c), None, leaf)
    total = b.load(acc)
    if op.skips_absent or op.identity == 0:
        return total
    with_fill = scalars.apply_op(b, op, [total, scalars.constant(kc.dtype, 0)], kc.dtype)
    missed = b.icmp_signed("<", b.load(count), kc.extent(expr.var))
    return b.select(missed, with_fill, total)
