"""Writing a computed result into an existing tensor: assignment in index notation
(``A[i, j] = B[i, j] * 2``) and numpy's ``out=``. Both keep the target's dtype by
numpy's same_kind casting and replace its entries, with every memo of the old ones."""

from __future__ import annotations

import numpy as np

from ..calls.binding import ShapeError
from ..kernel.api import Kernel
from ..notation.expr_api import make_assignment
from ..tensors.tensor import Tensor


def in_dtype(value: Tensor, dtype: np.dtype, refusal: str) -> Tensor:
    """``value`` in ``dtype``, that of the tensor it is written into, where numpy's
    same_kind rule allows the cast (float64 into float32, not into int64); else a
    TypeError saying ``refusal``."""
    if value.dtype == dtype:
        return value
    if not np.can_cast(value.dtype, dtype, "same_kind"):
        raise TypeError(f"{refusal} (numpy's same_kind rule)")
    return value.astype(dtype)


def replace_entries(target: Tensor, value: Tensor) -> Tensor:
    """``target`` holding ``value``'s entries (its name kept): no memo of the old
    entries (descriptor, validation, conversions) survives."""
    name = target.name
    target.__dict__.clear()
    target.__dict__.update(value.__dict__)
    target.name = name
    return target


def assign_notation(target: Tensor, indices, value) -> None:
    """``target[indices] = value`` in index notation, one kernel, the result written
    into ``target`` in its own dtype."""
    assignment, objects = make_assignment(target, indices, value)
    inputs = {n: t for n, t in objects.items() if t is not target}
    formats = {n: t.format for n, t in inputs.items()}
    # Indices only affine subscripts use take the assigned tensor's extents (padding).
    plain = {ix for a in assignment.accesses()[1:] for ix in a.indices}
    extents = {v.name: n for v, n in zip(assignment.lhs.indices, target.shape)
               if v not in plain}
    result = Kernel(assignment, formats, target.format, extents=extents)(**inputs)
    if result.shape != target.shape:
        raise ShapeError(f"the expression gives shape {result.shape}, but the tensor "
                         f"assigned to has shape {target.shape}")
    replace_entries(target, in_dtype(result, target.dtype, f"cannot assign a {result.dtype} "
                                     f"result to a {target.dtype} tensor"))
