"""Blockwise SpMV on Dask (``llvsparse.distributed``) against one llvsparse kernel call on
the whole matrix, the same total work in one process; and, with ``--out-of-core-gb``, an
SpMV of row blocks on disk by a LocalCluster of two workers with a memory limit, whose
peak worker memory (RSS, sampled every 20 ms) is reported; with ``--cluster``, the
in-memory SpMV on a LocalCluster of two worker processes, whose blocks were made and
kept on the workers, against the same single call.

    python -m llvsparse.tools.bench_dask [--entries 1e8] [--blocks 16] [--repeat 5]
        [--cluster] [--out-of-core-gb 3 --worker-memory 2GB] [--json out.json]

The matrix is square with ``--per-row`` entries in each row, in sorted distinct columns
(packing skips its sort), float64 values, int32 indices. Each timing is a median of
``--repeat`` warm runs (the kernel compiled and the blocks packed beforehand): the Dask
run includes building its graph and scheduling its tasks on the threaded scheduler with
as many threads as cores, each kernel call on one thread; the single call uses them all.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp


def _rows_of(rows: int, cols: int, per_row: int, rng: np.random.Generator) -> sp.csr_matrix:
    """``rows`` rows of ``per_row`` entries each, ``cols // per_row`` columns apart."""
    step = cols // per_row
    first = rng.integers(0, step, rows, dtype=np.int32)
    indices = (first[:, None] + np.arange(per_row, dtype=np.int32) * step).ravel()
    indptr = np.arange(0, rows * per_row + 1, per_row, dtype=np.int64)
    return sp.csr_matrix((rng.random(rows * per_row), indices, indptr), shape=(rows, cols))


def _block_of(lo: int, hi: int, n: int, per_row: int, seed: int):
    """Rows ``lo:hi`` of the benchmark matrix as a CSR tensor, made where it is called
    (on a worker, so that no block crosses the network). Importing llvsparse.distributed
    tells Dask the size of the Tensor this returns (the worker measures it now)."""
    import llvsparse as ls
    import llvsparse.distributed

    rows = _rows_of(hi - lo, n, per_row, np.random.default_rng(seed))
    return ls.Tensor.from_scipy(rows, ls.named_format("csr", 2))


def _median(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def in_memory(entries: int, per_row: int, blocks: int, repeat: int) -> dict:
    """One kernel call on the whole matrix against ``ld.evaluate`` over row blocks."""
    import dask

    import llvsparse as ls
    import llvsparse.distributed as ld
    from llvsparse.distributed.partitioned import Block, Partitioned, same

    n = entries // per_row
    rng = np.random.default_rng(0)
    whole = _rows_of(n, n, per_row, rng)
    x = rng.random(n)
    bounds = tuple(int(b) for b in np.linspace(0, n, blocks + 1))
    fmt = ls.named_format("csr", 2)
    parts = {(k, 0): Block(same, dask.delayed(ls.Tensor.from_scipy(whole[lo:hi], fmt)))
             for k, (lo, hi) in enumerate(itertools.pairwise(bounds))}
    P = Partitioned((n, n), (bounds, (0, n)), fmt, np.dtype("float64"), None, parts)
    big = ls.Tensor.from_scipy(whole, fmt)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    cores = os.cpu_count() or 1
    expected = whole @ x
    single = kernel(A=big, x=x).to_numpy()
    spread = ld.evaluate("y(i) = A(i,j) * x(j)", A=P, x=x).compute(
        scheduler="threads", num_workers=cores)
    assert np.allclose(single, expected) and np.allclose(spread, expected)
    result = {
        "entries": int(whole.nnz), "rows": n, "blocks": blocks, "cores": cores,
        "single_s": _median(lambda: kernel(A=big, x=x, threads=cores), repeat),
        "dask_threads_s": _median(lambda: ld.evaluate("y(i) = A(i,j) * x(j)", A=P, x=x)
                                  .compute(scheduler="threads", num_workers=cores), repeat),
        "scipy_s": _median(lambda: whole @ x, repeat),
    }
    result["dask_over_single"] = result["dask_threads_s"] / result["single_s"]
    return result


def _scipy_spmv(block: sp.csr_matrix, x: np.ndarray) -> np.ndarray:
    return block @ x


def on_cluster(entries: int, per_row: int, blocks: int, repeat: int) -> dict:
    """``ld.evaluate`` over row blocks kept on a LocalCluster of two single-threaded
    worker processes, against one kernel call on two threads over the same matrix; runs
    alternate. Each cluster run sends x and returns y to this process, as the single
    call does (an iterative method): x in the graph as a numpy array (the plain call),
    or scattered to both workers first (``client.scatter(x, broadcast=True)``, counted);
    one variant, labelled so, leaves y on the workers. The control runs scipy's
    ``block @ x`` on the same cluster, x scattered and y gathered the same way."""
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster, futures_of, wait

    import llvsparse as ls
    import llvsparse.distributed as ld
    from llvsparse.distributed.partitioned import Block, Partitioned, same

    n = entries // per_row
    bounds = tuple(int(b) for b in np.linspace(0, n, blocks + 1))
    pieces = list(itertools.pairwise(bounds))
    whole = sp.vstack([_block_of(lo, hi, n, per_row, k).to_scipy()
                       for k, (lo, hi) in enumerate(pieces)], format="csr")
    big = ls.Tensor.from_scipy(whole, ls.named_format("csr", 2))
    x = np.random.default_rng(0).random(n)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    expected = whole @ x
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        made = client.persist([dask.delayed(_block_of)(lo, hi, n, per_row, k)
                               for k, (lo, hi) in enumerate(pieces)])
        scipy_blocks = [client.submit(lambda t: t.to_scipy(), futures_of(m)[0])
                        for m in made]  # on the worker holding the block
        wait(scipy_blocks)
        parts = {(k, 0): Block(same, block) for k, block in enumerate(made)}
        P = Partitioned((n, n), (bounds, (0, n)), ls.named_format("csr", 2),
                        np.dtype("float64"), None, parts)

        def broadcast() -> object:
            return da.from_delayed(client.scatter(x, broadcast=True, hash=False), x.shape,
                                   x.dtype)

        def scipy_on_cluster() -> np.ndarray:
            x_on = client.scatter(x, broadcast=True, hash=False)
            return np.concatenate(client.gather(
                [client.submit(_scipy_spmv, b, x_on, pure=False) for b in scipy_blocks]))

        runs = {
            "single_2_threads_s": lambda: kernel(A=big, x=x, threads=2).to_numpy(),
            "dask_local_cluster_s": lambda: ld.evaluate(
                "y(i) = A(i,j) * x(j)", A=P, x=x).compute(scheduler=client),
            "dask_x_broadcast_s": lambda: ld.evaluate(
                "y(i) = A(i,j) * x(j)", A=P, x=broadcast()).compute(scheduler=client),
            "dask_y_left_on_workers_s": lambda: wait(client.persist(ld.evaluate(
                "y(i) = A(i,j) * x(j)", A=P, x=broadcast()))),
            "scipy_local_cluster_s": scipy_on_cluster,
            "scipy_single_s": lambda: whole @ x,
        }
        for name, run in runs.items():
            got = run()
            assert name.startswith("dask_y") or np.allclose(got, expected), name
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(repeat):
            for name, run in runs.items():
                times[name].append(_median(run, 1))
        compiles = client.run(_llvm_work)
    result = {"entries": int(whole.nnz), "rows": n, "blocks": blocks,
              **{name: statistics.median(t) for name, t in times.items()},
              "worker_llvm": sorted(compiles.values(), key=str)}
    single = result["single_2_threads_s"]
    for name in ("local_cluster", "x_broadcast", "y_left_on_workers"):
        result[f"{name}_over_single"] = result[f"dask_{name}_s"] / single
    result["scipy_cluster_over_scipy_single"] = (result["scipy_local_cluster_s"]
                                                 / result["scipy_single_s"])
    return result


class _PeakRSS:
    """The largest RSS each process reached, sampled in a thread every 20 ms."""

    def __init__(self, pids: list[int]) -> None:
        import psutil

        self.processes = [psutil.Process(p) for p in pids]
        self.peaks = [0] * len(pids)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.done.wait(0.02):
            for k, process in enumerate(self.processes):
                self.peaks[k] = max(self.peaks[k], process.memory_info().rss)

    def stop(self) -> list[int]:
        self.done.set()
        self.thread.join()
        return self.peaks


def out_of_core(gigabytes: float, per_row: int, worker_memory: str, block_entries: int
                ) -> dict:
    """Row blocks written to disk one at a time, multiplied by two workers limited to
    ``worker_memory`` each; the reference is computed block by block here too."""
    import dask
    from distributed import Client, LocalCluster

    import llvsparse.distributed as ld

    entries = int(gigabytes * 2**30 / 12)  # a float64 value and an int32 column each
    rows_per_block = block_entries // per_row
    blocks = max(1, entries // block_entries)
    n = rows_per_block * blocks
    rng = np.random.default_rng(1)
    x = rng.random(n)
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        for k in range(blocks):
            sp.save_npz(Path(folder) / f"block-{k}.npz", _rows_of(rows_per_block, n, per_row, rng),
                        compressed=False)
        written = time.perf_counter() - start
        on_disk = sum(p.stat().st_size for p in Path(folder).iterdir())
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          memory_limit=worker_memory, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            pids = list(client.run(os.getpid).values())
            baseline = client.run(lambda: __import__("psutil").Process().memory_info().rss)
            monitor = _PeakRSS(pids)
            start = time.perf_counter()
            with dask.config.set(scheduler=client):
                y = ld.evaluate("y(i) = A(i,j) * x(j)", A=ld.from_files(folder), x=x).compute()
            elapsed = time.perf_counter() - start
            peaks = monitor.stop()
            compiles = client.run(_llvm_work)
        start = time.perf_counter()
        expected = np.concatenate([sp.load_npz(Path(folder) / f"block-{k}.npz") @ x
                                   for k in range(blocks)])
        reference = time.perf_counter() - start
    assert np.allclose(y, expected)
    return {"entries": blocks * block_entries, "on_disk_bytes": on_disk, "blocks": blocks,
            "worker_memory": worker_memory, "write_s": written, "dask_cluster_s": elapsed,
            "scipy_block_by_block_s": reference,
            "worker_baseline_rss": sorted(baseline.values()), "worker_peak_rss": peaks,
            "worker_llvm": sorted(compiles.values(), key=str)}


def _llvm_work() -> dict:
    """A worker's LLVM compiles and object-code loads."""
    from llvsparse.backends.cpu import STATS

    return dict(STATS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=float, default=1e8)
    parser.add_argument("--per-row", type=int, default=20)
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cluster", action="store_true",
                        help="run the in-memory SpMV on a LocalCluster of two processes")
    parser.add_argument("--out-of-core-gb", type=float, default=0.0)
    parser.add_argument("--worker-memory", default="2GB")
    parser.add_argument("--block-entries", type=int, default=4_000_000)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    report = {}
    if args.entries > 0 and args.cluster:
        report["local_cluster"] = on_cluster(int(args.entries), args.per_row, args.blocks,
                                             args.repeat)
        print(json.dumps(report["local_cluster"], indent=1))
    elif args.entries > 0:
        report["in_memory"] = in_memory(int(args.entries), args.per_row, args.blocks,
                                        args.repeat)
        print(json.dumps(report["in_memory"], indent=1))
    if args.out_of_core_gb > 0:
        report["out_of_core"] = out_of_core(args.out_of_core_gb, args.per_row,
                                            args.worker_memory, args.block_entries)
        print(json.dumps(report["out_of_core"], indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
