"""Sparse 2-D convolution (paper 000): ``ls.conv`` on a sparse image against
scipy.signal.convolve2d on the same image stored dense.

    python -m llvsparse.tools.bench_conv [--size 4096] [--rounds 5] [--formats dcsr,coo]

Per density (0.1%, 1%, 10%) and filter (3x3, 5x5, dense), the medians of ``rounds``
interleaved runs (llvsparse, then scipy, alternately), their ratio, and llvsparse's time
per stored entry (flat across densities when time grows with the stored entries), and
the 1-minute load average when the row finished (a shared machine's load moves absolute
times). The results are checked against each other first. 'same' padding, a dense output; llvsparse
on one thread (the kernel scatters into its output, which it does not split).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import scipy.signal as ss
import scipy.sparse as sp

import llvsparse as ls


def image(size: int, density: float, seed: int) -> sp.coo_matrix:
    rng = np.random.default_rng(seed)
    count = int(size * size * density)
    flat = rng.choice(size * size, count, replace=False)
    return sp.coo_matrix((rng.standard_normal(count), (flat // size, flat % size)),
                         shape=(size, size))


def timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def row(size: int, density: float, k: int, fmt: str, rounds: int) -> dict:
    coo = image(size, density, seed=k)
    dense = coo.toarray()
    filt = np.random.default_rng(k + 1).standard_normal((k, k))
    tensor = ls.Tensor.from_numpy(dense, format=fmt)
    flipped = filt[::-1, ::-1].copy()  # convolve2d flips; correlation is what conv computes
    ours = ls.conv(tensor, filt, padding="same").to_numpy()
    theirs = ss.convolve2d(dense, flipped, mode="same")
    if not np.allclose(ours, theirs, atol=1e-9):
        raise AssertionError(f"results differ at density {density}, filter {k}x{k}")
    del ours, theirs
    mine, peer = [], []
    for _ in range(rounds):
        mine.append(timed(lambda: ls.conv(tensor, filt, padding="same")))
        peer.append(timed(lambda: ss.convolve2d(dense, flipped, mode="same")))
    ms, ps = statistics.median(mine), statistics.median(peer)
    return {"density": density, "filter": f"{k}x{k}", "format": fmt, "nnz": coo.nnz,
            "llvsparse_ms": ms * 1e3, "scipy_ms": ps * 1e3, "speedup": ps / ms,
            "ns_per_entry": ms * 1e9 / max(coo.nnz, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--formats", default="dcsr")
    parser.add_argument("--densities", default="0.001,0.01,0.1")
    args = parser.parse_args()
    ls.set_num_threads(1)
    print("| image | density | stored | filter | llvsparse ms | scipy convolve2d ms "
          "| speedup | ns per stored entry | load |\n|---|---|---|---|---|---|---|---|---|")
    for fmt in args.formats.split(","):
        empty = ls.Tensor.from_numpy(np.zeros((1, 1)), format=fmt)
        sides = [(args.size // 2, args.size - args.size // 2 + 1)] * 2  # a size² output
        assert ls.conv(empty, np.ones((3, 3)), padding=sides).shape == (args.size,) * 2
        def nothing(empty=empty, sides=sides) -> None:
            ls.conv(empty, np.ones((3, 3)), padding=sides)

        fixed = statistics.median(timed(nothing) for _ in range(args.rounds))
        print(f"| {args.size}² {fmt} | no entries (the dense output's allocation) | 0 | 3x3 "
              f"| {fixed * 1e3:.1f} | | | | {os.getloadavg()[0]:.1f} |", flush=True)
        for density in (float(d) for d in args.densities.split(",")):
            for k in (3, 5):
                r = row(args.size, density, k, fmt, args.rounds)
                print(f"| {args.size}² {fmt} | {density:.1%} | {r['nnz']} | {r['filter']} | "
                      f"{r['llvsparse_ms']:.1f} | {r['scipy_ms']:.1f} | {r['speedup']:.1f}x "
                      f"| {r['ns_per_entry']:.1f} | {os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
