"""The GPU emulator: the device kernels, their special registers read from host globals,
compiled with MCJIT and run over the whole grid of blocks and threads on the CPU.

Each launcher ``{name}_{phase}_emulated(table, bounds, threads, extra)`` takes the device
entry's arguments (device_ir.device_signature) but the status: it loops over
``nctaid.x`` blocks of ``ntid.x`` threads (two globals the host sets per launch), stores
each thread's registers and enters the phase's device entry; it returns the first
failing status. Threads run one after another, so a schedule whose threads write
disjoint rows gives what a race-free grid would.
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
    I64,
    PTR,
    EmulatedHooks,
    device_kernel,
    device_name,
    device_signature,
    linked,
    register_global,
)

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                          ctypes.c_void_p)


@dataclass
class EmulatedKernel:
    """Emulated device kernels: each phase's launcher and the grid's globals."""

    name: str
    launchers: dict[str, ctypes._CFuncPtr]
    grid: ctypes.c_int32
    block: ctypes.c_int32
    engine: object = field(repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def launch(self, phase: str, grid: int, block: int, table: int, bounds: int,
               threads: int, extra: int) -> int:
        """Run ``phase`` over ``grid`` blocks of ``block`` threads; the first failing
        status (0: none). Addresses are of host memory (0 for null)."""
        with self.lock:
            self.grid.value, self.block.value = grid, block
            return self.launchers[phase](table, bounds or None, threads, extra or None)


def _launcher(module: ir.Module, name: str, phase: str) -> None:
    """``{name}_{phase}_emulated``: every block's every thread, in order."""
    kernel = module.globals.get(device_name(name, phase)) or ir.Function(
        module, device_signature(), device_name(name, phase))
    i64p = I64.as_pointer()
    launch = ir.Function(module, ir.FunctionType(I32, [PTR, i64p, I64, i64p]),
                         f"{name}_{phase}_emulated")
    table, bounds, threads, extra = launch.args
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

    def each_thread() -> None:
        loop(b.load(registers["ntid.x"]), "tid.x",
             lambda: b.call(kernel, [table, status, bounds, threads, extra]))

    loop(b.load(registers["nctaid.x"]), "ctaid.x", each_thread)
    b.ret(b.load(status))


def emulate(host_ir: str, name: str, phases: tuple[str, ...] = ("range",)) -> EmulatedKernel:
    """The emulated device kernels of ``phases`` of the translator's IR ``host_ir``
    (entry ``name``)."""
    target = llvm.Target.from_default_triple()
    machine = target.create_target_machine(opt=2, jit=True)
    device = device_kernel(name, EmulatedHooks(), machine.triple, str(machine.target_data),
                           nvvm_kernel=False, phases=phases)
    for phase in phases:
        _launcher(device, name, phase)
    module = linked(host_ir, device)
    link_runtime(module, DEVICE_RUNTIME_IR)
    module.verify()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    grid = ctypes.c_int32.from_address(engine.get_global_value_address("llvsparse_emu_nctaid_x"))
    block = ctypes.c_int32.from_address(engine.get_global_value_address("llvsparse_emu_ntid_x"))
    launchers = {phase: LAUNCH(engine.get_function_address(f"{name}_{phase}_emulated"))
                 for phase in phases}
    return EmulatedKernel(name, launchers, grid, block, engine)
