"""Two rows at once: the sums of two outer iterations run side by side.

A row's sum over its stored entries is one chain of dependent adds, so a long row runs at
the add latency however many loads are in flight. Taking two rows together for as many
entries as both hold gives two independent chains per step; each row then finishes its
own remaining entries alone. Every row's adds keep their order (nothing is reassociated),
so the results are bit for bit those of one row at a time.

The two rows come from the two halves of the loop's range (i and i + n/2), not next to
each other: each lane then reads its operand arrays as one sequential stream that the
hardware prefetchers follow. Rows i and i+1 restart two short streams per pair, and from
memory (a matrix evicted by other work) ran 1.6-2x the time of one row at a time on FEM
matrices (C, bcsstk33: 0.75 vs 0.37 ms; halves: 0.35).

In C, with halves, against one row at a time: 0.76x on bcsstk16 (60 entries per row),
0.80x bcsstk33, 0.84-0.94x on the stencil and uniform rows, but 1.09x on the power-law
rows and 1.14x on ego-Twitter. So it is the other form of the loop
(ir/opt/passes.py: other_form), and a binding's first calls time both (llvsparse/calls/probe.py).

It applies to a statement whose output is full (written at every outer coordinate), whose
outer loop visits each coordinate once without a test, and whose inner loop, the last,
iterates one operand's level by position (unique, always found) and locates every other
operand level surely: row-wise SpMV, TTV into a dense result; not under ``fastmath``.

The sums read the statement's expression as written, where the one-at-a-time loop reads
the case's expression with absent operands folded away (``substitute_absent``); with one
lattice point and every other operand found, the two differ at most by folded constants,
which IEEE arithmetic evaluates to the same values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir.concrete.expressions import Iter
from ...ir.loops.nodes import Accumulate, Append, Clear, Insert, Loop, LoopNode, Merge, walk
from . import scalars
from .bodies import I64
from .emit_base import Ctx

if TYPE_CHECKING:
    from .codegen import KernelCompiler


def driver_of(node: LoopNode) -> Iter:
    """The level that drives the innermost loop of a loop the pairs pass noted: the one
    loop inside it, which iterates one level (passes.pairs)."""
    (inner,) = [n for n in walk(node.body) if isinstance(n, (Loop, Merge))]
    (driver,) = inner.chosen.iterated
    return driver


def emit(kc: KernelCompiler, node: Loop, lanes: list[Ctx]) -> None:
    """Each lane's sum over the index of the loop inside ``node``: together while every
    lane has entries left, then each lane alone; then each lane's write, in lane order."""
    b = kc.b
    (inner,) = [n for n in walk(node.body) if isinstance(n, (Loop, Merge))]
    var, expr, driver = inner.index, node.expr, driver_of(node)
    # The sum's start and its write, as the loop IR gives them (lower_loops.write_point).
    (clear,) = [n for n in walk(node.body) if isinstance(n, Clear)]
    (write,) = [n for n in walk(node.body) if isinstance(n, (Accumulate, Insert, Append))
                and n.target != clear.name]
    op = kc.operands[driver.uid]
    tensor = kc.tensors[op.tensor]
    start = scalars.constant(kc.dtype, clear.value)
    accs, bounds = [], []
    for lane in lanes:
        acc = kc.alloca(scalars.compute_type(kc.dtype), "pair.acc")
        b.store(start, acc)
        accs.append(acc)
        env = kc.parent_env(op, driver.level, lane)
        bounds.append(tensor.call(driver.level, "pos_bounds", **env))
    common = None
    for begin, end in bounds:
        length = b.sub(end, begin)
        common = length if common is None else b.select(
            b.icmp_signed("<", length, common), length, common)

    def add_at(lane: Ctx, p: ir.Value, acc: ir.Value) -> None:
        """acc += expr at position ``p`` of the driving level."""
        kc.accumulate(kc.value(expr, kc.at_position(lane, var, driver, p, expr)), acc)

    def together(k: ir.Value) -> None:
        for lane, acc, (begin, _) in zip(lanes, accs, bounds):
            add_at(lane, b.add(begin, k), acc)

    kc.counted_loop(ir.Constant(I64, 0), common, together, name=f"{var}.pair")
    for lane, acc, (begin, end) in zip(lanes, accs, bounds):
        kc.counted_loop(b.add(begin, common), end,
                        lambda p, lane=lane, acc=acc: add_at(lane, p, acc), name=f"{var}.rest")
    for lane, acc in zip(lanes, accs):
        kc.emit_write(write, b.load(acc), lane)

