"""How ``llvsparse bench`` times: thread pools pinned to one thread, each implementation
verified, warmed up and timed in rounds in a rotated order, and each measurement set
against the fastest peer and (SpMV) the measured memory bandwidth."""

from __future__ import annotations

import gc
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .bench_kernels import Case, Impl, Prepared, verify
from .bench_llvsparse import LS_NOTES

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
MIN_MEASURE_S = 0.005  # a measurement repeats a call until it has run this long
SLOW_CALL_S = 3.0  # a warm-up slower than this is reported as one call, not timed in rounds


@dataclass
class Pinning:
    """How thread pools were pinned (reported verbatim)."""

    statements: list[str] = field(default_factory=list)
    controller: Any = None


def pin_threads() -> Pinning:
    """Pin BLAS/OpenMP (threadpoolctl), numba and llvsparse to one thread."""
    pinning = Pinning()
    for var in THREAD_VARS:  # read by libraries loaded after this (MKL, numba, GraphBLAS)
        os.environ.setdefault(var, "1")
    # OpenMP workers (GraphBLAS-2t) otherwise spin after each parallel region and take the
    # second core from whichever implementation runs next in the rotation.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("KMP_BLOCKTIME", "0")
    env = ", ".join(f"{v}={os.environ.get(v)}" for v in (
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS",
        "OMP_WAIT_POLICY", "KMP_BLOCKTIME"))
    pinning.statements.append(f"environment: {env}")
    try:
        from threadpoolctl import threadpool_limits

        pinning.controller = threadpool_limits(limits=1)
        pinning.statements.append("threadpoolctl.threadpool_limits(1) on BLAS and OpenMP pools")
    except ImportError:
        pinning.statements.append("threadpoolctl not installed: BLAS/OpenMP pinned only by the "
                                  "environment variables (effective if set before start-up)")
    try:
        import numba

        numba.set_num_threads(1)
        pinning.statements.append("numba.set_num_threads(1) (the loops are serial anyway)")
    except (ImportError, ValueError):
        pass
    try:
        from llvsparse.abi import thread_calls

        if hasattr(thread_calls, "set_num_threads"):
            thread_calls.set_num_threads(1)
            pinning.statements.append("llvsparse.abi.thread_calls.set_num_threads(1); "
                                      "llvsparse columns pass threads=N per call")
    except ImportError:
        pass
    pinning.statements.append("GraphBLAS: gb.ss.config['nthreads'] = 1 or 2 per column; "
                              "MKL: mkl_set_num_threads(1)")
    return pinning


# -- timing ----------------------------------------------------------------------------------------
@dataclass
class Record:
    """One implementation on one kernel and input."""

    kernel: str
    input: str
    impl: str
    library: str
    threads: int
    input_meta: dict
    verified: bool = False
    error: str | None = None
    times_s: list[float] = field(default_factory=list)
    repeat: int = 1
    single_call: bool = False
    note: str | None = None
    ratio_to_best_peer: float | None = None
    ratio_to_best_1t_peer: float | None = None
    spmv_min_bytes: int | None = None
    roofline_fraction: float | None = None

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.times_s) if self.times_s else None

    @property
    def min_s(self) -> float | None:
        return min(self.times_s) if self.times_s else None

    def as_json(self) -> dict:
        data = dict(self.__dict__)
        data["median_s"] = self.median_s
        data["min_s"] = self.min_s
        return data


def time_once(call: Callable[[], Any]) -> float:
    """Seconds of one call (a warm-up, or a call too slow to repeat)."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def time_per_call(call: Callable[[], Any], repeat: int) -> float:
    """Mean seconds per call over ``repeat`` calls (short calls cannot be timed alone)."""
    start = time.perf_counter()
    for _ in range(repeat):
        call()
    return (time.perf_counter() - start) / repeat


def run_case(case: Case, impls: list[Impl], rounds: int) -> list[Record]:
    """Verify, warm up and time every implementation of ``case``'s kernel, interleaved."""
    records: list[Record] = []
    ready: list[tuple[Record, Impl, Prepared]] = []
    for impl in impls:
        prepare = impl.kernels.get(case.kernel)
        if prepare is None:
            continue
        record = Record(case.kernel, case.input_name, impl.name, impl.library, impl.threads,
                        case.meta, note=impl.notes.get(case.kernel))
        records.append(record)
        try:
            impl.configure()
            prepared = prepare(case)
            problem = verify(prepared.result(prepared.call()), case.reference)
        except Exception as error:  # noqa: BLE001 - a failing peer is reported, not fatal
            record.error = f"{type(error).__name__}: {error}"[:300]
            continue
        if problem is not None:
            record.error = f"wrong result: {problem}"
            continue
        record.verified = True
        if impl.library == "llvsparse" and case.kernel in LS_NOTES:
            record.note = LS_NOTES[case.kernel]
        warm = time_once(prepared.call)
        if warm > SLOW_CALL_S:
            record.single_call = True
            record.times_s = [warm]
            record.note = (record.note + "; " if record.note else "") + \
                f"slower than {SLOW_CALL_S:g} s per call: one warm call reported, no rounds"
            continue
        record.repeat = max(1, min(10_000, math.ceil(MIN_MEASURE_S / max(warm, 1e-7))))
        ready.append((record, impl, prepared))
    gc_was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            shift = r % max(len(ready), 1)
            for record, impl, prepared in ready[shift:] + ready[:shift]:
                impl.configure()
                record.times_s.append(time_per_call(prepared.call, record.repeat))
    finally:
        if gc_was:
            gc.enable()
    return records


def spmv_min_bytes(meta: dict) -> int:
    """vals (8 B) + column indices (4 B) per nonzero, row pointers (4 B), x and y (8 B)."""
    rows, cols, nnz = meta["rows"], meta["cols"], meta["nnz"]
    return 12 * nnz + 4 * (rows + 1) + 8 * cols + 8 * rows


def annotate(records: list[Record], bandwidth: dict[int, float]) -> None:
    """Ratios to the fastest (and fastest 1-thread) verified peer; SpMV roofline fractions."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for record in records:
        groups.setdefault((record.kernel, record.input), []).append(record)
    for group in groups.values():
        peers = [r for r in group if r.library != "llvsparse" and r.verified and r.times_s]
        best = min((r.median_s for r in peers), default=None)  # type: ignore[type-var]
        best_1t = min((r.median_s for r in peers if r.threads == 1),  # type: ignore[type-var]
                      default=None)
        for record in group:
            if record.median_s is None:
                continue
            if best:
                record.ratio_to_best_peer = record.median_s / best
            if best_1t:
                record.ratio_to_best_1t_peer = record.median_s / best_1t
            if record.kernel.startswith("spmv"):
                record.spmv_min_bytes = spmv_min_bytes(record.input_meta)
                gbs = bandwidth.get(record.threads) or bandwidth.get(1)
                if gbs:
                    rate = record.spmv_min_bytes / record.median_s
                    record.roofline_fraction = rate / (gbs * 1e9)
