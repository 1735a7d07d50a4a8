"""Writing into an existing tensor: assignment in index notation (``A[i, j] = B[i, j] *
2``) and numpy's ``out=``, which keep the target's dtype by numpy's same_kind casting,
and numpy's item assignment (``A[1, 2] = 3``, slices, masks). Each replaces the
target's entries, with every memo of the old ones."""

from __future__ import annotations

import numpy as np

from ..abi.results import check_fits_memory
from ..notation.expr_api import make_assignment
from ..tensors.coerce import asarray, is_foreign_sparse
from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor


def in_dtype(value: StoredTensor, dtype: np.dtype, refusal: str) -> StoredTensor:
    """``value`` in ``dtype``, that of the tensor it is written into, where numpy's
    same_kind rule allows the cast (float64 into float32, not into int64); else a
    TypeError saying ``refusal``."""
    if value.dtype == dtype:
        return value
    if not np.can_cast(value.dtype, dtype, "same_kind"):
        raise TypeError(f"{refusal} (numpy's same_kind rule)")
    return value.astype(dtype)


def replace_entries(target: StoredTensor, value: StoredTensor) -> StoredTensor:
    """``target`` holding ``value``'s entries (its name kept): no memo of the old
    entries (descriptor, validation, conversions) survives."""
    name = target.name
    target.__dict__.clear()
    target.__dict__.update(value.__dict__)
    target.name = name
    return target


def assign_notation(target: StoredTensor, indices, value) -> None:
    """``target[indices] = value`` in index notation, one kernel, the result written
    into ``target`` in its own dtype."""
    # the compiler, loaded by the first assignment (ls.Tensor needs none)
    from ..calls.binding import ShapeError
    from ..kernel.api import Kernel

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


def assign_items(target: StoredTensor, key, value) -> None:
    """``target[key] = value`` as numpy assigns (integers, slices with any step, ``...``,
    ``None``, integer and boolean arrays), in ``target``'s format, dtype and fill.

    The positions written are found on each axis's coordinates broadcast to the shape
    (zero strides: numpy's own indexing of them costs the positions written, not the
    tensor's size), ``value`` is broadcast to them and cast as numpy's assignment casts
    (a sparse value read densely: it covers the positions written only). A position
    written twice keeps the last value, as numpy's does; a written value equal to the
    fill is not stored (pydata/sparse's DOK drops it too); the other stored entries stay."""
    shape = target.shape
    key = _numpy_key(key)
    probe = np.broadcast_to(np.zeros((), np.bool_), shape)[key]  # numpy's errors, its
    check_fits_memory(probe.size * (8 * len(shape) + target.dtype.itemsize),  # shape
                      "the coordinates of the positions written")
    written = np.empty(probe.shape, target.dtype)
    written[...] = np.asarray(asarray(value) if is_foreign_sparse(value) else value)
    if not shape:  # a 0-d tensor: its one value
        if written.size:
            replace_entries(target, tensor_class().from_numpy(written.reshape(-1)[-1],
                                                      format=target.format))
        return
    grids = [np.broadcast_to(np.arange(n).reshape([-1 if d == k else 1
                                                    for d in range(len(shape))]), shape)
             for k, n in enumerate(shape)]
    new = np.array([grid[key].reshape(-1) for grid in grids], dtype=np.int64)
    old, old_values = target.to_coo()
    coords = np.concatenate([old.astype(np.int64), new], axis=1)
    values = np.concatenate([old_values, written.reshape(-1)])
    kept = _last_of_each(coords)
    fill = target.fill_value
    is_fill = np.isnan(values[kept]) if isinstance(fill, float) and np.isnan(fill) \
        else values[kept] == fill
    kept = kept[~(is_fill & (kept >= old.shape[1]))]  # written fills are not stored
    result = tensor_class().from_coo(coords[:, kept], values[kept], shape, format=target.format,
                                     dtype=target.dtype, index_dtype=target.index_dtype)
    replace_entries(target, result)


def _last_of_each(coords: np.ndarray) -> np.ndarray:
    """The indices of the last column among each run of equal coordinates (columns of
    ``coords``, an (order, n) array), in coordinate order."""
    order = np.lexsort(coords[::-1])  # stable: equal coordinates keep their order
    ordered = coords[:, order]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = np.any(ordered[:, 1:] != ordered[:, :-1], axis=0)
    return order[last]


def _numpy_key(key):
    """``key`` with tensors in it (a bool Tensor as a mask) as numpy arrays."""
    if isinstance(key, tuple):
        return tuple(_numpy_key(k) for k in key)
    if hasattr(key, "__array__") and not isinstance(key, np.ndarray):
        return np.asarray(key)
    return key
