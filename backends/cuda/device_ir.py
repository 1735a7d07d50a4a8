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
# the same, so it fails where the device would. ``llvsparse_alloc`` is the device
# module's, and so is ``llvsparse_realloc`` (see define_arena).
DEVICE_RUNTIME_IR = """
define linkonce_odr void @free(ptr %p) {
  ret void
}
"""
# A workspace's memory on the device: an arena the host allocates before the launch
# (``ARENA`` its address, null for none; ``ARENA_SLICE`` the bytes of each thread's
# slice). A thread's slice starts with the bytes it has used (zeroed by its device
# entry); ``llvsparse_alloc`` hands out the rest in order, and null once it is used up
# (the kernel's out-of-memory status); ``free`` gives nothing back: a thread's slice is
# reset at its next launch.
ARENA, ARENA_SLICE = "llvsparse_arena", "llvsparse_arena_slice"
ARENA_HEADER = 8


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


def _arena_globals(module: ir.Module) -> tuple[ir.GlobalVariable, ir.GlobalVariable]:
    found = module.globals.get(ARENA), module.globals.get(ARENA_SLICE)
    if found[0] is not None:
        return found
    base = ir.GlobalVariable(module, PTR, ARENA)
    base.initializer = ir.Constant(PTR, None)
    size = ir.GlobalVariable(module, I64, ARENA_SLICE)
    size.initializer = ir.Constant(I64, 0)
    return base, size


def _global_thread(b: ir.IRBuilder, hooks: TargetHooks) -> ir.Value:
    block, size, lane = (hooks.special(b, r) for r in ("ctaid.x", "ntid.x", "tid.x"))
    return b.add(b.mul(b.zext(block, I64), b.zext(size, I64)), b.zext(lane, I64))


def _thread_slice(b: ir.IRBuilder, module: ir.Module, thread: ir.Value) -> ir.Value:
    """This thread's arena slice (null where the arena is)."""
    base_global, size_global = _arena_globals(module)
    base = b.load(base_global)
    at = b.gep(base, [b.mul(thread, b.load(size_global))])
    return b.select(b.icmp_unsigned("==", base, ir.Constant(PTR, None)), base, at)


def define_arena(module: ir.Module, hooks: TargetHooks) -> None:
    """``llvsparse_alloc(bytes)``: the next 8-aligned ``bytes`` of the calling
    thread's arena slice, null where there is no arena or no room; and
    ``llvsparse_realloc(old, old_bytes, bytes)``: a fresh piece holding the old one's
    bytes (the old one is not given back)."""
    alloc = ir.Function(module, ir.FunctionType(PTR, [I64]), "llvsparse_alloc")
    b = ir.IRBuilder(alloc.append_basic_block("entry"))
    piece = _thread_slice(b, module, _global_thread(b, hooks))
    none = b.icmp_unsigned("==", piece, ir.Constant(PTR, None))
    with b.if_then(none, likely=False):
        b.ret(ir.Constant(PTR, None))
    used_at = b.bitcast(piece, I64.as_pointer())
    used = b.load(used_at)
    need = b.and_(b.add(alloc.args[0], ir.Constant(I64, 7)), ir.Constant(I64, -8))
    after = b.add(used, need)
    room = b.sub(b.load(_arena_globals(module)[1]), ir.Constant(I64, ARENA_HEADER))
    with b.if_then(b.icmp_signed(">", after, room), likely=False):
        b.ret(ir.Constant(PTR, None))
    b.store(after, used_at)
    b.ret(b.gep(piece, [b.add(used, ir.Constant(I64, ARENA_HEADER))]))
    realloc = ir.Function(module, ir.FunctionType(PTR, [PTR, I64, I64]), "llvsparse_realloc")
    old, old_bytes, size = realloc.args
    b = ir.IRBuilder(realloc.append_basic_block("entry"))
    moved = b.call(alloc, [size])  # a fresh piece, the old one's bytes copied over
    with b.if_then(b.and_(b.icmp_unsigned("!=", moved, ir.Constant(PTR, None)),
                          b.icmp_unsigned("!=", old, ir.Constant(PTR, None)))):
        copy = module.declare_intrinsic("llvm.memcpy", [PTR, PTR, I64])
        smaller = b.select(b.icmp_unsigned("<", old_bytes, size), old_bytes, size)
        b.call(copy, [moved, old, smaller, ir.Constant(ir.IntType(1), 0)])
    b.ret(moved)


def _reset_slice(module: ir.Module, b: ir.IRBuilder, thread: ir.Value) -> None:
    """Zero the used bytes of ``thread``'s arena slice (where there is an arena)."""
    piece = _thread_slice(b, module, thread)
    with b.if_then(b.icmp_unsigned("!=", piece, ir.Constant(PTR, None))):
        b.store(ir.Constant(I64, 0), b.bitcast(piece, I64.as_pointer()))


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
    thread = _global_thread(b, hooks)
    within = b.icmp_signed("<", thread, kernel.args[3])
    with b.if_then(within):
        _reset_slice(module, b, thread)
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
    define_arena(module, hooks)
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
