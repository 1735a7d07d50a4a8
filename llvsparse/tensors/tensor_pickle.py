"""A Tensor pickles as its arrays and format, without the descriptors and memos that
belong to this process; a tensor llvsparse packed is sealed (read-only index arrays)
again on the other side. Whether it was validated travels with it (for shipped level
formats, whose checks are the same on both sides): the bytes arrive as they left, and
unpickling already trusts its source with more than that. Walking it again cost a
Dask worker 1-2 s per 6M-entry block it fetched, more than the SpMV it was fetched for.
"""

from __future__ import annotations

import numpy as np

from ..abi.runtime import make_read_only
from ..formats.registry import generation

# Per-process caches that must not travel (see Tensor: descriptors, memos, validation).
_TENSOR_LOCAL = ("_holder", "_type_cache", "_slots", "_entries", "_auto_stats", "_sorted_memo",
                 "_validated", "generation")


_WAS_VALID = "_valid_when_pickled"


def tensor_state(tensor) -> dict:
    state = {k: v for k, v in tensor.__dict__.items() if k not in _TENSOR_LOCAL}
    validated = tensor.__dict__.get("_validated")
    if validated is not None and validated == tensor._sealed_state():
        state[_WAS_VALID] = True
    return state


def restore_tensor(tensor, state: dict) -> None:
    was_valid = state.pop(_WAS_VALID, False)
    tensor.__dict__.update(state)
    _align_arrays(tensor)
    tensor.generation = generation()  # laid out by the definitions this process has
    if state.get("_sealed"):
        for arrays in tensor.level_arrays:
            for array in arrays.values():
                make_read_only(array)
        if was_valid:
            tensor._mark_valid()  # shipped level formats only


def _align_arrays(tensor) -> None:
    """Copy arrays that arrived at unaligned addresses: pickle protocol 5 hands numpy
    its out-of-band buffers where they lie (dask.distributed slices them out of a
    message), and kernels refuse unaligned arrays (CorruptTensorError). A shared array
    stays shared."""
    copies: dict[int, np.ndarray] = {}

    def aligned(array):
        if not isinstance(array, np.ndarray) or array.flags.aligned:
            return array
        return copies.setdefault(id(array), np.require(array, requirements="CA"))

    tensor.level_arrays = [{name: aligned(a) for name, a in arrays.items()}
                           for arrays in tensor.level_arrays]
    tensor.values = aligned(tensor.values)
