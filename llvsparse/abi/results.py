"""Recycled memory for large results.

A fresh 50 MB result costs its page faults on every call (7.5 ms of a 47 ms SpMM on one
thread here, taken by both threads alike on two; 28 huge-page faults of a 12 ms SpAdd),
because freed memory that large goes back to the system. A loop of calls usually drops
the last result before the next call returns, so its memory is kept here and handed to
the next call that needs the same number of bytes: dense results (``RESULTS``, cleared
unless the kernel writes every entry) and the arrays kernels assemble sparse results in
(``BUFFERS``, see runtime).

Memory is only reused once no array views it: each result's base is an object whose
collection gives the memory back.
"""

from __future__ import annotations

import collections
import os
import threading

import numpy as np

MIN_BYTES = 4 << 20  # smaller buffers are recycled by malloc itself
DEFAULT_LIMIT = 256 << 20


def physical_memory() -> int | None:
    """Bytes of RAM in this machine, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_fits_memory(nbytes: int, what: str) -> None:
    """Refuse a result that cannot fit in RAM before a kernel starts writing it: its
    allocation may succeed (memory is committed lazily), and the kernel's writes then
    get the process killed by the system rather than raise."""
    total = physical_memory()
    if total is not None and nbytes > total:
        raise MemoryError(f"{what} would take {nbytes / 2**30:.1f} GiB, more than this "
                          f"machine's {total / 2**30:.1f} GiB of memory")


def with_spare(entries: int) -> int:
    """What to reserve for a call expected to assemble ``entries``, as the last call did:
    a little more, since kernels make room for a row's largest possible number of
    entries before it (a union of two rows), and growing mid-call would copy."""
    return entries + max(entries // 32, 1024)


class _Lease:
    """The base of a result array: its collection returns the memory to the pool."""

    __slots__ = ("__array_interface__", "memory", "pool")

    def __init__(self, memory: np.ndarray, count: int, dtype: np.dtype, pool: ResultPool):
        self.__array_interface__ = {"data": (memory.ctypes.data, False), "shape": (count,),
                                    "typestr": dtype.str, "version": 3}
        self.memory, self.pool = memory, pool

    def __del__(self) -> None:
        self.pool.give_back(self.memory)


class ResultPool:
    """Idle result buffers of at least MIN_BYTES, at most ``limit`` bytes in all: numpy
    arrays, or blocks of the kernels' allocator (anything with ``nbytes``)."""

    def __init__(self, limit: int = DEFAULT_LIMIT):
        self.limit = limit
        self.idle: list[np.ndarray] = []  # oldest first; only with the lock held
        # Given back, not yet idle: buffers return from __del__, which garbage collection
        # may run on a thread that holds the lock (allocating inside take), so returning
        # never waits for it; the lock's holder moves them to ``idle``.
        self.returned: collections.deque = collections.deque()
        self.lock = threading.Lock()

    def zeros(self, count: int, dtype: np.dtype,
              overwritten: bool = False) -> tuple[np.ndarray, bool]:
        """A flat result of ``count`` elements, and whether it may hold old values: a
        recycled one holds an earlier result until cleared; a fresh one is zero (large
        ones are untouched pages), unless it is small and ``overwritten`` (the kernel
        sets every entry), when malloc's memory is not cleared (scipy's 400k-row SpMV
        result: a 3.2 MB memset per call)."""
        nbytes = count * dtype.itemsize
        if nbytes < MIN_BYTES or self.limit < nbytes:
            if overwritten:
                return np.empty(count, dtype), True
            return np.zeros(count, dtype), False
        memory = self.take(nbytes)
        recycled = memory is not None
        if memory is None:
            memory = np.zeros(nbytes, np.uint8)
        return np.asarray(_Lease(memory, count, dtype, self)), recycled

    def take(self, nbytes: int):
        """An idle buffer of exactly ``nbytes``, now the caller's, or None."""
        with self.lock:
            self._settle()
            for k, memory in enumerate(self.idle):
                if memory.nbytes == nbytes:
                    return self.idle.pop(k)
        return None

    def give_back(self, memory) -> None:
        self.returned.append(memory)
        if self.lock.acquire(blocking=False):  # else its holder settles it
            try:
                self._settle()
            finally:
                self.lock.release()

    def set_limit(self, nbytes: int) -> None:
        with self.lock:
            self.limit = nbytes
            self._settle()

    def _settle(self) -> None:
        """Make returned buffers idle, then drop the oldest beyond the limit (the lock is
        held; a collection meanwhile only appends to ``returned``)."""
        while self.returned:
            self.idle.append(self.returned.popleft())
        held = sum(m.nbytes for m in self.idle)
        while self.idle and held > self.limit:
            held -= self.idle.pop(0).nbytes


RESULTS = ResultPool()
BUFFERS = ResultPool()


def set_result_pool_bytes(nbytes: int) -> None:
    """How many bytes of idle large results to keep for reuse, dense and sparse each
    (0: none; each result then gets fresh memory)."""
    if nbytes < 0:
        raise ValueError("the result pool's limit must be 0 or more bytes")
    RESULTS.set_limit(nbytes)
    BUFFERS.set_limit(nbytes)
