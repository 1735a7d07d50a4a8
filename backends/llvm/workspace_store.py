"""Storage policies of a workspace: where the producer's entries wait for the consumer.

Each store takes ``add(coordinate, value)`` (reduce by addition into the entry at a
linear coordinate) and ``drain(sorted, write)`` (hand every entry to ``write`` once,
in coordinate order when ``sorted``, then empty the store). Memory is allocated per
kernel call, freed at its end and on its failure paths.

* dense: a value and a mark per coordinate (workspace_dense).
* sort: (coordinate, value) pairs appended as produced, sorted (by radix when there are
  many, workspace_radix), duplicates summed.
* hash: an open-addressing table keyed by coordinate, doubled when half full, with the
  list of its occupied slots: drained by gathering the entries through the list (their
  slots emptied as they go) and sorting them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from . import scalars
from .bodies import I1, I64
from .emit_base import I8, I8P, ONE, STATUS_NO_MEMORY, ZERO, emit_counted_loop
from .workspace_radix import RADIX_FROM, radix_function
from .workspace_sort import insertion_function, sort_function

if TYPE_CHECKING:
    from ...ir.schedule.workspace_schedule import WorkspacePlan
    from .codegen import KernelCompiler

Write = Callable[[ir.Value, ir.Value], None]
INITIAL = 1024  # entries a sparse store starts with


class Store:
    """The base of every policy's store (a plugin policy's too, workspace_policy): a
    subclass allocates its arrays with ``allocate`` and then calls ``checked`` in its
    constructor, and emits ``add(at, value)`` (reduce ``value`` into linear coordinate
    ``at``) and ``drain(ordered, write)`` (call ``write(at, value)`` once per coordinate,
    in increasing order when ``ordered``, and leave the store empty for the next run).
    ``count`` is an int64 slot for its own use; ``value_type`` what it sums in."""

    two_pass = False  # whether the producer runs twice (workspace_bucket)

    @classmethod
    def for_plan(cls, kc: KernelCompiler, plan: WorkspacePlan, extents: list[ir.Value]
                 ) -> Store:
        """The store of one call of ``plan``'s kernel, over ``extents``."""
        del plan
        return cls(kc, extents)

    def __init__(self, kc: KernelCompiler) -> None:
        self.kc, self.b = kc, kc.b
        self.value_type = scalars.compute_type(kc.dtype)
        self.bytes = ir.Constant(I64, _width(self.value_type))
        self.count = kc.alloca(I64, "ws.count")
        self.b.store(ZERO, self.count)
        self.arrays: list[ir.AllocaInstr] = []

    def allocate(self, elements: ir.Value, element: ir.Type, name: str) -> ir.AllocaInstr:
        """A pointer slot holding a fresh array (checked in ``checked``)."""
        b = self.b
        slot = self.kc.alloca(element.as_pointer(), name)
        raw = b.call(self.kc.malloc, [b.mul(elements, ir.Constant(I64, _width(element)))])
        b.store(b.bitcast(raw, element.as_pointer()), slot)
        self.arrays.append(slot)
        return slot

    def checked(self) -> None:
        """Fail the call (status: no memory) if an allocation failed; from here on every
        failure path frees the arrays."""
        b, kc = self.b, self.kc
        failed = ir.Constant(I1, 0)
        for slot in self.arrays:
            failed = b.or_(failed, b.icmp_unsigned("==", b.load(slot),
                                                   ir.Constant(slot.type.pointee, None)))
        kc.releases.append(self.release)
        kc.fail_blocks.clear()  # failure blocks made from here on release the arrays
        ok = b.append_basic_block("ws.allocated")
        b.cbranch(failed, kc.fail(STATUS_NO_MEMORY), ok)
        b.position_at_end(ok)

    def add_at(self, coords: list[ir.Value], at: ir.Value, value: ir.Value) -> None:
        """Add ``value`` at the covered indices ``coords`` (linear coordinate ``at``)."""
        del coords
        self.add(at, value)

    def most_entries(self) -> ir.Value | None:
        """At most how many entries the next drain writes (None: not known before it;
        the output then checks its capacity at each entry)."""
        return None

    def prepare(self) -> None:
        """Between the passes of a two-pass store (the others have one pass)."""

    def release(self) -> None:
        for slot in self.arrays:
            self.b.call(self.kc.free, [self.b.bitcast(self.b.load(slot), I8P)])

    def at(self, slot: ir.AllocaInstr, index: ir.Value) -> ir.Value:
        return self.b.gep(self.b.load(slot), [index], inbounds=True)

    def plus(self, old: ir.Value, value: ir.Value) -> ir.Value:
        return scalars.apply(self.b, "add", [old, value], self.kc.dtype, self.kc.fastmath)

    def sort(self, keys: ir.AllocaInstr, vals: ir.AllocaInstr | None, n: ir.Value,
             short: bool = False) -> None:
        """Sort the first ``n`` keys (and values); ``short``: n is at most
        workspace_sort.SMALL, sorted inline."""
        b = self.b
        value = None if vals is None else self.value_type
        fn = insertion_function(b.module, value) if short else sort_function(b.module, value)
        arrays = [b.load(keys)] + ([] if vals is None else [b.load(vals)])
        b.call(fn, [*arrays, ZERO, n])


class PairStore(Store):
    """Coordinates and values in two arrays of ``cap`` entries that grow together
    (``initial`` of them at first: a count, or a value computed from the extents); a
    subclass allocates any arrays of its own, then calls ``checked``."""

    def __init__(self, kc: KernelCompiler, initial: int | ir.Value,
                 extents: list[ir.Value]) -> None:
        super().__init__(kc)
        b = self.b
        size = ONE
        for extent in extents:
            size = b.mul(size, extent)
        ctlz = b.module.globals.get("llvm.ctlz.i64") or ir.Function(
            b.module, ir.FunctionType(I64, [I64, I1]), "llvm.ctlz.i64")
        # Every coordinate is below 2**bits (the radix sort's passes cover them).
        self.bits = b.sub(ir.Constant(I64, 64), b.call(ctlz, [b.sub(size, ONE),
                                                              ir.Constant(I1, 0)]))
        first = initial if isinstance(initial, ir.Value) else ir.Constant(I64, initial)
        self.cap = kc.alloca(I64, "ws.cap")
        self.b.store(first, self.cap)
        self.keys = self.allocate(first, I64, "ws.keys")
        self.vals = self.allocate(first, self.value_type, "ws.vals")

    def most_entries(self) -> ir.Value:
        """The pairs held (a coordinate's pairs are summed into one entry)."""
        return self.b.load(self.count)

    def emit_sorted_runs(self, n: ir.Value, ordered: bool, write: Write,
                         pairs: tuple[ir.AllocaInstr, ir.AllocaInstr] | None = None) -> None:
        """Sort the first ``n`` pairs (of ``pairs``' key and value arrays, by default
        the store's own) when ``ordered``, and write each run of one coordinate once,
        its values summed."""
        b, kc = self.b, self.kc
        keys, vals = pairs or (self.keys, self.vals)
        if ordered:
            self.sort_pairs(n, keys, vals)
        q_slot, total = kc.alloca(I64, "ws.q"), kc.alloca(self.value_type, "ws.total")
        b.store(ZERO, q_slot)
        head, body, done = (b.append_basic_block(f"ws.runs.{x}") for x in ("head", "body", "done"))
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(b.icmp_signed("<", b.load(q_slot), n), body, done)
        b.position_at_end(body)
        q = b.load(q_slot)
        key = b.load(self.at(keys, q))
        b.store(b.load(self.at(vals, q)), total)
        b.store(b.add(q, ONE), q_slot)
        more, same = b.append_basic_block("ws.run.more"), b.append_basic_block("ws.run.same")
        finish = b.append_basic_block("ws.run.write")
        b.branch(more)
        b.position_at_end(more)
        r = b.load(q_slot)
        in_range = b.icmp_signed("<", r, n)
        b.cbranch(in_range, same, finish)
        b.position_at_end(same)
        matches = b.icmp_signed("==", b.load(self.at(keys, r)), key)
        add_block = b.append_basic_block("ws.run.add")
        b.cbranch(matches, add_block, finish)
        b.position_at_end(add_block)
        b.store(self.plus(b.load(total), b.load(self.at(vals, r))), total)
        b.store(b.add(r, ONE), q_slot)
        b.branch(more)
        b.position_at_end(finish)
        write(key, b.load(total))
        b.branch(head)
        b.position_at_end(done)

    def sort_pairs(self, n: ir.Value, keys: ir.AllocaInstr, vals: ir.AllocaInstr) -> None:
        """Order the first ``n`` pairs by coordinate: a radix sort through a spare copy
        when there are many, a quicksort when there are few or the copy does not fit."""
        b, kc = self.b, self.kc
        width = ir.Constant(I64, 8 + _width(self.value_type))
        many = b.icmp_signed(">=", n, ir.Constant(I64, RADIX_FROM))
        spare = kc.alloca(I8P, "ws.spare")
        b.store(ir.Constant(I8P, None), spare)
        with b.if_then(many):
            b.store(b.call(kc.malloc, [b.mul(n, width)]), spare)
        raw = b.load(spare)
        with b.if_else(b.icmp_unsigned("!=", raw, ir.Constant(I8P, None))) as (radix, quick):
            with radix:
                spare_keys = b.bitcast(raw, I64.as_pointer())
                spare_vals = b.bitcast(b.gep(raw, [b.mul(n, ir.Constant(I64, 8))]),
                                       self.value_type.as_pointer())
                b.call(radix_function(b.module, self.value_type),
                       [b.load(keys), b.load(vals), spare_keys, spare_vals, n,
                        self.bits])
                b.call(kc.free, [raw])
            with quick:
                self.sort(keys, vals, n)

    def grow(self, needed: ir.Value) -> None:
        """Make room for ``needed`` pairs (the compiler's out-of-line grow path)."""
        b, kc = self.b, self.kc
        with b.if_then(b.icmp_signed(">", needed, b.load(self.cap)), likely=False):
            cap = b.load(self.cap)
            new_cap = None
            for slot, element in ((self.keys, I64), (self.vals, self.value_type)):
                grown = b.call(kc.grow_function(element, None),
                               [b.bitcast(b.load(slot), I8P), cap, needed])
                raw = b.extract_value(grown, 0)
                ok = b.append_basic_block("ws.grown")
                b.cbranch(b.icmp_unsigned("==", raw, ir.Constant(I8P, None)),
                          kc.fail(STATUS_NO_MEMORY), ok)
                b.position_at_end(ok)
                b.store(b.bitcast(raw, element.as_pointer()), slot)
                new_cap = b.extract_value(grown, 1)
            b.store(new_cap, self.cap)


class SortStore(PairStore):
    def __init__(self, kc: KernelCompiler, extents: list[ir.Value]) -> None:
        super().__init__(kc, INITIAL, extents)
        self.checked()

    def add(self, at: ir.Value, value: ir.Value) -> None:
        b = self.b
        n = b.load(self.count)
        self.grow(b.add(n, ONE))
        b.store(at, self.at(self.keys, n))
        b.store(value, self.at(self.vals, n))
        b.store(b.add(n, ONE), self.count)

    def drain(self, ordered: bool, write: Write) -> None:
        self.emit_sorted_runs(self.b.load(self.count), True, write)
        self.b.store(ZERO, self.count)
        del ordered  # runs of one coordinate must be adjacent: always sorted


class HashStore(PairStore):
    """The table, the list of its occupied slots in the order they were taken, and the
    arrays the drain gathers entries into: a drain and its clear visit the entries only,
    not the table (one row of 5,000 columns left every later row of a hoisted cage10
    product scanning and refilling 16,384 slots: 369 ms against 103)."""

    EMPTY = ir.Constant(I64, -1)

    def __init__(self, kc: KernelCompiler, extents: list[ir.Value]) -> None:
        super().__init__(kc, INITIAL, extents)
        size = ir.Constant(I64, INITIAL)
        self.used = self.allocate(size, I64, "ws.used")
        self.out_keys = self.allocate(size, I64, "ws.out.keys")
        self.out_vals = self.allocate(size, self.value_type, "ws.out.vals")
        self.checked()
        b = self.b
        b.call(kc.memset, [b.bitcast(b.load(self.keys), I8P), ir.Constant(I8, 255),
                           ir.Constant(I64, 8 * INITIAL), ir.Constant(I1, 0)])

    def slot_of(self, keys: ir.Value, cap: ir.Value, at: ir.Value) -> ir.Value:
        """The slot holding ``at`` in a table of ``cap`` slots, or the empty one where
        it would go (linear probing from a multiplicative hash)."""
        b = self.b
        mask = b.sub(cap, ONE)
        slot = self.kc.alloca(I64, "ws.slot")
        mixed = b.mul(at, ir.Constant(I64, -7046029254386353131))  # 0x9E3779B97F4A7C15
        b.store(b.and_(b.xor(mixed, b.lshr(mixed, ir.Constant(I64, 29))), mask), slot)
        head, step, done = (b.append_basic_block(f"ws.probe.{x}") for x in ("head", "step", "done"))
        b.branch(head)
        b.position_at_end(head)
        s = b.load(slot)
        k = b.load(b.gep(keys, [s], inbounds=True))
        stop = b.or_(b.icmp_signed("==", k, at), b.icmp_signed("==", k, self.EMPTY))
        b.cbranch(stop, done, step)
        b.position_at_end(step)
        b.store(b.and_(b.add(s, ONE), mask), slot)
        b.branch(head)
        b.position_at_end(done)
        return b.load(slot)

    def add(self, at: ir.Value, value: ir.Value) -> None:
        b = self.b
        keys, cap = b.load(self.keys), b.load(self.cap)
        s = self.slot_of(keys, cap, at)
        key_at, val_at = b.gep(keys, [s], inbounds=True), self.at(self.vals, s)
        fresh = b.icmp_signed("==", b.load(key_at), self.EMPTY)
        with b.if_else(fresh) as (new, old):
            with new:
                b.store(at, key_at)
                b.store(value, val_at)
                count = b.load(self.count)
                b.store(s, self.at(self.used, count))
                n = b.add(count, ONE)
                b.store(n, self.count)
                with b.if_then(b.icmp_signed(">", b.mul(n, ir.Constant(I64, 2)), cap),
                               likely=False):
                    self.rehash(cap, n)
            with old:
                b.store(self.plus(b.load(val_at), value), val_at)

    def rehash(self, cap: ir.Value, n: ir.Value) -> None:
        """Move the ``n`` entries into a table of twice the slots (found through the
        list of occupied slots), and make every array that size."""
        b, kc = self.b, self.kc
        old = [b.load(slot) for slot in (self.keys, self.vals, self.used)]
        new_cap = b.mul(cap, ir.Constant(I64, 2))
        arrays = ((self.keys, I64), (self.vals, self.value_type), (self.used, I64),
                  (self.out_keys, I64), (self.out_vals, self.value_type))
        raws = [b.call(kc.malloc, [b.mul(new_cap, ir.Constant(I64, _width(t)))])
                for _, t in arrays]
        failed = ir.Constant(I1, 0)
        for raw in raws:
            failed = b.or_(failed, b.icmp_unsigned("==", raw, ir.Constant(I8P, None)))
        ok = b.append_basic_block("ws.rehashed")
        b.cbranch(failed, kc.fail(STATUS_NO_MEMORY), ok)
        b.position_at_end(ok)
        keys, vals, used = (b.bitcast(raw, t.as_pointer()) for raw, (_, t) in
                            zip(raws, arrays[:3]))
        b.call(kc.memset, [raws[0], ir.Constant(I8, 255), b.mul(new_cap, ir.Constant(I64, 8)),
                           ir.Constant(I1, 0)])

        def move(q: ir.Value) -> None:
            was = b.load(b.gep(old[2], [q], inbounds=True))
            key = b.load(b.gep(old[0], [was], inbounds=True))
            s = self.slot_of(keys, new_cap, key)
            b.store(key, b.gep(keys, [s], inbounds=True))
            b.store(b.load(b.gep(old[1], [was], inbounds=True)), b.gep(vals, [s], inbounds=True))
            b.store(s, b.gep(used, [q], inbounds=True))
        emit_counted_loop(b, kc.alloca(I64, "ws.move"), ZERO, n, move)
        for (slot, element), raw in zip(arrays, raws):
            b.call(kc.free, [b.bitcast(b.load(slot), I8P)])
            b.store(b.bitcast(raw, element.as_pointer()), slot)
        b.store(new_cap, self.cap)

    def drain(self, ordered: bool, write: Write) -> None:
        """Gather the entries (in the order their slots were taken), emptying their
        slots, then sort and write them."""
        b, kc = self.b, self.kc
        n = b.load(self.count)

        def gather(q: ir.Value) -> None:
            s = b.load(self.at(self.used, q))
            key_at = self.at(self.keys, s)
            b.store(b.load(key_at), self.at(self.out_keys, q))
            b.store(b.load(self.at(self.vals, s)), self.at(self.out_vals, q))
            b.store(self.EMPTY, key_at)
        emit_counted_loop(b, kc.alloca(I64, "ws.gather"), ZERO, n, gather)
        self.emit_sorted_runs(n, ordered, write, (self.out_keys, self.out_vals))
        b.store(ZERO, self.count)


def _width(element: ir.Type) -> int:
    if isinstance(element, ir.IntType):
        return max(1, element.width // 8)
    return 8 if isinstance(element, ir.DoubleType) else 4
