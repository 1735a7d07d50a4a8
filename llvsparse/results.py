"""Recycled memory for large dense results.

A fresh 50 MB result costs its page faults on every call (7.5 ms of a 47 ms SpMM on one
thread here, taken by both threads alike on two), because freed memory that large goes
back to the system. A loop of calls usually drops the last result before the next call
returns, so its memory is kept here and handed to the next call of the same size, which
clears it instead (a clear is one pass over mapped pages, split among the call's threads).

Memory is only reused once no array views it: each result's base is a lease whose
collection gives the memory back.
"""

from __future__ import annotations

import threading

import numpy as np

MIN_BYTES = 4 << 20  # smaller buffers are recycled by malloc itself
DEFAULT_LIMIT = 512 << 20


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
    """Idle result buffers of at least MIN_BYTES, at most ``limit`` bytes in all."""

    def __init__(self, limit: int = DEFAULT_LIMIT):
        self.limit = limit
        self.idle: list[np.ndarray] = []  # oldest first
        self.lock = threading.Lock()

    def zeros(self, count: int, dtype: np.dtype) -> tuple[np.ndarray, bool]:
        """A flat result of ``count`` elements, and whether it is recycled: a fresh one
        is zero (untouched pages), a recycled one holds an earlier result until cleared."""
        nbytes = count * dtype.itemsize
        if nbytes < MIN_BYTES or self.limit < nbytes:
            return np.zeros(count, dtype), False
        memory = self.take(nbytes)
        recycled = memory is not None
        if memory is None:
            memory = np.zeros(nbytes, np.uint8)
        return np.asarray(_Lease(memory, count, dtype, self)), recycled

    def take(self, nbytes: int) -> np.ndarray | None:
        with self.lock:
            for k, memory in enumerate(self.idle):
                if memory.nbytes == nbytes:
                    return self.idle.pop(k)
        return None

    def give_back(self, memory: np.ndarray) -> None:
        with self.lock:
            self.idle.append(memory)
            self._trim()

    def set_limit(self, nbytes: int) -> None:
        with self.lock:
            self.limit = nbytes
            self._trim()

    def _trim(self) -> None:
        """Drop the oldest idle buffers beyond the limit (the lock is held)."""
        held = sum(m.nbytes for m in self.idle)
        while self.idle and held > self.limit:
            held -= self.idle.pop(0).nbytes


RESULTS = ResultPool()


def set_result_pool_bytes(nbytes: int) -> None:
    """How many bytes of idle large results to keep for reuse (0: none; each result
    then gets fresh memory)."""
    if nbytes < 0:
        raise ValueError("the result pool's limit must be 0 or more bytes")
    RESULTS.set_limit(nbytes)
