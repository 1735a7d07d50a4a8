"""numpy's functions on tensors (``np.dot``, ``np.einsum``, ``np.concatenate``, ...):
the handlers ``__array_function__`` dispatches to (numpy_dispatch.NumpyArray).

A function missing from ``handlers()`` raises numpy's TypeError naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

from ..notation.einsum_forms import expanded, pairwise, sublists_to_string
from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor
from . import array_extras, entry_functions, entry_reductions, lazy_products, shape_ops, sorting
from .complex_values import any_complex, bilinear, multilinear
from .lazy_nodes import NodeHolder, as_node
from .lazy_ops import apply
from .numpy_protocols import ArrayOps, _cast, _no_options, finish
from .tensor_assign import in_dtype, replace_entries


def _nan_reduction(name: str) -> Callable:
    def call(a, axis=None, dtype=None, out=None, keepdims=False, **options):
        _no_options(f"np.{name}", out=out, **options)
        return getattr(entry_reductions, name)(a, axis, dtype, keepdims)
    return call


def _nodes(*values):
    nodes = [as_node(v) for v in values]
    if any(n is None for n in nodes):
        bad = next(v for v, n in zip(values, nodes) if n is None)
        raise TypeError(f"cannot use a {type(bad).__name__} as a tensor operand")
    return nodes


def product_result(result: object, operands: tuple, return_type: object = None) -> object:
    """A product's result as pydata/sparse gives it: an ndarray where an operand is one,
    else a tensor. ``return_type`` (pydata's option of ``tensordot``) asks for one:
    ``np.ndarray``, or a sparse kind (a format name, or a class named after one, such
    as pydata's ``COO`` and ``GCXS``)."""
    if isinstance(result, NodeHolder):
        return result
    if return_type is None:
        dense = any(isinstance(x, np.ndarray) for x in operands)
        return result.to_numpy() if dense and isinstance(result, StoredTensor) else result
    if return_type is np.ndarray:
        return result.to_numpy() if isinstance(result, StoredTensor) else np.asarray(result)
    name = return_type if isinstance(return_type, str) else \
        getattr(return_type, "__name__", None)
    if not isinstance(name, str) or name.lower() not in ("coo", "gcxs", "csr", "csc",
                                                         "csf", "dense"):
        raise TypeError(f"return_type must be None, np.ndarray or a sparse kind (a format "
                        f"name, COO or GCXS), not {return_type!r}")
    tensor = result if isinstance(result, StoredTensor) else \
        tensor_class().from_numpy(np.asarray(result))
    return tensor.asformat(name.lower()) if tensor.order else tensor


def dot(a, b, out=None):
    """``np.dot``: an ndarray where an operand is one (``product_result``)."""
    _no_options("np.dot", out=out)
    if any_complex((a, b)):
        return bilinear(dot, a, b)
    return product_result(finish(lazy_products.dot(*_nodes(a, b)), (a, b)), (a, b))


def tensordot(a, b, axes=2, *, return_type=None):
    """``np.tensordot``, with pydata/sparse's ``return_type=`` (``product_result``)."""
    if any_complex((a, b)):
        result = bilinear(lambda x, y: tensordot(x, y, axes), a, b)
    else:
        result = finish(lazy_products.tensordot(*_nodes(a, b), axes), (a, b))
    return product_result(result, (a, b), return_type)


def _einsum(*args, out=None, dtype=None, optimize=False, **options):
    """numpy's einsum, string or sublist form; more than two operands whose storage
    orders conflict in one kernel are contracted pairwise (einsum_forms.pairwise)."""
    _no_options("np.einsum", out=out, **options)
    from ..ir.errors import ScheduleError  # loads the compiler, on first use as above

    subscripts, operands = (args[0], list(args[1:])) if isinstance(args[0], str) \
        else sublists_to_string(args)
    if any_complex(operands):
        return multilinear(lambda *xs: _einsum(subscripts, *xs, dtype=dtype), operands)
    try:
        result = finish(lazy_products.einsum(subscripts, *operands), tuple(operands))
    except ScheduleError:
        if len(operands) <= 2 or any(isinstance(x, NodeHolder) for x in operands):
            raise
        terms, output = expanded(subscripts, [np.shape(x) for x in operands])
        result, term = operands[0], terms[0]
        for _, k, letters in pairwise(terms, output):
            result = finish(lazy_products.einsum(f"{term},{terms[k]}->{letters}", result,
                                                 operands[k]), (result, operands[k]))
            term = letters
    return result if dtype is None else _cast(result, dtype)


def _reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    return shape_ops.reshape(a, newshape if shape is None else shape, order)


def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    _no_options("np.concatenate", out=out)
    result = shape_ops.concatenate(arrays, axis)
    return result if dtype is None else result.astype(dtype)


def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    _no_options("np.stack", out=out)
    result = shape_ops.stack(arrays, axis)
    return result if dtype is None else result.astype(dtype)


def _where(condition, x=None, y=None):
    if x is None and y is None:  # np.where(c): the coordinates of nonzeros
        return tuple(np.nonzero(np.asarray(condition)))
    return finish(apply("where", condition, x, y), (condition, x, y))


def _on_dense(function: Callable) -> Callable:
    """``function`` on the operands' dense values (comparisons of results)."""
    def call(*args, **kwargs):
        dense = [np.asarray(a) if isinstance(a, ArrayOps) else a for a in args]
        return function._implementation(*dense, **kwargs)
    return call


def _method(name: str) -> Callable:
    def call(a, *args, **kwargs):
        return getattr(a, name)(*args, **kwargs)
    return call


def written_into(out: object, result: object, what: str) -> object:
    """``result`` written into ``out=`` (one Tensor, not a view), which then holds it in
    its own dtype (numpy's same_kind casting), as numpy's in-place ufuncs do."""
    target = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if type(target) is not tensor_class():
        raise TypeError(f"{what}(..., out=): out must be one Tensor (not a view or a "
                        f"{type(target).__name__})")
    value = result if isinstance(result, StoredTensor) else \
        tensor_class().from_numpy(np.asarray(result))
    if value.shape != target.shape:
        raise ValueError(f"{what}(..., out=): the result has shape {value.shape}, out "
                         f"has {target.shape}")
    return replace_entries(target, in_dtype(value, target.dtype, f"{what}(..., out=): cannot "
                                            f"cast the {value.dtype} result to out's "
                                            f"{target.dtype}"))


def _round(a, decimals=0, out=None):
    result = array_extras.rounded(a, decimals)
    return result if out is None else written_into(out, result, "np.round")


def gufunc(ufunc: np.ufunc, kwargs: dict, inputs: tuple) -> object:
    """A generalized ufunc other than matmul: vecdot (``axis=``); others are refused."""
    options = {k: v for k, v in kwargs.items() if v is not None}
    if ufunc is not getattr(np, "vecdot", None) or set(options) - {"axis"}:
        given = ", ".join(f"{k}=" for k in options)
        raise TypeError(f"np.{ufunc.__name__}{' with ' + given if given else ''} is not "
                        "supported on tensors")
    return array_extras.vecdot(*inputs, **options)


@cache
def handlers() -> dict[Callable, Callable]:
    """numpy functions dispatched to this front end; any other raises numpy's TypeError."""
    return {
        np.sum: _method("sum"), np.max: _method("max"), np.amax: _method("max"),
        np.min: _method("min"), np.amin: _method("min"), np.prod: _method("prod"),
        np.mean: _method("mean"), np.var: _method("var"), np.std: _method("std"),
        **{getattr(np, n): _nan_reduction(n)
           for n in ("nansum", "nanprod", "nanmax", "nanmin", "nanmean")},
        np.any: _method("any"), np.all: _method("all"),
        np.transpose: lambda a, axes=None: a.transpose(axes), np.dot: dot,
        np.tensordot: lambda a, b, axes=2: tensordot(a, b, axes),
        np.einsum: _einsum, np.where: _where,
        np.reshape: _reshape, np.squeeze: _method("squeeze"),
        np.swapaxes: _method("swapaxes"), np.broadcast_to: _method("broadcast_to"),
        np.expand_dims: lambda a, axis: shape_ops.expand_dims(a, axis),
        np.moveaxis: lambda a, source, destination: shape_ops.moveaxis(a, source,
                                                                       destination),
        np.concatenate: _concatenate, np.stack: _stack,
        np.roll: lambda a, shift, axis=None: shape_ops.roll(a, shift, axis),
        np.result_type: lambda *args: np.result_type(
            *[a.dtype if isinstance(a, ArrayOps) else a for a in args]),
        np.ravel: lambda a, order="C": shape_ops.reshape(a, -1, order),
        np.sort: sorting.sort, np.argmax: sorting.argmax, np.argmin: sorting.argmin,
        np.take: array_extras.take, np.pad: array_extras.pad, np.flip: array_extras.flip,
        np.round: _round, np.around: _round,
        np.diff: array_extras.diff, np.repeat: array_extras.repeat,
        np.matrix_transpose: array_extras.matrix_transpose,
        np.unique_values: array_extras.unique_values,
        np.unique_counts: array_extras.unique_counts,
        np.triu: array_extras.triu, np.tril: array_extras.tril, np.kron: array_extras.kron,
        np.outer: lambda a, b, out=None: array_extras.outer(
            np.multiply, shape_ops.reshape(a, -1), shape_ops.reshape(b, -1)),
        np.clip: entry_functions.clip, np.interp: entry_functions.interp,
        np.diagonal: entry_functions.diagonal,
        np.real: lambda a: a.real, np.imag: lambda a: a.imag,
        np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim,
        **{f: _on_dense(f) for f in (np.allclose, np.isclose, np.array_equal)},
    }
