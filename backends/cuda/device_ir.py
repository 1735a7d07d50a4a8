"""Device code for a planned kernel: the shared translator's range function, entered by
a grid of threads.

The CPU translator (backends/llvm) emits ``{name}_range(table, lo, hi)``: the kernel
over the coordinates [lo, hi) of the loop the plan tagged (``gpu_block``/``gpu_thread``).
The device kernel ``{name}_device(table, status)`` gives each thread one coordinate,
blockIdx * blockDim + threadIdx, and records a failing status. Only what the special
registers are differs per target: ``TargetHooks`` says how to read one (NVVM intrinsics
on the GPU, host globals in the emulator).
"""

from __future__ import annotations

from typing import Protocol

import llvmlite.binding as llvm
from llvmlite import ir

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


class NvvmHooks:
    """Special registers read through ``llvm.nvvm.read.ptx.sreg.*``."""

    def special(self, builder: ir.IRBuilder, register: str) -> ir.Value:
        module = builder.module
        name = f"llvm.nvvm.read.ptx.sreg.{register}"
        function = module.globals.get(name) or ir.Function(module, ir.FunctionType(I32, []),
                                                           name)
        return builder.call(function, [])


class EmulatedHooks:
    """Special registers read from host globals ``llvsparse_emu_<register>``, which the
    emulator's grid loop sets before entering each thread."""

    def special(self, builder: ir.IRBuilder, register: str) -> ir.Value:
        return builder.load(register_global(builder.module, register))


def register_global(module: ir.Module, register: str) -> ir.GlobalVariable:
    """The emulator's global for ``register`` (one per module)."""
    name = "llvsparse_emu_" + register.replace(".", "_")
    found = module.globals.get(name)
    if found is None:
        found = ir.GlobalVariable(module, I32, name)
        found.initializer = ir.Constant(I32, 0)
    return found


def device_name(name: str) -> str:
    return f"{name}_device"


def device_kernel(name: str, hooks: TargetHooks, triple: str, data_layout: str,
                  nvvm_kernel: bool) -> ir.Module:
    """A module holding ``{name}_device(table, status)``, which runs the coordinate of
    its global thread index through the declared ``{name}_range``."""
    module = ir.Module(name=f"{name}_device")
    module.triple, module.data_layout = triple, data_layout
    ranged = ir.Function(module, ir.FunctionType(I32, [PTR, I64, I64]), f"{name}_range")
    kernel = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I32.as_pointer()]),
                         device_name(name))
    b = ir.IRBuilder(kernel.append_basic_block("entry"))
    block, size, thread = (hooks.special(b, r) for r in ("ctaid.x", "ntid.x", "tid.x"))
    index = b.add(b.mul(b.zext(block, I64), b.zext(size, I64)), b.zext(thread, I64))
    status = b.call(ranged, [kernel.args[0], index, b.add(index, ir.Constant(I64, 1))])
    failed = b.icmp_signed("!=", status, ir.Constant(I32, 0))
    with b.if_then(failed, likely=False):
        b.store(status, kernel.args[1])
    b.ret_void()
    if nvvm_kernel:
        mark = module.add_metadata([kernel, ir.MetaDataString(module, "kernel"),
                                    ir.Constant(I32, 1)])
        module.add_named_metadata("nvvm.annotations", mark)
    return module


def linked(host_ir: str, device: ir.Module) -> llvm.ModuleRef:
    """The translator's module (its IR text parsed, not rewritten) with the device
    kernel linked in and retargeted."""
    module = llvm.parse_assembly(host_ir)
    module.triple, module.data_layout = device.triple, device.data_layout
    module.link_in(llvm.parse_assembly(str(device)))
    return module
