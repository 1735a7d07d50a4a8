"""The "edges" section of ``llvsparse bench``: what surrounds a kernel call, each timed
against numpy or scipy doing the same job in the same run.

Rows: ``to_numpy`` of a dense result (against ``np.asarray(values)``), a small SpMV with
and without ``to_numpy``, the operator path's fixed cost on a 10 x 10 matrix (``A @ x``,
with the same and a new ``x`` each call, ``A * 2.0``, ``A + B``, against scipy's same
operators, with issue 33's targets), ``to_scipy`` of a CSR result (against scipy's constructor on
the same arrays), ``asformat`` of an unordered COO product into CSR and of CSR into CSC
(against scipy's ``tocsr`` / ``tocsc``), ``A + A(j,i)`` in a loop of calls (a
transposed use: a conversion remembered on the operand; against scipy's ``A + A.T``), ``import llvsparse`` (against ``import numpy``), and a
cold SpMV compile by phase. Each pair runs interleaved, and every number is a median of
several rounds. Run alone: ``python -m llvsparse.tools.bench_edges [--quick]``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

MIN_MEASURE_S = 0.002  # a measurement repeats a call until it has run this long


def _per_call(call: Callable[[], Any]) -> float:
    """Seconds per call, repeated until MIN_MEASURE_S has passed."""
    count, start = 0, time.perf_counter()
    while True:
        call()
        count += 1
        elapsed = time.perf_counter() - start
        if elapsed >= MIN_MEASURE_S:
            return elapsed / count


def _interleaved(calls: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Median seconds per call of each, the calls taking turns every round."""
    for call in calls.values():
        call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            samples[name].append(_per_call(call))
    return {name: statistics.median(times) for name, times in samples.items()}


def _import_ms(module: str, rounds: int) -> float:
    """Median cumulative import time of ``module`` in a fresh interpreter (-X importtime)."""
    times = []
    for _ in range(rounds):
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                              capture_output=True, text=True, check=True)
        last = [line for line in done.stderr.splitlines()
                if re.search(rf"\|\s*{re.escape(module)}$", line)][-1]
        times.append(int(last.split("|")[1]) / 1e3)
    return statistics.median(times)


def _cold_compile(rounds: int) -> dict[str, float]:
    """Median phases (ms) of a cold CSR SpMV compile, in-memory and disk caches bypassed,
    and of its first call in all."""
    import llvsparse as ls
    from llvsparse.kernel import api

    small = ls.Tensor.from_scipy(sp.random(10, 10, density=0.3, random_state=3))
    x = np.ones(10)
    saved, env = dict(api._CACHE), os.environ.get("LLVSPARSE_CACHE")
    os.environ["LLVSPARSE_CACHE"] = "0"
    phases: dict[str, list[float]] = {}
    try:
        for _ in range(rounds):
            api._CACHE.clear()
            kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
            start = time.perf_counter()
            kernel(A=small, x=x)
            phases.setdefault("first call", []).append(time.perf_counter() - start)
            for name, seconds in kernel.compile_times.items():
                phases.setdefault(name, []).append(seconds)
    finally:
        if env is None:
            os.environ.pop("LLVSPARSE_CACHE", None)
        else:
            os.environ["LLVSPARSE_CACHE"] = env
        api._CACHE.clear()
        api._CACHE.update(saved)
    return {name: statistics.median(times) * 1e3 for name, times in phases.items()}


def edge_costs(quick: bool, rounds: int = 7) -> dict[str, Any]:
    """Every row of the section: {name: {"llvsparse_ms", "reference_ms", "reference"}},
    plus the cold compile's phases."""
    import llvsparse as ls

    rows: dict[str, dict[str, Any]] = {}

    def pair(name: str, mine: Callable[[], Any], reference: Callable[[], Any],
             what: str) -> None:
        times = _interleaved({"mine": mine, "reference": reference}, rounds)
        rows[name] = {"llvsparse_ms": times["mine"] * 1e3,
                      "reference_ms": times["reference"] * 1e3, "reference": what}

    rng = np.random.default_rng(0)
    n = 100_000 if quick else 1_000_000
    tall = ls.Tensor.from_scipy(sp.random(n, 10, density=0.2, format="csr", random_state=1))
    vector = ls.evaluate("y(i) = A(i,j) * x(j)", A=tall, x=np.ones(10))
    pair(f"to_numpy, dense {n:.0e}-vector result", vector.to_numpy,
         lambda: np.asarray(vector.values), "np.asarray(values)")

    small = ls.Tensor.from_scipy(sp.random(10, 10, density=0.3, random_state=3))
    x10 = np.ones(10)
    spmv = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    pair("10x10 SpMV call, then to_numpy", lambda: spmv(A=small, x=x10).to_numpy(),
         lambda: spmv(A=small, x=x10), "the call alone")

    # The operator path's fixed cost (issue 33): what a user writes, on a 10 x 10 matrix,
    # against scipy's same operator; the target is the row's most llvsparse / scipy.
    mats = [sp.random(10, 10, density=0.3, format="csr", random_state=k) for k in (3, 7)]
    A, B = (ls.asarray(m) for m in mats)
    xs = [np.random.default_rng(0).random(10) for _ in range(8)]  # new objects
    turns = [itertools.cycle(range(len(xs))) for _ in range(2)]  # one per way
    for name, mine, reference, target in [
            ("10x10 A @ x, operator", lambda: A @ x10, lambda: mats[0] @ x10, 2.0),
            ("10x10 A @ x, a new x each call", lambda: A @ xs[next(turns[0])],
             lambda: mats[0] @ xs[next(turns[1])], 2.0),
            ("10x10 A * 2.0, operator", lambda: A * 2.0, lambda: mats[0] * 2.0, 1.0),
            ("10x10 A + B, operator", lambda: A + B, lambda: mats[0] + mats[1], 1.0)]:
        pair(name, mine, reference, "scipy, the same operator")
        rows[name]["target"] = target

    side = 2_000 if quick else 10_000
    matrix = sp.random(side, side, density=0.05, format="csr", random_state=4)
    scaled = ls.compile("B(i,j) = A(i,j) * 2", B="csr", A="csr")
    result = scaled(A=ls.Tensor.from_scipy(matrix))
    pos, crd = result.level_arrays[1]["pos"], result.level_arrays[1]["crd"]
    pair(f"to_scipy, CSR result of {len(crd):.1e} entries", result.to_scipy,
         lambda: sp.csr_matrix((result.values, crd, pos), shape=result.shape),
         "sp.csr_matrix((data, indices, indptr))")
    reference = sp.csr_matrix((result.values, crd, pos), shape=result.shape)
    pair("to_numpy, same CSR result", result.to_numpy, reference.toarray, "scipy .toarray()")
    pair("asformat('csc'), same CSR result", lambda: result.asformat("csc"),
         reference.tocsc, "scipy .tocsc()")

    wide = 2_000 if quick else 20_000  # 8 or 16 entries a row: ~1e5 or ~5e6 products
    left = sp.random(wide, wide, density=(8 if quick else 16) / wide, format="csr",
                     random_state=5)
    product = ls.compile("C(i,k) = A(j,i) * B(j,k)", C="coo-unordered", A="csc", B="csr")(
        A=ls.Tensor.from_scipy(left, format="csc"), B=ls.Tensor.from_scipy(left))
    arrays = product.level_arrays
    coo = sp.coo_matrix((product.values, (arrays[0]["crd"], arrays[1]["crd"])),
                        shape=product.shape)
    pair(f"asformat('csr'), unordered COO product of {len(product.values):.1e} entries",
         lambda: product.asformat("csr"), coo.tocsr, "scipy coo .tocsr()")

    mixed = sp.random(side // 2, side // 2, density=0.02, format="csr", random_state=6)
    mixed.data = rng.random(mixed.nnz)
    square = ls.Tensor.from_scipy(mixed)
    symmetric = ls.compile("C(i,j) = A(i,j) + A(j,i)", C="csr", A="csr")
    pair(f"A + A(j,i), CSR of {mixed.nnz:.1e} entries, per call in a loop",
         lambda: symmetric(A=square), lambda: mixed + mixed.T, "scipy A + A.T")

    import_rounds = 3 if quick else 7
    rows["import llvsparse"] = {"llvsparse_ms": _import_ms("llvsparse", import_rounds),
                                "reference_ms": _import_ms("numpy", import_rounds),
                                "reference": "import numpy"}
    return {"rows": rows, "cold_compile_ms": _cold_compile(3 if quick else 7)}


def edges_table(costs: dict[str, Any]) -> str:
    """The section as text: a row per edge, then the cold compile's phases."""
    width = max(len(name) for name in costs["rows"])
    lines = [("Edges (medians, interleaved with the reference; target: the most "
              "llvsparse / reference where there is one)"),
             f"{'':{width}}  {'llvsparse':>12}  {'reference':>12}  ratio  target  reference"]
    for name, row in costs["rows"].items():
        mine, ref = row["llvsparse_ms"], row["reference_ms"]
        ratio = mine / ref if ref else float("nan")
        target = row.get("target")
        met = "" if target is None else \
            f"{target:g} {'met' if ratio <= target else 'NOT met'}"
        lines.append(f"{name:{width}}  {mine:>9.4f} ms  {ref:>9.4f} ms  "
                     f"{ratio:5.2f}  {met:>6}  {row['reference']}")
    lines.append("Cold CSR SpMV compile (ms): " + ", ".join(
        f"{name} {ms:.1f}" for name, ms in costs["cold_compile_ms"].items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llvsparse.tools.bench_edges",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small inputs, fewer rounds")
    parser.add_argument("--rounds", type=int, default=7, help="rounds per pair (default 7)")
    args = parser.parse_args(argv)
    print(edges_table(edge_costs(args.quick, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
