"""The start of a reduction other than + scattered into a dense output
(ir/schedule/scattered_reduction.py): every entry set to the operator's identity, as the loop
IR's ``clear`` of the output says."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from . import scalars
from .emit_base import ONE, ZERO, emit_counted_loop

if TYPE_CHECKING:
    from .codegen import KernelCompiler


def initialize(kc: KernelCompiler, start: float) -> None:
    """Set every entry of the dense output to ``start``, the reduction's identity the
    loop IR's ``clear`` names (the kernel then sets every entry itself, so the caller
    need not zero it: ir/loops/output_init.py)."""
    if kc.phase != "whole":
        return
    b, tensor = kc.b, kc.tensors[kc.out_name]
    count = ONE
    for extent in tensor.extents:
        count = b.mul(count, extent)
    vals = tensor.array_ref(tensor.vals_slot)
    identity = scalars.convert(b, scalars.constant(kc.dtype, start), kc.dtype,
                               tensor.type.dtype)
    stored = scalars.store_value(b, identity, tensor.type.dtype)
    emit_counted_loop(b, kc.alloca(ir.IntType(64), "identity.q"), ZERO, count,
                      lambda q: b.store(stored, vals.address(b, q)))
