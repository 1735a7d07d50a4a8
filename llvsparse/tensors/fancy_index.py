"""numpy's indexing beyond views: integer and boolean arrays, ``None``, negative steps.

Views (views.py) cover integers, slices with positive steps and ``...`` without a copy.
Any other key numpy takes is computed here on the stored entries, as a copy: each
dimension's key maps the entries' coordinates (a slice by arithmetic, an integer by
selection), and the advanced indices (arrays, and integers next to them) are joined
against the entries' coordinates in those dimensions, an entry appearing once per index
position naming it. The result is COO with the tensor's fill, and its dimensions are
where numpy puts them: the broadcast index shape replaces adjacent advanced indices, or
comes first where a slice, ``None`` or ``...`` separates them.
"""

from __future__ import annotations

import operator

import numpy as np

from ..ir.notation.syntax import AffineIndex, IndexVar
from .made_as import tensor_class
from .tensor import StoredTensor


def is_index_key(indices) -> bool:
    """Whether ``indices`` is meant as a numpy index: it names no index variable of
    index notation, plain or in an affine subscript (a key numpy refuses is refused
    here, naming the element)."""
    keys = indices if isinstance(indices, tuple) else (indices,)
    return not any(isinstance(k, (IndexVar, AffineIndex)) for k in keys)


def _array(key, position: int) -> np.ndarray | None:
    """An array-like key as an integer or bool array (None for any other key)."""
    if isinstance(key, (bool, np.bool_)):
        return np.asarray(key)
    if isinstance(key, (int, np.integer)):
        return None
    if not isinstance(key, (list, np.ndarray)) and not hasattr(key, "__array__"):
        return None
    array = np.asarray(key)
    if array.size == 0 and array.dtype.kind not in "b":
        array = array.astype(np.int64)
    if array.dtype.kind not in "biu":
        raise IndexError(f"index {position} ({key!r}): arrays used as indices must be of "
                         f"integer or boolean type, not {array.dtype}")
    return array


def _normalized(indices, shape: tuple[int, ...]) -> list:
    """The key as one entry per tensor dimension or ``None``: ``...`` spelled out,
    boolean arrays as the integer arrays of their true positions, integers checked."""
    keys = list(indices) if isinstance(indices, tuple) else [indices]
    if sum(k is Ellipsis for k in keys) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    expanded: list = []
    for n, key in enumerate(keys):
        array = _array(key, n)
        if array is not None and array.dtype == bool:
            expanded.append(("bool", array, n))
        elif array is not None:
            expanded.append(("int", array, n))
        elif key is None or key is Ellipsis or isinstance(key, slice):
            expanded.append(key)
        else:
            try:
                expanded.append(("scalar", operator.index(key), n))
            except TypeError:
                raise IndexError(f"index {n} ({key!r}): only integers, slices, '...', "
                                 "None and integer or boolean arrays are valid indices"
                                 ) from None
    used = sum(k[1].ndim if isinstance(k, tuple) and k[0] == "bool" else
               0 if k is None or k is Ellipsis else 1 for k in expanded)
    if used > len(shape):
        raise IndexError(f"too many indices: the tensor has {len(shape)} dimensions but "
                         f"{used} were indexed")
    if Ellipsis in expanded:
        at = expanded.index(Ellipsis)
        # numpy reads advanced indices on either side of a '...' as separated, even
        # where it stands for no dimension: a gap keeps them apart.
        expanded[at:at + 1] = [slice(None)] * (len(shape) - used) or [("gap", None, None)]
    else:
        expanded += [slice(None)] * (len(shape) - used)
    result, dim = [], 0
    for key in expanded:
        if isinstance(key, tuple) and key[0] == "gap":
            result.append(key)
        elif isinstance(key, tuple) and key[0] == "bool":
            _, mask, n = key
            extents = shape[dim:dim + mask.ndim]
            if mask.shape != extents:
                raise IndexError(f"index {n}: a boolean index of shape {mask.shape} does not "
                                 f"match the indexed dimensions' shape {extents}")
            result += [("int", a, n) for a in np.nonzero(mask)] if mask.ndim else \
                [("mask", mask, n)]
            dim += mask.ndim
        elif isinstance(key, tuple):
            kind, value, n = key
            array = np.asarray(value)
            extent = shape[dim]
            if array.size and (array.min() < -extent or array.max() >= extent):
                bad = array[(array < -extent) | (array >= extent)].flat[0]
                raise IndexError(f"index {n}: {bad} is out of bounds for dimension {dim} "
                                 f"of extent {extent}")
            result.append((kind, array.astype(np.int64) % max(extent, 1), n))
            dim += 1
        else:
            result.append(key)
            dim += key is not None
    return result


def _consumes(key) -> bool:
    """Whether a normalized key indexes a dimension of the tensor (None, a 0-d mask
    and a gap add one or none)."""
    return not (key is None or isinstance(key, tuple) and key[0] in ("mask", "gap"))


def getitem(tensor: StoredTensor, indices) -> object:
    """``tensor[indices]`` as numpy gives it, computed on the stored entries (a COO
    tensor, or the entry itself where every dimension is indexed by an integer)."""
    keys = _normalized(indices, tensor.shape)
    coords, values = tensor.to_coo()
    keep = np.ones(len(values), bool)
    advanced = [k for k, key in enumerate(keys) if isinstance(key, tuple)
                and key[0] in ("int", "scalar")]
    has_arrays = any(keys[k][0] == "int" for k in advanced)
    # Per result dimension before the join: (kind, coordinate per entry, extent).
    columns: list[tuple[str, np.ndarray | None, int]] = []
    dim = 0
    for key in keys:
        if not _consumes(key):
            if isinstance(key, tuple) and key[0] == "gap":
                continue
            # None, or a 0-d mask: a new dimension of 1 (True) or 0 (False)
            size = 1 if key is None or bool(key[1]) else 0
            keep &= size == 1
            columns.append(("new", None, size))
            continue
        c = coords[dim]
        if isinstance(key, slice):
            start, stop, step = key.indices(tensor.shape[dim])
            count = len(range(start, stop, step))
            offset = c - start
            position = offset // step
            keep &= (offset % step == 0) & (position >= 0) & (position < count)
            columns.append(("coord", position, count))
        elif key[0] == "scalar" and not has_arrays:
            keep &= c == key[1]
        else:
            columns.append(("adv", None, 0))
        dim += 1
    coords, values = coords[:, keep], values[keep]
    columns = [(kind, None if c is None else c[keep], n) for kind, c, n in columns]
    if not has_arrays:
        return _built(tensor, [(c, n) for _, c, n in columns], values)
    return _joined(tensor, keys, advanced, coords, values, columns)


def _joined(tensor: StoredTensor, keys: list, advanced: list[int], coords: np.ndarray,
            values: np.ndarray, columns: list) -> object:
    """The advanced indices joined against the entries: an entry appears once for every
    position of the broadcast index arrays that names its coordinates."""
    arrays = np.broadcast_arrays(*[np.asarray(keys[k][1]) for k in advanced])
    index_shape = arrays[0].shape
    dims = [sum(map(_consumes, keys[:k])) for k in advanced]
    extents = [tensor.shape[d] for d in dims]
    wanted = np.ravel_multi_index([a.ravel() for a in arrays], extents) if extents else \
        np.zeros(arrays[0].size, np.int64)
    have = np.ravel_multi_index([coords[d] for d in dims], extents)
    order = np.argsort(wanted, kind="stable")
    lo = np.searchsorted(wanted[order], have, "left")
    hi = np.searchsorted(wanted[order], have, "right")
    counts = hi - lo
    entry = np.repeat(np.arange(len(values)), counts)
    starts = np.repeat(lo - np.cumsum(counts) + counts, counts)
    flat = order[np.arange(len(entry)) + starts]  # each match's index position
    index_coords = np.unravel_index(flat, index_shape) if index_shape else ()
    adjacent = advanced == list(range(advanced[0], advanced[-1] + 1))
    index_dims = list(zip(index_coords, index_shape))
    out = [] if adjacent else list(index_dims)  # separated: the index dimensions first
    placed = not adjacent
    for kind, column, count in columns:
        if kind != "adv":
            out.append((None if column is None else column[entry], count))
        elif not placed:
            out += index_dims
            placed = True
    return _built(tensor, out, values[entry])


def _built(tensor: StoredTensor, dims: list, values: np.ndarray) -> object:
    """A COO tensor of the given (coordinate per entry, extent) dimensions (None: a new
    dimension, coordinate 0); the entry itself where there are no dimensions."""
    shape = tuple(int(n) for _, n in dims)
    count = len(values)
    if not shape:
        return values[0] if count else np.asarray(tensor.fill_value, tensor.dtype)[()]
    coords = np.array([np.zeros(count, np.int64) if c is None else c for c, _ in dims],
                      np.int64).reshape(len(dims), count)
    return tensor_class().from_coo(coords, values, shape, "coo", dtype=tensor.dtype,
                                   fill=tensor.fill_value)
