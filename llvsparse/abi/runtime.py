"""The kernel ABI on the host: tensor descriptors, calls and numpy-owned outputs (calls
whose chunks run on several threads are thread_calls.py's).

C view of a descriptor (see docs in README):

    typedef struct {
        int64_t  nlevels;
        int64_t *extents;    /* [nlevels] extent of each level's coordinates */
        int64_t *sizes;      /* [nlevels] positions per level (written for outputs) */
        void   **arrays;     /* level arrays in format order, then values */
        int64_t *capacities; /* elements allocated per array (outputs grow with malloc + free) */
        int64_t *params;     /* level parameters in format order (e.g. hashed W), then
                                a view's start, step, count per windowed level */
    } llvsparse_tensor;
    int32_t kernel(llvsparse_tensor **tensors);   /* tensors[0] is the output */
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import numpy as np

from ..backends.llvm.assembly import STATUS_INSERT_REFUSED
from ..backends.llvm.emit_base import STATUS_NEGATIVE_STORE, STATUS_NO_MEMORY
from .results import BUFFERS, MIN_BYTES, with_spare

_LIBC = ctypes.CDLL(ctypes.util.find_library("c"))
_LIBC.free.argtypes = [ctypes.c_void_p]
_LIBC.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_LIBC.realloc.restype = ctypes.c_void_p
_ALLOC_TYPE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64)


@functools.cache
def _allocate():
    # the JIT's allocator, first needed by an output: a tensor's descriptors (this module)
    # need no LLVM
    from ..backends.cpu import host_allocator

    return _ALLOC_TYPE(host_allocator())


class KernelRuntimeError(RuntimeError):
    """A kernel reported failure; ``status`` is its nonzero return status."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class Descriptor(ctypes.Structure):
    _fields_ = [("nlevels", ctypes.c_int64), ("extents", ctypes.POINTER(ctypes.c_int64)),
                ("sizes", ctypes.POINTER(ctypes.c_int64)),
                ("arrays", ctypes.POINTER(ctypes.c_void_p)),
                ("capacities", ctypes.POINTER(ctypes.c_int64)),
                ("params", ctypes.POINTER(ctypes.c_int64))]


_BYTE = ctypes.c_char
TABLE_TYPE = ctypes.POINTER(ctypes.POINTER(Descriptor))
KERNEL_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, TABLE_TYPE)
class _KernelBuffer:
    """Memory a kernel allocated, shown to numpy through ``__array_interface__`` (the
    array's base); when the last array viewing it is collected, it is freed, or kept
    for the next call's output if it is large (see results)."""

    __slots__ = ("__array_interface__", "nbytes")

    def __init__(self, address: int, count: int, dtype: np.dtype, writeable: bool = True):
        self.__array_interface__ = {"data": (address, not writeable), "shape": (count,),
                                    "typestr": dtype.str, "version": 3}
        self.nbytes = count * dtype.itemsize

    # Finalizers bind what they call: at interpreter exit, module globals may already
    # be None when the last buffers are collected.
    def __del__(self, free=_LIBC.free, pool=BUFFERS) -> None:
        address = self.__array_interface__["data"][0]
        if self.nbytes >= MIN_BYTES:
            pool.give_back(_IdleBlock(address, self.nbytes))
        else:
            free(address)


class _IdleBlock:
    """Memory from the kernels' allocator waiting in the pool; freed if the pool drops
    it, handed over (no longer freed here) when a call takes it."""

    __slots__ = ("address", "nbytes")

    def __init__(self, address: int, nbytes: int):
        self.address, self.nbytes = address, nbytes

    def detach(self) -> int:
        address, self.address = self.address, 0
        return address

    def __del__(self, free=_LIBC.free) -> None:  # bound: see _KernelBuffer.__del__
        if self.address:
            free(self.address)


class _Borrowed:
    """A buffer that a descriptor keeps between calls (see ``copy_out``), shown to numpy
    without taking it over: only the descriptor's own view of it (``kept``) lives on."""

    __slots__ = ("__array_interface__",)

    def __init__(self, address: int, count: int, dtype: np.dtype):
        self.__array_interface__ = {"data": (address, False), "shape": (count,),
                                    "typestr": dtype.str, "version": 3}


# Kernel buffers up to this size are copied out of and kept for the next call on the same
# descriptor (``copy_out``) rather than handed to numpy (``take``): a copy of a few KiB
# costs 0.5 us, a numpy array over foreign memory 3 us, its finalizer's free and the
# next call's allocation more; larger results keep the copy-free hand-over.
KEEP_BYTES = 16 << 10


class DescriptorHolder:
    """A descriptor plus the buffers it points into, kept alive for the call (an
    output's small ones for its next call too: ``copy_out``)."""

    def __init__(self, extents, arrays: list[np.ndarray | None], params: list[int]):
        # Small kernel buffers kept for the next call (``copy_out``), by slot: (address,
        # capacity, a view of it, the fill a fresh allocation starts with). First: the
        # finalizer reads it.
        self.kept: dict[int, tuple[int, int, np.ndarray, int | None]] = {}
        n = len(extents)
        self.extents = (ctypes.c_int64 * max(n, 1))(*extents)
        self.sizes = (ctypes.c_int64 * max(n, 1))()
        self.zero_sizes = np.frombuffer(self.sizes, np.int64)  # (fill: 6x ctypes.memset's speed)
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

    def forget(self, slot: int) -> None:
        """Drop the array in ``slot`` (a caller's, after the call)."""
        self.arrays[slot] = None
        self.pointers[slot] = None
        self.caps[slot] = 0

    def clear(self) -> None:
        """Back to an empty output descriptor (no entries; no arrays but the buffers
        ``copy_out`` kept, each refilled as the kernel's own allocation would be), for
        reuse once its arrays were adopted or released."""
        kept, pointers = self.kept, self.pointers
        for slot, (address, capacity, view, init) in list(kept.items()):
            if pointers[slot] != address or self.caps[slot] != capacity:
                del kept[slot]  # (grown by the kernel since: freed or taken below)
            elif init is not None:
                view.fill(init)
        if len(kept) < len(self.arrays):
            for slot in range(len(self.arrays)):
                if slot not in kept:
                    if self.arrays[slot] is None and pointers[slot]:
                        _LIBC.free(pointers[slot])
                    self.forget(slot)
        self.zero_sizes.fill(0)

    def reserve(self, slot: int, count: int, itemsize: int) -> None:
        """Hand the kernel a buffer of ``count`` elements for an output array it would
        otherwise grow from nothing (no doubling copies when ``count`` is an upper
        bound). Untouched pages cost nothing, and ``take`` trims the rest."""
        if count <= 0 or self.pointers[slot]:
            return
        nbytes = count * itemsize
        idle = BUFFERS.take(nbytes) if nbytes >= MIN_BYTES else None
        address = idle.detach() if idle is not None else _allocate()(nbytes)
        if address:  # out of memory here: the kernel grows the array as usual
            self.pointers[slot] = address
            self.caps[slot] = count

    def copy_out(self, slot: int, dtype: np.dtype, length: int, writeable: bool,
                 init: int | None) -> np.ndarray:
        """``take``, for a buffer of at most KEEP_BYTES a copy instead (read-only ones over
        bytes): the buffer stays in this descriptor for its next call (``clear`` refills
        it with ``init``, what the kernel's allocation would hold; None: nothing) and is
        freed with it."""
        address, capacity = self.pointers[slot], self.caps[slot]
        if not address or capacity * dtype.itemsize > KEEP_BYTES \
                or self.arrays[slot] is not None:
            self.kept.pop(slot, None)
            return self.take(slot, dtype, length, writeable)
        entry = self.kept.get(slot)
        if entry is None or entry[0] != address or entry[1] != capacity:
            view = np.asarray(_Borrowed(address, capacity, dtype))
            entry = self.kept[slot] = (address, capacity, view, init)
        if writeable:
            return entry[2][:length].copy()
        # Over immutable bytes, numpy never lets it be made writeable again (as over a
        # taken read-only buffer): a validated result's index arrays stay as checked.
        array = np.frombuffer(entry[2][:length].tobytes(), dtype)
        if array.flags.aligned:  # (bytes' data is 16-byte aligned in CPython)
            return array
        del self.kept[slot]
        return self.take(slot, dtype, length, writeable)

    def take(self, slot: int, dtype: np.dtype, length: int,
             writeable: bool = True) -> np.ndarray:
        """Adopt a kernel-allocated buffer as a numpy array that frees it when collected;
        ``writeable=False``: read-only, with everything it views."""
        address = self.pointers[slot]
        given = self.arrays[slot]
        if given is not None and address == (given.ctypes.data if given.size else None):
            view = given[:length]
            return view if writeable else make_read_only(view)
        capacity = self.caps[slot]
        if not address or capacity == 0:
            empty = np.zeros(length, dtype=dtype)
            return empty if writeable else make_read_only(empty)
        self.pointers[slot] = None
        # Shrinking in place (glibc splits or remaps, no copy), unless the buffer is one
        # to recycle and its spare room is what the next call reserves (with_spare).
        if capacity > length and (capacity * dtype.itemsize < MIN_BYTES
                                  or capacity > with_spare(length)):
            trimmed = _LIBC.realloc(address, max(length, 1) * dtype.itemsize)
            if trimmed:
                address, capacity = trimmed, length
        return np.asarray(_KernelBuffer(address, capacity, dtype, writeable))[:length]

    def private_copy(self, slots: list[int]) -> DescriptorHolder:
        """A descriptor for one thread: the same arrays, except ``slots``, which start
        empty for the kernel to grow (that thread's own buffers)."""
        copy = DescriptorHolder(list(self.extents), [None] * len(self.arrays),
                                list(self.params))
        copy.share(self, slots)
        for slot in slots:
            copy.pointers[slot], copy.caps[slot] = None, 0
        return copy

    def share(self, other: DescriptorHolder, own: list[int]) -> None:
        """Point every slot but ``own`` at ``other``'s arrays, with no entries yet."""
        for slot in range(len(self.arrays)):
            if slot not in own:
                self.pointers[slot], self.caps[slot] = other.pointers[slot], other.caps[slot]
        self.zero_sizes.fill(0)

    def give_back(self, slots: list[tuple[int, int]]) -> None:
        """Let go of the buffers in ``slots`` (slot, element size): large ones wait in
        the pool for the next call's reservations (a thread's buffers are the same size
        call after call, and fresh ones would cost their page faults again), the rest
        are freed."""
        for slot, itemsize in slots:
            address, nbytes = self.pointers[slot], self.caps[slot] * itemsize
            if not address:
                continue
            if nbytes >= MIN_BYTES:
                BUFFERS.give_back(_IdleBlock(address, nbytes))
            else:
                _LIBC.free(address)
            self.pointers[slot], self.caps[slot] = None, 0
            self.kept.pop(slot, None)

    def __del__(self, free=_LIBC.free) -> None:  # bound: see _KernelBuffer.__del__
        for slot, entry in self.kept.items():
            if self.pointers[slot] == entry[0]:
                free(entry[0])

    def release(self) -> None:
        """Free buffers that were not adopted (after a failed call), kept ones too."""
        self.kept.clear()
        for slot in range(len(self.arrays)):
            if self.arrays[slot] is None and self.pointers[slot]:
                _LIBC.free(self.pointers[slot])
                self.pointers[slot] = None


def make_read_only(array: np.ndarray) -> np.ndarray:
    """Make ``array`` and every array it views read-only (no writeable view of its
    memory is left), and return it."""
    view = array
    while isinstance(view, np.ndarray):
        view.flags.writeable = False
        view = view.base
    return array


def taken_address(array: np.ndarray) -> int | None:
    """Where a read-only array that ``DescriptorHolder.take`` made from a kernel's buffer
    starts (a view from the buffer's start); None for any other array. ``.ctypes``
    costs 2 us an array, ``from_buffer`` takes writeable arrays only."""
    base = array.base
    if type(base) is np.ndarray and type(base.base) is _KernelBuffer:
        return base.base.__array_interface__["data"][0]
    return None


def descriptor_table(holders: list[DescriptorHolder]):
    return (ctypes.POINTER(Descriptor) * len(holders))(
        *[ctypes.pointer(h.struct) for h in holders])


# What a kernel's nonzero return status means.
STATUS_MEANINGS = {
    STATUS_NO_MEMORY: "out of memory",
    STATUS_NEGATIVE_STORE: "a level function stored at a negative position: a plugin "
                           "level's insert or append function is wrong",
    STATUS_INSERT_REFUSED: "an output level refused an insert: the positions it keeps for "
                           "one parent are all taken (a level parameter that fixes them, "
                           "such as a hash level's bucket count, is too small)",
}


def check_status(status: int, holders: list[DescriptorHolder]) -> None:
    if status != 0:
        holders[0].release()
        meaning = STATUS_MEANINGS.get(status, "unknown status")
        raise KernelRuntimeError(f"kernel failed with status {status} ({meaning})", status)


@functools.lru_cache(maxsize=1024)
def _function(address: int):
    return KERNEL_TYPE(address)


def prepared_call(address: int, holders: list[DescriptorHolder]):
    """A zero-argument callable running the kernel on these descriptors (whose slots the
    caller may repoint between calls)."""
    function, table = _function(address), descriptor_table(holders)

    def run() -> None:
        status = function(table)
        if status != 0:
            check_status(status, holders)
    return run


def call(address: int, holders: list[DescriptorHolder]) -> None:
    """Run a kernel on the calling thread (ctypes releases the GIL for the call)."""
    check_status(_function(address)(descriptor_table(holders)), holders)
