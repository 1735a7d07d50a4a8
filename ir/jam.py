"""Unroll-and-jam: consecutive iterations of a sparse loop share the loops inside it.

A dot product per stored entry (SDDMM's ``sum_k A(i,k)*B(j,k)``) is a chain of dependent
adds, so one entry at a time runs at the add latency. With 8 entries in one k loop,
their chains run side by side while each sum keeps its own order (nothing is
reassociated). Where the inner loop updates an output row (SpMM's ``C(i,:) += a*B(k,:)``,
MTTKRP), the lanes' updates of one element follow each other in registers, so the row is
loaded and stored once per 8 entries instead of once per entry. Steps of 8, then of 4
(rows of 4-7 entries, such as a 2-D stencil's 5), then one at a time.

Every float operation happens in the same order as without jamming: the inner loops only
locate (full levels whose ``locate`` always finds), and the output is either written once
per lane after the inner loops, in lane order, or updated in place at locations that each
lane visits once per inner iteration, in lane order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from . import scalars
from .bodies import I64, TRUE, is_true
from .cin import Expr, Operand, operands
from .schedule import InternalCompilerError

if TYPE_CHECKING:
    from .codegen import KernelCompiler
    from .emit_base import Ctx

LANES = (8, 4)  # positions per step of the jammed loops, in the order they run
ZERO = ir.Constant(I64, 0)


def locates_surely(kc: KernelCompiler, op: Operand, level: int) -> bool:
    """Whether an operand's level is full and its ``locate`` finds every coordinate."""
    lv = kc.types[op.tensor].levels[level]
    return lv.full and lv.definition.always_found("locate")


def only_locate(kc: KernelCompiler, loop_vars: list[str], expr: Expr) -> bool:
    """Whether loops over ``loop_vars`` visit every coordinate of their extents and
    resolve every operand level they reach by a locate that always finds it: each level
    one of them indexes, and every level below it, which they resolve too even where an
    outer loop binds its index (B(k,j,l) with l outside a loop over j: l's level is
    located inside the j loop, after j's)."""
    for op in operands(expr):
        inside = False
        for level, var in enumerate(op.vars):
            inside = inside or var in loop_vars
            if inside and not locates_surely(kc, op, level):
                return False
    return True


def all_nonempty(kc: KernelCompiler, loop_vars: list[str]) -> ir.Value:
    """Whether loops that only locate run at all: every extent is positive. (A flag set
    inside them would keep LLVM from deleting loops whose values are unused, such as
    the dot products of a count phase.)"""
    b, nonempty = kc.b, TRUE
    for var in loop_vars:
        positive = b.icmp_signed(">", kc.extent(var), ZERO)
        nonempty = positive if nonempty is TRUE else b.and_(nonempty, positive)
    return nonempty


def locate_bound(kc: KernelCompiler, ctx: Ctx, expr: Expr) -> Ctx:
    """Resolve every operand level whose index is bound (each one surely found)."""
    for op in operands(expr):
        resolved = len(ctx.levels.get(op.uid, ()))
        ok, deeper = kc.cascade(op, resolved, TRUE, ctx)
        if not is_true(ok):  # only_locate and others_located_surely rule this out
            raise InternalCompilerError(f"{op.tensor}: a jammed locate may miss")
        for entry in deeper:
            ctx = ctx.resolve(op.uid, entry)
    return ctx


def emit(kc: KernelCompiler, order: list[str], depth: int, expr: Expr,
         lanes: list[Ctx]) -> None:
    """``kc.loops(order, depth, ...)`` for every lane, with one loop per index."""
    if depth == kc.out_depth and not kc.scatter:
        write_points(kc, order, depth, expr, lanes)
    elif depth == len(order):
        for lane in lanes:
            kc.output.write(kc.value(expr, lane), lane)
    else:
        each_coordinate(kc, order[depth], expr, lanes,
                        lambda inner: emit(kc, order, depth + 1, expr, inner))


def write_points(kc: KernelCompiler, order: list[str], depth: int, expr: Expr,
                 lanes: list[Ctx]) -> None:
    """Each lane's sum over ``order[depth:]``, then its write, in lane order."""
    if depth == len(order):
        for lane in lanes:
            kc.output.write(kc.value(expr, lane), lane)
        return
    b = kc.b
    accs = []
    for _ in lanes:
        acc = kc.alloca(scalars.compute_type(kc.dtype), "lane.acc")
        b.store(scalars.sum_start(kc.dtype), acc)
        accs.append(acc)
    reduce(kc, order[depth:], expr, lanes, accs)
    with b.if_then(all_nonempty(kc, order[depth:])):
        for lane, acc in zip(lanes, accs):
            total = b.load(acc)
            if kc.output.overwrites():  # an empty sum's -0.0 is stored as 0.0
                total = scalars.apply(b, "add", [total, scalars.constant(kc.dtype, 0)],
                                      kc.dtype)
            kc.output.write(total, lane)


def reduce(kc: KernelCompiler, order: list[str], expr: Expr, lanes: list[Ctx],
           accs: list[ir.Value]) -> None:
    if not order:
        for lane, acc in zip(lanes, accs):
            kc.accumulate(kc.value(expr, lane), acc, None)
        return
    each_coordinate(kc, order[0], expr, lanes,
                    lambda inner: reduce(kc, order[1:], expr, inner, accs))


def each_coordinate(kc: KernelCompiler, var: str, expr: Expr, lanes: list[Ctx],
                    body) -> None:
    """for var in range(extent): body(lanes with var bound and located)."""
    kc.counted_loop(ZERO, kc.extent(var),
                    lambda k: body([locate_bound(kc, kc.bind(lane, var, k), expr)
                                    for lane in lanes]), name=var)
