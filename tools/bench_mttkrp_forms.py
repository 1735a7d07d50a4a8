"""MTTKRP with and without the sum workspace (ir/schedule/precompute_sums.py), interleaved.

For each of the bench's tensors (the generated uniform and powerlaw 3-tensors and the
real FROSTT ones of ../shared/data) and the scaling bench's tensors at n and 4n (10^5
entries), times ``A(i,j) = B(i,k,l) * C(k,j) * D(l,j)`` (B in CSF, rank 32, dense
factors) compiled with ``precompute=None`` (the rule: no sum workspace) and
``precompute=True`` (the workspace form), alternating calls, and prints the medians,
their ratio, the entries per fibre ``B(i,k,:)`` and the load average. Times are the
process's CPU time by default (``--clock wall`` for wall time).

    python -m tools.bench_mttkrp_forms [--rounds 15] [--quick]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import llvsparse as ls
from tools import bench_inputs

RANK = 32
STATEMENT = "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)"


def _inputs(quick: bool):
    yield from bench_inputs.generated_tensors(quick)
    if not quick:
        for entry in bench_inputs.real_tensor_entries():
            try:
                yield bench_inputs.load_real_tensor(entry)
            except ValueError:  # not a 3-tensor (the bench leaves it out too)
                continue
    for fibre in (1, 2, 4, 8, 16):  # 2 x 10^5 entries in fibres of a fixed length
        rng = np.random.default_rng(fibre)
        heads = rng.integers(0, 2000, (2, 200_000 // fibre))
        coords = np.vstack([np.repeat(heads, fibre, axis=1),
                            rng.integers(0, 2000, heads.shape[1] * fibre)])
        coords, values = bench_inputs._sorted_unique(coords, rng.random(coords.shape[1]))
        yield bench_inputs.TensorInput(f"fibres of {fibre}", coords, values,
                                       (2000, 2000, 2000), "generated", {})
    for n in (1500, 6000):  # tools/bench_scaling.py's MTTKRP tensors
        rng = np.random.default_rng(1)
        coords = rng.integers(0, n, (3, 10**5))
        coords, values = bench_inputs._sorted_unique(coords, rng.random(10**5))
        yield bench_inputs.TensorInput(f"scaling n={n}", coords, values, (n, n, n),
                                       "generated", {})


def _fibres(coords: np.ndarray) -> int:
    if coords.shape[1] == 0:
        return 0
    new = np.any(coords[:2, 1:] != coords[:2, :-1], axis=0)
    return int(new.sum()) + 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="cpu",
                        help="cpu: the process's CPU time (a loaded machine's preemption "
                             "inflates wall times; every thread's time is counted)")
    args = parser.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    kernels = {form: ls.compile(STATEMENT, B="csf", C="dense", D="dense", precompute=form)
               for form in (None, True)}
    print(f"load average {os.getloadavg()}")
    print("| tensor | entries | per fibre | plain ms | workspace ms | ratio |")
    print("|---|---|---|---|---|---|")
    for tensor in _inputs(args.quick):
        rng = np.random.default_rng(0)
        shape = tensor.shape
        ops = {"B": ls.Tensor.from_coo(tensor.coords, tensor.values, shape, format="csf"),
               "C": rng.uniform(-1, 1, (shape[1], RANK)),
               "D": rng.uniform(-1, 1, (shape[2], RANK))}
        results = {form: k(**ops) for form, k in kernels.items()}
        scale = max(1.0, float(np.abs(results[None]).max()))
        if not np.allclose(results[None], results[True], rtol=1e-9, atol=1e-12 * scale):
            raise AssertionError(f"{tensor.name}: the two forms disagree")
        times: dict = {None: [], True: []}
        for _ in range(args.rounds):
            for form, k in kernels.items():
                start = clock()
                k(**ops)
                times[form].append(clock() - start)
        plain, ws = (float(np.median(times[f])) * 1e3 for f in (None, True))
        entries = tensor.coords.shape[1]
        print(f"| {tensor.name} | {entries:,} | {entries / max(1, _fibres(tensor.coords)):.2f} "
              f"| {plain:.2f} | {ws:.2f} | {ws / plain:.2f} |", flush=True)
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
