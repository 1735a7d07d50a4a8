"""``llvsparse bench``: run a suite of sparse kernels on generated and real inputs for
llvsparse and every installed peer, verify each result, time them interleaved, and report
a table, JSON, a PNG chart and a measured SpMV roofline.

Method: every implementation's result is checked against a scipy/numpy reference before
it is timed; then one warm-up call, then ``--rounds`` rounds in which the implementations
run one after another in an order rotated each round. A measurement repeats the call until
it has run for at least 5 ms (tiny inputs) and records the mean per call; the report gives
the median and minimum over rounds. Thread pools (BLAS, OpenMP, MKL, numba, GraphBLAS,
llvsparse) are pinned to one thread, except in the columns marked ``-2t``.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from . import bench_inputs as inputs
from .bench_edges import edge_costs, edges_table
from .bench_peers import (
    KERNELS,
    LS_NOTES,
    Case,
    Impl,
    Prepared,
    discover,
    llvsparse_supports_threads,
    make_case,
    skip_reason,
    verify,
)

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
MIN_MEASURE_S = 0.005  # a measurement repeats a call until it has run this long
LARGE_S = 0.001  # the second summary keeps inputs where the fastest peer takes this long
SLOW_CALL_S = 3.0  # a warm-up slower than this is reported as one call, not timed in rounds


# -- progress ----------------------------------------------------------------------------------
class Progress:
    """A one-line progress bar on stderr (a line per step when stderr is not a terminal)."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.start = time.perf_counter()
        self.enabled = enabled
        self.tty = sys.stderr.isatty()

    def step(self, label: str) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        fraction = self.done / self.total
        width = 30
        bar = "#" * int(fraction * width) + "." * (width - int(fraction * width))
        eta = f" eta {elapsed / fraction * (1 - fraction):4.0f}s" if self.done else ""
        text = f"[{bar}] {self.done:>3}/{self.total} {elapsed:5.0f}s{eta}  {label[:48]:<48}"
        if self.tty:
            sys.stderr.write("\r" + text)
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def advance(self) -> None:
        self.done += 1

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\r" + " " * 110 + "\r")
            sys.stderr.flush()


def note(text: str) -> None:
    """A note on stderr, on its own line."""
    sys.stderr.write(("\n" if sys.stderr.isatty() else "") + f"note: {text}\n")
    sys.stderr.flush()


# -- thread pinning --------------------------------------------------------------------------------
@dataclass
class Pinning:
    """How thread pools were pinned (reported verbatim)."""

    statements: list[str] = field(default_factory=list)
    controller: Any = None


def _pin() -> Pinning:
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
        from llvsparse import runtime

        if hasattr(runtime, "set_num_threads"):
            runtime.set_num_threads(1)
            pinning.statements.append("llvsparse.runtime.set_num_threads(1); llvsparse columns "
                                      "pass threads=N per call")
    except ImportError:
        pass
    pinning.statements.append("GraphBLAS: gb.ss.config['nthreads'] = 1 or 2 per column; "
                              "MKL: mkl_set_num_threads(1)")
    return pinning


# -- timing ------------------------------------------------------------------------------------------
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


def _once(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _measure(call: Callable[[], Any], repeat: int) -> float:
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
        warm = _once(prepared.call)
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
                record.times_s.append(_measure(prepared.call, record.repeat))
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


# -- roofline ---------------------------------------------------------------------------------------
def _triad(a: np.ndarray, b: np.ndarray, c: np.ndarray, scalar: float) -> None:
    np.multiply(c, scalar, out=a)
    np.add(a, b, out=a)


def stream(quick: bool, rounds: int = 7) -> dict:
    """STREAM-style triad a = b + s*c (two numpy passes: 5 arrays of traffic per element)
    and add a = b + c (3 arrays), on 1 thread and on 2 numpy threads over halves."""
    n = 2_000_000 if quick else 40_000_000
    a, b, c = np.zeros(n), np.random.default_rng(0).random(n), np.random.default_rng(1).random(n)
    half = n // 2

    def two_threads(body: Callable[[slice], None]) -> float:
        barrier = threading.Barrier(3)
        slices = [slice(0, half), slice(half, n)]

        def work(s: slice) -> None:
            barrier.wait()
            body(s)
            barrier.wait()

        workers = [threading.Thread(target=work, args=(s,)) for s in slices]
        for w in workers:
            w.start()
        barrier.wait()
        start = time.perf_counter()
        barrier.wait()
        elapsed = time.perf_counter() - start
        for w in workers:
            w.join()
        return elapsed

    def triad(s: slice) -> None:
        _triad(a[s], b[s], c[s], 3.0)

    def add(s: slice) -> None:
        np.add(b[s], c[s], out=a[s])

    results: dict[str, Any] = {"array_len": n, "array_mib": n * 8 / 2**20}
    for name, body, traffic in (("triad", triad, 40), ("add", add, 24)):
        body(slice(0, n))
        one = min(_once(lambda body=body: body(slice(0, n))) for _ in range(rounds))
        two = min(two_threads(body) for _ in range(rounds))
        results[f"{name}_1t_gbs"] = traffic * n / one / 1e9
        results[f"{name}_2t_gbs"] = traffic * n / two / 1e9
    results["bandwidth_gbs"] = {1: max(results["triad_1t_gbs"], results["add_1t_gbs"]),
                                2: max(results["triad_2t_gbs"], results["add_2t_gbs"])}
    results["method"] = (
        "best of 7; triad counts 40 B/element (numpy needs two passes: a=s*c then a+=b), "
        "add counts 24 B/element; the bound uses the larger of the two")
    return results


# -- compile costs ----------------------------------------------------------------------------------
def compile_costs(quick: bool) -> dict:
    """Cold SpMV compile (fresh Kernel, in-memory and disk caches bypassed), a compile served
    by the disk cache, and the call overhead of a 10x10 SpMV against peers."""
    import tempfile

    import llvsparse as ls
    from llvsparse import api

    expr = "y(i) = A(i,j) * x(j)"
    small = sp.random(10, 10, density=0.3, format="csr", random_state=3)
    A10 = ls.Tensor.from_scipy(small, format="csr")
    x10 = np.ones(10)
    saved = dict(api._CACHE)
    saved_env = {k: os.environ.get(k) for k in ("LLVSPARSE_CACHE", "LLVSPARSE_CACHE_DIR")}
    out: dict[str, Any] = {}
    extra = {"threads": 1} if llvsparse_supports_threads() else {}
    try:
        def first_call() -> float:
            api._CACHE.clear()
            kernel = ls.compile(expr, A="csr", x="dense")
            return _once(lambda: kernel(check=False, A=A10, x=x10, **extra))

        os.environ["LLVSPARSE_CACHE"] = "0"
        cold = [first_call() for _ in range(3 if quick else 5)]
        out["cold_compile_s"] = {"median": statistics.median(cold), "min": min(cold)}
        with tempfile.TemporaryDirectory() as folder:
            os.environ["LLVSPARSE_CACHE"] = "1"
            os.environ["LLVSPARSE_CACHE_DIR"] = folder
            first_call()
            disk = [first_call() for _ in range(3 if quick else 5)]
        out["disk_cached_compile_s"] = {"median": statistics.median(disk), "min": min(disk)}
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        api._CACHE.clear()
        api._CACHE.update(saved)
    kernel = ls.compile(expr, A="csr", x="dense")
    kernel(A=A10, x=x10)
    xt = ls.Tensor.from_numpy(x10, format="dense")
    # A Tensor around the caller's own (writeable) arrays: validated in full every call.
    own = ls.Tensor(A10.shape, A10.format, A10.dtype, A10.index_dtype, A10.level_extents,
                    [{k: np.array(a) for k, a in level.items()} for level in A10.level_arrays],
                    A10.params, A10.values.copy())
    calls: dict[str, Callable[[], Any]] = {
        "llvsparse check=False": lambda: kernel(check=False, A=A10, x=xt, **extra),
        "llvsparse check=False, numpy x": lambda: kernel(check=False, A=A10, x=x10, **extra),
        "llvsparse check=True (validation remembered)":
            lambda: kernel(check=True, A=A10, x=xt, **extra),
        "llvsparse check=True, caller's arrays (full validation)":
            lambda: kernel(check=True, A=own, x=xt, **extra),
        "scipy A @ x": lambda: small @ x10,
    }
    try:
        import numba

        from .bench_peers import _numba_loops

        f = _numba_loops(numba).spmv_csr
        calls["numba loop"] = lambda: f(small.indptr, small.indices, small.data, x10, 10)
    except ImportError:
        pass
    try:
        import graphblas as gb

        gA, gx = gb.io.from_scipy_sparse(small), gb.Vector.from_dense(x10)
        calls["graphblas mxv"] = lambda: gA.mxv(gx).new()
    except ImportError:
        pass
    overhead = {}
    number = 200 if quick else 2000
    for name, call in calls.items():
        call()
        samples = [_measure(call, number) for _ in range(7)]
        overhead[name] = {"median_us": statistics.median(samples) * 1e6,
                          "min_us": min(samples) * 1e6}
    out["call_overhead_10x10_spmv"] = overhead
    return out


# -- the suite -----------------------------------------------------------------------------------------
def _inputs(kernels: list[str], quick: bool, only: list[str] | None,
            skipped: list[dict]) -> Iterator[tuple[inputs.MatrixInput | inputs.TensorInput,
                                                   list[str]]]:
    """Each input once, with the kernels that run on it (loaded lazily, one at a time)."""

    def wanted(name: str) -> bool:
        return not only or any(part in name for part in only)

    matrix_kernels = [k for k in kernels if KERNELS[k].kind == "matrix"]
    tensor_kernels = [k for k in kernels if KERNELS[k].kind == "tensor"]
    families = ["quick"] if quick else sorted({KERNELS[k].family for k in matrix_kernels})
    for family in families:
        chosen = [k for k in matrix_kernels if quick or KERNELS[k].family == family]
        if chosen:
            for item in inputs.generated_matrices(family):
                if wanted(item.name):
                    yield item, chosen
    if matrix_kernels:
        for name in inputs.real_matrix_names(quick):
            if wanted(name):
                yield inputs.load_real_matrix(name), matrix_kernels
    if tensor_kernels:
        for item in inputs.generated_tensors(quick):
            if wanted(item.name):
                yield item, tensor_kernels
        if not quick:
            for entry in inputs.real_tensor_entries():
                if not wanted(entry["name"]):
                    continue
                try:
                    yield inputs.load_real_tensor(entry), tensor_kernels
                except ValueError as error:
                    skipped.append({"input": entry["name"], "kernel": "*", "reason": str(error)})
                    note(f"{entry['name']}: skipped for 3-tensor kernels ({error})")


def _count_tasks(kernels: list[str], quick: bool, only: list[str] | None) -> int:
    """An estimate of (input, kernel) pairs for the progress bar."""
    matrix = [k for k in kernels if KERNELS[k].kind == "matrix"]
    tensor = [k for k in kernels if KERNELS[k].kind == "tensor"]
    count = 0
    if matrix:
        count += len(matrix) * (3 + len(inputs.real_matrix_names(quick)))
    if tensor:
        reals = 0 if quick else sum(1 for e in inputs.real_tensor_entries()
                                    if e.get("order", 3) == 3)
        count += len(tensor) * (2 + reals)
    return count


def run_suite(kernels: list[str], impls: list[Impl], rounds: int, quick: bool,
              only: list[str] | None, progress: bool = True) -> tuple[list[Record], list[dict]]:
    records: list[Record] = []
    skipped: list[dict] = []
    bar = Progress(_count_tasks(kernels, quick, only), enabled=progress)
    for item, chosen in _inputs(kernels, quick, only, skipped):
        for kernel in chosen:
            reason = skip_reason(kernel, item)
            if reason is not None:
                skipped.append({"input": item.name, "kernel": kernel, "reason": reason})
                bar.advance()
                continue
            bar.step(f"{kernel} on {item.name}")
            case = make_case(kernel, item)
            records += run_case(case, impls, rounds)
            del case
            bar.advance()
        del item
        gc.collect()
    bar.step("done")
    bar.close()
    return records, skipped


# -- reporting ------------------------------------------------------------------------------------------
def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 0.1:
        return f"{seconds * 1e3:.0f}"
    if seconds >= 0.001:
        return f"{seconds * 1e3:.2f}"
    return f"{seconds * 1e3:.4f}"


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _columns(records: list[Record], kernel: str) -> list[str]:
    seen: list[str] = []
    for record in records:
        if record.kernel == kernel and record.impl not in seen:
            seen.append(record.impl)
    return seen


def kernel_tables(records: list[Record], markdown: bool = False) -> str:
    """Per kernel: median ms per implementation and input, and llvsparse / best peer."""
    lines: list[str] = []
    for kernel in KERNELS:
        rows = [r for r in records if r.kernel == kernel]
        if not rows:
            continue
        columns = _columns(records, kernel)
        header = ["input", "nnz"] + columns + ["best peer", "llvsparse / best"]
        table: list[list[str]] = []
        for input_name in dict.fromkeys(r.input for r in rows):
            group = {r.impl: r for r in rows if r.input == input_name}
            cells = [input_name, str(next(iter(group.values())).input_meta.get("nnz", ""))]
            for column in columns:
                record = group.get(column)
                if record is None:
                    cells.append("")
                elif not record.verified:
                    cells.append("FAIL" if record.error and "wrong" in record.error else "ERR")
                else:
                    cells.append(_ms(record.median_s) + ("*" if record.single_call else ""))
            peers = [r for r in group.values() if r.library != "llvsparse" and r.median_s]
            best = min(peers, key=lambda r: r.median_s, default=None)  # type: ignore
            cells.append(best.impl if best else "-")
            mine = group.get("llvsparse")
            ratio = mine.ratio_to_best_peer if mine else None
            cells.append(f"{ratio:.2f}x" if ratio else "-")
            table.append(cells)
        title = f"{kernel}: {KERNELS[kernel].title} (median ms; * = one call, too slow)"
        lines.append(_render(title, header, table, markdown))
    return "\n".join(lines)


def _best_peer_s(records: list[Record]) -> dict[tuple[str, str], float]:
    best: dict[tuple[str, str], float] = {}
    for r in records:
        if r.library != "llvsparse" and r.verified and r.median_s:
            key = (r.kernel, r.input)
            best[key] = min(best.get(key, math.inf), r.median_s)
    return best


def _by_min(records: list[Record]) -> list[Record]:
    """Copies whose ratios compare minimum times instead of medians."""
    best: dict[tuple[str, str], float] = {}
    for r in records:
        if r.library != "llvsparse" and r.verified and r.min_s:
            best[(r.kernel, r.input)] = min(best.get((r.kernel, r.input), math.inf), r.min_s)
    out = []
    for r in records:
        copy = Record(**{k: v for k, v in r.__dict__.items()})
        peak = best.get((r.kernel, r.input))
        copy.ratio_to_best_peer = r.min_s / peak if r.min_s and peak else None
        copy.ratio_to_best_1t_peer = None
        out.append(copy)
    return out


def summary_table(records: list[Record], markdown: bool = False, min_best_s: float = 0.0,
                  stat: str = "median") -> str:
    """Per kernel: geometric mean over inputs of each implementation's ratio to the best peer
    (only inputs on which the fastest peer takes at least ``min_best_s``); ``stat="min"``
    compares minimum times instead of medians."""
    best = _best_peer_s(records)
    records = [r for r in records if best.get((r.kernel, r.input), 0.0) >= min_best_s]
    if stat == "min":
        records = _by_min(records)
    impl_names: list[str] = []
    for record in records:
        if record.impl not in impl_names:
            impl_names.append(record.impl)
    header = ["kernel", "inputs"] + impl_names + ["llvsparse / best 1t peer", "llvsparse wins"]
    table = []
    for kernel in KERNELS:
        rows = [r for r in records if r.kernel == kernel]
        if not rows:
            continue
        cells = [kernel, str(len({r.input for r in rows}))]
        for name in impl_names:
            ratios = [r.ratio_to_best_peer for r in rows if r.impl == name and
                      r.ratio_to_best_peer]
            g = geomean(ratios)  # type: ignore[arg-type]
            cells.append(f"{g:.2f}" if g else "")
        one = geomean([r.ratio_to_best_1t_peer for r in rows  # type: ignore[misc]
                       if r.impl == "llvsparse" and r.ratio_to_best_1t_peer])
        cells.append(f"{one:.2f}" if one else "")
        mine = [r for r in rows if r.impl == "llvsparse" and r.ratio_to_best_peer]
        wins = sum(1 for r in mine if r.ratio_to_best_peer and r.ratio_to_best_peer < 1.0)
        cells.append(f"{wins}/{len(mine)}")
        table.append(cells)
    title = ("Summary: geometric mean over inputs of median time / fastest peer's median "
             "(1.00 = as fast as the fastest peer; lower is better)")
    if stat == "min":
        title = title.replace("median time / fastest peer's median",
                              "minimum time / fastest peer's minimum")
    if min_best_s:
        title += f"; only inputs where the fastest peer takes >= {min_best_s * 1e3:g} ms"
    if not table:  # an empty table read as a broken report
        reason = (f"no input where a peer was verified and the fastest took "
                  f">= {min_best_s * 1e3:g} ms (--quick inputs are smaller)" if min_best_s
                  else "no verified results")
        return f"{'**' + title + '**' if markdown else title}\n({reason})\n"
    return _render(title, header, table, markdown)


def scaling_table(records: list[Record], markdown: bool = False) -> str:
    """llvsparse's own one-thread median over its N-thread median, per kernel and input,
    with fresh results and (columns ``-out``) into an array allocated ahead."""
    mine = {(r.kernel, r.input, r.impl): r.median_s for r in records
            if r.library == "llvsparse" and r.verified and r.median_s}
    columns = sorted({(impl.removesuffix("-out"), impl.endswith("-out"))
                      for _, _, impl in mine if impl.removesuffix("-out") != "llvsparse"})
    if not columns:
        return ""
    header = ["kernel", "input"] + [f"1t / {name.removeprefix('llvsparse-')}"
                                    + (" (out=)" if out else "") for name, out in columns]
    table = []
    for kernel, case in dict.fromkeys((k, i) for k, i, _ in mine):
        cells = [kernel, case]
        for name, out in columns:
            suffix = "-out" if out else ""
            one, many = (mine.get((kernel, case, f"llvsparse{suffix}")),
                         mine.get((kernel, case, f"{name}{suffix}")))
            cells.append(f"{one / many:.2f}" if one and many else "")
        table.append(cells)
    return _render("Thread scaling: llvsparse 1-thread median / N-thread median (higher is "
                   "better)", header, table, markdown)


def roofline_table(records: list[Record], roof: dict, markdown: bool = False,
                   generated_only: bool = True) -> str:
    """SpMV: achieved GB/s of minimum traffic and fraction of the measured bandwidth."""
    rows = [r for r in records if r.kernel.startswith("spmv") and r.roofline_fraction and
            (not generated_only or r.input_meta.get("source") == "generated")]
    header = ["kernel", "input", "impl", "min MB", "median ms", "GB/s", "of bound"]
    table = [[r.kernel, r.input, r.impl, f"{(r.spmv_min_bytes or 0) / 1e6:.1f}",
              _ms(r.median_s), f"{(r.spmv_min_bytes or 0) / (r.median_s or 1) / 1e9:.2f}",
              f"{r.roofline_fraction:.0%}"] for r in rows]
    bw = roof["bandwidth_gbs"]
    title = (f"SpMV roofline: triad {roof['triad_1t_gbs']:.1f} GB/s (1 thread), "
             f"{roof['triad_2t_gbs']:.1f} GB/s (2 threads); add {roof['add_1t_gbs']:.1f} / "
             f"{roof['add_2t_gbs']:.1f} GB/s; bound = {bw[1]:.1f} / {bw[2]:.1f} GB/s")
    return _render(title, header, table, markdown)


def _render(title: str, header: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        out = [f"**{title}**", "", "| " + " | ".join(header) + " |",
               "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
        out += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(out) + "\n"
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    out = [title, fmt.format(*header), "  ".join("-" * w for w in widths)]
    out += [fmt.format(*row) for row in rows]
    return "\n".join(out) + "\n"


def write_png(records: list[Record], path: str) -> bool:
    """Bars: per kernel, each implementation's geometric-mean ratio to the fastest peer;
    dots: llvsparse on each input. Returns False (with a note) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        note("matplotlib not installed: no PNG written (pip install 'llvsparse[bench]')")
        return False
    kernels = [k for k in KERNELS if any(r.kernel == k for r in records)]
    names: list[str] = []
    for record in records:
        if record.impl not in names:
            names.append(record.impl)
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(kernels)), 5.5))
    width = 0.8 / max(len(names), 1)
    cmap = plt.get_cmap("tab10")
    for n, name in enumerate(names):
        xs, ys = [], []
        for k, kernel in enumerate(kernels):
            g = geomean([r.ratio_to_best_peer for r in records  # type: ignore[misc]
                         if r.kernel == kernel and r.impl == name and r.ratio_to_best_peer])
            if g:
                xs.append(k + (n - (len(names) - 1) / 2) * width)
                ys.append(g)
        ax.bar(xs, ys, width=width, label=name, color=cmap(n % 10),
               edgecolor="black" if name.startswith("llvsparse") else None)
        if name == "llvsparse":
            for k, kernel in enumerate(kernels):
                pts = [r.ratio_to_best_peer for r in records if r.kernel == kernel and
                       r.impl == name and r.ratio_to_best_peer]
                x0 = k + (n - (len(names) - 1) / 2) * width
                ax.scatter([x0] * len(pts), pts, s=8, color="black", zorder=3)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_yscale("log")
    low = min((r.ratio_to_best_peer for r in records if r.ratio_to_best_peer), default=1.0)
    ax.set_ylim(bottom=min(0.5, low * 0.8))
    ax.set_xticks(range(len(kernels)))
    ax.set_xticklabels(kernels, rotation=30, ha="right")
    ax.set_ylabel("median time / fastest peer (geomean over inputs; log)")
    ax.set_title("llvsparse bench: time relative to the fastest peer (lower is better; "
                 "dots = llvsparse per input)", fontsize=10)
    ax.legend(fontsize=8, ncol=min(len(names), 5), loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def llvsparse_revision() -> dict:
    """The git commit of the llvsparse tree being measured, and whether it had local edits."""
    import subprocess

    import llvsparse

    root = os.path.dirname(os.path.dirname(os.path.abspath(llvsparse.__file__)))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, check=True,
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, check=True, capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": head, "local_edits": bool(dirty)}


def machine_info() -> dict:
    info = {"python": sys.version.split()[0], "platform": platform.platform(),
            "processor": platform.processor(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


# -- entry point ---------------------------------------------------------------------------------------
def _kernel_list(text: str) -> list[str]:
    """``--kernels``: names or families (``spmv`` is every SpMV)."""
    chosen = []
    for part in text.split(","):
        part = part.strip()
        matches = [k for k in KERNELS if k == part or k.startswith(part + "_")]
        if not matches:
            raise argparse.ArgumentTypeError(f"unknown kernel {part!r}; choose from "
                                             f"{', '.join(KERNELS)}")
        chosen += [m for m in matches if m not in chosen]
    return chosen


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def _thread_counts(text: str) -> tuple[int, ...]:
    return tuple(_positive(part.strip()) for part in text.split(","))


def build_parser() -> argparse.ArgumentParser:
    # the docstring's first paragraph, as plain text
    summary = " ".join(__doc__.split("\n\n")[0].replace("``", "").split())
    parser = argparse.ArgumentParser(prog="llvsparse bench", description=summary)
    parser.add_argument("--quick", action="store_true",
                        help="tiny generated inputs and 2 small real matrices")
    parser.add_argument("--json", metavar="FILE", help="write every measurement as JSON")
    parser.add_argument("--png", metavar="FILE", help="write a chart (needs matplotlib)")
    parser.add_argument("--markdown", metavar="FILE", help="write the tables as Markdown")
    parser.add_argument("--kernels", metavar="LIST", type=_kernel_list, default=list(KERNELS),
                        help="comma-separated kernels or families (spmv, ttv, mttkrp, spmm...)")
    parser.add_argument("--inputs", metavar="LIST",
                        help="comma-separated substrings: run only inputs whose name matches")
    parser.add_argument("--rounds", type=_positive, default=7, help="timed rounds (default 7)")
    parser.add_argument("--llvsparse-threads", type=_thread_counts, default=(1,), metavar="LIST",
                        help="thread counts for llvsparse columns, e.g. 1,2 (default 1)")
    parser.add_argument("--llvsparse-out", action="store_true",
                        help="also time llvsparse writing dense results into an array "
                             "allocated ahead (call(out=...)): columns llvsparse[-Nt]-out")
    parser.add_argument("--no-roofline", action="store_true", help="skip the STREAM triad")
    parser.add_argument("--no-compile", action="store_true", help="skip compile-cost timing")
    parser.add_argument("--no-edges", action="store_true",
                        help="skip the edges section (to_numpy, to_scipy, asformat, import)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when every implementation verified, 1 otherwise."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.png and importlib.util.find_spec("matplotlib") is None:
        # said only at the end, after the whole run, it cost a rerun to get the chart
        parser.error("--png needs matplotlib, which is not installed "
                     "(pip install -e '.[bench]', or leave out --png)")
    kernels = args.kernels
    only = [s.strip() for s in args.inputs.split(",")] if args.inputs else None
    threads = args.llvsparse_threads
    if any(t > 1 for t in threads) and not llvsparse_supports_threads():
        note("this llvsparse has no threads= option: llvsparse runs on 1 thread only")
        threads = (1,)
    pinning = _pin()
    impls, peer_notes, versions = discover(threads, args.llvsparse_out)
    for text in peer_notes:
        note(text)
    started = time.time()
    revision = llvsparse_revision()
    roof = None
    if not args.no_roofline:
        roof = stream(args.quick)
    records, skipped = run_suite(kernels, impls, args.rounds, args.quick, only,
                                 progress=not args.no_progress)
    bandwidth = roof["bandwidth_gbs"] if roof else {}
    annotate(records, bandwidth)
    costs = None if args.no_compile else compile_costs(args.quick)
    edges = None if args.no_edges else edge_costs(args.quick)
    print(kernel_tables(records))
    print(summary_table(records))
    print(summary_table(records, min_best_s=LARGE_S))
    scaling = scaling_table(records)
    if scaling:
        print(scaling)
    if roof:
        print(roofline_table(records, roof))
    if costs:
        cold, disk = costs["cold_compile_s"], costs["disk_cached_compile_s"]
        print(f"Compile: cold SpMV {cold['median'] * 1e3:.0f} ms (median), from the disk "
              f"cache {disk['median'] * 1e3:.1f} ms")
        print("Call overhead, 10x10 SpMV: " + ", ".join(
            f"{name} {v['median_us']:.1f} us" for name, v in
            costs["call_overhead_10x10_spmv"].items()))
    if edges:
        print(edges_table(edges))
    for text in pinning.statements:
        print(f"threads: {text}")
    if revision:
        print(f"llvsparse: commit {revision['commit']}"
              f"{' with local edits' if revision['local_edits'] else ''}")
    failures = [r for r in records if not r.verified]
    for record in failures:
        print(f"NOT VERIFIED: {record.impl} {record.kernel} {record.input}: {record.error}")
    report = {
        "meta": {"started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
                 "elapsed_s": time.time() - started, "quick": args.quick,
                 "rounds": args.rounds, "min_measure_s": MIN_MEASURE_S,
                 "slow_call_s": SLOW_CALL_S, "machine": machine_info(), "versions": versions,
                 "llvsparse_revision": revision,
                 "threads": pinning.statements, "peer_notes": peer_notes,
                 "implementations": [{"name": i.name, "library": i.library,
                                      "threads": i.threads} for i in impls],
                 "kernels": {k: {"expr": KERNELS[k].expr, "title": KERNELS[k].title,
                                 "formats": KERNELS[k].formats,
                                 "out_format": KERNELS[k].out_format} for k in kernels},
                 "llvsparse_notes": dict(LS_NOTES)},
        "roofline": _jsonable(roof), "compile": costs, "edges": edges,
        "results": [r.as_json() for r in records], "skipped": skipped,
    }
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)
    if args.png:
        write_png(records, args.png)
    if args.markdown:
        with open(args.markdown, "w") as handle:
            handle.write(summary_table(records, markdown=True) + "\n")
            handle.write(summary_table(records, markdown=True, min_best_s=LARGE_S) + "\n")
            handle.write(summary_table(records, markdown=True, stat="min") + "\n")
            handle.write(kernel_tables(records, markdown=True) + "\n")
            handle.write(scaling_table(records, markdown=True) + "\n")
            if roof:
                handle.write(roofline_table(records, roof, markdown=True) + "\n")
                handle.write(roofline_table(records, roof, markdown=True,
                                            generated_only=False) + "\n")
    if pinning.controller is not None:
        pinning.controller.restore_original_limits()
    return 1 if failures else 0


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


if __name__ == "__main__":
    sys.exit(main())
