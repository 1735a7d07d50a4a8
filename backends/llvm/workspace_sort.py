"""An in-place sort of a workspace's coordinates, emitted once per module as LLVM IR.

A workspace gathers coordinates in the order the loops produce them; an output level
that keeps its coordinates ordered must receive them sorted. Lists are short (one
output row each), so the sort is an insertion sort up to ``SMALL`` keys and a
median-of-three quicksort above it, recursing into the smaller part so its depth stays
logarithmic. It can carry a value array along with the keys (a sparse workspace's
(coordinate, value) pairs).
"""

from __future__ import annotations

from llvmlite import ir

from .bodies import I64

SMALL = 16  # insertion sort at and below this many keys
ONE = ir.Constant(I64, 1)


def sort_function(module: ir.Module, value: ir.Type | None) -> ir.Function:
    """``sort(keys, [values,] lo, hi)``: sorts keys[lo:hi) ascending, moving values with
    them; declared in ``module`` once per value type."""
    name = "llvsparse_sort_" + ("keys" if value is None else str(value).replace(" ", ""))
    if name in module.globals:
        return module.globals[name]
    params = [I64.as_pointer()] + ([] if value is None else [value.as_pointer()]) + [I64, I64]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name)
    fn.linkage = "internal"
    keys, vals = fn.args[0], (fn.args[1] if value is not None else None)
    lo_arg, hi_arg = fn.args[-2], fn.args[-1]
    for arg in fn.args[:-2]:
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lo_s, hi_s = b.alloca(I64), b.alloca(I64)
    i_s, j_s = b.alloca(I64), b.alloca(I64)
    b.store(lo_arg, lo_s)
    b.store(hi_arg, hi_s)
    pair = _Pairs(b, keys, vals)
    loop, small, part = (fn.append_basic_block(n) for n in ("loop", "small", "partition"))
    b.branch(loop)
    b.position_at_end(loop)
    lo, hi = b.load(lo_s), b.load(hi_s)
    b.cbranch(b.icmp_signed("<=", b.sub(hi, lo), ir.Constant(I64, SMALL)), small, part)

    b.position_at_end(small)
    b.call(insertion_function(module, value), [*fn.args[:-2], lo, hi])
    b.ret_void()

    b.position_at_end(part)
    last = b.sub(hi, ONE)
    mid = b.add(lo, b.sdiv(b.sub(last, lo), ir.Constant(I64, 2)))
    for x, y in ((lo, mid), (mid, last), (lo, mid)):  # keys[lo] <= keys[mid] <= keys[last]
        pair.order(x, y)
    pivot = pair.key(mid)
    b.store(b.sub(lo, ONE), i_s)
    b.store(hi, j_s)
    scan_i, scan_j, check, done = (fn.append_basic_block(n) for n in
                                   ("scan_i", "scan_j", "check", "partitioned"))
    b.branch(scan_i)
    b.position_at_end(scan_i)  # do i += 1 while keys[i] < pivot
    i = b.add(b.load(i_s), ONE)
    b.store(i, i_s)
    b.cbranch(b.icmp_signed("<", pair.key(i), pivot), scan_i, scan_j)
    b.position_at_end(scan_j)  # do j -= 1 while keys[j] > pivot
    j = b.sub(b.load(j_s), ONE)
    b.store(j, j_s)
    b.cbranch(b.icmp_signed(">", pair.key(j), pivot), scan_j, check)
    b.position_at_end(check)
    i, j = b.load(i_s), b.load(j_s)
    swap = fn.append_basic_block("swap")
    b.cbranch(b.icmp_signed(">=", i, j), done, swap)
    b.position_at_end(swap)
    pair.swap(i, j)
    b.branch(scan_i)

    b.position_at_end(done)
    split = b.add(b.load(j_s), ONE)  # [lo, split) <= pivot <= [split, hi)
    pass_args = [keys] + ([vals] if vals is not None else [])
    with b.if_else(b.icmp_signed("<", b.sub(split, lo), b.sub(hi, split))) as (left, right):
        with left:
            b.call(fn, [*pass_args, lo, split])
            b.store(split, lo_s)
        with right:
            b.call(fn, [*pass_args, split, hi])
            b.store(split, hi_s)
    b.branch(loop)
    return fn


def insertion_function(module: ir.Module, value: ir.Type | None) -> ir.Function:
    """``insertion(keys, [values,] lo, hi)``: the insertion sort of ``sort_function``'s
    short ranges, always inlined: a dense workspace's short runs call it from inside
    the kernel's row loop, where a call spilled the loop's registers around it."""
    name = "llvsparse_insertion_" + ("keys" if value is None else str(value).replace(" ", ""))
    if name in module.globals:
        return module.globals[name]
    params = [I64.as_pointer()] + ([] if value is None else [value.as_pointer()]) + [I64, I64]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    for arg in fn.args[:-2]:
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    _insertion_sort(fn, b, _Pairs(b, fn.args[0], fn.args[1] if value is not None else None),
                    fn.args[-2], fn.args[-1])
    b.ret_void()
    return fn


class _Pairs:
    """Loads, compare-swaps and swaps of (key, value) entries."""

    def __init__(self, b: ir.IRBuilder, keys: ir.Value, vals: ir.Value | None) -> None:
        self.b, self.keys, self.vals = b, keys, vals

    def key(self, at: ir.Value) -> ir.Value:
        return self.b.load(self.b.gep(self.keys, [at], inbounds=True))

    def get(self, at: ir.Value) -> tuple[ir.Value, ir.Value | None]:
        b = self.b
        value = None if self.vals is None else b.load(b.gep(self.vals, [at], inbounds=True))
        return self.key(at), value

    def put(self, at: ir.Value, entry: tuple[ir.Value, ir.Value | None]) -> None:
        b = self.b
        b.store(entry[0], b.gep(self.keys, [at], inbounds=True))
        if self.vals is not None:
            b.store(entry[1], b.gep(self.vals, [at], inbounds=True))

    def swap(self, x: ir.Value, y: ir.Value) -> None:
        first, second = self.get(x), self.get(y)
        self.put(x, second)
        self.put(y, first)

    def order(self, x: ir.Value, y: ir.Value) -> None:
        with self.b.if_then(self.b.icmp_signed(">", self.key(x), self.key(y))):
            self.swap(x, y)


def _insertion_sort(fn: ir.Function, b: ir.IRBuilder, pair: _Pairs, lo: ir.Value,
                    hi: ir.Value) -> None:
    a_s, c_s = b.alloca(I64), b.alloca(I64)
    b.store(b.add(lo, ONE), a_s)
    outer, body, inner, shift, place, done = (fn.append_basic_block(f"ins.{n}") for n in (
        "outer", "body", "inner", "shift", "place", "done"))
    b.branch(outer)
    b.position_at_end(outer)
    b.cbranch(b.icmp_signed("<", b.load(a_s), hi), body, done)
    b.position_at_end(body)
    a = b.load(a_s)
    entry = pair.get(a)
    b.store(a, c_s)
    b.branch(inner)
    b.position_at_end(inner)
    c = b.load(c_s)
    above = b.icmp_signed(">", c, lo)
    prev = b.select(above, b.sub(c, ONE), c)
    moves = b.and_(above, b.icmp_signed(">", pair.key(prev), entry[0]))
    b.cbranch(moves, shift, place)
    b.position_at_end(shift)
    pair.put(c, pair.get(prev))
    b.store(prev, c_s)
    b.branch(inner)
    b.position_at_end(place)
    pair.put(b.load(c_s), entry)
    b.store(b.add(a, ONE), a_s)
    b.branch(outer)
    b.position_at_end(done)

