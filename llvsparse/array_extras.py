"""numpy's take, pad and vecdot on tensors, by the operations they are made of.

``take`` is an integer-array index (fancy_index.py), ``pad`` moves the stored entries
(the padding holds the fill, so a constant other than the fill is refused, as
pydata/sparse refuses it), and ``vecdot`` is a conjugated product summed over one axis,
computed by the kernels (or the complex routes) the operators use.
"""

from __future__ import annotations

import operator

import numpy as np

from .lazy_tensor import normalize_axis
from .shape_ops import moveaxis, reshape, tensor_of
from .tensor import Tensor


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


def pad(array: object, pad_width: object, mode: str = "constant", **kwargs) -> Tensor:
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
    return Tensor.from_coo(coords + widths[:, :1], values, shape, "coo", dtype=tensor.dtype,
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
