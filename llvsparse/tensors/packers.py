"""Packers for named formats whose levels cannot be assembled by a kernel.

DIA and ELL have a storage-only level (the diagonal or slot index) and levels without
insert/append (range, offset), so they are built here from sorted coordinates. Every
format whose levels can be inserted or appended into is packed by a compiled copy kernel
instead, with no code here.
"""

from __future__ import annotations

import numpy as np


def pack_dia(rows, cols, values, shape, index_dtype):
    """Diagonals at offsets j - i; values[d * nrows + i] holds A[i, i + offset[d]]."""
    nrows, ncols = shape
    diag = cols.astype(np.int64) - rows
    offsets = np.unique(diag)
    slot = np.searchsorted(offsets, diag)
    vals = np.zeros(len(offsets) * nrows, dtype=values.dtype)
    np.add.at(vals, slot * nrows + rows, values)
    offset_array = offsets.astype(index_dtype)
    arrays = [{}, {"offset": offset_array}, {"offset": offset_array}]
    return [len(offsets), nrows, ncols], arrays, vals


def _pack_ell(rows, cols, values, shape, index_dtype, row_major: bool):
    """ELLPACK with every row padded to the longest one by explicit zeros at columns the
    row does not store (see ``_padding_columns``)."""
    nrows, ncols = shape
    counts = np.bincount(rows, minlength=nrows) if nrows else np.zeros(0, np.int64)
    width = int(counts.max()) if len(rows) else 0
    slot = np.arange(len(rows)) - (np.cumsum(counts) - counts)[rows]
    crd_by_row = _padding_columns(rows, cols, counts, width)
    crd_by_row[rows, slot] = cols
    vals_by_row = np.zeros((nrows, width), dtype=values.dtype)
    vals_by_row[rows, slot] = values
    order = (lambda a: a.reshape(-1)) if row_major else (lambda a: a.T.reshape(-1))
    crd = order(crd_by_row).astype(index_dtype)
    vals = np.ascontiguousarray(order(vals_by_row))
    extents = [nrows, width, ncols] if row_major else [width, nrows, ncols]
    return extents, [{}, {}, {"crd": crd}], vals


def pack_ell(rows, cols, values, shape, index_dtype):
    """Slot-major ELLPACK (the paper's): entry k of row i at position k * nrows + i."""
    return _pack_ell(rows, cols, values, shape, index_dtype, row_major=False)


def pack_ell_rows(rows, cols, values, shape, index_dtype):
    """Row-major ELLPACK: entry k of row i at position i * width + k. Each row's entries
    are contiguous, so SpMV keeps a row's sum in a register."""
    return _pack_ell(rows, cols, values, shape, index_dtype, row_major=True)


def pack_bcsr(rows, cols, values, shape, index_dtype, block):
    """Block CSR: stored blocks in row-major block order, each block dense and row-major."""
    brows, bcols = block
    nrows, ncols = shape
    if nrows % brows or ncols % bcols:
        raise ValueError(f"shape {shape} is not a multiple of the block shape {block}")
    block_row, block_col = rows // brows, cols // bcols
    keys = block_row * (ncols // bcols) + block_col
    unique_keys, block_of = np.unique(keys, return_inverse=True)
    stored_rows = unique_keys // max(ncols // bcols, 1)
    pos = np.zeros(nrows // brows + 1, dtype=index_dtype)
    np.add.at(pos, stored_rows + 1, 1)
    pos = np.cumsum(pos).astype(index_dtype)
    crd = (unique_keys % max(ncols // bcols, 1)).astype(index_dtype)
    vals = np.zeros(len(unique_keys) * brows * bcols, dtype=values.dtype)
    inside = (rows % brows) * bcols + cols % bcols
    np.add.at(vals, block_of * brows * bcols + inside, values)
    extents = [nrows // brows, ncols // bcols, brows, bcols]
    return extents, [{}, {"pos": pos, "crd": crd}, {}, {}], vals


PACKERS = {"dia": pack_dia, "ell": pack_ell, "ell-rows": pack_ell_rows}


def _padding_columns(rows, cols, counts, width: int) -> np.ndarray:
    """(nrows, width) columns whose last ``width - counts[i]`` slots of row i hold distinct
    columns the row does not store. A padding entry at a stored column (the old column 0)
    was a duplicate that turned ``A(i,0) * x(0)`` into NaN for ``x(0) = inf``; among the
    first ``width`` columns a row stores at most ``counts[i]``, so enough are free."""
    nrows = len(counts)
    stored = np.zeros((nrows, width), dtype=bool)
    low = cols < width
    stored[rows[low], cols[low]] = True
    free = ~stored
    rank = np.cumsum(free, axis=1) - 1  # among the row's free columns
    columns = np.zeros((nrows, width), dtype=np.int64)
    take = free & (rank < (width - counts)[:, None])
    row_of, column = np.nonzero(take)
    columns[row_of, counts[row_of] + rank[row_of, column]] = column
    return columns
