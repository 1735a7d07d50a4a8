"""Kernel calls on the GPU emulator (``target="cuda-emulated"``): the operands are bound
as for native code, the output is sized on the host, and the planned device kernel runs
over its whole grid on the CPU (backends/cuda/emulator.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import runtime
from .backends.cuda.emulator import EmulatedKernel, emulate
from .instance import Instance
from .ir.gpu_plan import GpuMappingError, GpuPlan, plan_gpu
from .tensor import Tensor

if TYPE_CHECKING:
    from .api import Kernel


def gpu_plan(kernel: Kernel, inst: Instance) -> GpuPlan:
    """The GPU mapping of ``inst`` (GpuMappingError where it has none)."""
    return plan_gpu(kernel.program(inst), inst.parallel_mode is not None)


def extent_of(kernel: Kernel, plan: GpuPlan, shape: tuple[int, ...]) -> int:
    """The extent of the loop the grid splits: the output's index it runs over."""
    names = [v.name for v in kernel.assignment.lhs.indices]
    if plan.index not in names:
        raise GpuMappingError(f"the grid splits the loop over {plan.index}, which indexes "
                              "no mode of the output")
    return shape[names.index(plan.index)]


def emulated_call(kernel: Kernel, check: bool, tensors: dict[str, Any],
                  cache: dict[int, tuple[Instance, GpuPlan, EmulatedKernel]]) -> Tensor:
    """What ``kernel(**tensors)`` returns, computed by the emulated device kernel."""
    bound = kernel.bind(check=check, threads=1, **tensors)
    inst = bound.inst
    found = cache.get(id(inst))
    if found is None:
        plan = gpu_plan(kernel, inst)
        code = kernel.code_of(inst).jit
        found = cache[id(inst)] = (inst, plan, emulate(code.llvm_ir, code.name))
    _, plan, emulated = found  # (the instance kept alive: its id is the key)
    if not bound.dense:
        raise GpuMappingError("an assembled (sparse) output has no GPU mapping yet")
    values = np.zeros(bound.size, bound.dtype)
    output = runtime.DescriptorHolder(bound.extents, [values], bound.flat_params)
    extent = extent_of(kernel, plan, bound.shape)
    with emulated.lock:
        emulated.grid.value, emulated.block.value = plan.grid(extent), plan.block
        runtime.call(emulated.address, [output, *bound.inputs])
    return bound.result(values)
