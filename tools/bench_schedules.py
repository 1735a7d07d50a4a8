"""Paper 001's CPU schedules against the default schedule, on the same inputs.

    python -m llvsparse.tools.bench_schedules [--quick] [--rounds 7] [--threads 2]

For SpMV, SpMM, SDDMM, TTV and MTTKRP, each schedule of the paper (digest section 6.1)
is first compiled as written. Where the compiler refuses a directive (it names which:
CPU vector units, tiling in position space, a precompute of a sub-expression), the row
lists the refusal and then times the closest schedule it lowers, which is named in the
row. Every timed kernel is checked against a scipy/numpy reference first. Times are
medians of ``rounds`` interleaved calls (default, scheduled, default, ...), on
``threads`` threads.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from llvsparse.ir.errors import ScheduleError

import llvsparse as ls

from .bench_inputs import load_real_matrix, powerlaw, random_tensor, real_matrix_names, uniform


@dataclass(frozen=True)
class Case:
    """One kernel: its statement, formats, the paper's schedule, the closest schedule this
    compiler lowers, operands from a matrix, and a reference."""

    name: str
    statement: str
    formats: dict
    out_format: str
    paper: str
    lowered: str
    operands: Callable[[sp.csr_matrix], dict]
    reference: Callable[[dict], np.ndarray]


def _dense(rows: int, cols: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((rows, cols))


MATRIX_CASES = [
    Case("SpMV", "y(i) = A(i,j) * x(j)", {"A": "csr"}, "dense",
         "split(i, i0, i1, 16); reorder(i0, i1, j); parallelize(i0, cpu_thread, no_races)",
         "split(i, i0, i1, 16); reorder(i0, i1, j); parallelize(i0, cpu_thread, no_races)",
         lambda A: {"A": A, "x": _dense(A.shape[1], 1, 3)[:, 0]},
         lambda o: o["A"] @ o["x"]),
    Case("SpMV nonzero split", "y(i) = A(i,j) * x(j)", {"A": "csr"}, "dense",
         "fuse(i, j, f); pos(f, fp, A(i,j)); split(fp, c, t, 2048); "
         "parallelize(c, cpu_thread, atomics)",
         "fuse(i, j, f); pos(f, fp, A(i,j)); split(fp, c, t, 2048); "
         "parallelize(c, cpu_thread, atomics)",
         lambda A: {"A": A, "x": _dense(A.shape[1], 1, 3)[:, 0]},
         lambda o: o["A"] @ o["x"]),
    Case("SpMM", "C(i,k) = A(i,j) * B(j,k)", {"A": "csr"}, "dense",
         "split(i, i0, i1, 16); pos(j, jpos, A(i,j)); split(jpos, jpos0, jpos1, 8); "
         "reorder(i0, i1, jpos0, k, jpos1); parallelize(i0, cpu_thread, no_races)",
         "split(i, i0, i1, 16); pos(j, jpos, A(i,j)); split(jpos, jpos0, jpos1, 8); "
         "reorder(i0, i1, jpos0, k, jpos1); parallelize(i0, cpu_thread, no_races)",
         lambda A: {"A": A, "B": _dense(A.shape[1], 32, 4)},
         lambda o: o["A"] @ o["B"]),
    Case("SDDMM", "A(i,k) = B(i,k) * C(i,j) * D(j,k)", {"B": "csr"}, "csr",
         "split(i, i0, i1, 16); pos(k, kpos, B(i,k)); split(kpos, kpos0, kpos1, 8); "
         "reorder(i0, i1, kpos0, j, kpos1); parallelize(i0, cpu_thread, no_races)",
         "split(i, i0, i1, 16); pos(k, kpos, B(i,k)); split(kpos, kpos0, kpos1, 8); "
         "reorder(i0, i1, kpos0, j, kpos1); parallelize(i0, cpu_thread, no_races)",
         lambda A: {"B": A, "C": _dense(A.shape[0], 16, 5), "D": _dense(16, A.shape[1], 6)},
         lambda o: o["B"].multiply(o["C"] @ o["D"]).toarray()),
]

TENSOR_CASES = [
    Case("TTV", "A(i,j) = B(i,j,k) * c(k)", {"B": "csf"}, "dense",
         "fuse(i, j, f); pos(f, fpos, B(i,j,k)); split(fpos, chunk, fpos2, 16); "
         "reorder(chunk, fpos2, k); parallelize(chunk, cpu_thread, no_races)",
         "fuse(i, j, f); pos(f, fpos, B(i,j,k)); split(fpos, chunk, fpos2, 16); "
         "reorder(chunk, fpos2, k); parallelize(chunk, cpu_thread, no_races)",
         lambda T: {"B": T, "c": _dense(T.shape[2], 1, 7)[:, 0]},
         lambda o: np.einsum("ijk,k->ij", o["B"], o["c"])),
    Case("MTTKRP", "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", {"B": "csf"}, "dense",
         # The paper's precompute of the factors sharing l (its D(l,j) is D(l,j) here).
         "split(i, i1, i2, 16); reorder(i1, i2, k, l, j); "
         "precompute(B(i,k,l) * D(l,j), j, j, w); parallelize(i1, cpu_thread, no_races)",
         "split(i, i1, i2, 16); reorder(i1, i2, k, l, j); parallelize(i1, cpu_thread, no_races)",
         lambda T: {"B": T, "C": _dense(T.shape[1], 16, 8), "D": _dense(T.shape[2], 16, 9)},
         lambda o: np.einsum("ikl,kj,lj->ij", o["B"], o["C"], o["D"])),
]


def _timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def _as_array(result) -> np.ndarray:
    return np.asarray(result.to_numpy() if hasattr(result, "to_numpy") else result)


def _compile(case: Case, schedule: str | None) -> ls.Kernel:
    return ls.compile(case.statement, out_format=case.out_format, schedule=schedule,
                      **case.formats)


def measure(case: Case, operands: dict, rounds: int, threads: int) -> dict:
    """The paper's schedule (or its refusal, then the lowered one) against the default."""
    row = {"kernel": case.name, "paper": case.paper}
    try:
        _compile(case, case.paper)(**operands, threads=threads)
        schedule = case.paper
    except ScheduleError as error:
        row["refused"] = str(error)
        schedule = case.lowered
    row["timed"] = schedule
    default, scheduled = _compile(case, None), _compile(case, schedule)
    expected = case.reference(operands)
    operands = {n: ls.asarray(v, format=case.formats[n]) if n in case.formats else v
                for n, v in operands.items()}  # packed once, not per call
    for kernel in (default, scheduled):
        if not np.allclose(_as_array(kernel(**operands, threads=threads)), expected):
            raise AssertionError(f"{case.name}: a result differs from the reference")
    mine, base = [], []
    for _ in range(rounds):
        base.append(_timed(lambda: default(**operands, threads=threads)))
        mine.append(_timed(lambda: scheduled(**operands, threads=threads)))
    row["default_ms"] = statistics.median(base) * 1e3
    row["scheduled_ms"] = statistics.median(mine) * 1e3
    row["ratio"] = row["scheduled_ms"] / row["default_ms"]
    return row


def _tensor(quick: bool, skew: bool) -> np.ndarray:
    shape, nnz = ((60, 80, 50), 20_000) if quick else ((200, 300, 200), 400_000)
    t = random_tensor(shape, nnz, skew=skew)
    dense = np.zeros(shape)
    dense[tuple(t.coords)] = t.values
    return dense


def inputs(quick: bool) -> list[tuple[str, sp.csr_matrix]]:
    rows = 20_000 if quick else 200_000
    found = [(f"uniform-{rows}", uniform(rows, 8)), (f"powerlaw-{rows}", powerlaw(rows, 8))]
    for name in real_matrix_names(quick)[: 2 if quick else 5]:
        found.append((name, load_real_matrix(name).matrix))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs (a smoke run)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    rows = []
    for name, matrix in inputs(args.quick):
        for case in MATRIX_CASES:
            operands = case.operands(matrix)
            rows.append({"input": name, **measure(case, operands, args.rounds, args.threads)})
    for skew in (False, True):
        tensor = _tensor(args.quick, skew)
        for case in TENSOR_CASES:
            rows.append({"input": f"tensor-{'powerlaw' if skew else 'uniform'}",
                         **measure(case, case.operands(tensor), args.rounds, args.threads)})
    print("| kernel | input | default ms | scheduled ms | ratio | schedule timed |")
    print("|---|---|---:|---:|---:|---|")
    for row in rows:
        timed = row["timed"] + (" (paper's refused: " + row["refused"] + ")"
                                if "refused" in row else " (as in the paper)")
        print(f"| {row['kernel']} | {row['input']} | {row['default_ms']:.3f} | "
              f"{row['scheduled_ms']:.3f} | {row['ratio']:.2f} | {timed} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
