"""Kernels run by threads: the thread pool and its default size, splits of a loop's
outermost coordinates into chunks of about equal work, and calls whose chunks (or phases
of chunks: count, fill, finish) run on several threads. The descriptors and the
single-threaded call are runtime.py's."""

from __future__ import annotations

import ctypes
import functools
import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .runtime import TABLE_TYPE, DescriptorHolder, check_status, descriptor_table

RANGE_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, TABLE_TYPE, ctypes.c_int64, ctypes.c_int64)
# ... and an entry split's, which also takes its window of positions [lo, hi).
WINDOW_RANGE_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, TABLE_TYPE, *[ctypes.c_int64] * 4)
SETUP_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, TABLE_TYPE)
COUNT_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, TABLE_TYPE, ctypes.c_int64, ctypes.c_int64,
                              ctypes.POINTER(ctypes.c_int64))
FILL_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, TABLE_TYPE, ctypes.c_int64, ctypes.c_int64,
                             ctypes.c_int64)
FINISH_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, TABLE_TYPE, ctypes.c_int64)
APPEND_TYPE = COUNT_TYPE
_RUN_CHUNKS_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, TABLE_TYPE, ctypes.c_void_p,
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


@functools.cache
def _chunk_runner():
    # the JIT's host helpers, first needed by a threaded call: a tensor's descriptors
    # (runtime.py) need no LLVM
    from ..backends.cpu import host_chunk_runner

    run, close = host_chunk_runner()
    return _RUN_CHUNKS_TYPE(run), _CLOSE_TYPE(close)


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
