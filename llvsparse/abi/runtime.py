"""The kernel ABI on the host: tensor descriptors, calls and numpy-owned outputs.

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
import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

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
def _chunk_runner():
    # the JIT's host helpers, first needed by a threaded call: a tensor's descriptors
    # (this module) need no LLVM
    from ..backends.cpu import host_chunk_runner

    run, close = host_chunk_runner()
    return _RUN_CHUNKS_TYPE(run), _CLOSE_TYPE(close)


@functools.cache
def _allocate():
    # the JIT's allocator, first needed by an output: see _chunk_runner
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
_TABLE = ctypes.POINTER(ctypes.POINTER(Descriptor))
KERNEL_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, _TABLE)
RANGE_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, _TABLE, ctypes.c_int64, ctypes.c_int64)
# ... and an entry split's, which also takes its window of positions [lo, hi).
WINDOW_RANGE_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, _TABLE, *[ctypes.c_int64] * 4)
SETUP_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, _TABLE)
COUNT_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, _TABLE, ctypes.c_int64, ctypes.c_int64,
                              ctypes.POINTER(ctypes.c_int64))
FILL_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, _TABLE, ctypes.c_int64, ctypes.c_int64,
                             ctypes.c_int64)
FINISH_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, _TABLE, ctypes.c_int64)
APPEND_TYPE = COUNT_TYPE
_RUN_CHUNKS_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, _TABLE, ctypes.c_void_p,
                                    ctypes.c_int64, ctypes.POINTER(ctypes.c_int64))
_CLOSE_TYPE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_int64))
_POOL: list[tuple[ThreadPoolExecutor, int]] = []
_POOL_LOCK = threading.Lock()
_DEFAULT_THREADS = [os.cpu_count() or 1]


MAX_THREADS = 1024  # each is an OS thread kept in the pool: 10**6 took 12 s per call


def checked_thread_count(count) -> int:
    """``count`` as a thread count: an integer from 1 to MAX_THREADS (2.5 and True are
    refused rather than read as 2 and 1)."""
    if isinstance(count, (bool, np.bool_)) or not isinstance(count, (int, np.integer)) \
            or not 1 <= count <= MAX_THREADS:
        raise ValueError(f"threads must be an integer from 1 to {MAX_THREADS}, not {count!r}")
    return int(count)


def set_num_threads(count: int) -> None:
    """Default thread count for kernels whose outermost loop can be split."""
    _DEFAULT_THREADS[0] = checked_thread_count(count)


def get_num_threads() -> int:
    return _DEFAULT_THREADS[0]


def _pool(workers: int) -> ThreadPoolExecutor:
    """One process-wide pool of at least ``workers`` threads (the machine's cores unless a
    call asks for more), so threads are not created per call. A smaller pool that is
    replaced lets its threads go once the calls still holding it are done."""
    with _POOL_LOCK:
        if not _POOL or _POOL[0][1] < workers:
            size = max(os.cpu_count() or 1, workers)
            _POOL[:] = [(ThreadPoolExecutor(size, thread_name_prefix="llvsparse"), size)]
        return _POOL[0][0]


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

    def forget(self, slot: int) -> None:
        """Drop the array in ``slot`` (a caller's, after the call)."""
        self.arrays[slot] = None
        self.pointers[slot] = None
        self.caps[slot] = 0

    def clear(self) -> None:
        """Back to an empty output descriptor (no arrays, no entries), for reuse once its
        arrays were adopted or released."""
        self.release()
        for slot in range(len(self.arrays)):
            self.forget(slot)
        ctypes.memset(self.sizes, 0, ctypes.sizeof(self.sizes))

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
        ctypes.memset(self.sizes, 0, ctypes.sizeof(self.sizes))

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

    def release(self) -> None:
        """Free buffers that were not adopted (after a failed call)."""
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


# Chunks per thread: more than one, so a thread that drew light chunks takes more while
# another is still in a heavy one.
CHUNKS_PER_THREAD = 8


@dataclass(frozen=True)
class Split:
    """How a call's outermost coordinates [0, extent) are shared among threads: chunks in
    coordinate order, and the order threads draw them in (heaviest first, so the last
    chunks drawn are short)."""

    chunks: tuple[tuple[int, int], ...]
    order: tuple[int, ...]
    threads: int
    work: tuple[int, ...] = ()  # per chunk: its rows' weights, plus one per row
    # An entry split's: per chunk, the window of positions its rows are cut to (the
    # kernel then adds a cut row's partial sum into the output atomically).
    windows: tuple[tuple[int, int], ...] = ()

    @functools.cached_property
    def drawn_bounds(self) -> np.ndarray:
        """(lo, hi) of each chunk in drawing order, for the native chunk loop."""
        return np.array([self.chunks[k] for k in self.order], dtype=np.int64).reshape(-1, 2)


def split(extent: int, threads: int, weights: np.ndarray | None = None) -> Split:
    """Chunks of about equal work: ``weights[c]`` is the stored entries under coordinate c
    (each coordinate also costs one unit of its own); without weights, equal ranges."""
    count = max(min(extent, threads * CHUNKS_PER_THREAD), 1)
    cost = np.arange(1.0, extent + 1) if weights is None else np.cumsum(weights + 1.0)
    targets = cost[-1] * np.arange(1, count) / count if extent else np.zeros(0)
    inner = np.searchsorted(cost, targets, side="left") + 1
    # A coordinate worth a whole share gets a chunk to itself, so no light rows wait
    # behind it in the same thread.
    heavy = np.zeros(0, dtype=np.int64)
    if weights is not None and extent:
        heavy = np.flatnonzero(weights + 1.0 >= cost[-1] / count)
    bounds = np.unique(np.concatenate([[0], np.clip(inner, 1, extent), heavy, heavy + 1,
                                       [extent]]))
    chunks = tuple((int(lo), int(hi)) for lo, hi in itertools.pairwise(bounds))
    work = [cost[hi - 1] - (cost[lo - 1] if lo else 0.0) for lo, hi in chunks]
    order = tuple(sorted(range(len(chunks)), key=lambda k: -work[k]))
    return Split(chunks, order, threads, tuple(int(w) for w in work))


@dataclass(frozen=True)
class Phase:
    """Work over every chunk of a split: ``run_chunk(k)`` returns the kernel's status;
    ``after()`` runs once, on one thread, when every chunk of this phase is done and
    before any of the next phase starts."""

    run_chunk: Callable[[int], int]
    after: Callable[[], None] | None = None


def run_phases(holders: list[DescriptorHolder], plan: Split, phases: list[Phase]) -> None:
    """The phases one after another on up to ``plan.threads`` threads (the caller and pool
    workers) drawing chunks in ``plan.order``. Workers are handed the whole call once,
    not a job per phase: waking a pool thread costs about 50 us on this kind of virtual
    machine, and a handoff per phase doubled the overhead of a small call.

    No thread ever waits for one that has not started: a worker joins at whatever phase
    the call has reached (or leaves, if it is over), and a thread that finds a phase's
    chunks all drawn waits only for the chunks in flight. (A barrier over all the
    threads deadlocked when two calls shared the pool: each held part of the workers
    the other waited for.) After a failed chunk nothing more is drawn; raise for it."""
    count = len(plan.chunks)
    statuses = [0] * count
    errors: list[BaseException] = []
    state = threading.Condition()
    # Emptied when the call returns: a helper that starts later must not keep the call's
    # arrays alive (a result's memory is recycled once it is collected).
    live = list(phases)
    # The current phase, and how many of its chunks are drawn and finished.
    progress = {"phase": 0, "drawn": 0, "finished": 0}

    def failed() -> bool:
        return bool(errors) or any(statuses)

    def draw() -> tuple[int, int] | None:
        """The next (phase, chunk) to run, waiting out chunks in flight; None when the
        call is over or has failed. Called with ``state`` held."""
        while progress["phase"] < len(live) and not failed():
            if progress["drawn"] < count:
                progress["drawn"] += 1
                return progress["phase"], plan.order[progress["drawn"] - 1]
            state.wait()
        return None

    def finish(n: int, k: int, status: int | None, error: BaseException | None) -> None:
        """Record chunk ``k`` of phase ``n``; the last of a phase runs its ``after`` and
        opens the next. Called with ``state`` held."""
        if error is not None:
            errors.append(error)
        statuses[k] = status or 0
        progress["finished"] += 1
        if progress["finished"] == count and not failed():
            try:
                if live[n].after:
                    live[n].after()
            except BaseException as after_error:  # noqa: BLE001 -- the caller raises it
                errors.append(after_error)
            progress.update(phase=n + 1, drawn=0, finished=0)
        state.notify_all()

    def work() -> None:
        while True:
            with state:
                drawn = draw()
            if drawn is None:
                return
            n, k = drawn
            status, error = None, None
            try:
                status = live[n].run_chunk(k)
            except BaseException as chunk_error:  # noqa: BLE001 -- the caller raises it
                error = chunk_error
            with state:
                finish(n, k, status, error)

    helpers = min(plan.threads, count) - 1
    pool = _pool(helpers) if helpers > 0 else None
    for _ in range(helpers):
        pool.submit(work)
    work()
    with state:  # after a failure, chunks other threads are running still use the holders
        while progress["drawn"] > progress["finished"]:
            state.wait()
        live.clear()
    if errors:
        raise errors[0]
    for status in statuses:
        check_status(status, holders)


def call_parallel(range_address: int, holders: list[DescriptorHolder], plan: Split,
                  prepare: Callable[[int, int], None] | None = None) -> None:
    """Run the outermost loop's chunks of ``plan`` on its threads (without ``prepare``,
    the chunk loop is native: see ``_run_chunks_natively``).

    ``prepare(lo, hi)``: done to every chunk's rows by the threads before any chunk's
    kernel runs (clearing a caller's output, paging in a fresh one), so that work is
    shared too. (Doing it to each chunk just before its kernel measured slower: page
    faults mixed with the other thread's streaming cost more.)
    """
    if prepare is None and not plan.windows:
        _run_chunks_natively(range_address, holders, plan)
        return
    table = descriptor_table(holders)
    if plan.windows:  # a few chunks a thread: the chunk loop in Python costs little
        windowed = WINDOW_RANGE_TYPE(range_address)
        run = Phase(lambda k: windowed(table, *plan.chunks[k], *plan.windows[k]))
    else:
        function = RANGE_TYPE(range_address)
        run = Phase(lambda k: function(table, *plan.chunks[k]))

    def prepare_chunk(k: int) -> int:
        prepare(*plan.chunks[k])
        return 0
    run_phases(holders, plan, [Phase(prepare_chunk), run] if prepare else [run])


def call_private_outputs(range_address: int, outputs: list[DescriptorHolder],
                         inputs: list[DescriptorHolder], plan: Split) -> None:
    """Chunk k of ``plan`` (a range of the loop over a reduced index) into its own
    output ``outputs[k]``: no two threads write one entry; the caller combines them."""
    function = RANGE_TYPE(range_address)
    tables = [descriptor_table([out, *inputs]) for out in outputs]
    run_phases([outputs[0], *inputs], plan,
               [Phase(lambda k: function(tables[k], *plan.chunks[k]))])


def _run_chunks_natively(range_address: int, holders: list[DescriptorHolder],
                         plan: Split) -> None:
    """One kernel phase with the chunk loop in native code: helpers need the GIL only to
    start (a Python chunk loop left a pool worker waiting for the GIL while the caller
    drew every chunk of a short call), and the caller does not wait for a helper that
    has not started by the time the chunks are gone."""
    run, close = _chunk_runner()
    table, bounds = descriptor_table(holders), plan.drawn_bounds
    state = (ctypes.c_int64 * 3)()
    args = (range_address, table, bounds.ctypes.data, len(bounds), state)
    helpers = min(plan.threads, len(bounds)) - 1
    pool = _pool(helpers) if helpers > 0 else None
    for _ in range(helpers):
        pool.submit(run, *args)
    run(*args)
    close(state)
    check_status(state[1], holders)


def assemble_parallel(addresses: dict[str, int], holders: list[DescriptorHolder],
                      plan: Split, reserve: Callable[[int], None]) -> None:
    """A sparse output assembled by threads over chunks of its rows: count each chunk's
    entries, ``reserve(total)`` exactly, fill each chunk from its offset, finish."""
    table = descriptor_table(holders)
    check_status(SETUP_TYPE(addresses["setup"])(table), holders)
    counts = [ctypes.c_int64(0) for _ in plan.chunks]
    offsets: list[int] = []
    count, fill = COUNT_TYPE(addresses["count"]), FILL_TYPE(addresses["fill"])

    def size_output() -> None:
        offsets.extend(itertools.accumulate((c.value for c in counts), initial=0))
        reserve(offsets[-1])

    run_phases(holders, plan, [
        Phase(lambda k: count(table, *plan.chunks[k], ctypes.byref(counts[k])), size_output),
        Phase(lambda k: fill(table, *plan.chunks[k], offsets[k]))])
    check_status(FINISH_TYPE(addresses["finish"])(table, offsets[-1]), holders)
