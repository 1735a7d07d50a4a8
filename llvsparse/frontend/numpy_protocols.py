"""The NumPy front end of Tensor and LazyTensor: attributes, operators, reductions,
``.T`` and ``__array__`` (numpy's ``__array_ufunc__`` and ``__array_function__`` are
numpy_dispatch.py's, above the functions they dispatch to).

Every operation builds a lazy node (lazy_nodes.py, lazy_ops.py); the result is lazy if
any operand is (made by the lazy operand's class), else it is computed at once as one
kernel (lazy_compute.py), by the plan of its operands' signatures where it has one
(eager_plans.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..tensors.made_as import tensor_class
from . import complex_values, eager_plans, entry_reductions, lazy_products, shape_ops
from .lazy_compute import compute_node
from .lazy_nodes import NodeHolder, as_node, reduce_axes
from .lazy_nodes import transpose as transposed
from .lazy_ops import apply, power, reduce


def finish(node, operands: tuple, operation: object = None) -> object:
    """A lazy result where an operand is lazy (made by its class: LazyTensor.chained);
    else computed (a 0-d tensor for a full reduction, as pydata/sparse gives, following
    the array API standard). ``node`` may be a function making it: an ``operation``
    named (whose node depends only on it and its operands) is then run by the plan of its
    operands' signatures (eager_plans), or kept as a lazy recipe."""
    for x in operands:
        if isinstance(x, NodeHolder):
            return type(x).chained(operation, operands, node)
    if operation is not None:
        return eager_plans.run(operation, operands, node)
    return compute_node(node() if callable(node) else node)


def _binary(name: str, reflected: bool = False,
            function: Callable[[tuple], str] | None = None) -> Callable:
    """The operator method ``__name__`` (``__rname__`` where ``reflected``), applying
    the notation's ``name``, or what ``function`` picks for the operands."""
    def method(self, other):
        operands = (other, self) if reflected else (self, other)
        if function is None:
            planned = eager_plans.replayed(name, operands)
            if planned is not None:
                return planned
        if complex_values.any_complex(operands):
            return getattr(np, function(operands) if function else name)(*operands)
        if not _is_operand(other):
            return NotImplemented
        chosen = function(operands) if function else name
        return finish(lambda: apply(chosen, *operands), operands, chosen)
    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


def _is_operand(value: object) -> bool:
    """Whether ``value`` can be an operand (a tensor, lazy or not, without building a
    node for it: a lazy recipe builds its own when asked)."""
    return isinstance(value, ArrayOps) or as_node(value) is not None


def _is_bool(value: object) -> bool:
    dtype = getattr(value, "dtype", None)
    return np.dtype(dtype if dtype is not None else np.asarray(value).dtype) == np.bool_


def _logical(ufunc: str, inputs: tuple) -> str:
    """numpy's bitwise ``ufunc`` (``&``, ``|``, ``^``, ``~``) as the logical function it
    is on bools; on other dtypes it is bitwise, which the notation has not."""
    if not all(_is_bool(x) for x in inputs):
        raise TypeError(f"np.{ufunc} (an operator & | ^ ~) of non-bool operands is bitwise, "
                        "which llvsparse does not compute; it takes bool tensors (compare "
                        f"first), or use np.{_BITWISE[ufunc]}")
    return _BITWISE[ufunc]


def _bitwise(ufunc: str, reflected: bool = False) -> Callable:
    """``__and__`` and the like: numpy's ``ufunc``, the logical function on bools (a
    kernel), bitwise on integers (computed on the entries, ufuncs.py)."""
    logical = _binary(ufunc.split("_")[1], reflected,
                      lambda operands: _logical(ufunc, operands))
    on_entries = _via_ufunc(getattr(np, ufunc), reflected)

    def method(self, other):
        return logical(self, other) if _is_bool(self) and _is_bool(other) \
            else on_entries(self, other)
    method.__name__ = logical.__name__
    return method


def _via_ufunc(ufunc: np.ufunc, reflected: bool = False) -> Callable:
    """The operator method of numpy's ``ufunc`` (``//``, ``%``, ``<<``, ...), through
    ``__array_ufunc__``."""
    def method(self, other):
        if as_node(other) is None:
            return NotImplemented
        return ufunc(other, self) if reflected else ufunc(self, other)
    method.__name__ = f"__{'r' if reflected else ''}{ufunc.__name__}__"
    return method


def _no_options(what: str, **options: object) -> None:
    given = [k for k, v in options.items() if v is not None and v is not False]
    if given:
        raise TypeError(f"{what}: {', '.join(given)}= is not supported")


class ArrayOps:
    """NumPy behaviour on anything with ``shape`` that ``as_node`` can read: attributes,
    operators and reductions (numpy's dispatch protocols are NumpyArray's, numpy_dispatch.py)."""

    __slots__ = ()
    __array_priority__ = 20.0  # scipy.sparse and numpy defer their operators to ours

    # -- attributes ---------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def fill_value(self) -> object:
        """What an entry that is not stored holds."""
        return np.asarray(getattr(self, "fill", 0), self.dtype).item()

    @property
    def T(self):
        """Axes reversed: a view sharing the arrays for a tensor (a CSR's is CSC), a
        renaming of indices in a lazy chain."""
        return self.transpose()

    def transpose(self, *axes):
        order = axes[0] if len(axes) == 1 and (axes[0] is None or
                                               not isinstance(axes[0], int)) else axes
        return finish(transposed(as_node(self), order or None), (self,))

    def reshape(self, *shape, order="C"):
        """numpy's reshape (C order): stored entries re-raveled, the fill kept."""
        return shape_ops.reshape(self, shape[0] if len(shape) == 1 else shape, order)

    def flatten(self, order="C"):
        """The entries in one axis (C order), a new tensor."""
        return shape_ops.reshape(self, -1, order)

    def squeeze(self, axis=None):
        return shape_ops.squeeze(self, axis)

    def swapaxes(self, axis1, axis2):
        return shape_ops.swapaxes(self, axis1, axis2)

    def broadcast_to(self, shape):
        return shape_ops.broadcast_to(self, shape)

    # -- operators ----------------------------------------------------------------------
    __add__, __radd__ = _binary("add"), _binary("add", True)
    __sub__, __rsub__ = _binary("subtract"), _binary("subtract", True)
    __mul__, __rmul__ = _binary("multiply"), _binary("multiply", True)
    __truediv__, __rtruediv__ = _binary("divide"), _binary("divide", True)
    __rpow__ = _binary("power", True)
    __lt__, __le__ = _binary("less"), _binary("less_equal")
    __gt__, __ge__ = _binary("greater"), _binary("greater_equal")
    __eq__, __ne__ = _binary("equal"), _binary("not_equal")  # type: ignore[assignment]
    __and__, __rand__ = _bitwise("bitwise_and"), _bitwise("bitwise_and", True)
    __or__, __ror__ = _bitwise("bitwise_or"), _bitwise("bitwise_or", True)
    __xor__, __rxor__ = _bitwise("bitwise_xor"), _bitwise("bitwise_xor", True)
    __floordiv__ = _via_ufunc(np.floor_divide)
    __rfloordiv__ = _via_ufunc(np.floor_divide, True)
    __mod__, __rmod__ = _via_ufunc(np.remainder), _via_ufunc(np.remainder, True)
    __divmod__, __rdivmod__ = _via_ufunc(np.divmod), _via_ufunc(np.divmod, True)
    __lshift__, __rlshift__ = _via_ufunc(np.left_shift), _via_ufunc(np.left_shift, True)
    __rshift__, __rrshift__ = _via_ufunc(np.right_shift), _via_ufunc(np.right_shift, True)
    __hash__ = object.__hash__

    def __invert__(self):
        if not _is_bool(self):
            return np.invert(self)
        return finish(apply(_logical("invert", (self,)), self), (self,))

    def __pow__(self, other):
        """Small whole powers are products (numpy's x**2 is x*x); others need pow."""
        if complex_values.any_complex((self, other)):
            return np.power(self, other)
        if as_node(other) is None:
            return NotImplemented
        return finish(power(self, other), (self, other))

    def __neg__(self):
        if complex_values.is_complex(self):
            return np.negative(self)
        return finish(lambda: apply("negative", self), (self,), "negative")

    def __pos__(self):
        return self

    def __abs__(self):
        if complex_values.is_complex(self):
            return np.absolute(self)
        return finish(lambda: apply("absolute", self), (self,), "absolute")

    def __matmul__(self, other):
        return self._product(self, other)

    def __rmatmul__(self, other):
        return self._product(other, self)

    @staticmethod
    def _product(a, b):
        planned = eager_plans.replayed("matmul", (a, b))
        if planned is not None:
            return planned
        left, right = as_node(a), as_node(b)
        if left is None or right is None:
            return NotImplemented
        if complex_values.any_complex((a, b)):
            return complex_values.bilinear(ArrayOps._product, a, b)
        if min(len(left.shape), len(right.shape)) >= 2 and \
                left.shape[:-2] != right.shape[:-2]:  # numpy broadcasts the stacks
            stacks = np.broadcast_shapes(left.shape[:-2], right.shape[:-2])
            dense = isinstance(a, np.ndarray) or isinstance(b, np.ndarray)
            a = shape_ops.broadcast_to(a, stacks + left.shape[-2:])
            b = shape_ops.broadcast_to(b, stacks + right.shape[-2:])
            left, right = as_node(a), as_node(b)
            result = finish(lazy_products.matmul(left, right), (a, b))
            return result.to_numpy() if dense and not isinstance(result, NodeHolder) \
                else result  # an ndarray where an operand is one (eager_plans.dense_result)
        return finish(lambda: lazy_products.matmul(left, right), (a, b), "matmul")

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(f"the truth value of a {type(self).__name__} with "
                             f"{self.size} elements is ambiguous")
        return bool(np.asarray(self).reshape(()))

    def __float__(self) -> float:
        return float(np.asarray(self).reshape(()))

    def __int__(self) -> int:
        return int(np.asarray(self).reshape(()))

    def __complex__(self) -> complex:
        return complex(np.asarray(self).reshape(()))

    def item(self, *args):
        """The one value (numpy's ``item``), a Python number."""
        return np.asarray(self).item(*args)

    def __format__(self, spec: str) -> str:
        """A 0-d tensor formats as its value (``f"{A.sum():.3f}"``)."""
        return format(self.item(), spec) if self.size == 1 and spec else \
            object.__format__(self, spec)

    # -- reductions ---------------------------------------------------------------------
    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        """Sum over ``axis`` (None: all; an int or a tuple; negatives count from the
        end), fused into the kernel of a lazy chain."""
        if dtype is not None:
            return _cast(self.astype(dtype).sum(axis, out=out, keepdims=keepdims), dtype)
        return self._reduce("sum", axis, out, keepdims)

    def max(self, axis=None, out=None, keepdims=False):
        return self._reduce("max", axis, out, keepdims)

    def min(self, axis=None, out=None, keepdims=False):
        return self._reduce("min", axis, out, keepdims)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False):
        if dtype is not None:
            return _cast(self.astype(dtype).prod(axis, out=out, keepdims=keepdims), dtype)
        return self._reduce("prod", axis, out, keepdims)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        """The sum over ``axis`` divided by the count of entries it adds (float64 for
        integers and bools, as numpy's), one kernel."""
        _no_options("mean", out=out)
        if dtype is not None:
            return _cast(self.astype(dtype).mean(axis, keepdims=keepdims), dtype)
        axes = reduce_axes(axis, self.ndim)
        count = int(np.prod([self.shape[k] for k in axes], dtype=np.int64))
        if complex_values.is_complex(self):
            return self.sum(axis, keepdims=keepdims) / count
        total = reduce(as_node(self), axes, "sum")
        result = finish(apply("divide", total, count), (self,))
        return _kept(result, axes, self.ndim) if keepdims else result

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        """numpy's var, from the stored entries and the fill (entry_reductions)."""
        _no_options("var", out=out)
        return entry_reductions.var(self, axis, dtype, ddof, keepdims)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        _no_options("std", out=out)
        return entry_reductions.var(self, axis, dtype, ddof, keepdims, std=True)

    @property
    def real(self):
        """The real parts (this tensor's index arrays, new values)."""
        return complex_values.parts(self)[0]

    @property
    def imag(self):
        return complex_values.parts(self)[1]

    def round(self, decimals: int = 0, out=None):
        return np.round(self, decimals, out=out)

    def conj(self):
        return np.conjugate(self)

    def clip(self, min=None, max=None, out=None):
        """numpy's clip (entry_functions.py)."""
        return np.clip(self, min, max, out=out)

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1):
        return np.diagonal(self, offset, axis1, axis2)

    def todense(self) -> np.ndarray:
        """The dense values as a numpy array (pydata/sparse's name for it)."""
        return np.asarray(self)

    def any(self, axis=None, out=None, keepdims=False):
        """Whether an entry over ``axis`` is true (nonzero; NaN is), an or-reduction."""
        return self._reduce("any", axis, out, keepdims)

    def all(self, axis=None, out=None, keepdims=False):
        return self._reduce("all", axis, out, keepdims)

    def astype(self, dtype, copy: bool = True):
        """The values cast to ``dtype`` (Tensor.astype); a lazy chain is computed first,
        notation having no cast."""
        return compute_node(as_node(self)).astype(dtype, copy=copy)

    def _reduce(self, name: str, axis, out, keepdims: bool):
        """A reduction kernel over the operator's monoid (``max(j, ...)`` for max), every
        entry counting, a stored one or the fill, as in numpy's dense reduction."""
        _no_options(name, out=out)
        axes = reduce_axes(axis, self.ndim)
        if not keepdims:
            planned = eager_plans.replayed((name, axes), (self,))
            if planned is not None:
                return planned
        if complex_values.is_complex(self):
            return complex_values.reduction(self, name, axis, keepdims)
        result = finish(lambda: reduce(as_node(self), axes, name), (self,),
                        (name, axes))
        return _kept(result, axes, self.ndim) if keepdims else result

    # -- numpy protocols ----------------------------------------------------------------
    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """The dense values (a view of a dense tensor's own). ``copy=False`` is refused
        where they are a new array, as numpy 2 refuses it."""
        tensor = compute_node(as_node(self))
        if copy is False and (tensor is not self or any(tensor.level_arrays)):
            raise ValueError(f"the dense values of this {type(self).__name__} are a new "
                             "array; copy=False cannot be honoured")
        array = tensor.to_numpy()
        if dtype is not None:
            array = array.astype(dtype, copy=False)
        return array.copy() if copy else array


# numpy's bitwise ufuncs, which are logical on bools.
_BITWISE = {"bitwise_and": "logical_and", "bitwise_or": "logical_or",
            "bitwise_xor": "logical_xor", "invert": "logical_not"}

# ufuncs whose ``reduce`` is one of the reductions.
_REDUCTIONS = {"add": "sum", "maximum": "max", "minimum": "min", "multiply": "prod",
               "logical_or": "any", "logical_and": "all"}


def _cast(result, dtype):
    """A reduction's result in ``dtype`` (sums of int32 accumulate wider; asked for int32,
    numpy gives int32)."""
    return result.astype(dtype) if isinstance(result, ArrayOps) else np.dtype(dtype).type(result)


def _kept(result, axes: tuple[int, ...], ndim: int):
    """``keepdims=True``: the reduced axes back with extent 1 (computed, then reshaped)."""
    values = np.asarray(result)
    shape = [1 if k in axes else None for k in range(ndim)]
    rest = iter(values.shape)
    kept = values.reshape([next(rest) if e is None else 1 for e in shape])
    return tensor_class().from_numpy(kept)
