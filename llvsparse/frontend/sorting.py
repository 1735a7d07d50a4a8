"""numpy's sort, argmax and argmin on tensors, on the stored entries.

A line along the sorted (or searched) axis holds its stored values and, at every other
coordinate, the fill. Sorting it is sorting the stored values and splicing the fills in
where the fill sorts (NaN last, as numpy sorts); the extreme of a line is the best
stored value or the fill at the line's first coordinate not stored, the earlier one on a
tie, as numpy's first occurrence. Both are O(stored entries log) with no dense copy.
"""

from __future__ import annotations

import numpy as np

from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor
from .lazy_nodes import normalize_axis
from .shape_ops import reshape, tensor_of


def _lines(tensor: StoredTensor, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int,
                                               tuple[int, ...]]:
    """Each stored entry's line (the flat index of its other coordinates), its position
    on the line, and its value; the line length and the shape of the lines."""
    coords, values = tensor.to_coo()
    others = [k for k in range(tensor.order) if k != axis]
    line_shape = tuple(tensor.shape[k] for k in others)
    line = np.ravel_multi_index(tuple(coords[others]), line_shape) if others \
        else np.zeros(len(values), np.int64)
    return line.astype(np.int64), coords[axis].astype(np.int64), values, \
        tensor.shape[axis], line_shape


def _before(a: np.ndarray, b) -> np.ndarray:
    """Whether ``a`` sorts strictly before ``b`` in numpy's order (NaN last)."""
    with np.errstate(invalid="ignore"):
        return (a < b) | (~np.isnan(a) & np.isnan(b)) if a.dtype.kind in "fc" else a < b


def sort(x: object, axis: int = -1, *, descending: bool = False,
         stable: bool | None = None, kind: str | None = None) -> StoredTensor:
    """Sorted along ``axis`` (pydata/sparse's ``descending=``: numpy's ``-sort(-x)``
    order, NaN last); a COO tensor with the same fill."""
    tensor = tensor_of(x, "sort")
    if tensor.dtype.kind == "c":
        raise TypeError("sort of complex values is not supported")
    if tensor.order == 0:
        raise np.exceptions.AxisError("sort needs an array of at least one dimension")
    axis = normalize_axis(axis, tensor.order)
    line, position, values, length, _ = _lines(tensor, axis)
    fill = np.asarray(tensor.fill_value, tensor.dtype)
    flip = descending and tensor.dtype.kind in "fi"  # -sort(-x): NaN still last
    keys, fill_key = (-values, -fill) if flip else (values, fill)
    order = np.lexsort((keys, line))
    line, values, keys = line[order], values[order], keys[order]
    starts = np.searchsorted(line, line, "left")
    rank = np.arange(len(line)) - starts
    stored = np.bincount(line, minlength=int(line.max(initial=-1)) + 1)[line]
    after_fill = ~_before(keys, fill_key)
    position = rank + np.where(after_fill, length - stored, 0)
    if descending and not flip:  # bool and unsigned (no NaN): ascending, reversed
        position = length - 1 - position
    new = np.empty((tensor.order, len(values)), np.int64)
    others = [k for k in range(tensor.order) if k != axis]
    line_shape = tuple(tensor.shape[k] for k in others)
    if others:
        new[others] = np.array(np.unravel_index(line, line_shape)).reshape(len(others), -1)
    new[axis] = position
    return tensor_class().from_coo(new, values, tensor.shape, "coo", dtype=tensor.dtype,
                                   fill=tensor.fill_value)


def _extreme(x: object, axis, keepdims: bool, largest: bool, name: str) -> object:
    tensor = tensor_of(x, name)
    if tensor.dtype.kind == "c":
        raise TypeError(f"{name} of complex values is not supported")
    if axis is None:
        flat = reshape(tensor, -1) if tensor.order != 1 else tensor
        result = _extreme(flat, 0, False, largest, name)
        return reshape(result, (1,) * tensor.order) if keepdims else result
    axis = normalize_axis(axis, tensor.order)
    line, position, values, length, line_shape = _lines(tensor, axis)
    if length == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence")
    lines = int(np.prod(line_shape, dtype=np.int64))
    # Sorted first: a NaN (it wins, as in numpy), then the best value; ~ reverses an
    # integer order without overflow.
    if values.dtype.kind == "f":
        nan_first = np.isnan(values)
        better_key = np.where(nan_first, 0, -values if largest else values)
    else:
        nan_first = np.zeros(len(values), bool)
        better_key = ~values if largest else values
    order = np.lexsort((position, better_key, ~nan_first, line))
    line_s, pos_s = line[order], position[order]
    first = np.r_[True, line_s[1:] != line_s[:-1]] if len(line_s) else np.zeros(0, bool)
    best_line, best_pos = line_s[first], pos_s[first]
    best_val = values[order][first]
    # The first coordinate of each line that is not stored (length if every one is).
    by_pos = np.lexsort((position, line))
    l2, p2 = line[by_pos], position[by_pos]
    starts = np.searchsorted(l2, l2, "left")
    gap = p2 != np.arange(len(l2)) - starts
    missing = np.zeros(lines, np.int64)
    counts = np.bincount(l2, minlength=lines)
    missing[:] = counts
    gap_lines = l2[gap]
    gap_rank = (np.arange(len(l2)) - starts)[gap]
    np.minimum.at(missing, gap_lines, gap_rank)
    result = np.zeros(lines, np.int64)  # a line storing nothing: its first fill, at 0
    has = np.zeros(lines, bool)
    has[best_line] = True
    result[best_line] = best_pos
    fill = np.asarray(tensor.fill_value, tensor.dtype)
    with np.errstate(invalid="ignore"):
        if fill.dtype.kind == "f" and np.isnan(fill):
            fill_wins = ~np.isnan(best_val) | (missing[best_line] < best_pos)
        else:
            wins = fill > best_val if largest else fill < best_val
            tie = (fill == best_val) & (missing[best_line] < best_pos)
            fill_wins = ~np.isnan(best_val.astype(np.float64)) & (wins | tie)
    fill_wins &= missing[best_line] < length
    result[best_line[fill_wins]] = missing[best_line][fill_wins]
    out = result.reshape(line_shape)
    return tensor_class().from_numpy(np.expand_dims(out, axis) if keepdims else out)


def argmax(x: object, axis=None, out=None, *, keepdims: bool = False) -> object:
    """numpy's argmax (first occurrence; a NaN is the maximum) as a dense int64 tensor,
    0-d for a full one (pydata/sparse's kinds of result)."""
    if out is not None:
        raise TypeError("np.argmax: out= is not supported")
    return _extreme(x, axis, keepdims, True, "argmax")


def argmin(x: object, axis=None, out=None, *, keepdims: bool = False) -> object:
    """numpy's argmin (first occurrence; a NaN is the minimum)."""
    if out is not None:
        raise TypeError("np.argmin: out= is not supported")
    return _extreme(x, axis, keepdims, False, "argmin")
