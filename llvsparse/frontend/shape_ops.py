"""numpy's shape functions on tensors: reshape, expand_dims, squeeze, broadcast_to,
moveaxis, swapaxes, concatenate and stack.

A sparse operand's stored entries move to their new coordinates (a reshape is a
re-raveling of flat positions, broadcasting a replication); nothing dense is made and the
fill value is kept (an entry not stored still holds it). The result is a COO tensor, as
pydata/sparse gives; an operand whose every level is dense stays dense, done by numpy.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from ..ir.types import fill_key
from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor
from .lazy_compute import compute_node
from .lazy_nodes import node_of, normalize_axis
from .lazy_nodes import transpose as transposed


def is_dense(tensor: StoredTensor) -> bool:
    """Every level stores every coordinate (a property levels declare)."""
    return all(level.full for level in tensor.tensor_type.levels)


def tensor_of(value: object, what: str) -> StoredTensor:
    """``value`` (a tensor, lazy chain, array or number) as a computed Tensor."""
    return compute_node(node_of(value, what))


def _sparse(coords: np.ndarray, values: np.ndarray, shape: tuple[int, ...],
            fill: object) -> StoredTensor:
    if not shape:  # a 0-d result holds its one value
        value = values[0] if len(values) else np.asarray(fill, values.dtype)
        return tensor_class().from_numpy(np.asarray(value, values.dtype))
    return tensor_class().from_coo(coords, values, shape, "coo", fill=fill)


def _moved(tensor: StoredTensor, shape: tuple[int, ...], numpy_op, coords_op) -> StoredTensor:
    """``tensor`` moved into ``shape``: by ``numpy_op`` on its dense values if it is
    dense, else by ``coords_op`` on its stored entries' coordinates."""
    if is_dense(tensor):
        return tensor_class().from_numpy(np.ascontiguousarray(numpy_op(tensor.to_numpy())),
                                         fill=tensor.fill_value)
    coords, values = tensor.to_coo()
    new_coords, values = coords_op(coords, values)
    return _sparse(new_coords, values, shape, tensor.fill_value)


def new_shape(shape: object, size: int) -> tuple[int, ...]:
    """numpy's reshape target (an int or a sequence, one -1 inferred) for ``size``
    entries; a shape that does not hold them is a ValueError naming both."""
    try:
        wanted = (operator.index(shape),) if not isinstance(shape, Sequence) else \
            tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"a shape must be integers, not {shape!r}") from None
    unknown = [k for k, e in enumerate(wanted) if e == -1]
    if len(unknown) > 1 or any(e < -1 for e in wanted):
        raise ValueError(f"shape {wanted}: only one extent may be -1 and none below it")
    known = int(np.prod([e for e in wanted if e != -1], dtype=np.int64))
    if unknown and known and size % known == 0:
        wanted = tuple(size // known if e == -1 else e for e in wanted)
    if -1 in wanted or int(np.prod(wanted, dtype=np.int64)) != size:
        raise ValueError(f"cannot reshape an array of size {size} into shape {shape}")
    return wanted


def reshape(value: object, shape: object, order: str | None = "C") -> StoredTensor:
    """The entries in ``shape``, read in C order (or F: the first index fastest)."""
    if order not in ("C", "F", None):
        raise ValueError(f"reshape order must be 'C' or 'F', not {order!r}")
    order = order or "C"
    tensor = tensor_of(value, "reshape")
    target = new_shape(shape, tensor.size)
    if target == tensor.shape:
        return tensor

    def coords_op(coords, values):
        flat = np.ravel_multi_index(tuple(coords), tensor.shape, order=order) \
            if tensor.order else np.zeros(len(values), np.int64)
        return np.array(np.unravel_index(flat, target, order=order), np.int64).reshape(
            len(target), -1), values
    return _moved(tensor, target, lambda a: a.reshape(target, order=order), coords_op)


def _new_axes(axis: object, ndim: int) -> list[int]:
    axes = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    result = sorted(normalize_axis(a, ndim) for a in axes)
    if len(set(result)) != len(result):
        raise ValueError(f"repeated axis in {axis!r}")
    return result


def expand_dims(value: object, axis: object) -> StoredTensor:
    """New axes of extent 1 at ``axis`` (an int or a tuple, counted in the result)."""
    tensor = tensor_of(value, "expand_dims")
    axes = _new_axes(axis, tensor.order + (len(axis) if isinstance(axis, (tuple, list))
                                           else 1))
    old = iter(range(tensor.order))
    source = [None if k in axes else next(old) for k in range(tensor.order + len(axes))]
    shape = tuple(1 if m is None else tensor.shape[m] for m in source)

    def coords_op(coords, values):
        rows = [np.zeros(len(values), np.int64) if m is None else coords[m] for m in source]
        return np.array(rows, np.int64).reshape(len(shape), -1), values
    return _moved(tensor, shape, lambda a: a.reshape(shape), coords_op)


def squeeze(value: object, axis: object = None) -> StoredTensor:
    """Without the extent-1 ``axis`` (all of them by default)."""
    tensor = tensor_of(value, "squeeze")
    if axis is None:
        axes = [k for k, e in enumerate(tensor.shape) if e == 1]
    else:
        axes = _new_axes(axis, tensor.order)
        wide = [k for k in axes if tensor.shape[k] != 1]
        if wide:
            raise ValueError(f"cannot squeeze axis {wide[0]}: its extent is "
                             f"{tensor.shape[wide[0]]}, not 1")
    shape = tuple(e for k, e in enumerate(tensor.shape) if k not in axes)
    keep = [k for k in range(tensor.order) if k not in axes]
    return _moved(tensor, shape, lambda a: a.reshape(shape),
                  lambda coords, values: (coords[keep], values))


def broadcast_to(value: object, shape: object) -> StoredTensor:
    """The tensor repeated along new leading axes and its extent-1 axes (numpy's rules;
    a shape it does not broadcast to is a ValueError naming both)."""
    tensor = tensor_of(value, "broadcast_to")
    target = tuple(operator.index(e) for e in (shape if isinstance(shape, Sequence)
                                               else (shape,)))
    lead = len(target) - tensor.order
    if lead < 0 or any(e not in (1, t) for e, t in zip(tensor.shape, target[lead:])):
        raise ValueError(f"cannot broadcast shape {tensor.shape} to {target}")
    if target == tensor.shape:
        return tensor

    def coords_op(coords, values):
        grown = [k for k in range(len(target))
                 if k < lead or (tensor.shape[k - lead] == 1 and target[k] != 1)]
        copies = int(np.prod([target[k] for k in grown], dtype=np.int64))
        rows = [np.repeat(coords[k - lead], copies) if k >= lead else None
                for k in range(len(target))]
        grid = np.indices([target[k] for k in grown]).reshape(len(grown), -1)
        for g, k in enumerate(grown):
            rows[k] = np.tile(grid[g], len(values))
        return np.array(rows, np.int64).reshape(len(target), -1), np.repeat(values, copies)
    return _moved(tensor, target, lambda a: np.broadcast_to(a, target), coords_op)


def moveaxis(value: object, source: object, destination: object):
    """Axes ``source`` moved to ``destination``, the rest in order (a transpose)."""
    node = node_of(value, "moveaxis")
    ndim = len(node.shape)
    sources = [normalize_axis(a, ndim) for a in np.atleast_1d(source)]
    targets = [normalize_axis(a, ndim) for a in np.atleast_1d(destination)]
    if len(sources) != len(targets):
        raise ValueError("moveaxis: source and destination must have the same length")
    order = [k for k in range(ndim) if k not in sources]
    for target, axis in sorted(zip(targets, sources)):
        order.insert(target, axis)
    return compute_node(transposed(node, order))


def swapaxes(value: object, axis1: int, axis2: int):
    node = node_of(value, "swapaxes")
    order = list(range(len(node.shape)))
    a, b = normalize_axis(axis1, len(order)), normalize_axis(axis2, len(order))
    order[a], order[b] = order[b], order[a]
    return compute_node(transposed(node, order))


def roll(value: object, shift: object, axis: object = None) -> StoredTensor:
    """numpy's roll: entries shifted along ``axis`` (None: the flattened entries),
    wrapping around; each stored entry's coordinate moves, the fill stays."""
    tensor = tensor_of(value, "roll")
    if axis is None:
        return reshape(roll(reshape(tensor, -1), shift, 0), tensor.shape)
    axes = [normalize_axis(a, tensor.order) for a in np.atleast_1d(axis)]
    shifts = np.broadcast_to(np.atleast_1d(shift), (len(axes),))
    moves = dict.fromkeys(range(tensor.order), 0)
    for k, n in zip(axes, shifts):
        moves[k] += int(n)

    def coords_op(coords, values):
        moved = coords.copy()
        for k, n in moves.items():
            if tensor.shape[k]:
                moved[k] = (moved[k] + n) % tensor.shape[k]
        return moved, values
    return _moved(tensor, tensor.shape, lambda a: np.roll(a, shift, axis), coords_op)


def concatenate(values: Sequence[object], axis: object = 0) -> StoredTensor:
    """The operands joined along ``axis`` (None: flattened first). Sparse operands must
    share a fill value (the result has one); dense ones store every entry."""
    tensors = [tensor_of(v, "concatenate") for v in values]
    if not tensors:
        raise ValueError("need at least one array to concatenate")
    if axis is None:
        tensors, axis = [reshape(t, -1) for t in tensors], 0
    order = tensors[0].order
    if order == 0 or any(t.order != order for t in tensors):
        raise ValueError("concatenate: every operand needs the same number of axes, "
                         f"at least 1; got shapes {[t.shape for t in tensors]}")
    axis = normalize_axis(axis, order)
    if any(t.shape[:axis] + t.shape[axis + 1:] != tensors[0].shape[:axis] +
           tensors[0].shape[axis + 1:] for t in tensors):
        raise ValueError(f"concatenate along axis {axis}: shapes "
                         f"{[t.shape for t in tensors]} differ off that axis")
    dtype = np.result_type(*[t.dtype for t in tensors])
    if all(is_dense(t) for t in tensors):
        return tensor_class().from_numpy(np.concatenate([t.to_numpy() for t in tensors], axis)
                                         .astype(dtype))
    fills = {fill_key(t.fill_value) for t in tensors if not is_dense(t)}
    if len(fills) > 1:
        raise ValueError("concatenate: sparse operands have different fill values "
                         f"{[t.fill_value for t in tensors if not is_dense(t)]}")
    fill = next(t.fill_value for t in tensors if not is_dense(t))
    parts, offset = [], 0
    for t in tensors:
        coords, values = t.to_coo()
        coords = coords.copy()
        coords[axis] += offset
        parts.append((coords, values.astype(dtype)))
        offset += t.shape[axis]
    shape = tensors[0].shape[:axis] + (offset,) + tensors[0].shape[axis + 1:]
    return _sparse(np.concatenate([c for c, _ in parts], axis=1),
                   np.concatenate([v for _, v in parts]), shape, fill)


def stack(values: Sequence[object], axis: int = 0) -> StoredTensor:
    """The operands (one shape) along a new ``axis``."""
    tensors = [tensor_of(v, "stack") for v in values]
    if not tensors:
        raise ValueError("need at least one array to stack")
    if any(t.shape != tensors[0].shape for t in tensors):
        raise ValueError(f"stack: shapes {[t.shape for t in tensors]} differ")
    axis = normalize_axis(axis, tensors[0].order + 1)
    return concatenate([expand_dims(t, axis) for t in tensors], axis)
