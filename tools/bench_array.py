"""Array programming (issue 23): a fused lazy chain against the same steps run eagerly,
and ``A + 1`` on a huge, nearly empty matrix.

    python -m llvsparse.tools.bench_array [--n 20000] [--density 0.0025] [--rounds 7]
        [--huge 1000000] [--json out.json]

Chain: ``((A + B) * C).sum()`` over three random CSR matrices, as one llvsparse kernel
(``ls.lazy`` ... ``ls.compute``), as three eager llvsparse operations, as pydata/sparse
runs it (eager COO operations, where installed) and as scipy.sparse runs it. Rounds
alternate between the ways; each time is the median over rounds, every way warmed first
(kernels compiled). ``A + 1``: an n x n matrix holding n entries; the result keeps A's
pattern with fill 1, so its time and bytes follow the entries, not n * n; reported for
n/10 and n, with the result's stored entries and the process's peak RSS growth.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp


def _timed(run: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = run()
    return time.perf_counter() - start, value


def chain(n: int, density: float, rounds: int) -> dict:
    """The fused chain against its eager steps, checked against scipy before timing."""
    import llvsparse as ls

    mats = [sp.random(n, n, density, format="csr", random_state=k) for k in range(3)]
    A, B, C = (ls.asarray(m) for m in mats)
    ways: dict[str, Callable[[], object]] = {
        "llvsparse_fused": lambda: ls.compute(((ls.lazy(A) + B) * C).sum()),
        "llvsparse_eager": lambda: ((A + B) * C).sum(),
        "scipy": lambda: (mats[0] + mats[1]).multiply(mats[2]).sum(),
    }
    try:
        import sparse

        P = [sparse.COO.from_scipy_sparse(m) for m in mats]
        ways["pydata_sparse"] = lambda: float(((P[0] + P[1]) * P[2]).sum())
    except ImportError:
        pass
    expected = ways["scipy"]()
    for name, run in ways.items():
        got = float(np.asarray(run()))
        assert np.isclose(got, expected), (name, got, expected)
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, run in ways.items():
            times[name].append(_timed(run)[0])
    result = {"n": n, "entries_each": int(mats[0].nnz), "rounds": rounds}
    result.update({f"{name}_s": statistics.median(t) for name, t in times.items()})
    fused = result["llvsparse_fused_s"]
    result["eager_over_fused"] = result["llvsparse_eager_s"] / fused
    if "pydata_sparse_s" in result:
        result["pydata_over_fused"] = result["pydata_sparse_s"] / fused
    return result


def plus_one(n: int) -> dict:
    """``A + 1`` for an n x n matrix of n entries: time, stored entries and peak RSS."""
    import llvsparse as ls

    rng = np.random.default_rng(0)
    rows, cols = rng.integers(0, n, n), rng.integers(0, n, n)
    S = sp.csr_matrix((rng.random(n), (rows, cols)), shape=(n, n))
    A = ls.asarray(S)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    A + 1  # compiles the kernel
    elapsed, R = _timed(lambda: A + 1)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    stored = int(R.nnz)
    assert stored == A.nnz and R.fill_value == 1
    assert np.allclose(R.values[:stored], A.values[:stored] + 1)
    return {"n": n, "entries": int(S.nnz), "seconds": elapsed, "stored": stored,
            "peak_rss_growth_kib": grown, "fill": float(R.fill_value)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--density", type=float, default=0.0025)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--huge", type=int, default=1_000_000)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    report = {"chain": chain(args.n, args.density, args.rounds)}
    print(json.dumps(report["chain"], indent=1))
    if args.huge > 0:
        report["plus_one"] = [plus_one(args.huge // 10), plus_one(args.huge)]
        print(json.dumps(report["plus_one"], indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
