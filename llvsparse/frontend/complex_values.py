"""Complex tensors computed by exact routes over the compiler's real kernels.

The compiler has no complex arithmetic, so complex values are stored and converted, and
computed two ways. A pointwise function (``+``, ``*``, ``np.exp``, comparisons, ...) is
numpy's on the stored entries and the fill (ufuncs.on_entries: paper 004's rule, applied
by numpy itself). A product (matmul, dot, tensordot, einsum of two operands) is
bilinear, so it is four real ones, each a kernel:
``(Ar + i Ai)(Br + i Bi) = (Ar Br - Ai Bi) + i (Ar Bi + Ai Br)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor
from . import entry_reductions
from .lazy_compute import compute_node
from .lazy_nodes import NodeHolder, as_node
from .ufuncs import aligned, named_format


def is_complex(value: object) -> bool:
    """Whether ``value`` (a tensor, an array, a number) holds complex values."""
    if isinstance(value, complex):
        return True
    dtype = getattr(value, "dtype", None)
    return dtype is not None and np.dtype(dtype).kind == "c"


def any_complex(values) -> bool:
    return any(is_complex(v) for v in values)


def _computed(value: object) -> object:
    return compute_node(as_node(value)) if isinstance(value, (StoredTensor, NodeHolder)) else value


def _part(tensor: StoredTensor, values: np.ndarray, fill: float) -> StoredTensor:
    """``tensor``'s entries with other (real) values: the same index arrays."""
    return tensor_class()(tensor.shape, tensor.format.with_fill(fill), values.dtype,
                          tensor.index_dtype, tensor.level_extents, tensor.level_arrays,
                          tensor.params, values, name=tensor.name)


def parts(value: object) -> tuple[object, object]:
    """The real and imaginary parts of a complex tensor, array or number."""
    value = _computed(value)
    if isinstance(value, StoredTensor):
        fill = complex(value.fill_value)
        return (_part(value, np.ascontiguousarray(value.values.real), fill.real),
                _part(value, np.ascontiguousarray(value.values.imag), fill.imag))
    array = np.asarray(value)
    return array.real, array.imag


def combined(real: object, imag: object, dtype: np.dtype) -> object:
    """The complex values ``real + i imag`` of two results of one shape, exactly (no
    products by ``1j``, which turn an infinite part into NaN)."""
    if not isinstance(real, StoredTensor) and not isinstance(imag, StoredTensor):
        out = np.empty(np.shape(real), dtype)
        out.real, out.imag = real, imag
        return out
    real, imag = (x if isinstance(x, StoredTensor) else tensor_class().from_numpy(np.asarray(x))
                  for x in (real, imag))
    if real.order == 0:  # a full reduction's: a 0-d tensor
        return tensor_class().from_numpy(combined(np.asarray(real), np.asarray(imag), dtype))
    coords, columns = aligned([real, imag])
    values = np.empty(coords.shape[1], dtype)
    values.real, values.imag = columns[id(real)], columns[id(imag)]
    fill = complex(real.fill_value, imag.fill_value)
    return tensor_class().from_coo(coords, values, real.shape, named_format(real), dtype=dtype,
                                   fill=fill if fill.imag else fill.real)


def bilinear(product: Callable[[object, object], object], a: object, b: object) -> object:
    """``product(a, b)`` for a product linear in each operand, complex ones included."""
    dtype = np.result_type(getattr(a, "dtype", np.asarray(a).dtype),
                           getattr(b, "dtype", np.asarray(b).dtype))
    if dtype.kind != "c":
        return product(a, b)
    if not is_complex(b):
        ar, ai = parts(a)
        return combined(product(ar, b), product(ai, b), dtype)
    if not is_complex(a):
        br, bi = parts(b)
        return combined(product(a, br), product(a, bi), dtype)
    (ar, ai), (br, bi) = parts(a), parts(b)
    return combined(product(ar, br) - product(ai, bi), product(ar, bi) + product(ai, br),
                    dtype)


def multilinear(product: Callable[..., object], operands: list) -> object:
    """``product(*operands)`` for a product linear in each operand (an einsum): split
    at the first complex operand, the two halves joined by numpy's complex arithmetic
    on the stored entries."""
    k = next((k for k, x in enumerate(operands) if is_complex(x)), None)
    if k is None:
        return product(*operands)
    if len(operands) == 2:
        return bilinear(product, *operands)
    real_k, imag_k = parts(operands[k])
    real = multilinear(product, [*operands[:k], real_k, *operands[k + 1:]])
    imag = multilinear(product, [*operands[:k], imag_k, *operands[k + 1:]])
    dtype = np.result_type(*(getattr(x, "dtype", np.asarray(x).dtype) for x in operands))
    if not is_complex(real) and not is_complex(imag):
        return combined(real, imag, dtype)
    return real + imag * 1j


def reduction(value: object, name: str, axis, keepdims: bool) -> object:
    """numpy's reduction ``name`` of a complex tensor: a sum by parts (it is linear), a
    product on the stored entries and the fill, any/all of ``!= 0``; max and min (numpy
    orders complex values lexicographically) are refused."""
    if name == "sum":
        real, imag = parts(value)
        return combined(real.sum(axis, keepdims=keepdims), imag.sum(axis, keepdims=keepdims),
                        value.dtype)
    if name == "prod":
        return entry_reductions.prod(value, axis, None, keepdims)
    if name in ("any", "all"):
        return getattr(value != 0, name)(axis=axis, keepdims=keepdims)
    raise TypeError(f"{name} of complex values is not supported (numpy orders them "
                    "lexicographically; compare np.real and np.imag)")
