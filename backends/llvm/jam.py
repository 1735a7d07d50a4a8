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

from ...ir.concrete.expressions import Expr, operands
from ...ir.errors import InternalCompilerError
from ...ir.loops.nodes import (
    Accumulate,
    Allocate,
    Append,
    Block,
    Clear,
    If,
    Insert,
    Locate,
    Loop,
    Node,
    Nonempty,
)
from . import scalars
from .bodies import I64, TRUE, is_true

if TYPE_CHECKING:
    from .codegen import KernelCompiler
    from .emit_base import Ctx

ZERO = ir.Constant(I64, 0)


def contains_temp(expr: Expr) -> bool:
    """Whether ``expr`` reads a scalar temporary."""
    return any(op.uid == -1 for op in operands(expr))


def all_nonempty(kc: KernelCompiler, loop_vars: tuple[str, ...]) -> ir.Value:
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


def emit(kc: KernelCompiler, node: Node, lanes: list[Ctx],
         temps: dict[str, list[ir.Value]] | None = None) -> None:
    """The loop IR ``node`` (the body of a jammed loop) for every lane: each loop runs
    once for all lanes, each temporary is one per lane, and writes happen in lane
    order."""
    temps = {} if temps is None else temps
    b = kc.b
    if isinstance(node, Block):
        for item in node.items:
            emit(kc, item, lanes, temps)
    elif isinstance(node, Locate):
        return  # each lane's levels are located as its loops bind them (locate_bound)
    elif isinstance(node, Loop):  # every coordinate: it only locates (passes.can_jam)
        each_coordinate(kc, node.index, node.expr, lanes,
                        lambda inner: emit(kc, node.body, inner, temps))
    elif isinstance(node, Allocate):
        temps[node.name] = [kc.alloca(scalars.compute_type(kc.dtype), "lane.acc")
                            for _ in lanes]
    elif isinstance(node, Clear) and node.name in temps:
        for acc in temps[node.name]:
            b.store(scalars.constant(kc.dtype, node.value), acc)
    elif isinstance(node, If) and isinstance(node.condition, Nonempty):
        with b.if_then(all_nonempty(kc, node.condition.indices)):
            emit(kc, node.then, lanes, temps)
    elif isinstance(node, Accumulate) and node.target in temps:
        for lane, acc in zip(lanes, temps[node.target]):
            kc.accumulate(kc.value(node.value, lane), acc)
    elif isinstance(node, (Accumulate, Insert, Append)) and not contains_temp(node.value):
        for lane in lanes:
            kc.emit_write(node, kc.value(node.value, lane), lane)
    elif isinstance(node, (Insert, Append)) and node.value.tensor in temps:
        for lane, acc in zip(lanes, temps[node.value.tensor]):
            kc.emit_write(node, b.load(acc), lane)
    else:  # the jam pass chooses only loops whose inner loops locate surely
        raise InternalCompilerError(f"a jammed loop holds what it cannot jam: {node}")


def each_coordinate(kc: KernelCompiler, var: str, expr: Expr, lanes: list[Ctx],
                    body) -> None:
    """for var in range(extent): body(lanes with var bound and located)."""
    kc.counted_loop(ZERO, kc.extent(var),
                    lambda k: body([locate_bound(kc, kc.bind(lane, var, k), expr)
                                    for lane in lanes]), name=var)
