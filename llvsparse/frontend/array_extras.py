"""numpy's take, pad and vecdot on tensors, by the operations they are made of.

``take`` is an integer-array index (fancy_index.py), ``pad`` moves the stored entries
(the padding holds the fill, so a constant other than the fill is refused, as
pydata/sparse refuses it), and ``vecdot`` is a conjugated product summed over one axis,
computed by the kernels (or the complex routes) the operators use.
"""

from __future__ import annotations

import operator

import numpy as np

from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor
from .lazy_nodes import normalize_axis
from .shape_ops import moveaxis, reshape, tensor_of


def take(a: object, indices: object, axis=None, out=None, mode: str = "raise") -> object:
    """numpy's take: entries at ``indices`` along ``axis`` (of the flattened tensor
    where None); a COO tensor."""
    if out is not None or mode != "raise":
        raise TypeError("np.take: out= and mode= other than 'raise' are not supported")
    tensor = tensor_of(a, "take")
    if axis is None:
        return reshape(tensor, -1)[np.asarray(indices)]
    axis = normalize_axis(axis, tensor.order)
    return tensor[(slice(None),) * axis + (np.asarray(indices),)]


def _pad_widths(pad_width: object, ndim: int) -> np.ndarray:
    """numpy's pad_width (an int, a pair, or a pair per dimension) as (ndim, 2) ints."""
    widths = np.asarray(pad_width)
    if widths.dtype.kind not in "iu":
        raise TypeError(f"pad_width must be integers, not {pad_width!r}")
    try:
        widths = np.broadcast_to(widths, (ndim, 2))
    except ValueError:
        raise ValueError(f"pad_width {pad_width!r} does not fit {ndim} dimensions") from None
    if (widths < 0).any():
        raise ValueError(f"pad_width {pad_width!r} has a negative width")
    return widths.astype(np.int64)


def pad(array: object, pad_width: object, mode: str = "constant", **kwargs) -> StoredTensor:
    """numpy's constant pad: the stored entries moved by the leading widths. The padding
    holds the fill, so ``constant_values`` must equal it (pydata/sparse's rule)."""
    if mode != "constant":
        raise NotImplementedError(f"np.pad mode {mode!r}: only 'constant' is supported")
    unknown = sorted(set(kwargs) - {"constant_values"})
    if unknown:
        raise TypeError(f"np.pad: {', '.join(unknown)}= is not supported")
    tensor = tensor_of(array, "pad")
    constant = kwargs.get("constant_values", 0)
    if np.ndim(constant) != 0:
        raise ValueError("constant_values can only be one number, equal to the fill value")
    same = constant == tensor.fill_value or (np.isnan(constant) and np.isnan(tensor.fill_value))
    if not same:
        raise ValueError(f"constant_values ({constant}) must equal the fill value "
                         f"({tensor.fill_value}): the padding holds the fill")
    widths = _pad_widths(pad_width, tensor.order)
    coords, values = tensor.to_coo()
    shape = tuple(int(n + before + after) for n, (before, after) in zip(tensor.shape, widths))
    return tensor_class().from_coo(coords + widths[:, :1], values, shape, "coo", dtype=tensor.dtype,
                                   fill=tensor.fill_value)


def vecdot(x1: object, x2: object, axis: int = -1) -> object:
    """numpy's vecdot: ``sum(conj(x1) * x2)`` over ``axis`` of each operand, the other
    dimensions broadcast."""
    axis = operator.index(axis)
    a, b = tensor_of(x1, "vecdot"), tensor_of(x2, "vecdot")
    a = moveaxis(a, normalize_axis(axis, a.order), -1)
    b = moveaxis(b, normalize_axis(axis, b.order), -1)
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"vecdot: the summed dimensions differ ({a.shape[-1]} and "
                         f"{b.shape[-1]})")
    if a.dtype.kind == "c":
        a = np.conjugate(a)
    return (a * b).sum(axis=-1)


def flip(m: object, axis=None) -> object:
    """numpy's flip: reversed along ``axis`` (every axis where None), a COO copy."""
    tensor = tensor_of(m, "flip")
    axes = range(tensor.order) if axis is None else \
        [normalize_axis(a, tensor.order) for a in np.atleast_1d(axis)]
    key = [slice(None)] * tensor.order
    for a in axes:
        key[a] = slice(None, None, -1)
    return tensor[tuple(key)]


def _triangle(m: object, k: int, upper: bool) -> StoredTensor:
    """The entries on and above (``upper``) or below diagonal ``k`` of the last two axes;
    the others become 0, so the fill must be 0 (pydata/sparse's rule)."""
    tensor = tensor_of(m, "triu" if upper else "tril")
    if tensor.order < 2:
        raise ValueError("triu/tril need at least two dimensions")
    if tensor.fill_value != 0:
        raise ValueError(f"triu/tril zero the other entries; this tensor's fill value is "
                         f"{tensor.fill_value}, not 0")
    coords, values = tensor.to_coo()
    offset = coords[-1] - coords[-2]
    keep = offset >= k if upper else offset <= k
    return tensor_class().from_coo(coords[:, keep], values[keep], tensor.shape, "coo",
                                   dtype=tensor.dtype)


def triu(m: object, k: int = 0) -> StoredTensor:
    return _triangle(m, operator.index(k), True)


def tril(m: object, k: int = 0) -> StoredTensor:
    return _triangle(m, operator.index(k), False)


def kron(a: object, b: object) -> StoredTensor:
    """numpy's kron: every pair of stored entries, at ``coords_a * shape_b + coords_b``
    (the fewer dimensions padded with leading ones). Both fills must be 0: a product
    with an entry not stored is then 0 too."""
    left, right = tensor_of(a, "kron"), tensor_of(b, "kron")
    if left.fill_value != 0 or right.fill_value != 0:
        raise ValueError("kron needs fill value 0 on both operands (each product with an "
                         "entry not stored must be the fill)")
    order = max(left.order, right.order)
    (ca, va), (cb, vb) = left.to_coo(), right.to_coo()
    ca = np.concatenate([np.zeros((order - left.order, len(va)), np.int64), ca])
    cb = np.concatenate([np.zeros((order - right.order, len(vb)), np.int64), cb])
    shape_a = (1,) * (order - left.order) + left.shape
    shape_b = np.array((1,) * (order - right.order) + right.shape, np.int64)
    coords = (ca[:, :, None] * shape_b[:, None, None] + cb[:, None, :]).reshape(order, -1)
    values = np.multiply.outer(va, vb).ravel()
    shape = tuple(int(x) for x in np.array(shape_a) * shape_b)
    return tensor_class().from_coo(coords, values, shape, "coo", dtype=values.dtype)


def outer(ufunc: np.ufunc, a: object, b: object) -> object:
    """``ufunc.outer(a, b)``: ``a`` given ``b``'s dimensions as trailing ones, broadcast."""
    left, right = tensor_of(a, "outer"), tensor_of(b, "outer")
    return ufunc(reshape(left, left.shape + (1,) * right.order), right)


def rounded(a: object, decimals: int = 0) -> StoredTensor:
    """numpy's round on the stored values and the fill (same entries, same format)."""
    tensor = tensor_of(a, "round")
    fill = np.round(np.asarray(tensor.fill_value, tensor.dtype), decimals).item()
    return tensor_class()(tensor.shape, tensor.format.with_fill(fill), tensor.dtype,
                          tensor.index_dtype, tensor.level_extents, tensor.level_arrays,
                          tensor.params, np.round(tensor.values, decimals))


def matrix_transpose(x: object) -> object:
    """The last two axes swapped (numpy's ``matrix_transpose``, ``.mT``)."""
    tensor = tensor_of(x, "matrix_transpose")
    if tensor.order < 2:
        raise ValueError("matrix_transpose needs at least two dimensions")
    return moveaxis(tensor, -1, -2)


def _distinct(x: object, what: str) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values and their counts, the fill counted once per entry not
    stored; NaN values each distinct, as numpy's unique_values keeps them (so a NaN
    fill is one value per entry not stored)."""
    tensor = tensor_of(x, what)
    _, values = tensor.to_coo()
    unstored = tensor.size - len(values)
    fill = np.asarray([tensor.fill_value], tensor.dtype)
    nan_fill = tensor.dtype.kind in "fc" and bool(np.isnan(fill[0]))
    if nan_fill and unstored > 10**8:
        raise ValueError(f"{what}: {unstored} entries not stored hold NaN, each a distinct "
                         "value: too many to list")
    if unstored:
        values = np.concatenate([values, np.repeat(fill, unstored if nan_fill else 1)])
    distinct, inverse, counts = np.unique(values, return_inverse=True, return_counts=True,
                                          equal_nan=False)
    if unstored and not nan_fill:
        counts[inverse[-1]] += unstored - 1
    return distinct, counts


def unique_values(x: object) -> np.ndarray:
    return _distinct(x, "unique_values")[0]


def unique_counts(x: object) -> tuple[np.ndarray, np.ndarray]:
    return _distinct(x, "unique_counts")


def repeat(a: object, repeats: object, axis=None) -> StoredTensor:
    """numpy's repeat by one count: each entry at ``c`` along ``axis`` (of the flattened
    tensor where None) stored at ``c * repeats + k`` for every ``k < repeats``."""
    if np.ndim(repeats) != 0:
        raise ValueError("repeat: repeats must be an integer (one count for every entry)")
    count = operator.index(repeats)
    if count < 0:
        raise ValueError(f"repeat: repeats must not be negative, not {count}")
    tensor = tensor_of(a, "repeat")
    if axis is None:
        tensor, axis = reshape(tensor, -1), 0
    axis = normalize_axis(axis, tensor.order)
    coords, values = tensor.to_coo()
    coords = np.repeat(coords, count, axis=1)
    coords[axis] = coords[axis] * count + np.tile(np.arange(count), len(values))
    shape = tuple(n * count if k == axis else n for k, n in enumerate(tensor.shape))
    return tensor_class().from_coo(coords, np.repeat(values, count), shape, "coo",
                                   dtype=tensor.dtype, fill=tensor.fill_value)


def diff(a: object, n: int = 1, axis: int = -1, prepend=None, append=None) -> object:
    """numpy's diff: ``n`` times the difference of neighbours along ``axis`` (two views
    of the tensor subtracted), after ``prepend`` and ``append`` are joined on."""
    tensor = tensor_of(a, "diff")
    axis = normalize_axis(axis, tensor.order)
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative, not {n}")
    parts = []
    for extra in (prepend, tensor, append):
        if extra is None:
            continue
        if np.ndim(extra) == 0 and not isinstance(extra, StoredTensor):
            shape = tuple(1 if k == axis else e for k, e in enumerate(tensor.shape))
            extra = np.broadcast_to(np.asarray(extra), shape)
        parts.append(extra)
    result = np.concatenate(parts, axis=axis) if len(parts) > 1 else tensor
    for _ in range(n):
        head = [slice(None)] * result.ndim
        tail = list(head)
        head[axis], tail[axis] = slice(1, None), slice(None, -1)
        result = result[tuple(head)] - result[tuple(tail)]
    return result
