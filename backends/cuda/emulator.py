"""The GPU emulator: the device kernel, its special registers read from host globals,
compiled with MCJIT and run over the whole grid of blocks and threads on the CPU.

The launcher ``{name}_emulated(table)`` has the host entry's signature: it loops over
``nctaid.x`` blocks of ``ntid.x`` threads (two globals the host sets per launch), stores
each thread's registers and enters ``{name}_device``; it returns the first failing status.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field

import llvmlite.binding as llvm
from llvmlite import ir

from ..cpu import link_runtime
from .device_ir import (
    DEVICE_RUNTIME_IR,
    I32,
    PTR,
    EmulatedHooks,
    device_kernel,
    device_name,
    linked,
    register_global,
)


@dataclass
class EmulatedKernel:
    """An emulated device kernel: its launcher's address and its grid's globals."""

    name: str
    address: int
    grid: ctypes.c_int32
    block: ctypes.c_int32
    engine: object = field(repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def _launcher(module: ir.Module, name: str) -> None:
    """``{name}_emulated(table) -> status``: every block's every thread, in order."""
    kernel = module.globals.get(device_name(name)) or ir.Function(
        module, ir.FunctionType(ir.VoidType(), [PTR, I32.as_pointer()]), device_name(name))
    launch = ir.Function(module, ir.FunctionType(I32, [PTR]), f"{name}_emulated")
    b = ir.IRBuilder(launch.append_basic_block("entry"))
    status = b.alloca(I32)
    b.store(ir.Constant(I32, 0), status)
    registers = {r: register_global(module, r) for r in ("ctaid.x", "tid.x", "nctaid.x",
                                                           "ntid.x")}

    def loop(count: ir.Value, register: str, body) -> None:
        head, work, done = (b.append_basic_block(f"{register}.{part}")
                            for part in ("head", "body", "done"))
        b.store(ir.Constant(I32, 0), registers[register])
        b.branch(head)
        b.position_at_end(head)
        at = b.load(registers[register])
        b.cbranch(b.icmp_signed("<", at, count), work, done)
        b.position_at_end(work)
        body()
        b.store(b.add(b.load(registers[register]), ir.Constant(I32, 1)), registers[register])
        b.branch(head)
        b.position_at_end(done)

    def threads() -> None:
        loop(b.load(registers["ntid.x"]), "tid.x",
             lambda: b.call(kernel, [launch.args[0], status]))

    loop(b.load(registers["nctaid.x"]), "ctaid.x", threads)
    b.ret(b.load(status))


def emulate(host_ir: str, name: str) -> EmulatedKernel:
    """The emulated device kernel of the translator's IR ``host_ir`` (entry ``name``)."""
    target = llvm.Target.from_default_triple()
    machine = target.create_target_machine(opt=2, jit=True)
    device = device_kernel(name, EmulatedHooks(), machine.triple, str(machine.target_data),
                           nvvm_kernel=False)
    _launcher(device, name)
    module = linked(host_ir, device)
    link_runtime(module, DEVICE_RUNTIME_IR)
    module.verify()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    grid = ctypes.c_int32.from_address(engine.get_global_value_address("llvsparse_emu_nctaid_x"))
    block = ctypes.c_int32.from_address(engine.get_global_value_address("llvsparse_emu_ntid_x"))
    return EmulatedKernel(name, engine.get_function_address(f"{name}_emulated"), grid, block,
                          engine)
