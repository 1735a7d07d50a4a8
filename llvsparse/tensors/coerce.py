"""Operands from other libraries (numpy, scipy.sparse, pydata/sparse) as Tensors.

Kernels take Tensors; these turn what users already hold into one, packed once, directly
in the format a kernel asks for. pydata/sparse is never imported here: an object can
only be one of its arrays if the caller imported the package already.
"""

from __future__ import annotations

import sys

import numpy as np

from ..ir.types import fill_key
from .deferred import Deferred
from .format import Format, checked_fill
from .made_as import tensor_class
from .tensor import StoredTensor

# scipy.sparse formats stored the way an llvsparse format of the same name is.
_SCIPY_FORMATS = {"csr": "csr", "csc": "csc", "coo": "coo"}


def is_scipy_sparse(value: object) -> bool:
    """A scipy.sparse matrix or array, of any of its formats."""
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(value)


def is_pydata_sparse(value: object) -> bool:
    """A pydata/sparse array (COO, GCXS, DOK, ...)."""
    sparse = sys.modules.get("sparse")
    base = getattr(sparse, "SparseArray", None)
    return isinstance(base, type) and isinstance(value, base)


def is_foreign_sparse(value: object) -> bool:
    return is_scipy_sparse(value) or is_pydata_sparse(value)


def natural_format(value: object) -> str:
    """The format an operand passed without one is compiled for: its own where llvsparse
    has the same layout (scipy CSR, CSC, COO), else CSR for other scipy matrices and a
    coordinate list for vectors, pydata arrays and higher orders."""
    if is_scipy_sparse(value) and value.ndim == 2:
        return _SCIPY_FORMATS.get(value.format, "csr")
    if is_foreign_sparse(value):
        return "coo"
    return "dense"


def foreign_tensor(value: object, fmt: Format | str, name: str | None = None
                   ) -> StoredTensor | None:
    """``value`` packed in ``fmt`` if it is a scipy or pydata sparse array, else None."""
    if is_scipy_sparse(value):
        return tensor_class().from_scipy(value, format=fmt, name=name)
    if is_pydata_sparse(value):
        return tensor_class().from_pydata(value, format=fmt, name=name)
    return None


def asarray(value: object, format: Format | str | None = None,
            name: str | None = None, fill=None) -> StoredTensor:
    """``value`` as a Tensor, for the operator API (``ls.asarray(x)[j]``) and anywhere
    a Tensor is wanted: a Tensor as it is (converted if ``format`` differs), a scipy or
    pydata sparse array in its natural format (or ``format``), anything numpy can read
    as a dense tensor (or ``format``); a lazy expression computed (into ``format``).
    ``fill``: the value of entries not stored (a Tensor keeps its own; a different one
    is refused)."""
    if isinstance(value, Deferred):
        value = value.compute(format)
    if isinstance(value, StoredTensor):
        if fill is not None and fill_key(checked_fill(fill)) != fill_key(value.fill_value):
            raise ValueError(f"the tensor's fill value is {value.fill_value}, not {fill}")
        return value if format is None else value.asformat(format)
    fmt = natural_format(value) if format is None else format
    if is_scipy_sparse(value):
        return tensor_class().from_scipy(value, format=fmt, name=name, fill=fill)
    tensor = foreign_tensor(value, fmt, name)
    if tensor is not None:
        if fill is not None:
            raise ValueError("fill= is for dense arrays and scipy matrices; a pydata "
                             "array carries its own fill value")
        return tensor
    array = np.asarray(value)
    if array.dtype == object:
        raise TypeError(f"cannot use a {type(value).__name__} as a tensor")
    return tensor_class().from_numpy(array, format=fmt, name=name, fill=fill)
