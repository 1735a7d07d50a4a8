"""The kernel ABI on the host: tensor descriptors, calls and numpy-owned outputs.

C view of a descriptor (see docs in README):

    typedef struct {
        int64_t  nlevels;
        int64_t *extents;    /* [nlevels] extent of each level's coordinates */
        int64_t *sizes;      /* [nlevels] positions per level (written for outputs) */
        void   **arrays;     /* level arrays in format order, then values */
        int64_t *capacities; /* elements allocated per array (outputs grow with malloc + free) */
        int64_t *params;     /* level parameters in format order (e.g. hashed W) */
    } llvsparse_tensor;
    int32_t kernel(llvsparse_tensor **tensors);   /* tensors[0] is the output */
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

_LIBC = ctypes.CDLL(ctypes.util.find_library("c"))
_LIBC.free.argtypes = [ctypes.c_void_p]
_LIBC.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_LIBC.realloc.restype = ctypes.c_void_p
_ALLOC_TYPE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64)


@functools.cache
def _allocate():
    from .backends.cpu import host_allocator

    return _ALLOC_TYPE(host_allocator())


class KernelRuntimeError(RuntimeError):
    """A kernel reported failure (out of memory)."""


class Descriptor(ctypes.Structure):
    _fields_ = [("nlevels", ctypes.c_int64), ("extents", ctypes.POINTER(ctypes.c_int64)),
                ("sizes", ctypes.POINTER(ctypes.c_int64)),
                ("arrays", ctypes.POINTER(ctypes.c_void_p)),
                ("capacities", ctypes.POINTER(ctypes.c_int64)),
                ("params", ctypes.POINTER(ctypes.c_int64))]


_BYTE = ctypes.c_char
_TABLE = ctypes.POINTER(ctypes.POINTER(Descriptor))
KERNEL_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, _TABLE)
RANGE_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, _TABLE, ctypes.c_int64, ctypes.c_int64)
SETUP_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, _TABLE)
COUNT_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, _TABLE, ctypes.c_int64, ctypes.c_int64,
                              ctypes.POINTER(ctypes.c_int64))
FILL_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, _TABLE, ctypes.c_int64, ctypes.c_int64,
                             ctypes.c_int64)
FINISH_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, _TABLE, ctypes.c_int64)
_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()
_DEFAULT_THREADS = [os.cpu_count() or 1]


def set_num_threads(count: int) -> None:
    """Default thread count for kernels whose outermost loop can be split."""
    if count < 1:
        raise ValueError("the thread count must be at least 1")
    _DEFAULT_THREADS[0] = int(count)


def get_num_threads() -> int:
    return _DEFAULT_THREADS[0]


def _pool() -> ThreadPoolExecutor:
    """One process-wide pool, so threads are not created per call."""
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=max(os.cpu_count() or 1, 2),
                                            thread_name_prefix="llvsparse"))
        return _POOL[0]


class _KernelBuffer:
    """Memory a kernel allocated, shown to numpy through ``__array_interface__`` (the
    array's base) and freed when the last array viewing it is collected."""

    __slots__ = ("__array_interface__",)

    def __init__(self, address: int, count: int, dtype: np.dtype):
        self.__array_interface__ = {"data": (address, False), "shape": (count,),
                                    "typestr": dtype.str, "version": 3}

    def __del__(self) -> None:
        _LIBC.free(self.__array_interface__["data"][0])


class DescriptorHolder:
    """A descriptor plus the buffers it points into, kept alive for the call."""

    def __init__(self, extents, arrays: list[np.ndarray | None], params: list[int]):
        n = len(extents)
        self.extents = (ctypes.c_int64 * max(n, 1))(*extents)
        self.sizes = (ctypes.c_int64 * max(n, 1))()
        self.arrays = arrays
        self.pointers = (ctypes.c_void_p * len(arrays))(
            *[a.ctypes.data if a is not None and a.size else None for a in arrays])
        self.caps = (ctypes.c_int64 * len(arrays))(
            *[len(a) if a is not None else 0 for a in arrays])
        self.params = (ctypes.c_int64 * max(len(params), 1))(*params)
        self.struct = Descriptor(n, self.extents, self.sizes, self.pointers, self.caps,
                                 self.params)

    def point_to(self, slot: int, array: np.ndarray) -> None:
        """Reuse this descriptor for a new caller-owned, writable, contiguous array in
        ``slot`` (on the per-call path: ``from_buffer`` is 4x cheaper than ``.ctypes``)."""
        self.arrays[slot] = array
        self.pointers[slot] = ctypes.addressof(_BYTE.from_buffer(array)) if array.size \
            else None
        self.caps[slot] = len(array)

    def clear(self) -> None:
        """Back to an empty output descriptor (no arrays, no entries), for reuse once its
        arrays were adopted or released."""
        self.release()
        for slot in range(len(self.arrays)):
            self.arrays[slot] = None
            self.pointers[slot] = None
            self.caps[slot] = 0
        ctypes.memset(self.sizes, 0, ctypes.sizeof(self.sizes))

    def reserve(self, slot: int, count: int, itemsize: int) -> None:
        """Hand the kernel a buffer of ``count`` elements for an output array it would
        otherwise grow from nothing (no doubling copies when ``count`` is an upper
        bound). Untouched pages cost nothing, and ``take`` trims the rest."""
        if count <= 0 or self.pointers[slot]:
            return
        address = _allocate()(count * itemsize)
        if address:  # out of memory here: the kernel grows the array as usual
            self.pointers[slot] = address
            self.caps[slot] = count

    def take(self, slot: int, dtype: np.dtype, length: int) -> np.ndarray:
        """Adopt a kernel-allocated buffer as a numpy array that frees it when collected."""
        address = self.pointers[slot]
        given = self.arrays[slot]
        if given is not None and address == (given.ctypes.data if given.size else None):
            return given[:length]
        capacity = self.caps[slot]
        if not address or capacity == 0:
            return np.zeros(length, dtype=dtype)
        self.pointers[slot] = None
        if capacity > length:  # shrinking in place: glibc splits or remaps, no copy
            trimmed = _LIBC.realloc(address, max(length, 1) * dtype.itemsize)
            if trimmed:
                address, capacity = trimmed, length
        return np.asarray(_KernelBuffer(address, capacity, dtype))[:length]

    def release(self) -> None:
        """Free buffers that were not adopted (after a failed call)."""
        for slot in range(len(self.arrays)):
            if self.arrays[slot] is None and self.pointers[slot]:
                _LIBC.free(self.pointers[slot])
                self.pointers[slot] = None


def _table(holders: list[DescriptorHolder]):
    return (ctypes.POINTER(Descriptor) * len(holders))(
        *[ctypes.pointer(h.struct) for h in holders])


def _check(status: int, holders: list[DescriptorHolder]) -> None:
    if status != 0:
        holders[0].release()
        raise KernelRuntimeError(f"kernel failed with status {status} (out of memory)")


@functools.lru_cache(maxsize=1024)
def _function(address: int):
    return KERNEL_TYPE(address)


def prepared_call(address: int, holders: list[DescriptorHolder]):
    """A zero-argument callable running the kernel on these descriptors (whose slots the
    caller may repoint between calls)."""
    function, table = _function(address), _table(holders)

    def run() -> None:
        status = function(table)
        if status != 0:
            _check(status, holders)
    return run


def call(address: int, holders: list[DescriptorHolder]) -> None:
    """Run a kernel on the calling thread (ctypes releases the GIL for the call)."""
    _check(_function(address)(_table(holders)), holders)


def _chunks(extent: int, threads: int) -> list[tuple[int, int]]:
    """[0, extent) in equal ranges, more than threads so skewed rows (power-law inputs)
    stay balanced."""
    chunks = min(extent, threads * 4)
    bounds = [extent * k // chunks for k in range(chunks + 1)]
    return [(lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo]


def _run_all(holders: list[DescriptorHolder], calls) -> None:
    """Run (function, *args) calls on the pool; raise for the first that failed."""
    futures = [_pool().submit(*call) for call in calls]
    for status in [f.result() for f in futures]:
        _check(status, holders)


def call_parallel(range_address: int, holders: list[DescriptorHolder], extent: int,
                  threads: int) -> None:
    """Split the outermost loop's coordinates [0, extent) into chunks run on the pool."""
    function, table = RANGE_TYPE(range_address), _table(holders)
    _run_all(holders, [(function, table, lo, hi) for lo, hi in _chunks(extent, threads)])


def assemble_parallel(addresses: dict[str, int], holders: list[DescriptorHolder],
                      extent: int, threads: int, reserve) -> None:
    """A sparse output assembled by threads over chunks of its rows: count each chunk's
    entries, ``reserve(total)`` exactly, fill each chunk from its offset, finish."""
    table = _table(holders)
    _check(SETUP_TYPE(addresses["setup"])(table), holders)
    chunks = _chunks(extent, threads)
    counts = [ctypes.c_int64(0) for _ in chunks]
    count = COUNT_TYPE(addresses["count"])
    _run_all(holders, [(count, table, lo, hi, ctypes.byref(c))
                       for (lo, hi), c in zip(chunks, counts)])
    offsets = list(itertools.accumulate((c.value for c in counts), initial=0))
    reserve(offsets[-1])
    fill = FILL_TYPE(addresses["fill"])
    _run_all(holders, [(fill, table, lo, hi, offset)
                       for (lo, hi), offset in zip(chunks, offsets)])
    _check(FINISH_TYPE(addresses["finish"])(table, offsets[-1]), holders)
