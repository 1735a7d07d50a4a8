"""Scaling: each kernel at dimensions n and 4n with the same number of stored entries
(issue 32), timed as the median of interleaved rounds, beside scipy where scipy
computes the same thing. A kernel whose work follows what is stored grows by its dense
operands' growth at most; one that walks a product of dimensions grows by 4x or more.
scipy's time, at n and at 4n, is interleaved with the kernel's (one run of each per
round); the load average is printed at the end (the machine is shared).

    python -m llvsparse.tools.bench_scaling [--rounds 7] [--only "A @ B + D"]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import scipy.sparse as sp

import llvsparse as ls

ENTRIES = 10**5
NOTES: list[str] = []  # what the cases checked as they were made, printed at the end


def _matrix(n: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, n, (2, ENTRIES))
    return sp.coo_matrix((rng.random(ENTRIES), (rows, cols)), shape=(n, n)).tocsr()


def _tensor(n: int, seed: int) -> ls.Tensor:
    rng = np.random.default_rng(seed)
    return ls.Tensor.from_coo(rng.integers(0, n, (3, ENTRIES)), rng.random(ENTRIES),
                              (n, n, n), format="csf")


def _mttkrp(n: int, non_finite: bool = False):
    kernel = ls.compile("A(i,j) = B(i,k,l) * D(l,j) * C(k,j)", B="csf", C="dense",
                        D="dense")
    rng = np.random.default_rng(n)
    operands = {"B": _tensor(n, 1), "C": rng.random((n, 32)), "D": rng.random((n, 32))}
    if non_finite:  # the exact plan: what an inf in a dense factor costs (README)
        operands["C"][n // 2, 0] = np.inf
    return lambda: kernel(**operands), None


def _mttkrp_inf(n: int):
    return _mttkrp(n, non_finite=True)


def _spgemm_dcsr(n: int):
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="dcsr", B="dcsr", out_format="dcsr")
    a, b = _matrix(n, 2), _matrix(n, 3)
    operands = {"A": ls.Tensor.from_scipy(a, "dcsr"), "B": ls.Tensor.from_scipy(b, "dcsr")}
    return lambda: kernel(**operands), lambda: a @ b


def _ttm(n: int):
    kernel = ls.compile("A(i,j,r) = B(i,j,k) * U(k,r)", B="csf", U="dense", out_format="csf")
    operands = {"B": _tensor(n, 4), "U": np.random.default_rng(n).random((n, 16))}
    return lambda: kernel(**operands), None


def _product_plus(n: int):
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j) + D(i,j)", A="csr", B="csr", D="csr",
                        out_format="csr")
    a, b, d = _matrix(n, 5), _matrix(n, 6), _matrix(n, 7)
    operands = {name: ls.Tensor.from_scipy(m, "csr") for name, m in zip("ABD", (a, b, d))}
    got, expected = kernel(**operands).to_scipy().tocsr(), (a @ b + d).tocsr()
    if got.nnz != expected.nnz or abs(got - expected).max() > 1e-12:
        raise AssertionError(f"A @ B + D at n = {n}: {got.nnz} entries, scipy {expected.nnz}")
    NOTES.append(f"A @ B + D at n = {n:,}: {got.nnz:,} entries stored, as scipy's "
                 f"(max abs difference {abs(got - expected).max():.1e})")
    return lambda: kernel(**operands), lambda: a @ b + d


CASES = {
    "MTTKRP, B CSF, rank 32": (_mttkrp, 1500),
    "MTTKRP, B CSF, rank 32, one inf in C": (_mttkrp_inf, 1500),
    "SpGEMM DCSR x DCSR -> DCSR": (_spgemm_dcsr, 20000),
    "TTM, B CSF -> CSF, rank 16": (_ttm, 2000),
    "A @ B + D, CSR -> CSR": (_product_plus, 20000),
    "A @ B + D, CSR -> CSR, denser": (_product_plus, 3000),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", help="run the cases whose name contains this")
    args = parser.parse_args(argv)
    print("| kernel | n | t(n) ms | t(4n) ms | growth | scipy t(n) ms | ratio to scipy "
          "| scipy t(4n) ms | ratio at 4n |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (make, n) in CASES.items():
        if args.only and args.only not in name:
            continue
        small, reference = make(n)
        large, large_reference = make(4 * n)
        runs = [small, large] + ([reference, large_reference] if reference else [])
        for run in runs:  # compiled and warm
            run()
        rounds: list[list[float]] = [[] for _ in runs]
        for _ in range(args.rounds):  # interleaved: one run of each per step
            for k, run in enumerate(runs):
                start = time.perf_counter()
                run()
                rounds[k].append(time.perf_counter() - start)
        times = [float(np.median(r)) for r in rounds]
        peer = (f"{times[2] * 1e3:.1f} | {times[0] / times[2]:.2f}x | "
                f"{times[3] * 1e3:.1f} | {times[1] / times[3]:.2f}x") if reference \
            else "- | - | - | -"
        print(f"| {name} | {n:,} | {times[0] * 1e3:.1f} | {times[1] * 1e3:.1f} | "
              f"{times[1] / times[0]:.1f}x | {peer} |")
    for note in NOTES:
        print(note)
    print(f"load average (1, 5, 15 min) at the end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
