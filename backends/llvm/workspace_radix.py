"""A radix sort of a sparse workspace's (coordinate, value) pairs, emitted once per module
as LLVM IR.

A workspace with no hoisted loop (outer-product SpGEMM, ``forall k, i, j``) holds every
product of the kernel, millions of pairs, when it is sorted once at the end. The
quicksort of workspace_sort took about 130 ms of the 150 ms of cage10's A*A (2.2 million
pairs), where Gustavson's whole product takes 13 ms. The keys are bounded (below the
product of the covered extents), so they sort in a few stable counting passes of at most
``DIGIT`` bits, each linear in the pairs: a histogram of the digit, its prefix sums, and
a scatter into a second buffer. A pass whose digit is the same in every key is skipped.
"""

from __future__ import annotations

from llvmlite import ir

from .bodies import I64
from .emit_base import ONE, ZERO, emit_counted_loop

DIGIT = 12  # bits per pass at most: 4096 counters (32 KiB) stay in the L1 cache
RADIX_FROM = 1 << DIGIT  # fewer pairs than this are sorted by comparisons
IN_CACHE = 1 << 15  # more pairs than this (512 KiB of doubles) are split by their top digit
BUCKET = 13  # ... into buckets of about 2**13 pairs, each sorted while in the L2 cache


def radix_function(module: ir.Module, value: ir.Type) -> ir.Function:
    """``radix(keys, vals, spare_keys, spare_vals, n, bits)``: sorts keys[0:n) (each in
    [0, 2**bits)) ascending, stably, moving vals with them; the spare arrays (n entries
    each) are scratch. Declared in ``module`` once per value type."""
    name = "llvsparse_radix_" + str(value).replace(" ", "")
    if name in module.globals:
        return module.globals[name]
    kp, vp = I64.as_pointer(), value.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [kp, vp, kp, vp, I64, I64]), name)
    fn.linkage = "internal"
    for arg in fn.args[:4]:
        arg.add_attribute("noalias")
    keys, vals, spare_keys, spare_vals, n, bits = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    counts = b.gep(b.alloca(ir.ArrayType(I64, 1 << DIGIT), name="counts"), [ZERO, ZERO])
    src_k, src_v, dst_k, dst_v = (b.alloca(t) for t in (kp, vp, kp, vp))
    shift_s, total_s = b.alloca(I64, name="shift"), b.alloca(I64, name="total")
    q_s, copy_s = b.alloca(I64, name="q"), b.alloca(I64, name="copy")
    for slot, array in ((src_k, keys), (src_v, vals), (dst_k, spare_keys), (dst_v, spare_vals)):
        b.store(array, slot)
    digit = ir.Constant(I64, DIGIT)
    passes = b.udiv(b.add(bits, ir.Constant(I64, DIGIT - 1)), digit)
    some = b.select(b.icmp_unsigned("==", passes, ZERO), ONE, passes)
    width = b.udiv(b.sub(b.add(bits, some), ONE), some)  # bits spread evenly over the passes
    radix = b.shl(ONE, width)
    mask = b.sub(radix, ONE)
    b.store(ZERO, shift_s)

    def at(slot: ir.AllocaInstr, index: ir.Value) -> ir.Value:
        return b.gep(b.load(slot), [index], inbounds=True)

    def digit_of(key: ir.Value) -> ir.Value:
        return b.and_(b.lshr(key, b.load(shift_s)), mask)

    head, body, done = (fn.append_basic_block(f"radix.{x}") for x in ("head", "pass", "done"))
    split = fn.append_basic_block("radix.split")
    large = b.and_(b.icmp_signed(">=", n, ir.Constant(I64, IN_CACHE)),
                   b.icmp_unsigned(">", bits, digit))
    b.cbranch(large, split, head)
    b.position_at_end(split)
    _split_by_top_digit(fn, b, counts, q_s, total_s, copy_s)

    b.position_at_end(head)
    more = b.and_(b.icmp_unsigned("<", b.load(shift_s), bits),
                  b.icmp_signed(">", n, ONE))
    b.cbranch(more, body, done)

    b.position_at_end(body)
    emit_counted_loop(b, q_s, ZERO, radix,
                      lambda r: b.store(ZERO, b.gep(counts, [r], inbounds=True)), "radix.zero")

    def count(q: ir.Value) -> None:
        slot = b.gep(counts, [digit_of(b.load(at(src_k, q)))], inbounds=True)
        b.store(b.add(b.load(slot), ONE), slot)
    emit_counted_loop(b, q_s, ZERO, n, count, "radix.count")
    first = b.load(b.gep(counts, [digit_of(b.load(at(src_k, ZERO)))], inbounds=True))
    scatter, next_pass = fn.append_basic_block("radix.scatter"), fn.append_basic_block("radix.next")
    b.cbranch(b.icmp_signed("==", first, n), next_pass, scatter)  # one digit: nothing moves

    b.position_at_end(scatter)
    b.store(ZERO, total_s)

    def prefix(r: ir.Value) -> None:  # each digit's first place in the destination
        slot = b.gep(counts, [r], inbounds=True)
        here, total = b.load(slot), b.load(total_s)
        b.store(total, slot)
        b.store(b.add(total, here), total_s)
    emit_counted_loop(b, q_s, ZERO, radix, prefix, "radix.prefix")

    def place(q: ir.Value) -> None:
        key = b.load(at(src_k, q))
        slot = b.gep(counts, [digit_of(key)], inbounds=True)
        to = b.load(slot)
        b.store(b.add(to, ONE), slot)
        b.store(key, at(dst_k, to))
        b.store(b.load(at(src_v, q)), at(dst_v, to))
    emit_counted_loop(b, q_s, ZERO, n, place, "radix.place")
    for x, y in ((src_k, dst_k), (src_v, dst_v)):  # the destination is the next source
        old = b.load(x)
        b.store(b.load(y), x)
        b.store(old, y)
    b.branch(next_pass)

    b.position_at_end(next_pass)
    b.store(b.add(b.load(shift_s), width), shift_s)
    b.branch(head)

    b.position_at_end(done)  # an odd number of moves left the pairs in the spare arrays
    copy, end = fn.append_basic_block("radix.copy"), fn.append_basic_block("radix.end")
    b.cbranch(b.icmp_unsigned("!=", b.load(src_k), keys), copy, end)
    b.position_at_end(copy)

    def back(q: ir.Value) -> None:
        b.store(b.load(at(src_k, q)), b.gep(keys, [q], inbounds=True))
        b.store(b.load(at(src_v, q)), b.gep(vals, [q], inbounds=True))
    emit_counted_loop(b, q_s, ZERO, n, back, "radix.back")
    b.branch(end)
    b.position_at_end(end)
    b.ret_void()
    return fn


def _split_by_top_digit(fn: ir.Function, b: ir.IRBuilder, counts: ir.Value,
                        q_s: ir.AllocaInstr, total_s: ir.AllocaInstr,
                        copy_slot: ir.AllocaInstr) -> None:
    """Many pairs: one counting pass by the top digit into the spare arrays, buckets of
    about 2**BUCKET pairs, then each bucket sorted by the remaining bits (this function
    again, with the bucket's place in the arrays as its scratch) while it is in cache,
    and copied back. Every pair crosses memory twice, not once per pass (2.2M pairs of
    cage10's outer product: 3 passes)."""
    keys, vals, spare_keys, spare_vals, n, bits = fn.args
    ctlz = fn.module.globals.get("llvm.ctlz.i64") or ir.Function(
        fn.module, ir.FunctionType(I64, [I64, ir.IntType(1)]), "llvm.ctlz.i64")
    log2 = b.sub(ir.Constant(I64, 63), b.call(ctlz, [n, ir.Constant(ir.IntType(1), 0)]))
    top = b.sub(log2, ir.Constant(I64, BUCKET))
    top = b.select(b.icmp_signed(">", top, ir.Constant(I64, DIGIT)), ir.Constant(I64, DIGIT), top)
    top = b.select(b.icmp_signed("<", top, ONE), ONE, top)
    rest = b.sub(bits, top)
    buckets = b.shl(ONE, top)
    mask = b.sub(buckets, ONE)  # a bucket of a split above shares the bits above ``bits``

    def bucket_of(key: ir.Value) -> ir.Value:
        return b.and_(b.lshr(key, rest), mask)

    def slot(d: ir.Value) -> ir.Value:
        return b.gep(counts, [d], inbounds=True)

    emit_counted_loop(b, q_s, ZERO, buckets, lambda d: b.store(ZERO, slot(d)), "split.zero")

    def count(q: ir.Value) -> None:
        at = slot(bucket_of(b.load(b.gep(keys, [q], inbounds=True))))
        b.store(b.add(b.load(at), ONE), at)
    emit_counted_loop(b, q_s, ZERO, n, count, "split.count")
    b.store(ZERO, total_s)

    def prefix(d: ir.Value) -> None:
        at, total = slot(d), b.load(total_s)
        here = b.load(at)
        b.store(total, at)
        b.store(b.add(total, here), total_s)
    emit_counted_loop(b, q_s, ZERO, buckets, prefix, "split.prefix")

    def place(q: ir.Value) -> None:
        key = b.load(b.gep(keys, [q], inbounds=True))
        at = slot(bucket_of(key))
        to = b.load(at)
        b.store(b.add(to, ONE), at)
        b.store(key, b.gep(spare_keys, [to], inbounds=True))
        b.store(b.load(b.gep(vals, [q], inbounds=True)), b.gep(spare_vals, [to], inbounds=True))
    emit_counted_loop(b, q_s, ZERO, n, place, "split.place")
    b.store(ZERO, total_s)  # each bucket's start; its count slot now holds its end

    def sort_bucket(d: ir.Value) -> None:
        start, end = b.load(total_s), b.load(slot(d))
        size = b.sub(end, start)
        with b.if_then(b.icmp_signed(">", size, ONE)):
            b.call(fn, [b.gep(spare_keys, [start], inbounds=True),
                        b.gep(spare_vals, [start], inbounds=True),
                        b.gep(keys, [start], inbounds=True),
                        b.gep(vals, [start], inbounds=True), size, rest])

        def back(q: ir.Value) -> None:
            b.store(b.load(b.gep(spare_keys, [q], inbounds=True)), b.gep(keys, [q], inbounds=True))
            b.store(b.load(b.gep(spare_vals, [q], inbounds=True)), b.gep(vals, [q], inbounds=True))
        emit_counted_loop(b, copy_slot, start, end, back, "split.back")
        b.store(end, total_s)

    emit_counted_loop(b, q_s, ZERO, buckets, sort_bucket, "split.bucket")
    b.ret_void()
