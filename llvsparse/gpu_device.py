"""Kernel calls on a GPU (``target="cuda"``): the operands' descriptors mirrored into
device memory, the planned kernel's PTX loaded and launched through cuda-python
(backends/cuda/driver.py), the dense output sized on the host and copied back.

A descriptor on the device is the host's with every pointer replaced: its extents,
sizes, capacities and parameters, each array, and the table of pointers to them are
copied over; nothing is allocated by the kernel (outputs are sized before the launch).
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

import numpy as np

from . import runtime
from .backends.cuda import emit_ptx
from .backends.cuda.device_ir import device_name
from .backends.cuda.driver import Device, device
from .gpu_call import extent_of, gpu_plan
from .gpu_resident import DeviceTensor
from .ir.gpu_plan import GpuMappingError
from .tensor import Tensor

if TYPE_CHECKING:
    from .api import Kernel


def _int64s(holder_array: ctypes.Array, count: int) -> np.ndarray:
    return np.ctypeslib.as_array(holder_array)[:count].astype(np.int64).copy() if count \
        else np.zeros(1, np.int64)


class DeviceTable:
    """The descriptor table of one call, mirrored on ``gpu``; frees what it allocated."""

    def __init__(self, gpu: Device, holders: list[runtime.DescriptorHolder],
                 resident: dict[int, int]):
        """``resident``: device copies made already (DeviceTensor), by host array id."""
        self.gpu, self.owned, self.arrays = gpu, [], []
        structs = []
        for holder in holders:
            n = int(holder.struct.nlevels)
            fields = [self._copy(_int64s(a, max(n, 1)))
                      for a in (holder.extents, holder.sizes)]
            arrays = [0 if a is None or not a.size else resident.get(id(a)) or self._copy(a)
                      for a in holder.arrays]
            self.arrays.append(arrays)
            pointers = self._copy(np.array(arrays or [0], np.uint64))
            caps = self._copy(_int64s(holder.caps, max(len(holder.arrays), 1)))
            params = self._copy(_int64s(holder.params, len(holder.params)))
            structs.append(self._copy(np.array([n, *fields, pointers, caps, params],
                                               np.uint64)))
        self.table = self._copy(np.array(structs, np.uint64))
        self.status = self._copy(np.zeros(1, np.int32))

    def _copy(self, array: np.ndarray) -> int:
        pointer = self.gpu.to_device(array)
        self.owned.append(pointer)
        return pointer

    def free(self) -> None:
        for pointer in self.owned:
            self.gpu.free(pointer)
        self.owned = []


def device_call(kernel: Kernel, check: bool, tensors: dict[str, Any],
                cache: dict[tuple[int, int], tuple[Any, Any, Any]], ordinal: int = 0,
                gpu: Device | None = None) -> Tensor:
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
    inst = bound.inst
    key = (id(inst), id(gpu))  # a function handle belongs to one device's context
    found = cache.get(key)
    if found is None:
        plan = gpu_plan(kernel, inst)
        code = kernel.code_of(inst).jit
        ptx = emit_ptx(code.llvm_ir, code.name, gpu.sm)
        found = cache[key] = ((inst, gpu), plan, gpu.function(ptx, device_name(code.name)))
    _, plan, function = found  # (the instance and device kept alive: their ids are the key)
    if not bound.dense:
        raise GpuMappingError("an assembled (sparse) output has no GPU mapping yet")
    values = np.zeros(bound.size, bound.dtype)
    output = runtime.DescriptorHolder(bound.extents, [values], bound.flat_params)
    table = DeviceTable(gpu, [output, *bound.inputs], resident)
    try:
        gpu.launch(function, plan.grid(extent_of(kernel, plan, bound.shape)), plan.block,
                   (table.table, table.status))
        status = gpu.to_host(table.status, np.zeros(1, np.int32))[0]
        if status:
            runtime.check_status(int(status), [output])
        if values.size:
            gpu.to_host(table.arrays[0][0], values.view(np.uint8))
    finally:
        table.free()
    return bound.result(values)
