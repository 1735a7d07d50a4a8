"""Output assembly through the output levels' insert and append functions.

Insert levels (a prefix of the output) are sized up front with their ``size`` function
and written through ``locate`` + ``insert_coord``. Append levels form groups: a level
that is not branchless starts a group, branchless levels ride along at their parent's
position. The last group is appended at the write point; earlier groups are appended
after their children, and only when a child was produced (no empty segments). Block
levels below the last group (ir/legality.block_suffix) are written through ``locate``
under the position its entry took: the entry is appended by the first write under it,
which fills its block with the result's fill; later writes under it find it open.
"""

from __future__ import annotations

import ast
from types import SimpleNamespace
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir.errors import InternalCompilerError
from ...ir.loops.assembly_phases import grows_with_entries
from ...ir.loops.legality import appends_in_order, block_suffix, inserted_prefix, output_refusal
from ...ir.notation.operators import ADD
from ...ir.types import TensorType, unordered_append_output
from . import gpu_hooks, scalars
from .bodies import I1, I64, emit_body, is_true, mark_access

if TYPE_CHECKING:
    from .codegen import KernelCompiler
    from .emit_base import Ctx
    from .tensor_ir import TensorIR

# The status of a call whose output level refused an insert (insert_coord returned False).
STATUS_INSERT_REFUSED = 3
ONE = ir.Constant(I64, 1)
ZERO = ir.Constant(I64, 0)


class OutputAssembler:
    def __init__(self, kc: KernelCompiler, tensor: TensorIR, ttype: TensorType,
                 level_vars: tuple[str, ...], phase: str = "whole",
                 start: ir.Value | None = None, atomic: bool = False, warp: bool = False):
        self.kc, self.b = kc, kc.b
        # Threads share output entries (the loop IR's atomic tag): writes add atomically.
        # A warp's lanes hold partial sums of each entry (warp sums): summed by the warp,
        # written by lane 0.
        self.atomic, self.warp = atomic, warp
        # A threaded assembly's phases (ir/loops/assembly_phases.py): only setup
        # and whole touch the arrays up front; count only counts; fill and finish start
        # the last group's count at ``start`` (the thread's offset, or the total);
        # append starts it at 0 in a thread's private buffers (the gather phases).
        self.phase, self.start = phase, start
        self.tensor = tensor
        self.levels = ttype.levels
        self.vars = level_vars
        self.unordered = unordered_append_output(ttype.levels)
        self.all_insert = all(lv.can_insert for lv in self.levels)
        self.prefix = inserted_prefix(ttype.levels)
        # Lowering asked the same before (ir/loops/legality.py); a direct compile asks here.
        if (reason := output_refusal(ttype)) is not None:
            raise InternalCompilerError(reason)
        self.blocks = block_suffix(ttype.levels)
        self.heads = [k for k in range(self.prefix, self.blocks)
                      if k == self.prefix or not self.levels[k].branchless]
        self.last_head = self.heads[-1] if self.heads else len(self.levels)
        self.open_block: ir.AllocaInstr | None = None  # the entry whose block is written

    def appends_in_order(self, var: str) -> bool:
        """Whether ``var``'s coordinates are appended to a level that keeps them ordered."""
        return appends_in_order(self.tensor.type, tuple(self.vars), var)

    def head_of(self, level: int) -> int:
        return max(h for h in self.heads if h <= level)

    # -- helpers -------------------------------------------------------------------------
    def call(self, level: int, name: str, **values: ir.Value) -> list[ir.Value]:
        return self.tensor.call(level, name, **values)

    def has(self, level: int, name: str) -> bool:
        return self.levels[level].definition.has(name)

    def ensure_lengths(self, level: int, parent_size: ir.Value, size: ir.Value) -> None:
        for name, adef in self.levels[level].definition.arrays.items():
            if adef.length is None:
                continue
            fn = SimpleNamespace(name=f"{name}.length", body=(ast.Return(value=adef.length),))
            env = self.tensor.env(level, parent_size=parent_size, size=size)
            (needed,) = emit_body(self.b, fn, env, {})
            slot = self.tensor.type.slot_of(level, name).index
            self.kc.ensure(self.tensor, slot, needed, adef.init)

    @property
    def appends(self) -> bool:
        """Whether a write appends one entry to the last level (rather than inserting
        everywhere, or writing into a block that one entry owns)."""
        return self.prefix < len(self.levels) and self.blocks == len(self.levels)

    def reserve_last_group(self, extra: ir.Value) -> set[int]:
        """Make room for ``extra`` more entries in the last append group's sized arrays
        and the values; return those slots."""
        b = self.b
        head = self.last_head
        size = b.add(b.load(self.counters[head]), extra)
        slots = {self.tensor.vals_slot}
        for k in range(head, len(self.levels)):
            self.ensure_lengths(k, self.level_size(k - 1) if k == head else size, size)
            slots |= {self.tensor.type.slot_of(k, name).index
                      for name, adef in self.levels[k].definition.arrays.items()
                      if grows_with_entries(adef.length)}
        self.kc.ensure(self.tensor, self.tensor.vals_slot, size, None)
        return slots

    def coord(self, ctx: Ctx, level: int) -> ir.Value:
        return ctx.bound[self.vars[level]] if level >= 0 else ZERO

    # -- phases --------------------------------------------------------------------------
    def entries(self) -> ir.Value:
        """Entries appended to the last group so far."""
        return self.b.load(self.counters[self.last_head])

    def prologue(self) -> None:
        b = self.b
        arrays = self.phase in ("whole", "setup")
        self.sizes: list[ir.Value | None] = [None] * len(self.levels)
        parent_size = ONE
        for k in range(self.prefix):
            (size,) = self.call(k, "size", parent_size=parent_size)
            if arrays:
                self.ensure_lengths(k, parent_size, size)
                if self.has(k, "insert_init"):
                    self.call(k, "insert_init", parent_size=parent_size, size=size)
            self.sizes[k] = size
            parent_size = size
        self.static_size = parent_size
        if self.prefix == len(self.levels) and arrays:
            self.kc.ensure(self.tensor, self.tensor.vals_slot, parent_size, 0)
        self.counters = {}
        for h in self.heads:
            self.counters[h] = self.kc.alloca(I64, f"out{h}.size")
            start = self.start if h == self.last_head and self.start is not None else ZERO
            b.store(start, self.counters[h])
        if not arrays:
            return
        if self.blocks < len(self.levels):
            self.open_block = self.kc.alloca(I64, "out.block")
            b.store(ir.Constant(I64, -1), self.open_block)
        for k in range(self.prefix, self.blocks):
            known = parent_size if k == self.prefix else ZERO
            self.ensure_lengths(k, known, ZERO)
            if self.has(k, "append_init"):
                self.call(k, "append_init", parent_size=known, size=ZERO)

    def level_size(self, level: int) -> ir.Value:
        if level < 0:
            return ONE
        if level < self.prefix:
            return self.sizes[level]
        if level >= self.blocks:
            (size,) = self.call(level, "size", parent_size=self.level_size(level - 1))
            return size
        return self.b.load(self.counters[self.head_of(level)])

    def epilogue(self) -> None:
        b = self.b
        if self.heads and self.heads[0] == 0:
            self.call(0, "append_edges", p_parent=ZERO, p_begin=ZERO,
                      p_end=b.load(self.counters[0])) if self.has(0, "append_edges") else None
        for k in range(len(self.levels)):
            parent_size, size = self.level_size(k - 1), self.level_size(k)
            self.ensure_lengths(k, parent_size, size)
            for fn in ("append_finalize", "insert_finalize"):
                if self.has(k, fn):
                    self.call(k, fn, parent_size=parent_size, size=size)
            b.store(size, b.gep(self.tensor.sizes_ptr, [ir.Constant(I64, k)]))
        self.kc.ensure(self.tensor, self.tensor.vals_slot, self.level_size(len(self.levels) - 1),
                       0 if self.all_insert else None)

    # -- positions -----------------------------------------------------------------------
    def insert_position(self, level: int, parent: ir.Value, ctx: Ctx) -> ir.Value:
        b = self.b
        i = self.coord(ctx, level)
        env = {"p_parent": parent, "i": i, "i_parent": self.coord(ctx, level - 1)}
        pos, found = self.call(level, "locate", **env)
        if not is_true(found) and self.has(level, "insert_coord"):
            with b.if_then(b.not_(found)):
                inserted = self.call(level, "insert_coord", p=pos, i=i, p_parent=parent)
                if inserted and not is_true(inserted[0]):
                    # The level refused: its parent's segment is full.
                    flag = inserted[0] if inserted[0].type == I1 else \
                        b.icmp_signed("!=", inserted[0], ZERO)
                    ok = b.append_basic_block("inserted")
                    b.cbranch(flag, ok, self.kc.fail(STATUS_INSERT_REFUSED))
                    b.position_at_end(ok)
        return pos

    def append_group(self, head: int, stop: int, ctx: Ctx) -> ir.Value:
        """Append the coordinates of levels head..stop; return the position at ``stop``."""
        b = self.b
        pos = b.load(self.counters[head])
        b.store(b.add(pos, ONE), self.counters[head])
        parent = ZERO
        for k in range(head, stop + 1):
            if k > head:
                parent, (pos, _) = pos, self.call(k, "pos_bounds", p_parent=pos)
            self.call(k, "append_coord", p=pos, i=self.coord(ctx, k), p_parent=parent)
        return pos

    def prefix_position(self, ctx: Ctx, upto: int) -> ir.Value:
        pos = ZERO
        for k in range(min(upto + 1, self.prefix)):
            pos = self.insert_position(k, pos, ctx)
        return pos

    def write(self, value: ir.Value, ctx: Ctx, adds: bool) -> None:
        """Write ``value`` at the output entry ``ctx`` binds; ``adds``: fold it into what
        is there (an inserted level's entry written more than once) instead of storing."""
        b = self.b
        last = len(self.levels) - 1
        if self.phase == "count":  # the rows are array-free: only the count changes
            counter = self.counters[self.last_head]
            b.store(b.add(b.load(counter), ONE), counter)
            return
        pos = self.prefix_position(ctx, last)
        if self.blocks <= last:
            pos = self.block_position(ctx)
        elif self.prefix <= last:
            pos = self.append_group(self.last_head, last, ctx)
            self.kc.ensure(self.tensor, self.tensor.vals_slot, b.add(pos, ONE), None)
        vals = self.tensor.array_ref(self.tensor.vals_slot)
        address = vals.address(b, pos)
        dtype = self.tensor.type.dtype
        kc = self.kc
        if (self.warp or self.atomic) and self.prefix <= last:
            raise InternalCompilerError("warp sums or atomic adds into an assembled output")
        if self.warp:  # the warp's total, written (or added) by lane 0
            value = gpu_hooks.warp_sum(b, value)
            with b.if_then(b.icmp_signed("==", gpu_hooks.lane(b), ZERO)):
                self.write_at(value, address, dtype, last, adds)
            return
        if self.atomic and kc.window is not None:  # an entry split: of a thread's rows,
            lo, hi = kc.lo, b.sub(kc.hi, ONE)  # only its first and last may be shared
            row = self.coord(ctx, 0)
            shared = b.or_(b.icmp_signed("==", row, lo), b.icmp_signed("==", row, hi))
            with b.if_else(shared) as (cut, whole):
                with cut:
                    self.add_atomically(value, address, dtype)
                with whole:
                    self.write_at(value, address, dtype, last, adds)
            return
        if self.atomic:
            self.add_atomically(value, address, dtype)
            return
        self.write_at(value, address, dtype, last, adds)

    def add_atomically(self, value: ir.Value, address: ir.Value, dtype: str) -> None:
        """Add ``value`` into the output's entry at ``address`` (threads share it)."""
        b = self.b
        value = scalars.store_value(b, scalars.convert(b, value, self.kc.dtype, dtype), dtype)
        b.atomic_rmw("fadd" if isinstance(value.type, (ir.FloatType, ir.DoubleType)) else "add",
                     address, value, "monotonic")

    def write_at(self, value: ir.Value, address: ir.Value, dtype: str, last: int,
                 adds: bool) -> None:
        """Store ``value`` at ``address``, or reduce it into what is there."""
        b, kc = self.b, self.kc
        if (self.prefix > last or self.blocks <= last) and adds:
            stored = b.load(address)
            mark_access(stored, b.module, is_input=False)
            old = scalars.load_value(b, stored, dtype, kc.dtype)
            value = scalars.apply_op(b, kc.statement.reduce_op or ADD, [old, value], kc.dtype,
                                     kc.fastmath)
        self.store(value, address, dtype)

    def store(self, value: ir.Value, address: ir.Value, dtype: str) -> None:
        """Store a computed value into the output's values at ``address``."""
        b = self.b
        value = scalars.convert(b, value, self.kc.dtype, dtype)
        mark_access(b.store(scalars.store_value(b, value, dtype), address), b.module,
                    is_input=False)

    def block_position(self, ctx: Ctx) -> ir.Value:
        """The position of a write into a block level: under the last group's entry,
        appended (its block filled) unless the block is open already."""
        b, kc = self.b, self.kc
        last = self.blocks - 1
        with b.if_then(b.icmp_signed("<", b.load(self.open_block), ZERO)):
            entry = self.append_group(self.last_head, last, ctx)
            b.store(entry, self.open_block)
            start, end = (self._block_start(entry, k) for k in (0, 1))
            kc.ensure(self.tensor, self.tensor.vals_slot, end, None)
            vals = self.tensor.array_ref(self.tensor.vals_slot)
            dtype = self.tensor.type.dtype
            fill = scalars.store_value(b, scalars.constant(dtype, self.tensor.type.fill), dtype)
            kc.counted_loop(start, end, lambda q: b.store(fill, vals.address(b, q)),
                            name="block")
        pos = b.load(self.open_block)
        for k in range(self.blocks, len(self.levels)):
            pos = self.insert_position(k, pos, ctx)
        return pos

    def _block_start(self, entry: ir.Value, offset: int) -> ir.Value:
        """The first position of the block of entry ``entry + offset``."""
        pos = self.b.add(entry, ir.Constant(I64, offset)) if offset else entry
        for k in range(self.blocks, len(self.levels)):
            (pos,) = self.call(k, "size", parent_size=pos)
        return pos

    # -- hooks around loops of output indices ----------------------------------------------
    def hooks_for(self, var: str):
        if self.unordered or self.phase == "count":
            return None
        if self.open_block is not None and self.vars[self.blocks - 1] == var:
            # A new coordinate of the last appended level: no block is open.
            return (lambda ctx: self.close_block(), lambda ctx, saved: None)
        for h in self.heads:
            if h > 0 and self.vars[h - 1] == var:
                return (lambda ctx, h=h: self.b.load(self.counters[h]),
                        lambda ctx, saved, h=h: self.close_segment(h, ctx, saved))
        return None

    def close_block(self) -> ir.Value:
        """Forget the open block; the value a segment hook saves (callers such as a
        workspace's drain store it, so it is a value, not the void of a store)."""
        none = ir.Constant(I64, -1)
        self.b.store(none, self.open_block)
        return none

    def close_segment(self, head: int, ctx: Ctx, begin: ir.Value) -> None:
        b = self.b
        end = b.load(self.counters[head])
        with b.if_then(b.icmp_signed(">", end, begin)):
            parent_level = head - 1
            if parent_level < self.prefix:
                parent = self.prefix_position(ctx, parent_level)
            else:
                parent = self.append_group(self.head_of(parent_level), parent_level, ctx)
            if self.has(head, "append_edges"):
                self.call(head, "append_edges", p_parent=parent, p_begin=begin, p_end=end)
