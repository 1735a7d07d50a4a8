"""numpy's clip, interp and diagonal on tensors, from their stored entries and fill.

``clip`` is ``maximum`` then ``minimum`` (kernels, which keep the pattern where the
bounds are numbers); ``interp`` is pointwise, so it maps the stored values and the fill
(paper 004's rule, as pydata/sparse does); ``diagonal`` keeps the stored entries on the
diagonal, the fill unchanged. The pydata suite's commonest missing functions (issue 33).
"""

from __future__ import annotations

import numpy as np

from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor
from .lazy_nodes import normalize_axis
from .shape_ops import tensor_of
from .tensor_assign import in_dtype, replace_entries
from .ufuncs import named_format


def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **options):
    """numpy's clip: bounds are numbers, arrays or tensors (broadcast); None leaves that
    side open (both None: a copy, as numpy 2.1's)."""
    if options:
        raise TypeError(f"np.clip: {', '.join(sorted(options))}= is not supported")
    low = a_min if min is None else min
    high = a_max if max is None else max
    result = tensor_of(a, "np.clip")
    if low is None and high is None:
        result = result.astype(result.dtype)
    if low is not None:
        result = np.maximum(result, low)
    if high is not None:
        result = np.minimum(result, high)
    if out is None:
        return result
    target = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if type(target) is not tensor_class() or target.shape != result.shape:
        raise ValueError("np.clip(..., out=): out must be one Tensor of the result's shape "
                         f"{result.shape}")
    return replace_entries(target, in_dtype(result, target.dtype, "np.clip(..., out=): "
                                            f"cannot cast the {result.dtype} result to "
                                            f"out's {target.dtype}"))


def interp(x, xp, fp, left=None, right=None, period=None):
    """numpy's interp of a tensor ``x``: of each stored value and of the fill (the
    result's fill); ``xp`` and ``fp`` are read dense. An array ``x`` gives numpy's."""
    xp, fp = np.asarray(xp), np.asarray(fp)

    def mapped(values):
        return np.interp(values, xp, fp, left, right, period)
    if not isinstance(x, StoredTensor):
        return mapped(np.asarray(x))
    if not x.shape:
        return tensor_class().from_numpy(np.asarray(mapped(x.item())))
    coords, values = x.to_coo()
    fill = np.asarray(mapped(np.asarray(x.fill_value, x.dtype))).item()
    result = np.asarray(mapped(values))
    return tensor_class().from_coo(coords, result, x.shape, named_format(x), dtype=result.dtype,
                                   fill=fill)


def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1) -> StoredTensor:
    """numpy's diagonal: the other axes first, then the diagonal's (a COO tensor of the
    stored entries on it, the fill kept)."""
    tensor = tensor_of(a, "np.diagonal")
    if tensor.order < 2:
        raise ValueError("np.diagonal: the array must be at least 2-d")
    first, second = normalize_axis(axis1, tensor.order), normalize_axis(axis2, tensor.order)
    if first == second:
        raise ValueError("axis1 and axis2 cannot be the same")
    offset = int(offset)
    rows, cols = tensor.shape[first], tensor.shape[second]
    length = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    coords, values = tensor.to_coo()
    on = coords[second] - coords[first] == offset
    rest = [k for k in range(tensor.order) if k not in (first, second)]
    place = coords[first] if offset >= 0 else coords[second]
    kept = np.vstack([coords[rest][:, on], place[on][None, :]])
    shape = tuple(tensor.shape[k] for k in rest) + (length,)
    return tensor_class().from_coo(kept, values[on], shape, "coo", dtype=tensor.dtype,
                                   fill=tensor.fill_value)

