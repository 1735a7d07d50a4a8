"""numpy's dispatch protocols on Tensor and LazyTensor: ``__array_ufunc__`` (ufuncs,
their ``reduce`` and ``outer``, ``out=``) and ``__array_function__`` (the handlers of
numpy_functions.py), over ArrayOps' operators and reductions (numpy_protocols.py)."""

from __future__ import annotations

import numpy as np

from ..notation import elementwise as ew
from . import complex_values, numpy_functions, ufuncs
from .lazy_ops import apply, power
from .numpy_protocols import (
    _BITWISE,
    _REDUCTIONS,
    ArrayOps,
    _is_bool,
    _is_operand,
    _no_options,
    finish,
)


class NumpyArray(ArrayOps):
    """ArrayOps with numpy's dispatch protocols: what Tensor and LazyTensor are made of."""

    __slots__ = ()

    def dot(self, other):
        """``np.dot(self, other)``, as pydata/sparse's method."""
        return numpy_functions.dot(self, other)

    @property
    def mT(self):
        """The last two axes swapped."""
        return numpy_functions.array_extras.matrix_transpose(self)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs, **kwargs):
        if method == "reduce" and ufunc.__name__ in _REDUCTIONS and len(inputs) == 1:
            options = dict(kwargs)  # np.add.reduce(A, axis=0): A.sum(axis=0)
            axis, keepdims = options.pop("axis", 0), options.pop("keepdims", False)
            _no_options(f"np.{ufunc.__name__}.reduce", **options)
            return getattr(inputs[0], _REDUCTIONS[ufunc.__name__])(axis=axis,
                                                                 keepdims=keepdims)
        if method == "__call__" and kwargs.get("out") is not None:
            options = {k: v for k, v in kwargs.items() if k != "out"}
            return numpy_functions.written_into(kwargs["out"], ufunc(*inputs, **options),
                                                f"np.{ufunc.__name__}")
        if method == "outer" and len(inputs) == 2 and not kwargs:
            return numpy_functions.array_extras.outer(ufunc, *inputs)
        if method != "__call__":
            return NotImplemented
        if ufunc.signature is not None and ufunc is not np.matmul:  # vecdot, matvec
            return numpy_functions.gufunc(ufunc, {k: v for k, v in kwargs.items()
                                                  if k != "out" or v is not None}, inputs)
        _no_options(f"np.{ufunc.__name__}", **{k: v for k, v in kwargs.items()
                                               if k not in ("out", "dtype")})
        if ufunc is not np.matmul and complex_values.any_complex(inputs):
            return ufuncs.on_entries(ufunc, inputs, kwargs)  # numpy's complex arithmetic
        if not all(_is_operand(x) for x in inputs):
            return NotImplemented
        if ufunc is np.matmul:
            return self._product(*inputs)
        if ufunc is np.power:
            return finish(power(*inputs), inputs)
        name = ufunc.__name__
        if name in _BITWISE and all(_is_bool(x) for x in inputs):
            name = _BITWISE[name]
        if not ew.is_known(name) or kwargs.get("dtype") is not None:
            return ufuncs.on_entries(ufunc, inputs, kwargs)
        return finish(lambda: apply(name, *inputs), inputs, name)

    def __array_function__(self, func, types, args, kwargs):
        handler = numpy_functions.handlers().get(func)
        if handler is None or not all(issubclass(t, (ArrayOps, np.ndarray)) for t in types):
            return NotImplemented  # numpy raises a TypeError naming the function
        return handler(*args, **kwargs)
