"""The dense workspace's store: a value per coordinate, a mark per coordinate holding the
run it was last touched in (so nothing is cleared between runs) and the list of the
run's touched coordinates.

A run is drained in coordinate order by one of three ways, chosen per run from its
entry count ``n`` and the span ``[lo, hi]`` of its coordinates (one pass over the list):

* ``n <= SORT_ROWS_UP_TO``: the list sorted (an insertion sort, workspace_sort, inlined);
* a span of at most BITMAP_CHUNKS_PER_ENTRY chunks of 4,096 coordinates per entry: a
  bit per coordinate and a flag byte per 64 coordinates set for each entry, the span's
  flags compared with zero 64 at a time, each flagged word's bits walked;
* wider: the list sorted.

Scanning a run's marks for its epoch instead (8 at a time, no bitmap) was tried for
spans of up to 16 coordinates per entry: 1.38-1.44x this bitmap's time on wiki-Vote
and soc-sign-bitcoin-otc A*A, 1.17x on add32 (a mispredicted exit per chunk of 8 that
holds an entry), within 5% elsewhere (tools/BENCHMARKS.md, "SpGEMM's dense workspace
kernel").

Quicksorting every row's list took most of Gustavson's time (cage10 A*A: 66 ms, 23 with
a bitmap; uniform 100k-row A*A^T, whose rows spread over all columns, 2.8 s).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from . import scalars
from .bodies import I1, I64, while_loop
from .emit_base import I8, I8P, ONE, ZERO, emit_counted_loop
from .workspace_sort import SMALL
from .workspace_store import Store, Write

if TYPE_CHECKING:
    from .codegen import KernelCompiler

# Runs of at most this many coordinates are sorted without a look at their span: a road
# graph's SpGEMM rows hold 3-4 entries, where the span pass, the marks and the scan cost
# more than the sort (luxembourg_osm A*A^T: 6.6 ms through the bitmap, 5.0 sorted;
# scipy 6.2).
SORT_ROWS_UP_TO = SMALL
# Chunks of 64 flags (4,096 coordinates) a bitmap drain may compare per entry (else the
# list is sorted): a chunk costs a load and a compare, a sorted entry about log2(entries)
# mispredicted compares. Flags are bytes, set by plain stores; the summary bit per word
# they replace was set by a read-modify-write of one summary word per 4,096 coordinates,
# which chained every entry of a run through memory (cage10 A*A: 83 entries a row, 3
# summary words; 15% of the kernel).
BITMAP_CHUNKS_PER_ENTRY = 4
FLAGS = 64  # flags compared at once
SIX = ir.Constant(I64, 6)


class DenseStore(Store):
    """The store of one call: its arrays span every coordinate of the covered indices."""

    def __init__(self, kc: KernelCompiler, extents: list[ir.Value]) -> None:
        super().__init__(kc)
        b = self.b
        size = ONE
        for extent in extents:
            size = b.mul(size, extent)
        self.size = size
        words = b.add(b.lshr(size, SIX), ONE)
        flags = b.add(words, ir.Constant(I64, FLAGS))  # spare (zero) flags for a last load
        self.vals = self.allocate(size, self.value_type, "ws.vals")
        self.marks = self.allocate(size, I64, "ws.marks")
        self.list = self.allocate(b.add(size, ONE), I64, "ws.list")
        self.bits = self.allocate(words, I64, "ws.bits")  # a bit per touched coordinate
        self.flags = self.allocate(flags, I8, "ws.flags")  # a byte per nonzero word
        self.checked()
        for slot, count, width in ((self.marks, size, 8), (self.bits, words, 8),
                                   (self.flags, flags, 1)):
            b.call(kc.memset, [b.bitcast(b.load(slot), I8P), ir.Constant(I8, 0),
                               b.mul(count, ir.Constant(I64, width)), ir.Constant(I1, 0)])
        self.epoch = kc.alloca(I64, "ws.epoch")
        b.store(ONE, self.epoch)

    def most_entries(self) -> ir.Value:
        return self.b.load(self.count)

    def add(self, at: ir.Value, value: ir.Value) -> None:
        """Branch-free: the list always receives the coordinate, but its count only
        grows on the run's first touch (the list has one spare slot for that)."""
        b = self.b
        epoch, mark = b.load(self.epoch), self.at(self.marks, at)
        fresh = b.icmp_signed("!=", b.load(mark), epoch)
        place = self.at(self.vals, at)
        start = b.select(fresh, scalars.sum_start(self.kc.dtype), b.load(place))
        b.store(self.plus(start, value), place)
        n = b.load(self.count)
        b.store(at, self.at(self.list, n))
        b.store(b.add(n, b.zext(fresh, I64)), self.count)
        b.store(epoch, mark)

    def drain(self, ordered: bool, write: Write) -> None:
        """Every entry of the run, in coordinate order where ``ordered`` (the module's
        three ways); then the next run."""
        b, kc = self.b, self.kc
        n = b.load(self.count)

        def entry(at: ir.Value) -> None:
            write(at, b.load(self.at(self.vals, at)))

        def from_list() -> None:
            emit_counted_loop(b, kc.alloca(I64, "ws.q"), ZERO, n,
                              lambda q: entry(b.load(self.at(self.list, q))))

        def sorted_list(short: bool = False) -> None:
            self.sort(self.list, None, n, short)
            from_list()

        if not ordered:
            from_list()
        else:
            with b.if_else(b.icmp_signed("<=", n, ir.Constant(I64, SORT_ROWS_UP_TO))) as (
                    short, long):
                with short:
                    sorted_list(short=True)
                with long:
                    self.drain_long(n, entry, sorted_list)
        self.next_run()

    def next_run(self) -> None:
        """Empty the list; the next run's epoch makes every mark stale."""
        b = self.b
        b.store(ZERO, self.count)
        b.store(b.add(b.load(self.epoch), ONE), self.epoch)

    def drain_long(self, n: ir.Value, entry: Callable[[ir.Value], None],
                   sorted_list: Callable[[], None]) -> None:
        """A run of more than SORT_ROWS_UP_TO entries: its span decides the way."""
        b, kc = self.b, self.kc
        low, high = kc.alloca(I64, "ws.low"), kc.alloca(I64, "ws.high")
        b.store(ir.Constant(I64, 2**63 - 1), low)
        b.store(ZERO, high)

        def span(q: ir.Value) -> None:
            at = b.load(self.at(self.list, q))
            b.store(b.select(b.icmp_signed("<", at, b.load(low)), at, b.load(low)), low)
            b.store(b.select(b.icmp_signed(">", at, b.load(high)), at, b.load(high)), high)
        emit_counted_loop(b, kc.alloca(I64, "ws.q"), ZERO, n, span)
        lo, hi = b.load(low), b.load(high)
        chunks = b.sub(b.lshr(hi, ir.Constant(I64, 12)), b.lshr(lo, ir.Constant(I64, 12)))
        few = b.icmp_signed("<", chunks, b.mul(n, ir.Constant(I64, BITMAP_CHUNKS_PER_ENTRY)))
        with b.if_else(few) as (bitmap, sort):
            with bitmap:
                self.bitmap(n, lo, hi, entry)
            with sort:
                sorted_list()

    def bitmap(self, n: ir.Value, lo: ir.Value, hi: ir.Value,
               entry: Callable[[ir.Value], None]) -> None:
        """Set the run's bits and flags, then visit the flagged words of its span."""
        b, kc = self.b, self.kc
        emit_counted_loop(b, kc.alloca(I64, "ws.q"), ZERO, n,
                          lambda q: self.mark(b.load(self.at(self.list, q))))
        vector = ir.VectorType(I8, FLAGS)

        def flagged(base: ir.Value) -> ir.Value:
            address = b.bitcast(self.at(self.flags, base), vector.as_pointer())
            return b.icmp_unsigned("!=", b.load(address, align=1), ir.Constant(vector, None))

        def word(w: ir.Value) -> None:
            b.store(ir.Constant(I8, 0), self.at(self.flags, w))
            address = self.at(self.bits, w)
            bits = b.load(address)
            b.store(ZERO, address)
            self.walk_bits(bits, b.shl(w, SIX), entry)
        self.chunked(b.lshr(lo, SIX), b.lshr(hi, SIX), flagged, word)

    def chunked(self, lo: ir.Value, hi: ir.Value, test: Callable[[ir.Value], ir.Value],
                visit: Callable[[ir.Value], None]) -> None:
        """Visit, in order, each index in [lo, hi] whose lane of ``test(base)`` (a
        vector of FLAGS tests of indices base, base + 1, ...) holds, FLAGS indices a
        step from lo rounded down to a multiple of FLAGS."""
        b, kc = self.b, self.kc
        step = ir.Constant(I64, FLAGS)
        start = b.and_(lo, ir.Constant(I64, -FLAGS))
        count = b.add(b.udiv(b.sub(hi, start), step), ONE)

        def chunk(c: ir.Value) -> None:
            base = b.add(start, b.mul(c, step))
            self.walk_bits(b.bitcast(test(base), I64), base, visit)
        emit_counted_loop(b, kc.alloca(I64, "ws.chunk"), ZERO, count, chunk)

    def walk_bits(self, word: ir.Value, base: ir.Value, visit: Callable[[ir.Value], None]
                  ) -> None:
        """Visit ``base`` plus each set bit's index in ``word``, lowest first."""
        b, kc = self.b, self.kc
        cttz = b.module.globals.get("llvm.cttz.i64") or ir.Function(
            b.module, ir.FunctionType(I64, [I64, I1]), "llvm.cttz.i64")
        bits = kc.alloca(I64, "ws.bits.left")
        b.store(word, bits)
        with while_loop(b, "ws.scan", lambda: b.icmp_unsigned("!=", b.load(bits), ZERO)):
            left = b.load(bits)
            offset = b.call(cttz, [left, ir.Constant(I1, 1)])
            b.store(b.and_(left, b.sub(left, ONE)), bits)
            visit(b.add(base, offset))

    def mark(self, at: ir.Value) -> None:
        """Set the coordinate's bit and its word's flag."""
        b = self.b
        word = b.lshr(at, SIX)
        address = self.at(self.bits, word)
        mask = b.shl(ONE, b.and_(at, ir.Constant(I64, 63)))
        b.store(b.or_(b.load(address), mask), address)
        b.store(ir.Constant(I8, 1), self.at(self.flags, word))
