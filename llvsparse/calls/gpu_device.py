"""Kernel calls on a GPU (``target="cuda"``): the operands' descriptors mirrored into
device memory, the planned kernel's PTX loaded and launched through cuda-python
(backends/cuda/driver.py), the output sized on the host and copied back.

A descriptor on the device is the host's with every pointer replaced: its extents,
sizes, capacities and parameters, each array, and the table of pointers to them are
copied over; nothing is allocated by the kernel (outputs are sized before the launch).

A dense output is one launch. An assembled (sparse) output (``count_fill``) is two, as
on the emulator (gpu_call.assemble): the host's setup phase sizes the output's fixed
arrays, the count grid writes each thread's entry count into a device array, the host
copies the counts back and scans them into offsets, allocates the appended arrays (on
the host, then on the device, both sized by the count), and the fill grid writes them;
their device copies come back before the host's finish phase seals the output.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

import numpy as np

from ..abi import runtime
from ..backends.cpu import JitKernel
from ..backends.cuda import emit_ptx
from ..backends.cuda.device_ir import ARENA, ARENA_SLICE, device_name
from ..backends.cuda.driver import Device, device
from ..ir.loops.gpu_plan import GpuPlan
from ..tensors.gpu_resident import DeviceTensor
from ..tensors.tensor import StoredTensor
from .binding import BoundCall
from .gpu_call import assemble, call_schedule, check_output, device_code, device_phases, gpu_plan
from .gpu_launch import Launch, launch_of

if TYPE_CHECKING:
    from .served import ServedKernel


def _int64s(holder_array: ctypes.Array, count: int) -> np.ndarray:
    return np.ctypeslib.as_array(holder_array)[:count].astype(np.int64).copy() if count \
        else np.zeros(1, np.int64)


def raw_arrays(holder: runtime.DescriptorHolder, itemsizes: list[int]) -> list[np.ndarray | None]:
    """Byte views of the buffers an output descriptor points to (which its kernel's
    host phases allocated), each as long as its capacity: slot k holds elements of
    ``itemsizes[k]`` bytes."""
    views: list[np.ndarray | None] = []
    for slot, itemsize in enumerate(itemsizes):
        address, count = holder.pointers[slot], int(holder.caps[slot])
        views.append(np.ctypeslib.as_array((ctypes.c_uint8 * (count * itemsize))
                                           .from_address(address))
                     if address and count > 0 else None)
    return views


class DeviceTable:
    """Descriptor tables of one call, mirrored on ``gpu``; frees what it allocated.
    Host arrays are copied once per call (by identity), so a table rebuilt for a
    second launch (an assembly's fill) copies only what changed."""

    def __init__(self, gpu: Device, resident: dict[int, int]):
        """``resident``: device copies made already (DeviceTensor), by host array id."""
        self.gpu, self.owned = gpu, []
        self.copies: dict[int, tuple[np.ndarray, int]] = {}  # id -> (array kept, copy)
        self.resident = resident

    def mirror(self, holders: list[runtime.DescriptorHolder],
               arrays: list[list[np.ndarray | None]]) -> int:
        """A device table of ``holders`` whose arrays (``arrays[k]`` for holder k)
        are copied over; the device address of each holder's arrays is kept in
        ``self.arrays``."""
        structs, self.arrays = [], []
        for holder, host in zip(holders, arrays, strict=True):
            n = int(holder.struct.nlevels)
            fields = [self.copy(_int64s(a, max(n, 1))) for a in (holder.extents, holder.sizes)]
            pointers = [self.array(a) for a in host]
            self.arrays.append(pointers)
            structs.append(self.copy(np.array(
                [n, *fields, self.copy(np.array(pointers or [0], np.uint64)),
                 self.copy(_int64s(holder.caps, max(len(host), 1))),
                 self.copy(_int64s(holder.params, len(holder.params)))], np.uint64)))
        return self.copy(np.array(structs, np.uint64))

    def array(self, array: np.ndarray | None) -> int:
        """The device copy of a host array (0 for none), made once per call."""
        if array is None or not array.size:
            return 0
        found = self.resident.get(id(array))
        if found:
            return found
        if id(array) not in self.copies:
            self.copies[id(array)] = (array, self.copy(array))
        return self.copies[id(array)][1]

    def copy(self, array: np.ndarray) -> int:
        """A device copy of ``array``, freed with the table."""
        pointer = self.gpu.to_device(array)
        self.owned.append(pointer)
        return pointer

    def free(self) -> None:
        for pointer in self.owned:
            self.gpu.free(pointer)
        self.owned, self.copies = [], {}


def _plan_and_functions(kernel: ServedKernel, bound: BoundCall, gpu: Device,
                        cache: dict) -> tuple[GpuPlan, dict[str, Any], JitKernel]:
    """The plan of ``bound``'s instance, its device entries on ``gpu`` by phase
    (loaded once per instance and device) and the translated code they come from."""
    inst = bound.inst
    schedule = call_schedule(kernel, bound)
    key = (id(inst), id(gpu), schedule)  # a function handle belongs to one device's context
    found = cache.get(key)
    if found is None:
        plan = gpu_plan(kernel, inst, schedule)
        code = device_code(kernel, inst, plan)
        phases = device_phases(plan)
        ptx = emit_ptx(code.llvm_ir, code.name, gpu.sm, phases, plan.lanes, plan.windows)
        functions = {phase: gpu.function(ptx, device_name(code.name, phase))
                     for phase in phases}
        functions[PTX] = ptx
        found = cache[key] = ((inst, gpu), plan, functions, code)
    return found[1], found[2], found[3]  # (the instance and device kept alive: ids are the key)


PTX = "ptx"  # where the functions of a plan keep the PTX text they come from


def _set_arena(gpu: Device, ptx: str, table: DeviceTable, launch: Launch) -> None:
    """A device arena of the launch's workspace slices (device_ir.define_arena), freed
    with the table, its address and slice size written to the module's globals."""
    if not launch.arena_slice:
        return
    arena = gpu.alloc(launch.arena_bytes)
    table.owned.append(arena)
    gpu.set_global(ptx, ARENA, arena)
    gpu.set_global(ptx, ARENA_SLICE, launch.arena_slice)


def _launch(gpu: Device, function: Any, launch: Launch, table: DeviceTable, address: int,
            holders: list[runtime.DescriptorHolder], extra: int = 0) -> None:
    """One launch over ``launch``'s grid; its failing status as the host's exception."""
    status = table.copy(np.zeros(1, np.int32))
    bounds = 0 if launch.bounds is None else table.copy(launch.bounds)
    gpu.launch(function, launch.grid, launch.block,
               (address, status, bounds, launch.threads, extra))
    failed = gpu.to_host(status, np.zeros(1, np.int32))[0]
    if failed:
        runtime.check_status(int(failed), holders)


def device_call(kernel: ServedKernel, check: bool, tensors: dict[str, Any],
                cache: dict[tuple[int, int], tuple[Any, ...]], ordinal: int = 0,
                gpu: Device | None = None) -> StoredTensor:
    """What ``kernel(**tensors)`` returns, computed on GPU ``ordinal`` (or ``gpu``)."""
    gpu = gpu or device(ordinal)
    resident: dict[int, int] = {}
    for name, value in list(tensors.items()):
        if isinstance(value, DeviceTensor):
            if value.gpu is not gpu:
                raise ValueError(f"{name} is on GPU {value.gpu.ordinal}, not on the GPU "
                                 f"{gpu.ordinal} this call runs on")
            resident.update(value.pointers)
            tensors[name] = value.host
    bound = kernel.bind(check=check, threads=1, **tensors)
    plan, functions, code = _plan_and_functions(kernel, bound, gpu, cache)
    check_output(plan, bound)
    launch = launch_of(kernel, plan, bound)
    table = DeviceTable(gpu, resident)
    try:
        _set_arena(gpu, functions[PTX], table, launch)
        if plan.assembles:
            return _assembled(gpu, functions, code, bound, launch, table)
        values = np.zeros(bound.size, bound.dtype)
        output = runtime.DescriptorHolder(bound.extents, [values], bound.flat_params)
        holders = [output, *bound.inputs]
        address = table.mirror(holders, [h.arrays for h in holders])
        windows = 0 if launch.windows is None else table.copy(launch.windows)
        _launch(gpu, functions["whole"], launch, table, address, holders, windows)
        if values.size:
            gpu.to_host(table.arrays[0][0], values.view(np.uint8))
    finally:
        table.free()
    return bound.result(values)


def _assembled(gpu: Device, functions: dict[str, Any], code: JitKernel, bound: BoundCall,
               launch: Launch, table: DeviceTable) -> StoredTensor:
    """The sparse output of ``bound``: count and fill grids on ``gpu`` (see the
    module's docstring), between the host's setup, scan and finish."""
    output = bound.assembled
    itemsizes = [output.index_dtype.itemsize] * output.values_slot + [output.dtype.itemsize]

    def run(phase: str, holders: list[runtime.DescriptorHolder], extra: np.ndarray) -> None:
        host = [raw_arrays(holders[0], itemsizes), *(h.arrays for h in holders[1:])]
        address = table.mirror(holders, host)
        on_device = table.copy(extra)
        _launch(gpu, functions[phase], launch, table, address, holders, on_device)
        if phase == "count":
            gpu.to_host(on_device, extra)
            return
        for view, pointer in zip(host[0], table.arrays[0], strict=True):
            if view is not None:  # what fill wrote into the output's arrays
                gpu.to_host(pointer, view)

    return assemble(code, bound, launch, run)
