"""Sparse 3-D convolutions (paper 000, issue 36): a submanifold convolution of a point
cloud, and the paper's own 3-D setup against a dense kernel.

    python -m llvsparse.tools.bench_submanifold [--points 100000] [--size 512]
        [--channels 16] [--rounds 5] [--paper-sizes 99] [--sparsities 0.8,0.9,0.99,0.999]

Point cloud: ``O(h,w,d,f) = M(h,w,d) * I(h+r-1, w+s-1, d+t-1, c) * F(r,s,t,c,f)``, the
output on the input's points only (M is their mask, walked as CSF; the image's point
levels hashed so each tap is located, or compressed and located through subsections,
i.e. binary searches; a 3x3x3 filter, channels -> channels). A dense
reference cannot run at 512³ (the image alone is 512³ x 16 float64 = 17.2 GB), so the
reference is numpy's per-point gather: for each of the 27 taps, the neighbours found
by a search of the sorted point keys, their features gathered and multiplied by the
tap's channel matrix. Both results are checked against each other first.

Paper setup (its Fig. 17, 3-D): a uniformly random image of size³ with a dense 3x3x3
filter, ``ls.conv`` on a CSF image ('valid', a dense output) against
scipy.signal.correlate(method='direct') on the dense image.

Medians of ``rounds`` interleaved runs, llvsparse on one thread; the peak resident
memory of the process is printed last.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np
import scipy.signal as ss

import llvsparse as ls

SUBMANIFOLD = "O(h,w,d,f) = M(h,w,d) * I(h+r-1, w+s-1, d+t-1, c) * F(r,s,t,c,f)"
HASHED = ["hashmap", "hashmap", "hashmap", "dense"]
DENSE2 = ["dense", "dense", "hashmap", "dense"]  # 512² positions: 2 MiB
ROWS = ["compressed", "compressed", "compressed", "dense"]


def cloud(points: int, size: int, channels: int, seed: int = 0):
    """Sorted distinct points (3, P), their features (P, C) and a filter (3,3,3,C,C)."""
    rng = np.random.default_rng(seed)
    flat = np.sort(rng.choice(size ** 3, points, replace=False))
    coords = np.stack(np.unravel_index(flat, (size,) * 3))
    return coords, rng.standard_normal((points, channels)), \
        rng.standard_normal((3, 3, 3, channels, channels))


def gather_reference(coords: np.ndarray, feats: np.ndarray, filt: np.ndarray,
                     size: int) -> np.ndarray:
    """Per-point gather: out[p] = sum over taps of feats[neighbour] @ F[tap]."""
    keys = np.ravel_multi_index(tuple(coords), (size,) * 3)  # sorted, as coords are
    out = np.zeros_like(feats)
    for r in range(3):
        for s in range(3):
            for t in range(3):
                near = coords + np.array([[r - 1], [s - 1], [t - 1]])
                inside = np.all((near >= 0) & (near < size), axis=0)
                rows = np.flatnonzero(inside)
                key = np.ravel_multi_index(tuple(near[:, rows]), (size,) * 3)
                at = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
                hit = keys[at] == key
                out[rows[hit]] += feats[at[hit]] @ filt[r, s, t]
    return out


def timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def point_cloud(points: int, size: int, channels: int, rounds: int,
                levels: list[str]) -> None:
    coords, feats, filt = cloud(points, size, channels)
    shape4 = (size, size, size, channels)
    flat4 = np.stack([*(np.repeat(c, channels) for c in coords),
                      np.tile(np.arange(channels), points)])
    image = ls.Tensor.from_coo(flat4, feats.reshape(-1), shape4, format=levels)
    mask = ls.Tensor.from_coo(coords, np.ones(points), (size,) * 3, format="csf")
    kernel = ls.compile(SUBMANIFOLD, M="csf", I=levels, out_format=ROWS)
    start = time.perf_counter()
    result = kernel(M=mask, I=image, F=filt)
    first = time.perf_counter() - start
    expected = gather_reference(coords, feats, filt, size)
    got_coords, got = result.to_coo()
    if not (np.array_equal(got_coords[:3, ::channels], coords)
            and np.allclose(got.reshape(points, channels), expected, atol=1e-9)):
        raise AssertionError("the point-cloud convolution differs from the gather reference")
    call = kernel.bind(check=False, M=mask, I=image, F=filt)
    mine, peer = [], []
    for _ in range(rounds):
        mine.append(timed(call))
        peer.append(timed(lambda: gather_reference(coords, feats, filt, size)))
    ms, ps = statistics.median(mine) * 1e3, statistics.median(peer) * 1e3
    print(f"| {points} points in {size}³, 3x3x3, {channels} -> {channels}; I "
          f"[{', '.join(levels)}] | "
          f"{ms:.1f} | {ps:.1f} | {ps / ms:.2f}x | first call {first * 1e3:.0f} ms "
          f"(compile and bind) |", flush=True)


def paper_setup(size: int, sparsity: float, rounds: int) -> None:
    rng = np.random.default_rng(1)
    dense = rng.standard_normal((size,) * 3) * (rng.random((size,) * 3) >= sparsity)
    filt = rng.standard_normal((3, 3, 3))
    tensor = ls.Tensor.from_numpy(dense, format="csf")
    ours = ls.conv(tensor, filt).to_numpy()
    if not np.allclose(ours, ss.correlate(dense, filt, mode="valid", method="direct"),
                       atol=1e-9):
        raise AssertionError(f"3-D convolution differs at sparsity {sparsity}")
    if not np.allclose(ours, shifted_slices(dense, filt), atol=1e-9):
        raise AssertionError(f"the shifted-slices reference differs at sparsity {sparsity}")
    mine, peer, slices = [], [], []
    for _ in range(rounds):
        mine.append(timed(lambda: ls.conv(tensor, filt)))
        peer.append(timed(lambda: ss.correlate(dense, filt, mode="valid", method="direct")))
        slices.append(timed(lambda: shifted_slices(dense, filt)))
    ms, ps, ns = (statistics.median(t) * 1e3 for t in (mine, peer, slices))
    print(f"| {size}³ csf, {sparsity:.1%} sparse ({np.count_nonzero(dense)} stored) | "
          f"{ms:.2f} | {ps:.2f} | {ns:.2f} | {ps / ms:.1f}x | {ns / ms:.1f}x |", flush=True)


def shifted_slices(dense: np.ndarray, filt: np.ndarray) -> np.ndarray:
    """A dense 'valid' correlation as 27 scaled shifted slices (numpy's vectorized
    form of a dense convolution kernel)."""
    n = [d - k + 1 for d, k in zip(dense.shape, filt.shape)]
    out = np.zeros(n)
    for (r, s, t), weight in np.ndenumerate(filt):
        out += weight * dense[r:r + n[0], s:s + n[1], t:t + n[2]]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--channels", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--image-levels", default=";".join(",".join(levels) for levels in
                                                           (HASHED, DENSE2, ROWS)),
                        help="the image's levels, formats separated by ';'")
    parser.add_argument("--paper-sizes", default="99")
    parser.add_argument("--sparsities", default="0.8,0.9,0.99,0.999")
    args = parser.parse_args()
    ls.set_num_threads(1)
    print("| point cloud | llvsparse ms | numpy gather ms | speedup | |\n|---|---|---|---|---|")
    for levels in args.image_levels.split(";"):
        point_cloud(args.points, args.size, args.channels, args.rounds, levels.split(","))
    print("\n| paper 000 Fig. 17 setup | llvsparse ms | scipy correlate (direct) ms "
          "| numpy shifted slices ms | vs scipy | vs slices |\n|---|---|---|---|---|---|")
    for size in (int(s) for s in args.paper_sizes.split(",")):
        for sparsity in (float(s) for s in args.sparsities.split(",")):
            paper_setup(size, sparsity, args.rounds)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak resident memory: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
