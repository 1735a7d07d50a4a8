"""Kernel calls on the GPU emulator (``target="cuda-emulated"``): the operands are bound
as for native code, the output is sized on the host, and the planned device kernels run
over their whole grids on the CPU (backends/cuda/emulator.py).

An assembled output (schedule ``count_fill``) is sized as on a device: the host runs the
setup phase, a grid counts each range's entries, the host scans the counts into
offsets and allocates the output exactly, a second grid fills it, and the host's
finish phase seals it.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

import numpy as np

from ..abi import runtime, thread_calls
from ..backends.cpu import JitKernel
from ..backends.cuda.emulator import EmulatedKernel, emulate
from ..ir.loops.gpu_plan import ENTRY_SPLIT, NONZERO_SPLIT, GpuMappingError, GpuPlan, plan_gpu
from ..ir.loops.nodes import Program
from ..ir.plan.autoschedule import gpu_schedule
from ..tensors.tensor import StoredTensor
from .binding import BoundCall
from .gpu_launch import Launch, launch_of
from .instance import Instance

if TYPE_CHECKING:
    from .served import ServedKernel

ASSEMBLY_PHASES = ("count", "fill")  # the device's phases of an assembled output


def gpu_plan(kernel: ServedKernel, inst: Instance, schedule: str | None = None) -> GpuPlan:
    """The GPU mapping of ``inst`` under ``schedule``, else the kernel's
    ``gpu_schedule`` (GpuMappingError where it has none)."""
    plan = plan_gpu(kernel.program(inst), inst.parallel_mode is not None,
                    schedule=schedule or kernel.gpu_schedule, **kernel.gpu_sizes)
    device_code(kernel, inst, plan)
    return plan


def call_schedule(kernel: ServedKernel, bound: BoundCall) -> str | None:
    """The GPU schedule of one call: the kernel's where it names one, else the
    autoscheduler's pick for these operands (ir/autoschedule.gpu_schedule; None: the
    rule's). What the pick weighs is planned once per instance."""
    if kernel.gpu_schedule is not None:
        return None
    inst = bound.inst
    key = ("pick", id(inst))
    if key not in kernel.device_cache:  # the rule's plan, and whether entry_split fits
        rule = plan_gpu(kernel.program(inst), inst.parallel_mode is not None,
                        **kernel.gpu_sizes)
        try:
            plan_gpu(kernel.program(inst), True, schedule=ENTRY_SPLIT, **kernel.gpu_sizes)
            fits = rule.schedule == NONZERO_SPLIT
        except GpuMappingError:
            fits = False
        kernel.device_cache[key] = (inst, rule, fits)  # (the instance kept alive)
    _, rule, fits = kernel.device_cache[key]
    if not fits:
        return None
    weights = kernel.entries_per_row(bound.inputs_by_name, rule.index)
    longest = int(np.sum(weights, axis=0).max()) if weights and len(weights[0]) else 0
    pick, _ = gpu_schedule(rule.schedule, longest, rule.entries)
    return None if pick == rule.schedule else pick


def device_code(kernel: ServedKernel, inst: Instance, plan: GpuPlan) -> JitKernel:
    """The translated code ``plan``'s device entries call: the CPU's, or (an assembled
    output the CPU gathers, a position split's atomic writes) built again from the
    loop IR with the plan's tags. GpuMappingError where an assembled output cannot be
    built in count and fill phases."""
    if not (plan.assembles or plan.splits_positions or plan.windows) and plan.lanes == 1:
        return kernel.code_of(inst).jit
    if plan.assembles and "count" in kernel.code_of(inst).jit.assembly:
        return inst.jit
    key = ("code", id(inst), plan.schedule, plan.block, plan.entries)
    found = kernel.device_cache.get(key)
    if found is None:
        def retag(program: Program) -> Program:
            return plan_gpu(program, True, plan.block, plan.schedule, plan.entries).program
        code = kernel.rebuilt(inst, retag)
        found = kernel.device_cache[key] = (inst, code)  # (the instance kept alive)
    code = found[1]
    if plan.assembles and not all(p in code.assembly
                                  for p in ("setup", *ASSEMBLY_PHASES, "finish")):
        raise GpuMappingError("this kernel's assembled output cannot be built in count "
                              "and fill phases (its rows are not outermost, or its levels "
                              "are not a row-owned append group), which sizing it on the "
                              "host before the launch needs")
    return code


def device_phases(plan: GpuPlan) -> tuple[str, ...]:
    """The device entries a plan launches."""
    return ASSEMBLY_PHASES if plan.assembles else ("whole",)


def check_output(plan: GpuPlan, bound: BoundCall) -> None:
    if plan.assembles == bound.dense:
        raise GpuMappingError("the GPU plan and the bound output disagree on whether the "
                              "output is assembled")


def assemble(code: JitKernel, bound: BoundCall, launch: Launch, run: Any) -> StoredTensor:
    """The assembled output of ``bound`` (``code``: its phases on the host): setup and
    finish on the host, ``run(phase,
    holders, extra)`` launching the count and fill grids (``extra``: the per-thread
    counts, then offsets, as int64 arrays)."""
    addresses = code.assembly
    holders = [bound.assembled.holder(reserve=False), *bound.inputs]
    table = runtime.descriptor_table(holders)
    runtime.check_status(thread_calls.SETUP_TYPE(addresses["setup"])(table), holders)
    counts = np.zeros(max(launch.threads, 1), np.int64)
    run("count", holders, counts)
    offsets = np.concatenate([[0], np.cumsum(counts[:launch.threads])]).astype(np.int64)
    total = int(offsets[-1])
    bound.assembled.reserve_for(holders[0], total)
    run("fill", holders, offsets)
    runtime.check_status(thread_calls.FINISH_TYPE(addresses["finish"])(table, total), holders)
    return bound.assembled.adopt(holders[0])


def emulated_call(kernel: ServedKernel, check: bool, tensors: dict[str, Any],
                  cache: dict[int, tuple[Instance, GpuPlan, JitKernel, EmulatedKernel]]
                  ) -> StoredTensor:
    """What ``kernel(**tensors)`` returns, computed by the emulated device kernels."""
    bound = kernel.bind(check=check, threads=1, **tensors)
    inst = bound.inst
    schedule = call_schedule(kernel, bound)
    found = cache.get((id(inst), schedule))
    if found is None:
        plan = gpu_plan(kernel, inst, schedule)
        code = device_code(kernel, inst, plan)
        found = cache[(id(inst), schedule)] = (inst, plan, code, emulate(
            code.llvm_ir, code.name, device_phases(plan), plan.lanes, plan.windows))
    _, plan, code, emulated = found  # (the instance kept alive: its id is the key)
    check_output(plan, bound)
    launch = launch_of(kernel, plan, bound)
    arena = np.empty(launch.arena_bytes, np.uint8)  # the threads' workspace slices
    emulated.set_arena(arena.ctypes.data if arena.size else 0, launch.arena_slice)

    def run(phase: str, holders: list[runtime.DescriptorHolder],
            extra: np.ndarray | None) -> None:
        table = runtime.descriptor_table(holders)
        status = emulated.launch(phase, launch.grid, launch.block, ctypes.addressof(table),
                                 launch.bounds_address, launch.threads,
                                 launch.windows_address if extra is None
                                 else extra.ctypes.data)
        runtime.check_status(status, holders)

    if plan.assembles:
        return assemble(code, bound, launch, run)
    values = np.zeros(bound.size, bound.dtype)
    run("whole", [runtime.DescriptorHolder(bound.extents, [values], bound.flat_params),
                  *bound.inputs], None)
    return bound.result(values)
