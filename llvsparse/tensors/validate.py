"""O(1) checks of a tensor's descriptor fields: everything a kernel trusts that the
O(nnz) walk (walk.py) does not read.

The walk checks every read against the level extents, so extents that disagree with
the shape let a kernel write a 6-row CSR into a 2-row result (SIGSEGV) or read x[9] of
an 8-long x. Here extents, parameters, dtypes and memory layout are checked against the
shape and the format before any native code runs.
"""

from __future__ import annotations

import numpy as np

from ..formats.interpret import CorruptTensorError
from ..formats.registry import generation as registry_generation
from ..formats.registry import get_level
from .format import PARAM_LIMIT

INDEX_DTYPES = (np.dtype("int32"), np.dtype("int64"))
INDEX_LIMIT = 2**31 - 1


def check_descriptor(tensor) -> None:
    """Refuse (CorruptTensorError) every descriptor field that disagrees with the shape,
    the format or the layout native code assumes."""
    _check_fields(tensor)
    _check_arrays(tensor)
    values = tensor.values
    if not isinstance(values, np.ndarray) or values.dtype != tensor.dtype \
            or values.ndim != 1 or not values.flags.c_contiguous or not values.flags.aligned:
        raise CorruptTensorError(f"values must be a contiguous, aligned 1-d {tensor.dtype} "
                                 "array in native byte order")


def _check_fields(tensor) -> None:
    """Shape, extents, index dtype and parameters against the format; remembered per
    tensor while they are the same values (on every checked call, walking the levels
    here doubled a 35 µs SpMV)."""
    key = (tensor.format, tensor.index_dtype, tensor.shape, tuple(tensor.level_extents),
           tuple(tuple(p.items()) for p in tensor.params), registry_generation())
    if tensor.__dict__.get("_fields_checked") == key:
        return
    levels = tensor.format.levels
    _check_counts(tensor, len(levels))
    if tensor.index_dtype not in INDEX_DTYPES:
        raise CorruptTensorError(f"index dtype must be int32 or int64, not {tensor.index_dtype}")
    for k, level in enumerate(levels):
        _check_extent(tensor, k, level)
        _check_params(tensor, k, level)
    tensor._fields_checked = key


def _check_counts(tensor, nlevels: int) -> None:
    """One extent, one array mapping and one parameter mapping per level; a shape of the
    format's order."""
    if len(tensor.shape) != tensor.format.order:
        raise CorruptTensorError(f"shape {tensor.shape} has {len(tensor.shape)} modes but "
                                 f"format {tensor.format!r} stores {tensor.format.order}")
    if any(s < 0 for s in tensor.shape):
        raise CorruptTensorError(f"shape {tensor.shape} has a negative extent")
    for what, items in (("level_extents", tensor.level_extents),
                        ("level_arrays", tensor.level_arrays), ("params", tensor.params)):
        if len(items) != nlevels:
            raise CorruptTensorError(f"{what} has {len(items)} entries but format "
                                     f"{tensor.format!r} has {nlevels} levels")
    for what, items in (("level_arrays", tensor.level_arrays), ("params", tensor.params)):
        if not all(isinstance(item, dict) for item in items):
            raise CorruptTensorError(f"{what} must hold one dict per level")


def expected_extent(shape: tuple[int, ...], level) -> int | None:
    """The extent the shape gives ``level`` (None for a storage-only level, whose extent
    the data chooses: DIA's diagonal count, ELL's width). A blocked mode must be a whole
    number of blocks: kernels rebuild a coordinate as outer * block + inner."""
    if level.mode is None:
        return None
    size = shape[level.mode]
    if level.block is None:
        return size
    if level.inner:
        return level.block
    return size // level.block if size % level.block == 0 else None


def _check_extent(tensor, k: int, level) -> None:
    extent = tensor.level_extents[k]
    where = f"level {k} ({level.kind})"
    if extent < 0:
        raise CorruptTensorError(f"{where} has the negative extent {extent}")
    if tensor.index_dtype == np.dtype("int32") and extent > INDEX_LIMIT:
        raise CorruptTensorError(f"{where} has extent {extent}, more than int32 indices hold")
    if level.mode is None:
        return
    expected = expected_extent(tensor.shape, level)
    if expected is None:
        raise CorruptTensorError(f"{where}: mode {level.mode} of shape {tensor.shape} is not "
                                 f"a whole number of blocks of {level.block}")
    if extent != expected:
        raise CorruptTensorError(f"{where} has extent {extent}, but shape {tensor.shape} "
                                 f"gives it {expected} (mode {level.mode})")


def _check_params(tensor, k: int, level) -> None:
    declared = set(get_level(level.kind).params)
    given = tensor.params[k]
    where = f"level {k} ({level.kind})"
    if set(given) != declared:
        missing, extra = sorted(declared - set(given)), sorted(set(given) - declared)
        raise CorruptTensorError(f"{where} parameters must be {sorted(declared)}: "
                                 f"missing {missing}, unknown {extra}")
    for name, value in given.items():
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or not 1 <= value <= PARAM_LIMIT:
            raise CorruptTensorError(f"{where} parameter {name} is {value!r}; it must be a "
                                     f"positive integer, at most {PARAM_LIMIT}")


def _check_arrays(tensor) -> None:
    """Every array slot holds a contiguous, aligned 1-d array of the index dtype (native
    byte order: a '>i4' array is not int32), and shared slots hold one array."""
    levels, index_dtype, ttype = tensor.level_arrays, tensor.index_dtype, tensor.tensor_type
    for slot in ttype.array_slots():
        array = levels[slot.level].get(slot.name)
        if not isinstance(array, np.ndarray) or array.dtype != index_dtype \
                or array.ndim != 1 or not _contiguous_and_aligned(array.flags):
            _refuse_array(tensor, slot, array)
        if slot.shared:
            for k, level in enumerate(ttype.levels):
                if k != slot.level and slot.name in level.definition.arrays \
                        and levels[k].get(slot.name) is not array:
                    held = "lacks it" if levels[k].get(slot.name) is None else \
                        "holds a different array (kernels read the first level's)"
                    raise CorruptTensorError(
                        f"levels {slot.level} and {k} ({level.kind}) share array "
                        f"{slot.name!r}, but level {k} {held}")


def _contiguous_and_aligned(flags) -> bool:
    return flags.c_contiguous and flags.aligned


def _refuse_array(tensor, slot, array) -> None:
    if array is None:
        kind = tensor.format.levels[slot.level].kind
        raise CorruptTensorError(f"level {slot.level} ({kind}) is missing array {slot.name!r}")
    raise CorruptTensorError(f"level {slot.level} array {slot.name!r} must be a contiguous, "
                             f"aligned 1-d {tensor.index_dtype} array in native byte order")
