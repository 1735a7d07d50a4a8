"""Entries of a scipy sparse matrix or array, after checking its arrays.

scipy's own conversions trust the arrays: a CSR whose indptr decreases once converted to
COO without an error, dropped an entry, and SpMV then matched neither scipy nor the
data. What scipy's ``check_format(full_check=True)`` checks is checked here, in O(nnz)
vectorized numpy (check_format also sorts-checks and may prune in place, so it is not
called), and a corrupt input raises CorruptTensorError naming the problem.
"""

from __future__ import annotations

import numpy as np

from ..formats.interpret import CorruptTensorError


def scipy_entries(matrix) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """(coordinates (order, n) int64, values (n,), shape) of every stored entry of a
    scipy sparse matrix or array, repeats kept; corrupt arrays are refused."""
    import scipy.sparse as sp  # loaded on first use: import llvsparse stays light

    if not sp.issparse(matrix):
        raise TypeError(f"from_scipy needs a scipy sparse matrix or array (or a numpy "
                        f"array), not {type(matrix).__name__}")
    shape = tuple(int(s) for s in matrix.shape)
    fmt = matrix.format
    if fmt in ("csr", "csc"):
        return _compressed(matrix, shape, fmt)
    if fmt == "coo":
        coords = getattr(matrix, "coords", None)
        coords = (matrix.row, matrix.col) if coords is None else coords
        return _coordinates(coords, matrix.data, shape, "coo"), _data(matrix.data, "coo"), shape
    if fmt == "bsr":
        return _blocked(matrix, shape)
    if fmt == "dia":
        return _diagonals(matrix, shape)
    # lil and dok keep Python containers, which scipy builds entry by entry: no arrays
    # of theirs can disagree. Their COO conversion is checked like any other.
    return scipy_entries(matrix.tocoo())


def _index_array(array, name: str, fmt: str) -> np.ndarray:
    array = np.asarray(array)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise CorruptTensorError(f"scipy {fmt} {name} must be a 1-d integer array, not "
                                 f"{array.ndim}-d {array.dtype}")
    return array


def _data(data, fmt: str, ndim: int = 1) -> np.ndarray:
    data = np.asarray(data)
    if data.ndim != ndim:
        raise CorruptTensorError(f"scipy {fmt} data must be {ndim}-d, not {data.ndim}-d")
    return data


def _in_range(array: np.ndarray, extent: int, name: str, fmt: str) -> None:
    if array.size and (array.min() < 0 or array.max() >= extent):
        bad = int(array.min()) if array.min() < 0 else int(array.max())
        raise CorruptTensorError(f"scipy {fmt} {name} holds {bad}, outside [0, {extent})")


def _checked_indptr(indptr, count: int, stored: int, fmt: str) -> np.ndarray:
    """``indptr`` of ``count`` segments over ``stored`` indices: starts at 0, never
    decreases and ends within the indices (scipy ignores indices past its end)."""
    indptr = _index_array(indptr, "indptr", fmt).astype(np.int64, copy=False)
    if len(indptr) != count + 1:
        raise CorruptTensorError(f"scipy {fmt} indptr has {len(indptr)} entries; the shape "
                                 f"needs {count + 1}")
    if indptr[0] != 0:
        raise CorruptTensorError(f"scipy {fmt} indptr starts at {int(indptr[0])}, not 0")
    step = np.diff(indptr)
    if step.size and step.min() < 0:
        bad = int(np.argmax(step < 0))
        raise CorruptTensorError(f"scipy {fmt} indptr decreases from {int(indptr[bad])} to "
                                 f"{int(indptr[bad + 1])} at position {bad + 1}")
    if indptr[-1] > stored:
        raise CorruptTensorError(f"scipy {fmt} indptr ends at {int(indptr[-1])}, past the "
                                 f"{stored} stored indices")
    return indptr


def _compressed(matrix, shape: tuple[int, ...], fmt: str):
    if len(shape) == 1:  # a 1-d csr_array: one row
        coords, values, _ = _compressed(matrix, (1, shape[0]), fmt)
        return coords[1:], values, shape
    major, minor = (shape[0], shape[1]) if fmt == "csr" else (shape[1], shape[0])
    indices = _index_array(matrix.indices, "indices", fmt)
    data = _data(matrix.data, fmt)
    if len(data) != len(indices):
        raise CorruptTensorError(f"scipy {fmt} data has {len(data)} entries but indices has "
                                 f"{len(indices)}")
    indptr = _checked_indptr(matrix.indptr, major, len(indices), fmt)
    nnz = int(indptr[-1])
    _in_range(indices[:nnz], minor, "indices", fmt)
    coords = np.empty((2, nnz), np.int64)  # filled in place: no stacking copy
    major_mode = 0 if fmt == "csr" else 1
    coords[major_mode] = np.repeat(np.arange(major, dtype=np.int64), np.diff(indptr))
    coords[1 - major_mode] = indices[:nnz]
    return coords, data[:nnz], shape


def _coordinates(coords, data, shape: tuple[int, ...], fmt: str) -> np.ndarray:
    if len(coords) != len(shape):
        raise CorruptTensorError(f"scipy {fmt} has {len(coords)} coordinate arrays for "
                                 f"shape {shape}")
    arrays = [_index_array(c, f"coordinates of mode {m}", fmt) for m, c in enumerate(coords)]
    count = len(np.asarray(data))
    for mode, (array, extent) in enumerate(zip(arrays, shape)):
        if len(array) != count:
            raise CorruptTensorError(f"scipy {fmt} has {len(array)} coordinates of mode "
                                     f"{mode} but {count} values")
        _in_range(array, extent, f"coordinates of mode {mode}", fmt)
    return np.vstack(arrays) if arrays else np.zeros((0, count), np.int64)


def _blocked(matrix, shape: tuple[int, ...]):
    rows, cols = (int(b) for b in matrix.blocksize)
    if rows < 1 or cols < 1 or shape[0] % rows or shape[1] % cols:
        raise CorruptTensorError(f"scipy bsr blocksize {(rows, cols)} does not divide the "
                                 f"shape {shape}")
    indices = _index_array(matrix.indices, "indices", "bsr")
    data = _data(matrix.data, "bsr", ndim=3)
    if data.shape[1:] != (rows, cols) or len(data) != len(indices):
        raise CorruptTensorError(f"scipy bsr data has shape {data.shape}; its "
                                 f"{len(indices)} blocks need ({len(indices)}, {rows}, {cols})")
    indptr = _checked_indptr(matrix.indptr, shape[0] // rows, len(indices), "bsr")
    nnz = int(indptr[-1])
    block_cols = indices[:nnz].astype(np.int64)
    _in_range(block_cols, shape[1] // cols, "indices", "bsr")
    block_rows = np.repeat(np.arange(shape[0] // rows, dtype=np.int64), np.diff(indptr))
    inner_row, inner_col = np.divmod(np.arange(rows * cols, dtype=np.int64), cols)
    row = (block_rows[:, None] * rows + inner_row).reshape(-1)
    col = (block_cols[:, None] * cols + inner_col).reshape(-1)
    return np.vstack([row, col]), data[:nnz].reshape(-1), shape


def _diagonals(matrix, shape: tuple[int, ...]):
    offsets = _index_array(matrix.offsets, "offsets", "dia")
    data = _data(matrix.data, "dia", ndim=2)
    if data.shape[0] != len(offsets):
        raise CorruptTensorError(f"scipy dia data has {data.shape[0]} diagonals but offsets "
                                 f"has {len(offsets)}")
    if len(np.unique(offsets)) != len(offsets):
        raise CorruptTensorError("scipy dia offsets repeat a diagonal")
    # data[d, j] holds A[j - offsets[d], j]: columns below both the data's width and the
    # matrix's, rows inside the matrix.
    width = min(data.shape[1], shape[1])
    col = np.broadcast_to(np.arange(width, dtype=np.int64), (len(offsets), width))
    row = col - offsets[:, None]
    values = data[:, :width]
    inside = (row >= 0) & (row < shape[0]) & (values != 0)  # as scipy's tocoo: no padding
    return np.vstack([row[inside], col[inside]]), values[inside], shape
