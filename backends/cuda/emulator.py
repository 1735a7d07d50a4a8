"""The GPU emulator: the device kernels, their special registers read from host globals,
compiled with MCJIT and run over the whole grid of blocks and threads on the CPU.

Each launcher ``{name}_{phase}_emulated(table, bounds, threads, extra)`` takes the device
entry's arguments (device_ir.device_signature) but the status: it loops over
``nctaid.x`` blocks of ``ntid.x`` threads (two globals the host sets per launch), stores
each thread's registers and enters the phase's device entry; it returns the first
failing status. Threads run one after another, so a schedule whose threads write
disjoint rows gives what a race-free grid would, and atomic adds are the host's.

A warp schedule's lanes must meet at each shuffle, so its grid runs differently
(WarpRunner): the 32 lanes of a warp are host threads that enter the device entry
together, warp after warp; special registers, the lane and the warp sums are host
callbacks answering per thread, and a sum waits for all 32 lanes' values.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field

import llvmlite.binding as llvm
from llvmlite import ir

from ..cpu import link_runtime
from .device_ir import (
    ARENA,
    ARENA_SLICE,
    DEVICE_RUNTIME_IR,
    I32,
    I64,
    PTR,
    SPECIAL_POINTER,
    EmulatedHooks,
    device_kernel,
    device_name,
    device_signature,
    linked,
    register_global,
)
from .warp_ir import LANE_POINTER, sum_pointer

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                          ctypes.c_void_p)


ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.c_int64, ctypes.c_void_p)
WARP = 32
SHUFFLE_TIMEOUT_S = 60.0  # lanes that never meet at a shuffle: an error, not a hang


def butterfly(values: list[float]) -> float:
    """The sum a butterfly of shuffles leaves in every lane (the device's order)."""
    values = list(values)
    offset = len(values) // 2
    while offset:
        values = [values[k] + values[k ^ offset] for k in range(len(values))]
        offset //= 2
    return values[0]


class WarpRunner:
    """Runs a warp schedule's grid: each warp's lanes as host threads meeting at the
    warp sums (see the module's docstring)."""

    def __init__(self, engine: object):
        self.local = threading.local()
        self.barrier = threading.Barrier(WARP, timeout=SHUFFLE_TIMEOUT_S)
        self.slots = [0.0] * WARP
        self.grid = self.block = 0
        special = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(self._special)
        lane = ctypes.CFUNCTYPE(ctypes.c_int64)(lambda: self.local.tid % WARP)
        self.callbacks = [special, lane]  # kept alive while the engine may call them
        addresses = {SPECIAL_POINTER: special, LANE_POINTER: lane}
        for kind, c_type in ((ir.FloatType(), ctypes.c_float), (ir.DoubleType(), ctypes.c_double)):
            summed = ctypes.CFUNCTYPE(c_type, c_type)(self._sum)
            self.callbacks.append(summed)
            addresses[sum_pointer(kind)] = summed
        for name, callback in addresses.items():
            slot = ctypes.c_void_p.from_address(engine.get_global_value_address(name))
            slot.value = ctypes.cast(callback, ctypes.c_void_p).value

    def _special(self, code: int) -> int:
        return (self.local.ctaid, self.block, self.local.tid, self.grid)[code]

    def _sum(self, value: float) -> float:
        lane = self.local.tid % WARP
        self.slots[lane] = value
        self.barrier.wait()  # every lane's value is in
        total = butterfly(self.slots)
        self.barrier.wait()  # every lane has read them: the slots may be reused
        return total

    def run(self, entry: ctypes._CFuncPtr, grid: int, block: int, args: tuple) -> None:
        """Every warp of ``grid`` blocks of ``block`` threads, lanes together."""
        self.grid, self.block = grid, block
        failures: list[BaseException] = []

        def lane_thread(lane: int) -> None:
            try:
                for ctaid in range(grid):
                    for warp in range(block // WARP):
                        self.local.ctaid, self.local.tid = ctaid, warp * WARP + lane
                        entry(*args)
            except (ctypes.ArgumentError, threading.BrokenBarrierError) as error:
                failures.append(error)
                self.barrier.abort()

        lanes = [threading.Thread(target=lane_thread, args=(k,)) for k in range(WARP)]
        for thread in lanes:
            thread.start()
        for thread in lanes:
            thread.join()
        if failures or self.barrier.broken:
            self.barrier.reset()
            raise RuntimeError("emulated warp lanes did not meet at a shuffle (divergent "
                               "control flow around a warp sum)") from (failures or [None])[0]


@dataclass
class EmulatedKernel:
    """Emulated device kernels: each phase's launcher and the grid's globals; a warp
    schedule's entries and their runner."""

    name: str
    launchers: dict[str, ctypes._CFuncPtr]
    grid: ctypes.c_int32
    block: ctypes.c_int32
    engine: object = field(repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    warps: WarpRunner | None = None
    entries: dict[str, ctypes._CFuncPtr] = field(default_factory=dict)

    def set_arena(self, address: int, slice_bytes: int) -> None:
        """The workspace arena the next launches hand out (device_ir.define_arena):
        host memory at ``address`` (0: none), ``slice_bytes`` a thread."""
        where = self.engine.get_global_value_address
        ctypes.c_void_p.from_address(where(ARENA)).value = address or None
        ctypes.c_int64.from_address(where(ARENA_SLICE)).value = slice_bytes

    def launch(self, phase: str, grid: int, block: int, table: int, bounds: int,
               threads: int, extra: int) -> int:
        """Run ``phase`` over ``grid`` blocks of ``block`` threads; the first failing
        status (0: none). Addresses are of host memory (0 for null)."""
        with self.lock:
            if self.warps is None:
                self.grid.value, self.block.value = grid, block
                return self.launchers[phase](table, bounds or None, threads, extra or None)
            status = ctypes.c_int32(0)
            self.warps.run(self.entries[phase], grid, block,
                           (table, ctypes.addressof(status), bounds or None, threads,
                            extra or None))
            return status.value


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


def emulate(host_ir: str, name: str, phases: tuple[str, ...] = ("whole",),
            lanes: int = 1, windows: bool = False) -> EmulatedKernel:
    """The emulated device kernels of ``phases`` of the translator's IR ``host_ir``
    (entry ``name``); ``lanes``: threads per range (32: a warp schedule); ``windows``:
    an entry split's threads."""
    target = llvm.Target.from_default_triple()
    machine = target.create_target_machine(opt=2, jit=True)
    device = device_kernel(name, EmulatedHooks(concurrent=lanes > 1), machine.triple,
                           str(machine.target_data), nvvm_kernel=False, phases=phases,
                           lanes=lanes, windows=windows)
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
    if lanes == 1:
        return EmulatedKernel(name, launchers, grid, block, engine)
    entries = {phase: ENTRY(engine.get_function_address(device_name(name, phase)))
               for phase in phases}
    return EmulatedKernel(name, launchers, grid, block, engine, warps=WarpRunner(engine),
                          entries=entries)
