"""Bench kernels of this tree against another checkout of llvsparse and the 1-thread
peers, interleaved in one run: SpGEMM (A·Aᵀ and A·A, CSR x CSR -> CSR) by default, any
kernel of the bench with ``--kernels`` (``--kernels all``: every one, on the real
matrices and tensors of ../shared/data).

A change to a kernel is judged by its geometric mean against the fastest
1-thread peer over the bench's inputs; on this shared machine the load moves between
two runs by more than such a change gains, so the old and the new kernel are timed in
the same rounds. The other checkout runs in a worker process (its own interpreter,
``--base-python``) that builds the same case from its own tree, verifies its result
against scipy's, and times its bound kernel when asked; this process times its own
kernel and the peers (scipy, sparse_dot_mkl, python-graphblas at one thread) in
between. Medians of ``--rounds`` rounds; the load average is printed beside each row.
Each sample is the process's CPU time (``time.process_time``, every thread of it), not
wall time: on the shared 2-core machine at a load average of 8-10 a process runs in
bursts, and wall-time medians of the same code moved 3x between neighbouring rows;
``--wall`` times wall clock instead (for a quiet machine).

    python -m llvsparse.tools.bench_spgemm_ab --base-python /path/to/old/.venv/bin/python
    python -m llvsparse.tools.bench_spgemm_ab --base-python ... --kernels all --no-peers
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

# Absolute imports: the worker runs this file by its path under the other checkout's
# interpreter, where these name that checkout's modules.
from llvsparse.tools.bench_inputs import (
    MatrixInput,
    TensorInput,
    load_real_matrix,
    load_real_tensor,
    real_matrix_names,
    real_tensor_entries,
)
from llvsparse.tools.bench_kernels import KERNELS as BENCH_KERNELS
from llvsparse.tools.bench_kernels import make_case, skip_reason, verify
from llvsparse.tools.bench_llvsparse import llvsparse_impl
from llvsparse.tools.bench_peers import discover

KERNELS = ("spgemm", "spgemm_aa")  # the default
MEASURE_S = 0.02  # each timed sample repeats a call for about this long (``--sample``)
PEER_LIBRARIES = ("scipy", "sparse_dot_mkl", "graphblas")


CLOCK = time.process_time


def load_input(name: str) -> MatrixInput | TensorInput:
    """A real matrix or tensor of the manifest, by name."""
    tensors = {entry["name"]: entry for entry in real_tensor_entries()}
    return load_real_tensor(tensors[name]) if name in tensors else load_real_matrix(name)


def _worker(kernel: str, name: str) -> None:
    """The other checkout's side: bind its kernel on the case, verify, then answer each
    line ``repeat`` on stdin with the mean seconds per call."""
    case = make_case(kernel, load_input(name))
    prepared = llvsparse_impl(1).kernels[kernel](case)
    problem = verify(prepared.result(prepared.call()), case.reference)
    print("ok" if problem is None else f"wrong: {problem}", flush=True)
    for line in sys.stdin:
        clock, repeat = line.split()
        print(_per_call(prepared.call, int(repeat), getattr(time, clock)), flush=True)


class Worker:
    """A worker process of the other checkout, for one case."""

    def __init__(self, python: str, kernel: str, name: str) -> None:
        self.process = subprocess.Popen(
            [python, os.path.abspath(__file__), "--worker", kernel, name],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
        assert self.process.stdout is not None
        self.status = self.process.stdout.readline().strip()

    def time(self, repeat: int) -> float:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{CLOCK.__name__} {repeat}\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def _per_call(call: Callable[[], Any], repeat: int,
              clock: Callable[[], float] = time.perf_counter) -> float:
    start = clock()
    for _ in range(repeat):
        call()
    return (clock() - start) / repeat


def run(base_python: str, names: list[str], rounds: int, kernels: tuple[str, ...],
        with_peers: bool = True, sample: float = MEASURE_S) -> None:
    impls, _, _ = discover((1,)) if with_peers else ([], None, None)
    peers = [i for i in impls if i.library in PEER_LIBRARIES and i.threads == 1]
    ours = llvsparse_impl(1)
    ratios: dict[str, dict[str, list[float]]] = {k: {"new": [], "base": []} for k in kernels}
    new_over_base: dict[str, list[float]] = {k: [] for k in kernels}
    print("| kernel | input | new ms | base ms | fastest peer (ms) | new / peer | "
          "base / peer | new / base | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        item = load_input(name)
        for kernel in kernels:
            if skip_reason(kernel, item) is not None:
                continue
            case = make_case(kernel, item)
            calls: dict[str, Callable[[], Any]] = {}
            for impl in [ours, *peers]:
                if kernel not in impl.kernels:
                    continue
                impl.configure()
                prepared = impl.kernels[kernel](case)
                if verify(prepared.result(prepared.call()), case.reference) is None:
                    calls[impl.name] = prepared.call
            worker = Worker(base_python, kernel, name)
            if worker.status != "ok" or "llvsparse" not in calls:
                print(f"| {kernel} | {name} | skipped: base {worker.status}, "
                      f"new {'ok' if 'llvsparse' in calls else 'wrong'} |")
                worker.close()
                continue
            repeats = {k: max(1, math.ceil(sample / max(_per_call(c, 1), 1e-7)))
                       for k, c in calls.items()}
            repeats["base"] = repeats["llvsparse"]
            times: dict[str, list[float]] = {k: [] for k in repeats}
            for r in range(rounds):
                order = list(repeats)
                order = order[r % len(order):] + order[:r % len(order)]
                for key in order:
                    if key == "base":
                        times[key].append(worker.time(repeats[key]))
                    else:
                        next(i for i in [ours, *peers] if i.name == key).configure()
                        times[key].append(_per_call(calls[key], repeats[key], CLOCK))
            worker.close()
            med = {k: statistics.median(v) for k, v in times.items()}
            new_over_base[kernel].append(med["llvsparse"] / med["base"])
            peer_names = [k for k in med if k not in ("llvsparse", "base")]
            peer = "- | - | -"
            if peer_names:
                best = min(peer_names, key=lambda k: med[k])
                new, base = med["llvsparse"] / med[best], med["base"] / med[best]
                ratios[kernel]["new"].append(new)
                ratios[kernel]["base"].append(base)
                peer = f"{best} ({med[best] * 1e3:.3g}) | {new:.2f} | {base:.2f}"
            load = os.getloadavg()[0]
            print(f"| {kernel} | {name} | {med['llvsparse'] * 1e3:.3g} | {med['base'] * 1e3:.3g}"
                  f" | {peer} | {med['llvsparse'] / med['base']:.2f} | {load:.1f} |",
                  flush=True)
    for kernel in kernels:
        both, mine = ratios[kernel], new_over_base[kernel]
        if mine:
            line = f"{kernel}: {len(mine)} inputs, geometric mean new / base {_gm(mine):.3f}"
            if both["new"]:
                line += (f"; / fastest 1-thread peer: new {_gm(both['new']):.3f}, "
                         f"base {_gm(both['base']):.3f}")
            print(line)
    every = [x for v in new_over_base.values() for x in v]
    if every:
        print(f"all: {len(every)} rows, geometric mean new / base {_gm(every):.3f}")


def _gm(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in values))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-python", help="the other checkout's interpreter")
    parser.add_argument("--inputs", default="", help="comma-separated real matrix names")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--kernels", default=",".join(KERNELS),
                        help="comma-separated bench kernels, or 'all'")
    parser.add_argument("--sample", type=float, default=MEASURE_S,
                        help="seconds each timed sample repeats a call for")
    parser.add_argument("--no-peers", action="store_true", help="time only new against base")
    parser.add_argument("--wall", action="store_true", help="wall-clock time, not CPU time")
    parser.add_argument("--worker", nargs=2, metavar=("KERNEL", "INPUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(*args.worker)
        return 0
    if not args.base_python:
        parser.error("--base-python is required")
    global CLOCK
    CLOCK = time.perf_counter if args.wall else time.process_time
    kernels = tuple(BENCH_KERNELS) if args.kernels == "all" else tuple(args.kernels.split(","))
    unknown = [k for k in kernels if k not in BENCH_KERNELS]
    if unknown:
        parser.error(f"unknown kernels {unknown}; the bench has {sorted(BENCH_KERNELS)}")
    names = args.inputs.split(",") if args.inputs else real_matrix_names(False)
    if args.kernels == "all" and not args.inputs:
        names += [entry["name"] for entry in real_tensor_entries()]
    run(args.base_python, names, args.rounds, kernels, not args.no_peers,
        args.sample)
    return 0


if __name__ == "__main__":
    sys.exit(main())
