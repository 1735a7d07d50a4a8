"""Output memory in generated kernels: growing an output's arrays as entries are
written, the out-of-line grow path, and the blocks that fail a call cleanly (the arrays
published so the caller frees them) on a failed allocation or a bad store index."""

from __future__ import annotations

from llvmlite import ir

from .bodies import I64
from .emit_base import (
    I8P,
    I32,
    ONE,
    STATUS_NEGATIVE_STORE,
    STATUS_NO_MEMORY,
    ZERO,
    emit_counted_loop,
)
from .tensor_ir import TensorIR


class MemoryEmitter:
    """KernelCompiler's memory methods (a part of it, kept in a module of its own)."""

    def fail(self, status: int = STATUS_NO_MEMORY) -> ir.Block:
        """The block that publishes the output's arrays (so they are freed) and returns
        ``status``, one per status and function."""
        if status not in self.fail_blocks:
            name = "no_memory" if status == STATUS_NO_MEMORY else f"failed_{status}"
            with self.b.goto_block(self.function.append_basic_block(name)) as _:
                self.fail_blocks[status] = self.b.block
                for release in self.releases:
                    release()
                if self.phase not in ("count", "fill"):  # threads share the descriptor
                    self.tensors[self.out_name].write_back(self.b)
                self.b.ret(ir.Constant(I32, status))
        return self.fail_blocks[status]

    def ensure_store(self, tensor: TensorIR, slot: int, index: ir.Value,
                     init: int | None) -> None:
        """Before a level function stores at ``index``: grow the array past it, and fail
        the call on a negative index (a wrong plugin function) instead of writing in
        front of the array."""
        ok = self.b.append_basic_block("store_index_ok")
        self.b.cbranch(self.b.icmp_signed("<", index, ZERO), self.fail(STATUS_NEGATIVE_STORE),
                       ok)
        self.b.position_at_end(ok)
        self.ensure(tensor, slot, self.b.add(index, ONE), init)

    def ensure(self, tensor: TensorIR, slot: int, needed: ir.Value, init: int | None) -> None:
        """Grow an output array to hold ``needed`` elements, filling new ones with ``init``
        (None: every element is written before it is read, so no fill)."""
        if slot in tensor.prechecked:
            return
        b = self.b
        cap_ptr, array_slot = tensor.local_caps[slot], tensor.local_pointers[slot]
        cap = b.load(cap_ptr)
        if self.phase == "fill":  # sized exactly by the count phase; threads never grow
            ok = b.append_basic_block("fits")
            b.cbranch(b.icmp_signed(">", needed, cap), self.fail(), ok)
            b.position_at_end(ok)
            return
        with b.if_then(b.icmp_signed(">", needed, cap), likely=False):
            grow = self.grow_function(tensor.element(slot), init)
            grown = b.call(grow, [b.load(array_slot), cap, needed])
            raw, new_cap = b.extract_value(grown, 0), b.extract_value(grown, 1)
            ok = b.append_basic_block("grown")
            b.cbranch(b.icmp_unsigned("==", raw, ir.Constant(I8P, None)), self.fail(), ok)
            b.position_at_end(ok)
            b.store(raw, array_slot)
            b.store(new_cap, cap_ptr)

    def grow_function(self, element: ir.Type, init: int | None) -> ir.Function:
        """The out-of-line slow path of ``ensure`` for one element type and fill: kept out
        of kernel loops (noinline, cold) so their registers are not spent on it."""
        name = f"llvsparse_grow_{element}_{'none' if init is None else init}".replace(" ", "")
        if name in self.module.globals:
            return self.module.globals[name]
        result = ir.LiteralStructType([I8P, I64])
        function = ir.Function(self.module, ir.FunctionType(result, [I8P, I64, I64]), name)
        function.linkage = "internal"
        function.attributes.add("noinline")
        function.attributes.add("cold")
        old, cap, needed = function.args
        b = ir.IRBuilder(function.append_basic_block("entry"))
        doubled = b.mul(cap, ir.Constant(I64, 2))
        new_cap = b.select(b.icmp_signed(">", needed, doubled), needed, doubled)
        new_cap = b.select(b.icmp_signed("<", new_cap, ir.Constant(I64, 16)),
                           ir.Constant(I64, 16), new_cap)
        width = max(1, element.width // 8) if isinstance(element, ir.IntType) else (
            8 if isinstance(element, ir.DoubleType) else 4)
        bytes_per = ir.Constant(I64, width)
        # A count past what a byte size can hold (or wrapped negative) fails like malloc.
        too_big = b.or_(b.icmp_signed("<", needed, ZERO),
                        b.icmp_signed(">", new_cap, ir.Constant(I64, (2**63 - 1) // width)))
        with b.if_then(too_big):
            b.ret(ir.Constant(result, [ir.Constant(I8P, None), ZERO]))
        # A buffer grows through the target's llvsparse_realloc (the host releases a large
        # one's pages as it copies them, never holding two copies); a first one is allocated.
        grow = self.module.globals.get("llvsparse_realloc") or ir.Function(
            self.module, ir.FunctionType(I8P, [I8P, I64, I64]), "llvsparse_realloc")
        fresh = b.icmp_unsigned("==", old, ir.Constant(I8P, None))
        with b.if_else(fresh) as (first, grown):
            with first:
                allocated = b.call(self.malloc, [b.mul(new_cap, bytes_per)])
                from_first = b.block
            with grown:
                moved = b.call(grow, [old, b.mul(cap, bytes_per), b.mul(new_cap, bytes_per)])
                from_grown = b.block
        raw = b.phi(I8P)
        raw.add_incoming(allocated, from_first)
        raw.add_incoming(moved, from_grown)
        failed = b.icmp_unsigned("==", raw, ir.Constant(I8P, None))
        with b.if_then(failed):
            b.ret(ir.Constant(result, [ir.Constant(I8P, None), ZERO]))
        if init is not None:
            typed = b.bitcast(raw, element.as_pointer())
            fill = (ir.Constant(element, float(init))
                    if not isinstance(element, ir.IntType) else ir.Constant(element, init))
            emit_counted_loop(b, b.alloca(I64), cap, new_cap,
                              lambda q: b.store(fill, b.gep(typed, [q], inbounds=True)))
        packed = b.insert_value(ir.Constant(result, ir.Undefined), raw, 0)
        b.ret(b.insert_value(packed, new_cap, 1))
        return function
