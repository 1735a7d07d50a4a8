"""Tensors to numpy and scipy.sparse, and conversions between scipy-shaped formats.

The generic path walks every level through its YAML functions and sorts the entries:
27.7 ms to return a dense 10^6-vector, 2 s to hand a 5M-entry CSR result to scipy, up to
2.3 s to turn a COO product into CSR. Tensors whose levels are laid out as numpy or
scipy lay out theirs (see layouts.py) skip it: a dense tensor's values are reshaped (a
view), a CSR/CSC/COO tensor's arrays are handed to scipy as they are, and conversions
among CSR, CSC and COO run scipy's own counting sorts.
"""

from __future__ import annotations

import math

import numpy as np

from .layouts import Layout, layout_of
from .made_as import tensor_class
from .value_types import checked_index_dtype

# The scipy format each tensor layout hands its arrays to.
SCIPY_FORMATS = ("csr", "csc", "coo")


def to_numpy(tensor) -> np.ndarray:
    """The tensor as a dense array. A dense-laid-out tensor gives a view of its values
    (writing to it writes the tensor, as ``np.asarray(t.values)`` does); every other
    tensor gives a new array."""
    if tensor.order == 0:
        values = tensor.values
        return np.asarray(values[0] if len(values) else tensor.fill_value, dtype=tensor.dtype)
    layout = layout_of(tensor.tensor_type)
    if layout is not None and layout.kind == "dense":
        view = _dense_view(tensor, layout)
        if view is not None:
            return view
    zero_fill = tensor.fill_value == 0 and tensor.dtype != np.float16  # scipy lacks it
    if zero_fill and layout is not None and layout.kind in SCIPY_FORMATS and \
            _scipy_ready(tensor, layout):
        return _scipy_of(tensor, layout).toarray()
    return _scattered(tensor)


def _dense_view(tensor, layout: Layout) -> np.ndarray | None:
    """The values reshaped to the level extents and transposed to mode order, or None
    where the extents or the values do not match the shape."""
    extents, shape = tensor.level_extents, tensor.shape
    if len(extents) != len(shape) or \
            any(extents[k] != shape[m] for k, m in enumerate(layout.modes)):
        return None
    size = math.prod(extents)
    if len(tensor.values) < size:
        return None
    blocked = tensor.values[:size].reshape(extents)
    axes = layout.transpose
    return blocked if axes is None else blocked.transpose(axes)


def _scattered(tensor) -> np.ndarray:
    """Every stored entry summed into a zero array: one walk, no sort. Repeated
    coordinates (padding, duplicates of a non-unique level) add up, as ``to_coo``'s do."""
    coords, positions = tensor._stored_entries()
    dense = np.zeros(tensor.shape, dtype=tensor.dtype)
    if not len(positions):
        return dense if tensor.fill_value == 0 else np.full_like(dense, tensor.fill_value)
    flat = np.ravel_multi_index(tuple(coords), tensor.shape)
    values = tensor.values[positions]
    if tensor.fill_value != 0:  # NaN included: entries not stored are the fill
        summed = _scattered_with_zero_fill(tensor.shape, flat, values, dense)
        stored = np.zeros(dense.size, dtype=bool)
        stored[flat] = True
        return np.where(stored.reshape(tensor.shape), summed,
                        np.asarray(tensor.fill_value, dtype=tensor.dtype))
    return _scattered_with_zero_fill(tensor.shape, flat, values, dense)


def _scattered_with_zero_fill(shape: tuple[int, ...], flat: np.ndarray, values: np.ndarray,
                              dense: np.ndarray) -> np.ndarray:
    """Entries at flat positions ``flat`` summed into ``dense`` (zeros)."""
    if values.dtype.kind == "f":
        sums = np.bincount(flat, weights=values, minlength=dense.size)
        return sums.astype(dense.dtype, copy=False).reshape(shape)
    target = dense.reshape(-1)
    target[flat] = values
    if np.bincount(flat, minlength=dense.size).max() > 1:  # repeated: add them up
        target[:] = 0
        (np.logical_or if values.dtype == bool else np.add).at(target, flat, values)
    return dense


def _scipy_ready(tensor, layout: Layout, check: bool = True) -> bool:
    """Whether the arrays are where the layout says: extents match the shape and the
    entries start at position 0 (anything else takes the generic path). scipy trusts
    index arrays (an index out of range writes out of bounds), so a tensor not trusted
    as it is (``Tensor._trusted``) is validated first, unless ``check`` is False."""
    if check and not tensor._trusted():
        tensor.validate()
    extents = tensor.level_extents
    if any(extents[k] != tensor.shape[m] for k, m in enumerate(layout.modes)):
        return False
    pos = tensor.level_arrays[0 if layout.kind == "coo" else 1].get("pos")
    return pos is not None and len(pos) and int(pos[0]) == 0 and len(tensor.values) >= pos[-1]


def _scipy_of(tensor, layout: Layout):
    """A scipy matrix on the tensor's own arrays (values and index arrays, no copies)."""
    import scipy.sparse as sp  # loaded on first use: import llvsparse stays light

    arrays = tensor.level_arrays
    if layout.kind == "coo":
        pos = arrays[0]["pos"]
        count = int(pos[-1])
        coords = [arrays[0]["crd"][:count], arrays[1]["crd"][:count]]
        rows, cols = coords if layout.modes == (0, 1) else coords[::-1]
        matrix = sp.coo_matrix(tensor.shape, dtype=tensor.dtype)
        if hasattr(matrix, "coords") and rows.dtype == np.int64:  # as stored, no downcast
            matrix.coords, matrix.data = (rows, cols), tensor.values[:count]
        else:
            matrix = sp.coo_matrix((tensor.values[:count], (rows, cols)), shape=tensor.shape)
        if layout.canonical:
            matrix.has_canonical_format = True
        return matrix
    pos, crd = arrays[1]["pos"], arrays[1]["crd"]
    count = int(pos[-1])
    kind = sp.csr_matrix if layout.kind == "csr" else sp.csc_matrix
    matrix = kind(tensor.shape, dtype=tensor.dtype)
    # Set rather than passed to the constructor, which narrows int64 indices by a copy.
    matrix.data, matrix.indices, matrix.indptr = tensor.values[:count], crd[:count], pos
    matrix.check_format(full_check=False)
    matrix.has_sorted_indices = layout.canonical
    if layout.canonical:
        matrix.has_canonical_format = True
    return matrix


def to_scipy(tensor, format: str = "csr"):
    """A scipy.sparse matrix. A CSR, CSC or COO tensor's arrays are handed over
    (shared: its values are the tensor's, its index arrays read-only where the
    tensor's are), then converted by scipy if ``format`` is another."""
    import scipy.sparse as sp  # loaded on first use: import llvsparse stays light

    if tensor.order != 2:
        raise ValueError("to_scipy needs a matrix")
    if tensor.fill_value != 0:
        raise ValueError(f"to_scipy needs fill value 0, and this tensor's is "
                         f"{tensor.fill_value}: scipy.sparse reads entries not stored as 0 "
                         "(use to_numpy, or to_coo for the stored entries)")
    layout = layout_of(tensor.tensor_type)
    if layout is not None and layout.kind in SCIPY_FORMATS and _scipy_ready(tensor, layout):
        return _scipy_of(tensor, layout).asformat(format)
    coords, positions = tensor._stored_entries()
    values = tensor.values[positions] if len(positions) else tensor.values[:0]
    # scipy's COO-to-CSR sums repeated coordinates and sorts: the canonical entries.
    matrix = sp.coo_matrix((values, (coords[0], coords[1])), shape=tensor.shape).tocsr()
    matrix.sum_duplicates()
    return matrix.asformat(format)


def scipy_pair(tensor, fmt) -> tuple[Layout, Layout] | None:
    """The layouts of ``tensor`` and of ``fmt`` where both are CSR, CSC or COO matrices
    (by their levels) and the tensor's arrays are where its layout says; None otherwise.
    The caller validates the tensor first where it must."""
    if tensor.order != 2 or tensor.dtype == np.float16:  # a dtype scipy.sparse refuses
        return None
    source = layout_of(tensor.tensor_type)
    target = layout_of(fmt.tensor_type(tensor.dtype.name, tensor.index_dtype.name))
    if source is None or target is None or source.kind not in SCIPY_FORMATS \
            or target.kind not in SCIPY_FORMATS or not _scipy_ready(tensor, source, False):
        return None
    return source, target


def scipy_conversion(tensor, fmt, source: Layout, target: Layout, positions: bool = False):
    """``tensor`` in ``fmt`` by scipy's conversions (layouts from ``scipy_pair``), with
    fresh arrays of the tensor's index dtype in canonical order (which satisfies any
    weaker claims of ``fmt``). ``positions``: the values are where each entry's value
    is in the tensor (int64; for a canonical source, whose entries are not summed)."""
    matrix = _scipy_of(tensor, source)
    if positions:
        matrix.data = np.arange(len(matrix.data), dtype=np.int64)
    order = "csc" if target.modes == (1, 0) else "csr"
    converted = matrix.asformat(order)
    converted = converted.copy() if converted is matrix else converted
    converted.sum_duplicates()  # sorts each segment and adds up repeats, in place
    return _wrapped(tensor.shape, tensor.index_dtype, tensor.name, fmt, target, converted)


def adopt_scipy(matrix, fmt, index_dtype=None):
    """A Tensor of ``fmt`` on the arrays of ``matrix``, a scipy CSR or CSC matrix whose
    arrays were checked (``check_format(full_check=True)``) and that nothing else holds
    (its arrays become the tensor's, read-only); None where ``fmt`` does not lay
    entries out as ``matrix`` does or the matrix is not canonical. Packing it instead
    went through coordinates: 0.44 s for 4M entries that scipy loaded in 0.09 s."""
    idx = checked_index_dtype(index_dtype, *matrix.shape, matrix.nnz)
    target = layout_of(fmt.tensor_type(matrix.dtype.name, idx.name))
    if target is None or target.kind != matrix.format or not target.canonical \
            or not matrix.has_canonical_format:
        return None
    return _wrapped(tuple(matrix.shape), idx, None, fmt, target, matrix)


def _wrapped(shape: tuple[int, ...], idx: np.dtype, name: str | None, fmt, target: Layout,
             matrix):
    """A sealed, validated Tensor on a canonical scipy matrix's arrays."""
    pos = matrix.indptr.astype(idx, copy=False)
    crd = matrix.indices.astype(idx, copy=False)
    extents = [shape[m] for m in target.modes]
    if target.kind == "coo":
        outer = np.repeat(np.arange(len(pos) - 1, dtype=idx), np.diff(pos))
        arrays = [{"pos": np.array([0, len(crd)], dtype=idx), "crd": outer}, {"crd": crd}]
    else:
        arrays = [{}, {"pos": pos, "crd": crd}]
    values = np.ascontiguousarray(matrix.data)
    return tensor_class()(shape, fmt, values.dtype, idx, extents, arrays,
                          [{} for _ in fmt.levels], values, name=name)._seal()._mark_valid()
