"""CSR SpMV on 2 threads: paper 001's nonzero split against the row splits, on power-law
and skewed inputs (issue 34's target: the nonzero split no slower than the row split on
any input, and faster where a few rows hold most entries).

    python -m llvsparse.tools.bench_nonzero_split [--rounds 15] [--threads 2]

Columns (each checked against scipy first, ``out=`` reused, wall time, medians of
interleaved rounds; the load average beside each row, since two threads on the shared
2-core machine share it with everyone else):

- rows: ``parallelize(i, cpu_thread, no_races)``, equal ranges of rows;
- auto: the default schedule (the model's split: ranges of about equal stored entries
  where rows are skewed, thread_calls.split);
- nonzero: ``fuse(i,j,f); pos(f,fp,A(i,j)); split(fp,c,t,CHUNK);
  parallelize(c,cpu_thread,atomics)``, the paper's schedule as written;
- 1 thread: the default schedule on one thread, for scale.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Iterator

import numpy as np
import scipy.sparse as sp

import llvsparse as ls

from .bench_inputs import canonical_csr, load_real_matrix, powerlaw

SPMV = "y(i) = A(i,j) * x(j)"
CHUNK = 2048
SCHEDULES = {
    "rows": "parallelize(i, cpu_thread, no_races)",
    "auto": None,
    "nonzero": f"fuse(i, j, f); pos(f, fp, A(i,j)); split(fp, c, t, {CHUNK}); "
               "parallelize(c, cpu_thread, atomics)",
}
SKEWED = ("wiki-Vote", "cit-HepTh", "soc-sign-bitcoin-otc", "memplus", "rajat01",
          "p2p-Gnutella04", "ca-GrQc", "email-Enron", "mbeacxc", "add32")


def heavy_rows(rows: int = 200_000, heavy: int = 4, per_heavy: int = 100_000) -> sp.csr_matrix:
    """``heavy`` rows of ``per_heavy`` entries, 3 entries in every other row."""
    rng = np.random.default_rng(5)
    counts = np.full(rows, 3)
    counts[rng.choice(rows, heavy, replace=False)] = per_heavy
    r = np.repeat(np.arange(rows), counts)
    c = rng.integers(0, rows, len(r))
    return canonical_csr(sp.coo_matrix((rng.uniform(-1, 1, len(r)), (r, c)), shape=(rows, rows)))


def inputs(names: list[str] | None) -> Iterator[tuple[str, sp.csr_matrix]]:
    generated: dict[str, Callable[[], sp.csr_matrix]] = {
        "powerlaw-100k": lambda: powerlaw(100_000, 10),
        "powerlaw-400k": lambda: powerlaw(400_000, 8),
        "4 rows of 100k + 3 per row": heavy_rows,
    }
    for name in names or [*generated, *SKEWED]:
        yield name, generated[name]() if name in generated else load_real_matrix(name).matrix


def interleaved(calls: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median wall seconds per call of each, taking turns."""
    repeat = {}
    for name, call in calls.items():
        for _ in range(10):  # warm, and past a binding's probe calls
            call()
        start = time.perf_counter()
        call()
        repeat[name] = max(1, int(0.01 / max(time.perf_counter() - start, 1e-7)))
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(repeat[name]):
                call()
            times[name].append((time.perf_counter() - start) / repeat[name])
    return {name: statistics.median(t) for name, t in times.items()}


def run(names: list[str] | None, rounds: int, threads: int) -> None:
    kernels = {k: ls.compile(SPMV, "dense", A="csr", x="dense", schedule=s)
               for k, s in SCHEDULES.items()}
    print("| input | rows | stored | max / mean | top 1% rows' share | 1 thread ms | "
          "rows ms | auto ms | nonzero ms | nonzero / rows | nonzero / auto | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, a in inputs(names):
        x = np.random.default_rng(0).uniform(-1, 1, a.shape[1])
        expected = a @ x
        out = np.zeros(a.shape[0])
        A, xs = ls.Tensor.from_scipy(a, format="csr"), ls.Tensor.from_numpy(x, format="dense")
        calls: dict[str, Callable[[], object]] = {}
        for key, kernel in kernels.items():
            bound = kernel.bind(A=A, x=xs, threads=threads)
            got = np.asarray(bound(out=out))
            if not np.allclose(got, expected, rtol=1e-9, atol=1e-12):
                raise AssertionError(f"{name}, {key}: the result differs from scipy's")
            calls[key] = lambda bound=bound, out=out: bound(out=out)
        one = kernels["auto"].bind(A=A, x=xs, threads=1)
        calls["one"] = lambda one=one, out=out: one(out=out)
        t = interleaved(calls, rounds)
        counts = np.sort(np.diff(a.indptr))[::-1]
        top = counts[:max(1, len(counts) // 100)].sum() / max(a.nnz, 1)
        print(f"| {name} | {a.shape[0]:,} | {a.nnz:,} | {counts[0] / counts.mean():.0f} | "
              f"{top:.2f} | {t['one'] * 1e3:.3f} | {t['rows'] * 1e3:.3f} | "
              f"{t['auto'] * 1e3:.3f} | {t['nonzero'] * 1e3:.3f} | "
              f"{t['nonzero'] / t['rows']:.2f} | {t['nonzero'] / t['auto']:.2f} | "
              f"{os.getloadavg()[0]:.1f} |", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", default=None, help="comma-separated input names")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    run(args.inputs.split(",") if args.inputs else None, args.rounds, args.threads)


if __name__ == "__main__":
    main()
