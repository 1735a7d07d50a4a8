"""Software prefetch of the rows a position loop reaches next (the prefetch pass,
ir/opt/passes.py).

In ``A(i,k) * B(k,j)`` the loop over A's positions visits B's rows in a random order,
and each row's first reads (its bounds, then its first coordinate and value) wait on
memory. A few positions further on (the distance the pass chose: ``Loop.forms.prefetch``),
the loop reads the coordinate it will reach,
locates the other operand's levels there, reads the bounds of the row it will iterate
and prefetches that row's first entry. Everything is asked of the levels' own
functions (``pos_access``, ``locate``, ``pos_bounds``), so no format is named.

The position ahead may lie past the loop's range (in the next rows of A, so a short row
still gets its prefetch), and the values read there need not be valid coordinates or
positions: every read of this code is clamped into its array (the descriptor's length),
and an empty array is read as a constant 0, so no address outside the arrays is formed.
A prefetch changes no result; the NVPTX backend drops it.

It is the kernel's other form, timed against the first on a binding's first calls
(llvsparse/calls/probe.py): it pays where the rows are long enough and come from memory
(uniform-100k A·A: 0.78x the time), and its dozen instructions per position cost more
than they save where the rows are already in cache or mostly empty (cage10,
powerlaw-100k A·A: up to 1.18x always on; see tools/BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir.concrete.expressions import operands
from .bodies import ArrayRef, emit_body, mark_access
from .emit_base import I8P, I32, I64, ONE, ZERO, Ctx, LevelPos
from .tensor_ir import TensorIR

if TYPE_CHECKING:
    from .point import PointEmitter


@dataclass
class _Clamped(ArrayRef):
    """An input array read at its index clamped into it (``last``: its length - 1, or 0
    for an empty array, which ``pointer`` then replaces by a constant 0); ``fetch``:
    the first read a prefetch (kept in every cache level) and every read 0."""

    last: ir.Value = ZERO
    fetch: bool = False
    fetched: bool = False

    def load(self, builder: ir.IRBuilder, index: ir.Value) -> ir.Value:
        b = builder
        # unsigned: a negative index clamps to the last element too
        address = self.address(b, b.select(b.icmp_unsigned("<", index, self.last), index,
                                           self.last))
        if not self.fetch:
            value = b.load(address)
            mark_access(value, b.module, True)
            return value if self.element.width == 64 else b.sext(value, I64)
        if not self.fetched:
            fn = b.module.declare_intrinsic("llvm.prefetch", [I8P], ir.FunctionType(
                ir.VoidType(), [I8P, I32, I32, I32]))
            b.call(fn, [b.bitcast(address, I8P), ir.Constant(I32, 0), ir.Constant(I32, 3),
                        ir.Constant(I32, 1)])
            self.fetched = True
        return ZERO


def _clamped(tensor: TensorIR, slot: int, fetch: bool) -> _Clamped:
    """Array ``slot`` of an input, its length read from the descriptor."""
    b = tensor.kc.b
    length = b.load(b.gep(tensor.caps_ptr, [ir.Constant(I64, slot)]))
    length.set_metadata("invariant.load", b.module.add_metadata([]))
    empty = b.icmp_signed("<=", length, ZERO)
    element = tensor.element(slot)
    name = f"llvsparse.prefetch.zero.{element}"  # read in place of an empty array
    if name not in b.module.globals:
        zero = ir.GlobalVariable(b.module, element, name)
        zero.initializer, zero.global_constant, zero.linkage = \
            ir.Constant(element, 0), True, "internal"
    pointer = b.select(empty, b.module.globals[name], tensor.pointers[slot])
    return _Clamped(pointer, element, last=b.select(empty, ZERO, b.sub(length, ONE)),
                    fetch=fetch)


def _arrays(tensor: TensorIR, level: int, fetch: bool = False) -> dict[str, ArrayRef]:
    return {name: _clamped(tensor, tensor.type.slot_of(level, name).index, fetch)
            for name in tensor.type.levels[level].definition.arrays}


def _call(tensor: TensorIR, level: int, function: str, **env: ir.Value) -> list[ir.Value]:
    """A level function inlined over clamped reads."""
    definition = tensor.type.levels[level].definition
    return emit_body(tensor.kc.b, definition.functions[function], tensor.env(level, **env),
                     _arrays(tensor, level))


def ahead(pe: PointEmitter) -> None:
    """At the top of an iteration of a loop whose forms prefetch (the pass chose it for
    a loop over one level's positions): the prefetches for the position that many
    further on."""
    if not pe.forms.prefetch:
        return
    b = pe.b
    state = pe.states[pe.iterated[0]]
    at = b.add(b.load(state.cur), ir.Constant(I64, pe.forms.prefetch))
    for tensor, level, env in _rows(pe, at):
        begin = _call(tensor, level, "pos_bounds", **env)[0]
        emit_body(b, tensor.type.levels[level].definition.functions["pos_access"],
                  tensor.env(level, p=begin, **env), _arrays(tensor, level, fetch=True))
        if level + 1 == len(tensor.type.levels):
            _clamped(tensor, tensor.vals_slot, True).load(b, begin)


def _rows(pe: PointEmitter, at: ir.Value) -> Iterator[tuple[TensorIR, int, dict]]:
    """For each other operand located at the loop's coordinate at position ``at``: its
    tensor, the level below the located ones (iterated by position) and that level's
    parent environment there."""
    kc, it = pe.kc, pe.iterated[0]
    driver = kc.operands[it.uid]
    tensor = kc.tensors[driver.tensor]
    if not isinstance(tensor, TensorIR) or it.level in tensor.windows:
        return  # (a temporary's arrays have no lengths to clamp to)
    coord = _call(tensor, it.level, "pos_access", p=at,
                  **kc.parent_env(driver, it.level, pe.ctx))[0]
    ctx: Ctx = kc.bind(pe.ctx, pe.var, coord)
    for op in operands(pe.expr):
        tensor = kc.tensors[op.tensor]
        level = len(ctx.levels.get(op.uid, ()))
        if op.uid == it.uid or not isinstance(tensor, TensorIR) or level >= len(op.vars) \
                or op.vars[level] != pe.var:
            continue
        inner = ctx
        while level < len(op.vars) and op.vars[level] in ctx.bound \
                and level not in tensor.windows \
                and "locate" in tensor.type.levels[level].definition.functions:
            i = ctx.bound[op.vars[level]]
            pos = _call(tensor, level, "locate", i=i, **kc.parent_env(op, level, inner))[0]
            inner, level = inner.resolve(op.uid, LevelPos(pos, i)), level + 1
        if level < len(op.vars) and op.vars[level] not in ctx.bound \
                and level not in tensor.windows \
                and "pos_bounds" in tensor.type.levels[level].definition.functions:
            yield tensor, level, kc.parent_env(op, level, inner)
