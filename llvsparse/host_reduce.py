"""max, min and prod over axes of a computed tensor, on the host.

The front end does not yet use the notation's max/min reductions (``max(j, ...)``) for
these, so they run in numpy over the stored entries: each output cell folds its stored values, then the fill
value once if any entry under it is not stored. That is numpy's answer on the dense
array (NaN propagates, ``inf * 0`` is NaN) without building it.
"""

from __future__ import annotations

import math

import numpy as np

from .tensor import Tensor


def _start(ufunc: np.ufunc, dtype: np.dtype) -> object:
    """A value that ``ufunc`` leaves any stored value unchanged against."""
    if ufunc is np.multiply:
        return 1
    if dtype.kind == "b":
        return ufunc is np.minimum
    low, high = (np.iinfo(dtype).min, np.iinfo(dtype).max) if dtype.kind in "iu" else \
        (-np.inf, np.inf)
    return low if ufunc is np.maximum else high


def host_reduce(tensor: Tensor, ufunc: np.ufunc, axes: tuple[int, ...]) -> np.ndarray:
    """``ufunc.reduce`` of ``tensor`` over ``axes`` as a dense array (0-d for all)."""
    shape = tensor.shape
    reduced = math.prod(shape[k] for k in axes)
    kept = [k for k in range(len(shape)) if k not in axes]
    out_shape = tuple(shape[k] for k in kept)
    if not any(tensor.level_arrays) or reduced == 0:  # dense, or numpy's empty rules
        return ufunc.reduce(tensor.to_numpy(), axis=axes)
    coords, values = tensor.to_coo()
    cells = math.prod(out_shape)
    where = np.ravel_multi_index(tuple(coords[kept]), out_shape) if kept else \
        np.zeros(coords.shape[1], dtype=np.int64)
    result = np.full(cells, _start(ufunc, values.dtype), dtype=values.dtype)
    partial = np.bincount(where, minlength=cells) < reduced
    fill = getattr(tensor, "fill_value", tensor.fill)
    with np.errstate(all="ignore"):  # NaN and overflow as numpy's reduce gives them, quietly
        ufunc.at(result, where, values)
        result[partial] = ufunc(result[partial], np.asarray(fill, values.dtype))
    return result.reshape(out_shape)
