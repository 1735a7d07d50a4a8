"""Kernel calls run by the interpreter backend (``target="interpret"``): the operands are
bound and converted as for native code, then the kernel's loop IR is walked in Python."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..backends.interpret import run_program
from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor

if TYPE_CHECKING:
    from .served import ServedKernel

TARGETS = ("cpu", "interpret", "cuda-emulated", "cuda")


def interpret_call(kernel: ServedKernel, check: bool, tensors: dict[str, Any]) -> StoredTensor:
    """What ``kernel(**tensors)`` returns, computed by walking its loop IR."""
    bound = kernel.bind(check=check, threads=1, **tensors)
    inst = bound.inst
    program = kernel.program(inst)
    coords, values = run_program(program, bound.inputs_by_name, bound.shape)
    out_type = bound.out_type
    stored = np.asarray(values, dtype=program.dtype).astype(out_type.dtype)
    return tensor_class().from_coo(coords, stored, bound.shape, bound.format, dtype=out_type.dtype,
                                   index_dtype=out_type.index_dtype, fill=bound.format.fill)
