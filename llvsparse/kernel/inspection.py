"""Inspecting a kernel: its concrete notation, loop IR, lattices, LLVM IR, assembly,
PTX and exported object code, each of its current instance (compiled again where it
came from the disk cache, which keeps no IR)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..backends.cpu import JitKernel
from ..backends.cuda import emit_ptx
from ..caching.export import export_kernel
from ..calls.gpu_call import device_code, device_phases, gpu_plan
from ..calls.instance import Instance
from ..ir.loops.gpu_plan import GpuPlan
from ..ir.loops.nodes import Program, show_program
from .build import build


class KernelInspection:
    """The inspection half of ``api.Kernel`` (which provides ``instance``, ``last``,
    ``plan`` and ``_request``)."""

    def _default(self) -> Instance:
        return self.last or self.instance()

    def _with_code(self) -> Instance:
        """The current instance, recompiled if it came from the disk cache (no IR kept)."""
        return self.code_of(self._default())

    def code_of(self, inst: Instance) -> Instance:
        """``inst``, recompiled if it came from the disk cache (no IR kept)."""
        jit_code = inst.jit
        together = jit_code.compiled is not None and jit_code.compiled.module is jit_code.module
        if jit_code.llvm_ir is None or (jit_code.has_other and not together):
            inst.jit = build(self._request(inst.types), inst.types, inst.conversions,
                             lazy=False).jit
        return inst

    def rebuilt(self, inst: Instance, retag: Callable[[Program], Program]) -> JitKernel:
        """``inst``'s code built again for a GPU plan (gpu_call.py): ``retag`` runs on
        its loop IR before translation (the plan's tags, and the assembly phases a
        sparse output is counted and filled in)."""
        request = replace(self._request(inst.types), retag=retag)
        return build(request, inst.types, inst.conversions, lazy=False).jit

    @property
    def llvm_ir(self) -> str:
        return self._with_code().jit.llvm_ir

    @property
    def llvm_ir_optimized(self) -> str:
        return self._with_code().jit.llvm_ir_optimized

    @property
    def asm(self) -> str:
        return self._with_code().jit.asm

    @property
    def compile_times(self) -> dict[str, float]:
        """Seconds per phase of the last cold compile (empty when loaded from disk)."""
        return dict(self._default().jit.phases)

    @property
    def lattices(self) -> str:
        """Every loop's iteration lattice, one line per loop as lowered."""
        return self._default().lattices

    def gpu_plan(self) -> GpuPlan:
        """How the kernel maps onto a GPU grid (ir/loops/gpu_plan.py); GpuMappingError where
        it has no GPU mapping yet."""
        return gpu_plan(self, self._with_code())

    def ptx(self, sm: str = "sm_80") -> str:
        """PTX of the planned device kernel for an NVIDIA GPU of compute capability
        ``sm`` (needs no GPU); GpuMappingError where the kernel has no GPU mapping yet."""
        inst = self._with_code()
        plan = gpu_plan(self, inst)
        code = device_code(self, inst, plan)
        return emit_ptx(code.llvm_ir, code.name, sm, device_phases(plan), plan.lanes,
                        plan.windows)

    def export(self, path: str | Path, name: str = "llvsparse_kernel") -> tuple[Path, Path]:
        """Write an object file (``.o``) or shared library (``.so``) plus a C header."""
        return export_kernel(self, self._with_code(), Path(path), name)

    @property
    def concrete(self) -> str:
        """Concrete index notation of the scheduled statements."""
        return self._default().concrete

    @property
    def loops(self) -> str:
        """The loop IR: each loop, what it iterates and locates, and the fast forms the
        optimization passes chose for it (in brackets); under a user's schedule, that
        schedule first."""
        text = show_program(self.program(self._default()))
        return text if self.plan is None else f"schedule: {self.plan.schedule}\n{text}"

    def program(self, inst: Instance) -> Program:
        """The loop IR of ``inst``, one of this kernel's instances (lowered again where
        it was loaded from the disk cache)."""
        if inst.program is None:
            inst.program = build(self._request(inst.types), inst.types,
                                 inst.conversions).program
        return inst.program()
