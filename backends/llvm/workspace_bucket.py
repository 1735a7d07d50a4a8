"""The bucket policy of a sparse workspace: entries bucketed by their leading indices.

Outer-product SpGEMM (``forall k, i, j`` into a row-major C) produces every product of
the kernel before any row of C is complete. The sort policy appends them all (cage10
A*A: 2.2 million pairs, 35 MB) and radix-sorts them, 8-10x Gustavson's time. Here the
producer's loops run twice: a first pass only counts the entries of each row (the
covered indices but the last, ``row``), a prefix sum makes the counts each row's place
in one array, and a second pass writes each entry's last index and value into its
row's bucket. A row's bucket is then reduced in a dense accumulator over the last index
(a DenseStore: small enough to stay in cache, drained in order through its bitmap) and
written out; rows come out in order, so nothing is sorted but within a row. The fill
prefetches each row's next records for writing (its next run lands there).

Under hoisted loops (one run of the store per hoisted coordinate) each run also passes
over every row (prefix sum, drain, zeroing): suited to workspaces holding the whole
product, as the outer product's does.

The fixed arrays (a count per row, the accumulator) are checked against the machine's
memory before the call (llvsparse/calls/workspaces.py); the buckets, sized exactly by the
count pass, are allocated inside the call (status: no memory when that fails).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from llvmlite import ir

from .bodies import I1, I64
from .emit_base import I8, I8P, ONE, STATUS_NO_MEMORY, ZERO, emit_counted_loop
from .workspace_dense import DenseStore
from .workspace_store import Store, Write, _width

if TYPE_CHECKING:
    from ...ir.schedule.workspace_schedule import WorkspacePlan
    from .codegen import KernelCompiler

# Records ahead of the one written that are prefetched for writing: the row's next run
# (a later k) lands there. cage10 A*A: 2.30x -> 1.82x Gustavson's time 16 ahead, 2-8%
# less again 24 ahead (8, 20, 32 and 64 no better).
PREFETCH = ir.Constant(I64, 24)


class BucketStore(Store):
    """Two passes of the producer (``counting`` says which one ``add_at`` serves), then
    ``prepare`` between them and ``drain`` after the second."""

    two_pass = True

    @classmethod
    def for_plan(cls, kc: KernelCompiler, plan: WorkspacePlan, extents: list[ir.Value]
                 ) -> BucketStore:
        """Records keyed in the output's index type."""
        key = ir.IntType(np.dtype(plan.temporary.type.index_dtype).itemsize * 8)
        return cls(kc, extents, key)

    def __init__(self, kc: KernelCompiler, extents: list[ir.Value], key: ir.IntType) -> None:
        """``key``: the integer type the last index fits in (the output's index type)."""
        super().__init__(kc)
        b = self.b
        self.width = extents[-1]
        rows = ONE
        for extent in extents[:-1]:
            rows = b.mul(rows, extent)
        self.rows = rows
        self.extents = extents
        self.acc = DenseStore(kc, [self.width])
        kc.releases.remove(self.acc.release)  # freed with this store's arrays
        self.arrays.extend(self.acc.arrays)
        # ends[r]: row r's count (at r + 1), then its start, then (after the fill) its end.
        self.ends = self.allocate(b.add(rows, ONE), I64, "ws.ends")
        self.checked()
        self.zero_ends()
        # One array of packed (last index, value) records: a record's two parts share a
        # cache line, and a 32-bit index makes a double's record 12 bytes, not 16.
        self.record = ir.LiteralStructType([key, self.value_type], packed=True)
        self.record_bytes = ir.Constant(I64, key.width // 8 + _width(self.value_type))
        self.records = self.null_slot(self.record, "ws.buckets")
        self.counting = True

    def null_slot(self, element: ir.Type, name: str) -> ir.AllocaInstr:
        """A pointer slot, empty until ``prepare`` (freed with the others: free(NULL) is
        a no-op)."""
        slot = self.kc.alloca(element.as_pointer(), name)
        self.b.store(ir.Constant(element.as_pointer(), None), slot)
        self.arrays.append(slot)
        return slot

    def zero_ends(self) -> None:
        b = self.b
        b.call(self.kc.memset, [b.bitcast(b.load(self.ends), I8P), ir.Constant(I8, 0),
                                b.mul(b.add(self.rows, ONE), ir.Constant(I64, 8)),
                                ir.Constant(I1, 0)])

    def row_of(self, coords: list[ir.Value]) -> ir.Value:
        b, row = self.b, ZERO
        for coord, extent in zip(coords[:-1], self.extents[:-1]):
            row = b.add(b.mul(row, extent), coord) if row is not ZERO else coord
        return row

    def add_at(self, coords: list[ir.Value], at: ir.Value, value: ir.Value) -> None:
        """Count the entry in its row, or write it to the row's next place (no division:
        the row is computed from the indices, loop-invariant in the innermost loop)."""
        b = self.b
        row = self.row_of(coords)
        if self.counting:
            slot = self.at(self.ends, b.add(row, ONE))
            b.store(b.add(b.load(slot), ONE), slot)
            return
        slot = self.at(self.ends, row)
        place = b.load(slot)
        key, val = self.fields(place)
        self.prefetch(b.add(place, PREFETCH))
        b.store(b.trunc(coords[-1], self.record.elements[0]) if self.narrow else coords[-1], key)
        b.store(value, val)
        b.store(b.add(place, ONE), slot)

    def prefetch(self, place: ir.Value) -> None:
        """Ask for record ``place``'s cache line, for writing (a hint: never faults)."""
        b = self.b
        fn = b.module.globals.get("llvm.prefetch.p0") or ir.Function(
            b.module, ir.FunctionType(ir.VoidType(), [I8P, ir.IntType(32), ir.IntType(32),
                                                      ir.IntType(32)]), "llvm.prefetch.p0")
        i32 = ir.IntType(32)
        b.call(fn, [b.bitcast(self.fields(place)[0], I8P), ir.Constant(i32, 1),
                    ir.Constant(i32, 3), ir.Constant(i32, 1)])

    @property
    def narrow(self) -> bool:
        return self.record.elements[0].width < 64

    def fields(self, place: ir.Value) -> tuple[ir.Value, ir.Value]:
        """Pointers to the key and the value of record ``place``."""
        b, base = self.b, self.b.load(self.records)
        return tuple(b.gep(base, [place, ir.Constant(ir.IntType(32), f)], inbounds=True)
                     for f in (0, 1))

    def entry(self, place: ir.Value) -> tuple[ir.Value, ir.Value]:
        """The last index (64 bits) and the value of record ``place``."""
        b = self.b
        key, val = self.fields(place)
        key = b.load(key)
        return (b.zext(key, I64) if self.narrow else key), b.load(val)

    def prepare(self) -> None:
        """Counts to starts (a prefix sum), and the buckets allocated for them all."""
        b, kc = self.b, self.kc
        total = kc.alloca(I64, "ws.total")
        b.store(ZERO, total)

        def running(r: ir.Value) -> None:
            slot = self.at(self.ends, r)
            now = b.add(b.load(total), b.load(slot))
            b.store(now, slot)
            b.store(now, total)
        emit_counted_loop(b, kc.alloca(I64, "ws.r"), ZERO, b.add(self.rows, ONE), running,
                          "ws.prefix")
        raw = b.call(kc.malloc, [b.mul(b.add(b.load(total), ONE), self.record_bytes)])
        b.store(b.bitcast(raw, self.record.as_pointer()), self.records)
        ok = b.append_basic_block("ws.buckets")
        b.cbranch(b.icmp_unsigned("==", raw, ir.Constant(I8P, None)),
                  kc.fail(STATUS_NO_MEMORY), ok)
        b.position_at_end(ok)
        self.counting = False

    def drain(self, ordered: bool, write: Write) -> None:
        """Row by row: a row of one entry is written as it is; a longer one is reduced
        in the accumulator and drained from it (in order where ``ordered``). The
        buckets are then freed and the counts zeroed for the next run."""
        b, kc = self.b, self.kc
        start = kc.alloca(I64, "ws.start")
        b.store(ZERO, start)

        def row(r: ir.Value) -> None:
            lo, hi = b.load(start), b.load(self.at(self.ends, r))
            b.store(hi, start)
            base = b.mul(r, self.width)
            size = b.sub(hi, lo)
            with b.if_else(b.icmp_signed("==", size, ONE)) as (single, longer):
                with single:
                    col, value = self.entry(lo)
                    write(b.add(base, col), value)
                with longer, b.if_then(b.icmp_signed(">", size, ONE)):
                    emit_counted_loop(b, kc.alloca(I64, "ws.q"), lo, hi,
                                      lambda q: self.acc.add(*self.entry(q)), "ws.bucket")
                    self.acc.drain(ordered, lambda col, value: write(b.add(base, col), value))
        emit_counted_loop(b, kc.alloca(I64, "ws.row"), ZERO, self.rows, row, "ws.rows")
        b.call(kc.free, [b.bitcast(b.load(self.records), I8P)])
        b.store(ir.Constant(self.record.as_pointer(), None), self.records)
        self.zero_ends()
        self.counting = True
