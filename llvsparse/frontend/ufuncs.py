"""Any numpy ufunc on tensors, computed on the stored entries and the fill.

The kernel path (elementwise.py) covers the ufuncs the notation has. Every other one
(``np.sin``, ``np.expm1``, bitwise and shift operators on integers, ``//``, ``%``, ...)
is pointwise, so paper 004's rule applies directly: the result stores ``f`` of each
stored value, and its fill is ``f`` of the fill. Operands of one shape that store
different coordinates are aligned on the union of their coordinates, each reading its
fill where it stores nothing. Operands that broadcast against each other, or against a
dense array, are computed on dense values (the result is dense). Result dtypes the
compiler lacks (complex, float16, ...) are refused by Tensor with an error naming them.
"""

from __future__ import annotations

import numpy as np

from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor
from .lazy_compute import compute_node
from .lazy_nodes import NodeHolder, as_node

_NAMED = ("csr", "csc", "coo")


def named_format(tensor: StoredTensor) -> str:
    """The named format the result keeps (pydata's COO for anything else)."""
    name = getattr(tensor.format, "name", None)
    return name if name in _NAMED and tensor.format.levels and \
        len(tensor.format.levels) == tensor.order else "coo"


def _is_dense(tensor: StoredTensor) -> bool:
    return all(level.full for level in tensor.tensor_type.levels)


def _checked_options(ufunc: np.ufunc, kwargs: dict) -> dict:
    unknown = sorted(k for k, v in kwargs.items() if k != "dtype" and v is not None)
    if unknown:
        raise TypeError(f"np.{ufunc.__name__}: {', '.join(unknown)}= is not supported on "
                        "tensors")
    return {k: v for k, v in kwargs.items() if v is not None}


def on_entries(ufunc: np.ufunc, inputs: tuple, kwargs: dict
               ) -> StoredTensor | tuple[StoredTensor, ...]:
    """``ufunc(*inputs)`` with every tensor computed first; see the module docstring. A
    ufunc of several results (``np.divmod``, ``np.modf``, ``np.frexp``) gives a tuple
    of tensors, each with the stored entries' results and the fill's."""
    options = _checked_options(ufunc, kwargs)
    operands = [compute_node(as_node(x)) if isinstance(x, (StoredTensor, NodeHolder)) else x
                for x in inputs]
    tensors = [x for x in operands if isinstance(x, StoredTensor)]
    others = [x for x in operands if not isinstance(x, StoredTensor)]
    shape = tensors[0].shape
    sparse = [t for t in tensors if not _is_dense(t)]
    if not sparse or any(t.shape != shape for t in tensors) or any(np.ndim(x) for x in others):
        dense = [np.asarray(x) if isinstance(x, StoredTensor) else x for x in operands]
        results = ufunc(*dense, **options)
        return tuple(tensor_class().from_numpy(np.asarray(r)) for r in results) if ufunc.nout > 1 \
            else tensor_class().from_numpy(np.asarray(results))
    coords, columns = aligned(tensors)
    values = ufunc(*[columns[id(x)] if isinstance(x, StoredTensor) else x for x in operands],
                   **options)
    fills = ufunc(*[np.asarray(_fill(x), x.dtype) if isinstance(x, StoredTensor) else x
                    for x in operands], **options)
    if ufunc.nout == 1:
        values, fills = (values,), (fills,)
    results = []
    for value, fill in zip(values, fills):
        value = np.asarray(value)
        if value.dtype != np.asarray(fill).dtype:
            value = value.astype(np.result_type(value, fill))
        results.append(tensor_class().from_coo(coords, value, shape, named_format(sparse[0]),
                                       dtype=value.dtype, fill=np.asarray(fill).item()))
    return results[0] if ufunc.nout == 1 else tuple(results)


def _fill(tensor: StoredTensor) -> object:
    return tensor.fill_value if not _is_dense(tensor) else 0


def aligned(tensors: list[StoredTensor]) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """The union of the tensors' stored coordinates, and each tensor's values there (its
    fill where it stores nothing), keyed by ``id``."""
    shape = tensors[0].shape
    entries = {id(t): t.to_coo() for t in tensors}
    flats = {key: np.ravel_multi_index(tuple(c), shape) if shape else np.zeros(len(v), int)
             for key, (c, v) in entries.items()}
    union = np.unique(np.concatenate(list(flats.values())))
    columns = {}
    for t in tensors:
        flat, values = flats[id(t)], entries[id(t)][1]
        column = np.full(len(union), _fill(t), t.dtype)
        column[np.searchsorted(union, flat)] = values
        columns[id(t)] = column
    coords = np.array(np.unravel_index(union, shape), np.int64).reshape(len(shape), -1)
    return coords, columns
