"""The in-memory cache of compiled kernels, bounded by bytes, least recently used first.

Every distinct compile used to stay for the life of the process (RSS grew by 0.93 MB a
kernel: 9.5 GB over 10,000). An entry's size is estimated from what it keeps: its IR
texts, object code and statements, plus the execution engine that holds its machine code.
Evicting an entry only drops the cache's reference: a Kernel object or a binding that
still uses the compiled kernel keeps it (and its engine) alive and working, and the
engine is released with the last reference.

``LLVSPARSE_KERNEL_CACHE_MB`` (default 256) sets the bound at import;
``ls.set_kernel_cache_bytes`` changes it at run time.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, MutableMapping
from typing import Any

DEFAULT_BYTES = 256 << 20

# What an engine holding one small kernel's object code costs beyond the bytes counted
# (measured: about 50 KB of RSS per engine loaded from object code).
ENGINE_BYTES = 64 << 10


def footprint(instance: Any) -> int:
    """Estimated bytes an instance keeps alive (see the module docstring)."""
    jit = instance.jit
    texts = (jit.llvm_ir, jit.llvm_ir_optimized, instance.concrete, instance.lattices)
    return ENGINE_BYTES + len(jit.object_code) + sum(len(t) for t in texts if t)


def _bound_from_environment() -> int:
    text = os.environ.get("LLVSPARSE_KERNEL_CACHE_MB")
    if text is None:
        return DEFAULT_BYTES
    try:
        megabytes = float(text)
        return DEFAULT_BYTES if math.isnan(megabytes) else max(0, int(megabytes * 2**20))
    except (ValueError, OverflowError):  # "abc", "inf"
        return DEFAULT_BYTES


class KernelCache(MutableMapping):
    """Instances by key, least recently used first (a lookup counts as a use);
    thread-safe. ``nbytes`` is the estimated total, at most ``max_bytes`` after a store
    unless one entry alone is larger."""

    def __init__(self, max_bytes: int) -> None:
        self._entries: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.max_bytes = max_bytes
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[tuple]:
        with self._lock:
            return iter(list(self._entries))

    def __getitem__(self, key: tuple) -> Any:
        with self._lock:
            instance, _ = self._entries[key]
            self._entries.move_to_end(key)
            return instance

    def __setitem__(self, key: tuple, instance: Any) -> None:
        size = footprint(instance)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.nbytes -= old[1]
            self._entries[key] = (instance, size)
            self.nbytes += size
            self._evict()

    def __delitem__(self, key: tuple) -> None:
        with self._lock:
            _, size = self._entries.pop(key)
            self.nbytes -= size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.nbytes = 0

    def set_max_bytes(self, max_bytes: int) -> None:
        with self._lock:
            self.max_bytes = max_bytes
            self._evict()

    def _evict(self) -> None:
        """Drop least recently used entries until the rest fit (the newest stays even
        if it alone is larger: the caller is about to use it)."""
        while self.nbytes > self.max_bytes and len(self._entries) > 1:
            _, (_, size) = self._entries.popitem(last=False)
            self.nbytes -= size


KERNELS = KernelCache(_bound_from_environment())


def set_kernel_cache_bytes(max_bytes: int) -> None:
    """Bound the memory of compiled kernels kept for reuse (least recently used go
    first); 0 keeps none beyond those Kernel objects still hold."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"the kernel cache bound is a non-negative number of bytes, "
                         f"not {max_bytes!r}")
    KERNELS.set_max_bytes(max_bytes)
