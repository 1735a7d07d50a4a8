"""Lowering of operand workspaces (ir/schedule/precompute.py).

The temporaries are allocated once per kernel call (so each thread running a range of
the kernel has its own), their marks zeroed, and freed at the end and on every failure
path. The loop IR (precompute_loops) says the rest: before the loop a plan names
(``Precompute.at``), once per coordinate of the loops outside it, the operand's slice is
inserted into the temporary by the operand's own loop (``scatter``); the loop then runs
over the expression reading the temporary (located through the temporary level's
``locate``), and the slice's coordinates clear the marks again (``clear_mark``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from llvmlite import ir

from . import scalars
from .bodies import I1, I64, ArrayRef, emit_body
from .emit_base import I8, I8P, ONE, STATUS_NO_MEMORY, ZERO, Ctx

if TYPE_CHECKING:
    from ...ir.schedule.precompute import Precompute
    from .codegen import KernelCompiler


class Temporary:
    """A temporary as the kernel sees it (the interface of ``TensorIR`` the loops use):
    its level functions inlined over its mark array, and its values."""

    def __init__(self, kc: KernelCompiler, plan: Precompute, extent: ir.Value) -> None:
        b = kc.b
        self.kc, self.plan, self.type = kc, plan, plan.temporary.type
        self.extents = self.level_extents = [extent]
        self.windows: dict = {}
        self.vals_slot = 1
        element = scalars.element_type(self.type.dtype)
        self.slots = []
        self.itemsize = itemsize = np.dtype(self.type.dtype).itemsize
        for name, width, kind in (("mark", 1, I8), ("vals", itemsize, element)):
            slot = kc.alloca(kind.as_pointer(), f"{plan.temporary.name}.{name}")
            raw = b.call(kc.malloc, [b.mul(b.add(extent, ONE), ir.Constant(I64, width))])
            b.store(b.bitcast(raw, kind.as_pointer()), slot)
            self.slots.append(slot)
        self.marks = ArrayRef(b.load(self.slots[0]), I8)
        self.vals = ArrayRef(b.load(self.slots[1]), element)

    def array_ref(self, slot: int, init: int | None = None) -> ArrayRef:
        return self.vals if slot == self.vals_slot else self.marks

    def call(self, level: int, function: str, **values: ir.Value) -> list[ir.Value]:
        env = {"N": self.extents[0], "N_child": ZERO, "i_parent": ZERO,
               "i_grandparent": ZERO, "p_parent": ZERO, **values}
        definition = self.type.levels[level].definition
        return emit_body(self.kc.b, definition.functions[function], env,
                         {"mark": self.marks})

    def release(self) -> None:
        for slot in self.slots:
            self.kc.b.call(self.kc.free, [self.kc.b.bitcast(self.kc.b.load(slot), I8P)])


def allocate(kc: KernelCompiler) -> Callable[[], None]:
    """Allocate the temporaries of the nest being lowered (at the builder's position,
    before its loops), failing the call cleanly where memory runs out; returns what
    frees them after the loops."""
    plans = kc.statement.precomputes
    if not plans:
        return lambda: None
    b = kc.b
    made = []
    for plan in plans:
        temp = Temporary(kc, plan, kc.extent(plan.var))
        kc.tensors[plan.temporary.name] = temp
        kc.types = {**kc.types, plan.temporary.name: plan.temporary.type}
        made.append(temp)
    failed = ir.Constant(I1, 0)
    for temp in made:
        for slot in temp.slots:
            failed = b.or_(failed, b.icmp_unsigned("==", b.load(slot),
                                                   ir.Constant(slot.type.pointee, None)))
    releases = [temp.release for temp in made]
    kc.releases.extend(releases)
    kc.fail_blocks.clear()  # failure blocks made from here on free the temporaries
    ok = b.append_basic_block("precompute.allocated")
    b.cbranch(failed, kc.fail(STATUS_NO_MEMORY), ok)
    b.position_at_end(ok)
    for temp in made:
        # marks, and a sum workspace's values (kept at 0 where unmarked), zeroed
        for slot, width in zip(temp.slots, (1, temp.itemsize)):
            if width == 1 or temp.plan.expr is not None:
                b.call(kc.memset, [b.bitcast(b.load(slot), I8P), ir.Constant(I8, 0),
                                   b.mul(b.add(temp.extents[0], ONE), ir.Constant(I64, width)),
                                   ir.Constant(I1, 0)])

    def free() -> None:
        for release in releases:
            release()
            kc.releases.remove(release)
        kc.fail_blocks.clear()
    return free


def scatter(kc: KernelCompiler, plan: Precompute, value: ir.Value, ctx: Ctx) -> None:
    """Store ``value``, an entry of the operand's slice, at its coordinate of the
    temporary, and mark it."""
    b, temp = kc.b, kc.tensors[plan.temporary.name]
    at = ctx.bound[plan.var]
    mark = temp.marks.address(b, at)
    place = temp.vals.address(b, at)
    if plan.adds:  # a duplicate or a sum's next term adds to the value stored first
        old = scalars.load_value(b, b.load(place), temp.type.dtype, kc.dtype)
        total = scalars.apply(b, "add", [old, value], kc.dtype)
        if plan.expr is None:
            seen = b.icmp_unsigned("!=", b.load(mark), ir.Constant(I8, 0))
            total = b.select(seen, total, value)
        value = total  # a sum workspace's unmarked values are kept at 0 (clear_mark)
    b.store(scalars.store_value(b, value, kc.dtype), place)
    if plan.expr is None:  # a sum workspace's row is full: no marks
        b.store(ir.Constant(I8, 1), mark)


def clear_mark(kc: KernelCompiler, plan: Precompute, ctx: Ctx) -> None:
    """Unmark the temporary's entry at the slice's coordinate."""
    temp = kc.tensors[plan.temporary.name]
    at = ctx.bound[plan.var]
    if plan.expr is None:
        kc.b.store(ir.Constant(I8, 0), temp.marks.address(kc.b, at))
    else:  # a sum workspace's row: its value back to 0
        kc.b.store(scalars.store_value(kc.b, scalars.constant(kc.dtype, 0.0), kc.dtype),
                   temp.vals.address(kc.b, at))
