"""The dtypes, index dtypes and shapes a tensor may have, checked where tensors are
made and where kernels are declared (kept apart from Tensor so that the conversions it
uses can check them too)."""

from __future__ import annotations

import operator

import numpy as np

VALUE_DTYPES = ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint64",
                "uint32", "uint16", "uint8", "bool", "complex128", "complex64")
INDEX_LIMIT = 2**31 - 1


def checked_index_dtype(requested, *sizes: int) -> np.dtype:
    if requested is not None:
        dtype = np.dtype(requested)
        if dtype not in (np.dtype("int32"), np.dtype("int64")):
            raise TypeError(f"index dtype must be int32 or int64, not {dtype}")
        if dtype == np.dtype("int32") and max(sizes, default=0) > INDEX_LIMIT:
            raise ValueError(f"index dtype int32 cannot hold a size of {max(sizes)}; "
                             "use int64")
        return dtype
    return np.dtype("int64") if max(sizes, default=0) >= INDEX_LIMIT else np.dtype("int32")


def checked_shape(shape) -> tuple[int, ...]:
    """``shape`` as non-negative integers; 2.9 is refused rather than truncated to 2."""
    try:
        extents = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"shape must be a sequence of integers, not {shape!r}") from None
    if any(e < 0 for e in extents):
        raise ValueError(f"shape {extents} has a negative extent")
    return extents


def checked_value_dtype(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if str(dtype) not in VALUE_DTYPES:
        raise TypeError(f"value dtype must be one of {', '.join(VALUE_DTYPES)}, not {dtype}")
    return dtype
