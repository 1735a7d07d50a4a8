"""Device code for a planned kernel: the shared translator's functions, entered by a
grid of threads.

The CPU translator (backends/llvm) emits ``{name}_range(table, lo, hi)``: the kernel
over the coordinates [lo, hi) of the loop the plan tagged (``gpu_block``/``gpu_thread``),
and, for an assembled output, ``{name}_count`` and ``{name}_fill`` over such a range.
Each device entry (``{name}_device``, ``{name}_count_device``, ``{name}_fill_device``)
gives each thread its range, one coordinate or a host-computed range of a nonzero
split, and records a failing status. Only what the special registers are differs per
target: ``TargetHooks`` says how to read one (NVVM intrinsics on the GPU, host globals in
the emulator).
"""

from __future__ import annotations

from typing import Protocol

import llvmlite.binding as llvm
from llvmlite import ir

from . import warp_ir

I32, I64 = ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType(ir.IntType(8))
# No device heap: outputs and workspaces are sized on the host before the launch. A
# kernel that would grow an array anyway gets no memory and fails with its out-of-memory
# status (an exception on the host), never a write past its buffer. The emulator links
# the same, so it fails where the device would.
DEVICE_RUNTIME_IR = """
define linkonce_odr ptr @llvsparse_alloc(i64 %bytes) {
  ret ptr null
}
define linkonce_odr ptr @llvsparse_realloc(ptr %old, i64 %old_bytes, i64 %bytes) {
  ret ptr null
}
define linkonce_odr void @free(ptr %p) {
  ret void
}
"""


class TargetHooks(Protocol):
    """What a target emits for the constructs that differ from the CPU's."""

    def special(self, builder: ir.IRBuilder, register: str) -> ir.Value:
        """The i32 value of the special register ``register`` (e.g. ``tid.x``)."""
        ...

    def define_warp(self, module: ir.Module) -> None:
        """Define a warp schedule's lane and warp sums in ``module`` (warp_ir)."""
        ...


class NvvmHooks:
    """Special registers read through ``llvm.nvvm.read.ptx.sreg.*``."""

    def special(self, builder: ir.IRBuilder, register: str) -> ir.Value:
        module = builder.module
        name = f"llvm.nvvm.read.ptx.sreg.{register}"
        function = module.globals.get(name) or ir.Function(module, ir.FunctionType(I32, []),
                                                           name)
        return builder.call(function, [])

    def define_warp(self, module: ir.Module) -> None:
        warp_ir.define_nvvm(module, self.special)


SPECIALS = ("ctaid.x", "ntid.x", "tid.x", "nctaid.x")  # codes of the emulator's callback


class EmulatedHooks:
    """Special registers read from host globals ``llvsparse_emu_<register>``, which the
    emulator's grid loop sets before entering each thread; ``concurrent`` (a warp
    schedule's lanes run as host threads): from a host callback of the register's code
    in SPECIALS, which answers per thread."""

    def __init__(self, concurrent: bool = False):
        self.concurrent = concurrent

    def special(self, builder: ir.IRBuilder, register: str) -> ir.Value:
        if not self.concurrent:
            return builder.load(register_global(builder.module, register))
        signature = ir.FunctionType(I32, [I32])
        pointer = warp_ir.pointer_global(builder.module, SPECIAL_POINTER, signature)
        return builder.call(builder.load(pointer), [ir.Constant(I32, SPECIALS.index(register))])

    def define_warp(self, module: ir.Module) -> None:
        warp_ir.define_emulated(module)


SPECIAL_POINTER = "llvsparse_emu_special_fn"


def register_global(module: ir.Module, register: str) -> ir.GlobalVariable:
    """The emulator's global for ``register`` (one per module)."""
    name = "llvsparse_emu_" + register.replace(".", "_")
    found = module.globals.get(name)
    if found is None:
        found = ir.GlobalVariable(module, I32, name)
        found.initializer = ir.Constant(I32, 0)
    return found


# What each device entry calls per thread, after its range [lo, hi) of the split loop:
# the kernel over the range (the translator's whole phase, ``{name}_range``); the count
# of a range's output entries (stored at ``extra[thread]``); the fill of a range's
# entries from offset ``extra[thread]``.
PHASES = ("whole", "count", "fill")


def device_name(name: str, phase: str = "whole") -> str:
    """The device entry of ``phase`` of kernel ``name``."""
    return f"{name}_device" if phase == "whole" else f"{name}_{phase}_device"


def device_signature() -> ir.FunctionType:
    """``(table, status, bounds, threads, extra)``: ``bounds`` null gives thread t the
    coordinate t, else the range [bounds[t], bounds[t+1]) (t counts warps where a warp
    shares a range); threads from ``threads`` on do nothing; ``extra``: the per-thread
    counts or offsets of an assembly's phases. An entry split (``windows``) reads thread
    t's rows as [bounds[t], bounds[threads + t]) and its window of positions as
    [extra[t], extra[t + 1])."""
    i64p = I64.as_pointer()
    return ir.FunctionType(ir.VoidType(), [PTR, I32.as_pointer(), i64p, I64, i64p])


def _declare(module: ir.Module, signature: ir.FunctionType, name: str) -> ir.Function:
    return module.globals.get(name) or ir.Function(module, signature, name)


def _phase_call(module: ir.Module, b: ir.IRBuilder, name: str, phase: str, args,
                lo: ir.Value, hi: ir.Value, thread: ir.Value) -> ir.Value:
    """The status of the translator's ``phase`` function over [lo, hi) for ``thread``."""
    i64p = I64.as_pointer()
    table, extra = args[0], args[4]
    if phase == "whole":
        callee = _declare(module, ir.FunctionType(I32, [PTR, I64, I64]), f"{name}_range")
        return b.call(callee, [table, lo, hi])
    if phase == "count":
        callee = _declare(module, ir.FunctionType(I32, [PTR, I64, I64, i64p]),
                          f"{name}_count")
        return b.call(callee, [table, lo, hi, b.gep(extra, [thread])])
    if phase == "fill":
        callee = _declare(module, ir.FunctionType(I32, [PTR, I64, I64, I64]),
                          f"{name}_fill")
        return b.call(callee, [table, lo, hi, b.load(b.gep(extra, [thread]))])
    raise ValueError(f"unknown device phase {phase!r}; one of {', '.join(PHASES)}")


def _windowed_call(module: ir.Module, b: ir.IRBuilder, name: str, args,
                   thread: ir.Value) -> ir.Value:
    """An entry split's thread (see device_signature): rows [bounds[t],
    bounds[threads + t]) and positions [extra[t], extra[t + 1]) of the windowed loop."""
    table, bounds, threads, extra = args[0], args[2], args[3], args[4]
    rows = [b.load(b.gep(bounds, [at]), align=8) for at in (thread, b.add(threads, thread))]
    window = [b.load(b.gep(extra, [at]), align=8)
              for at in (thread, b.add(thread, ir.Constant(I64, 1)))]
    callee = _declare(module, ir.FunctionType(I32, [PTR, I64, I64, I64, I64]), f"{name}_range")
    return b.call(callee, [table, *rows, *window])


def _add_entry(module: ir.Module, name: str, phase: str, hooks: TargetHooks,
               nvvm_kernel: bool, lanes: int, windows: bool = False) -> None:
    kernel = ir.Function(module, device_signature(), device_name(name, phase))
    for argument in (kernel.args[2], kernel.args[4]):
        argument.add_attribute("noalias")
    b = ir.IRBuilder(kernel.append_basic_block("entry"))
    block, size, lane = (hooks.special(b, r) for r in ("ctaid.x", "ntid.x", "tid.x"))
    thread = b.add(b.mul(b.zext(block, I64), b.zext(size, I64)), b.zext(lane, I64))
    within = b.icmp_signed("<", thread, kernel.args[3])
    if lanes > 1:  # a warp per range: its lanes share it (threads counts lanes)
        thread = b.udiv(thread, ir.Constant(I64, lanes))
    if windows:
        with b.if_then(within):
            status = _windowed_call(module, b, name, kernel.args, thread)
            with b.if_then(b.icmp_signed("!=", status, ir.Constant(I32, 0)), likely=False):
                b.store(status, kernel.args[1])
        _finish_entry(module, b, kernel, nvvm_kernel)
        return
    with b.if_then(within):
        bounds, next_ = kernel.args[2], b.add(thread, ir.Constant(I64, 1))
        ranged = b.icmp_unsigned("!=", bounds, ir.Constant(bounds.type, None))
        origin = b.block
        read, joined = b.append_basic_block("ranged"), b.append_basic_block("bounded")
        b.cbranch(ranged, read, joined)
        b.position_at_end(read)  # only a ranged launch has a bounds array to read
        lo_read = b.load(b.gep(bounds, [thread]), align=8)
        hi_read = b.load(b.gep(bounds, [next_]), align=8)
        b.branch(joined)
        b.position_at_end(joined)
        lo, hi = b.phi(I64), b.phi(I64)
        lo.add_incoming(lo_read, read)
        lo.add_incoming(thread, origin)
        hi.add_incoming(hi_read, read)
        hi.add_incoming(next_, origin)
        status = _phase_call(module, b, name, phase, kernel.args, lo, hi, thread)
        with b.if_then(b.icmp_signed("!=", status, ir.Constant(I32, 0)), likely=False):
            b.store(status, kernel.args[1])
    _finish_entry(module, b, kernel, nvvm_kernel)


def _finish_entry(module: ir.Module, b: ir.IRBuilder, kernel: ir.Function,
                  nvvm_kernel: bool) -> None:
    """Return, and mark the entry a kernel for NVVM."""
    b.ret_void()
    if nvvm_kernel:
        mark = module.add_metadata([kernel, ir.MetaDataString(module, "kernel"),
                                    ir.Constant(I32, 1)])
        module.add_named_metadata("nvvm.annotations", mark)


def device_kernel(name: str, hooks: TargetHooks, triple: str, data_layout: str,
                  nvvm_kernel: bool, phases: tuple[str, ...] = ("whole",),
                  lanes: int = 1, windows: bool = False) -> ir.Module:
    """A module holding one device entry per phase of ``phases`` (see device_signature),
    each running its threads' ranges through the translator's declared functions;
    ``lanes`` threads share each range (32: a warp schedule, whose lane and warp sums
    the module defines); ``windows``: an entry split's threads, each a window of
    positions."""
    if windows and (lanes != 1 or phases != ("whole",)):
        raise ValueError("an entry split runs one thread a window, in one phase")
    module = ir.Module(name=f"{name}_device")
    module.triple, module.data_layout = triple, data_layout
    for phase in phases:
        _add_entry(module, name, phase, hooks, nvvm_kernel, lanes, windows)
    if lanes > 1:
        hooks.define_warp(module)
    return module


def linked(host_ir: str, device: ir.Module) -> llvm.ModuleRef:
    """The translator's module (its IR text parsed, not rewritten) with the device
    kernel linked in and retargeted."""
    module = llvm.parse_assembly(host_ir)
    module.triple, module.data_layout = device.triple, device.data_layout
    module.link_in(llvm.parse_assembly(str(device)))
    return module
