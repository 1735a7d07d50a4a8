"""What a target's calls (the GPU's, the emulator's, the interpreter's) need of the kernel
they serve. ``kernel.api.Kernel`` provides it; the calls name this protocol instead of
that class, so calls/ imports nothing from the kernel layer above it, not even for type
checkers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from ..backends.cpu import JitKernel
    from ..ir.loops.nodes import Program
    from ..ir.notation import syntax as nt
    from ..tensors.tensor import StoredTensor
    from .binding import BoundCall
    from .instance import Instance


class ServedKernel(Protocol):
    """A compiled kernel as its calls on other targets see it."""

    assignment: nt.Assignment
    gpu_schedule: str | None  # how a GPU grid splits the work (None: the model's pick)
    gpu_sizes: dict[str, int]  # threads per block, entries per thread
    device_cache: dict  # plans and device code, per instance

    def bind(self, *, check: bool = True, threads: int | None = None,
             **tensors: Any) -> BoundCall: ...

    def entries_per_row(self, inputs: dict[str, StoredTensor],
                        var: str) -> list[np.ndarray]: ...

    def program(self, inst: Instance) -> Program: ...

    def code_of(self, inst: Instance) -> Instance: ...

    def rebuilt(self, inst: Instance, retag: Callable[[Program], Program]) -> JitKernel: ...
