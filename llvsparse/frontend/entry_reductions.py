"""Reductions numpy has and the kernels' monoids do not: var, std and the NaN-skipping
nansum / nanprod / nanmax / nanmin / nanmean.

They are computed on the stored entries, grouped by the coordinates the reduction keeps,
plus the fill counted once per entry not stored (paper 004: an entry not stored holds the
fill). That is O(stored entries + result size), with no dense copy of the operand. The
result is a dense Tensor (0-d for a full reduction), as the kernel reductions give. Integer and bool operands have no NaN: their nan-reductions are the
plain ones, as in numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..tensors.made_as import tensor_class
from .lazy_compute import compute_node
from .lazy_nodes import as_node, reduce_axes


@dataclass
class Groups:
    """Stored entries grouped by the result cell they reduce into."""

    cell: np.ndarray  # per stored entry, its result cell (flat index)
    values: np.ndarray  # per stored entry, its value
    fill: object  # the value of entries not stored
    missing: np.ndarray  # per result cell, how many of its entries are not stored
    per_cell: int  # entries reduced into each cell
    kept_shape: tuple[int, ...]
    axes: tuple[int, ...]
    ndim: int
    dtype: np.dtype


def grouped(value: object, axis) -> Groups:
    """``value``'s stored entries grouped by the coordinates a reduction over ``axis``
    keeps (a lazy chain is computed first)."""
    tensor = compute_node(as_node(value))
    axes = reduce_axes(axis, tensor.order)
    kept = [k for k in range(tensor.order) if k not in axes]
    kept_shape = tuple(tensor.shape[k] for k in kept)
    coords, values = tensor.to_coo()
    if tensor.order == 0:
        coords, values = np.zeros((0, 1), np.int64), values[:1]
    cell = np.ravel_multi_index(tuple(coords[kept]), kept_shape) if kept \
        else np.zeros(len(values), np.int64)
    size = int(np.prod(kept_shape, dtype=np.int64))
    per_cell = int(np.prod([tensor.shape[k] for k in axes], dtype=np.int64))
    missing = per_cell - np.bincount(cell, minlength=size)[:size]
    return Groups(cell, values, tensor.fill_value, missing, per_cell, kept_shape, axes,
                  tensor.order, tensor.dtype)


def _sum_in(groups: Groups, values: np.ndarray, fill: float) -> np.ndarray:
    """Per cell, the sum of ``values`` (one per stored entry) and of ``fill`` once per
    entry not stored (none counted where every entry is stored, so an infinite or NaN
    fill does not leak in)."""
    if values.dtype.kind == "c":  # bincount adds real weights: each part apart
        fill = complex(fill)
        return _complex(_sum_in(groups, values.real, fill.real),
                        _sum_in(groups, values.imag, fill.imag))
    size = len(groups.missing)
    total = np.bincount(groups.cell, values.astype(np.float64), minlength=size)[:size]
    return total + np.where(groups.missing > 0, groups.missing * np.float64(fill), 0.0)


def _complex(real: np.ndarray, imag: np.ndarray) -> np.ndarray:
    """``real + i imag`` exactly (``1j * inf`` would give a NaN real part)."""
    out = np.empty(real.shape, np.complex128)
    out.real, out.imag = real, imag
    return out


def _wide(dtype: np.dtype) -> np.dtype:
    """The dtype a NaN-skipping reduction accumulates in."""
    return np.dtype(np.complex128 if dtype.kind == "c" else np.float64)


def _float_dtype(dtype: np.dtype) -> np.dtype:
    """numpy's result dtype for mean/var of ``dtype``: float64 for integers and bools."""
    return np.dtype(np.float64) if dtype.kind in "biu" else dtype


def _result(groups: Groups, cells: np.ndarray, dtype: np.dtype, keepdims: bool) -> object:
    """Per-cell values as a dense Tensor of the kept shape (reduced axes kept with extent
    1 under ``keepdims``), 0-d for a full reduction."""
    array = cells.astype(dtype).reshape(groups.kept_shape)
    if keepdims:
        kept = iter(groups.kept_shape)
        shape = [1 if k in groups.axes else next(kept) for k in range(groups.ndim)]
        return tensor_class().from_numpy(array.reshape(shape))
    return tensor_class().from_numpy(array)  # 0-d for a full reduction, as the kernels give


def var(value: object, axis=None, dtype=None, ddof: int = 0, keepdims: bool = False,
        std: bool = False) -> object:
    """numpy's var (std: its square root): the mean squared distance from the mean,
    two passes over the stored entries, divided by entries - ``ddof``."""
    groups = grouped(value, axis)
    if groups.dtype.kind == "c":
        raise TypeError("var/std of complex values is not supported")
    mean = _sum_in(groups, groups.values, groups.fill) / groups.per_cell
    spread = (groups.values.astype(np.float64) - mean[groups.cell]) ** 2
    with np.errstate(invalid="ignore", over="ignore"):
        filled = (np.float64(groups.fill) - mean) ** 2
        squares = np.bincount(groups.cell, spread, minlength=len(mean))[:len(mean)]
        squares = squares + np.where(groups.missing > 0, groups.missing * filled, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cells = squares / max(groups.per_cell - ddof, 0)
    cells = np.sqrt(cells) if std else cells
    return _result(groups, cells, np.dtype(dtype) if dtype else _float_dtype(groups.dtype),
                   keepdims)


def nansum(value: object, axis=None, dtype=None, keepdims: bool = False) -> object:
    """The sum with NaN counted as 0."""
    if value.dtype.kind not in "fc":
        return value.sum(axis=axis, dtype=dtype, keepdims=keepdims)
    groups = grouped(value, axis)
    fill = 0.0 if np.isnan(groups.fill) else groups.fill
    cells = _sum_in(groups, np.where(np.isnan(groups.values), 0, groups.values), fill)
    return _result(groups, cells, np.dtype(dtype) if dtype else groups.dtype, keepdims)


def nanmean(value: object, axis=None, dtype=None, keepdims: bool = False) -> object:
    """The mean of the entries that are not NaN (NaN where every one is)."""
    if value.dtype.kind not in "fc":
        return value.mean(axis=axis, dtype=dtype, keepdims=keepdims)
    groups = grouped(value, axis)
    nan = np.isnan(groups.values)
    fill_nan = bool(np.isnan(groups.fill))
    total = _sum_in(groups, np.where(nan, 0.0, groups.values), 0.0 if fill_nan else groups.fill)
    count = _sum_in(groups, (~nan).astype(np.float64), 0.0 if fill_nan else 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cells = total / count
    return _result(groups, cells, np.dtype(dtype) if dtype else groups.dtype, keepdims)


def _folded(ufunc: np.ufunc, start: float, skip_nan: Callable[[np.ndarray], np.ndarray]
            ) -> Callable:
    """A NaN-skipping reduction by ``ufunc.at`` from ``start``; the fill folds in once
    for a cell missing an entry (``fill ** missing`` for a product)."""
    def reduction(value: object, axis=None, dtype=None, keepdims: bool = False) -> object:
        plain = {np.multiply: "prod", np.fmax: "max", np.fmin: "min"}[ufunc]
        if value.dtype.kind not in "fc":
            options = {"dtype": dtype} if plain == "prod" else {}
            return getattr(value, plain)(axis=axis, keepdims=keepdims, **options)
        groups = grouped(value, axis)
        wide = _wide(groups.dtype)
        cells = np.full(len(groups.missing), start, wide)
        ufunc.at(cells, groups.cell, skip_nan(groups.values.astype(wide)))
        fill = skip_nan(np.array([groups.fill], wide))[0]
        if ufunc is np.multiply:
            fold = np.where(groups.missing > 0, fill ** groups.missing, 1.0)
        else:
            fold = np.where(groups.missing > 0, fill, start)
        cells = ufunc(cells, fold)
        return _result(groups, cells, np.dtype(dtype) if dtype else groups.dtype, keepdims)
    return reduction


nanprod = _folded(np.multiply, 1.0, lambda v: np.where(np.isnan(v), 1.0, v))
prod = _folded(np.multiply, 1.0, lambda v: v)  # for complex values, which kernels lack
nanmax = _folded(np.fmax, np.nan, lambda v: v)
nanmin = _folded(np.fmin, np.nan, lambda v: v)
