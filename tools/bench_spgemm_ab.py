"""SpGEMM (A·Aᵀ and A·A, CSR x CSR -> CSR) of this tree against another checkout of
llvsparse and the 1-thread peers, interleaved in one run.

A change to the SpGEMM kernel is judged by its geometric mean against the fastest
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
from llvsparse.tools.bench_inputs import load_real_matrix, real_matrix_names
from llvsparse.tools.bench_kernels import make_case, skip_reason, verify
from llvsparse.tools.bench_llvsparse import llvsparse_impl
from llvsparse.tools.bench_peers import discover

KERNELS = ("spgemm", "spgemm_aa")
MEASURE_S = 0.02  # each timed sample repeats a call for about this long
PEER_LIBRARIES = ("scipy", "sparse_dot_mkl", "graphblas")


CLOCK = time.process_time


def _worker(kernel: str, name: str) -> None:
    """The other checkout's side: bind its kernel on the case, verify, then answer each
    line ``repeat`` on stdin with the mean seconds per call."""
    case = make_case(kernel, load_real_matrix(name))
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


def run(base_python: str, names: list[str], rounds: int,
        kernels: tuple[str, ...] = KERNELS) -> None:
    impls, _, _ = discover((1,))
    peers = [i for i in impls if i.library in PEER_LIBRARIES and i.threads == 1]
    ours = llvsparse_impl(1)
    ratios: dict[str, dict[str, list[float]]] = {k: {"new": [], "base": []} for k in kernels}
    print("| kernel | input | new ms | base ms | fastest peer (ms) | new / peer | "
          "base / peer | new / base | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        item = load_real_matrix(name)
        for kernel in kernels:
            if skip_reason(kernel, item) is not None:
                continue
            case = make_case(kernel, item)
            calls: dict[str, Callable[[], Any]] = {}
            for impl in [ours, *peers]:
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
            repeats = {k: max(1, math.ceil(MEASURE_S / max(_per_call(c, 1), 1e-7)))
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
            peer_names = [k for k in med if k not in ("llvsparse", "base")]
            best = min(peer_names, key=lambda k: med[k])
            new, base = med["llvsparse"] / med[best], med["base"] / med[best]
            ratios[kernel]["new"].append(new)
            ratios[kernel]["base"].append(base)
            load = os.getloadavg()[0]
            print(f"| {kernel} | {name} | {med['llvsparse'] * 1e3:.3g} | {med['base'] * 1e3:.3g}"
                  f" | {best} ({med[best] * 1e3:.3g}) | {new:.2f} | {base:.2f} | "
                  f"{new / base:.2f} | {load:.1f} |", flush=True)
    for kernel, both in ratios.items():
        if both["new"]:
            gm = {k: math.exp(statistics.fmean(math.log(x) for x in v)) for k, v in both.items()}
            print(f"{kernel}: {len(both['new'])} inputs, geometric mean / fastest 1-thread "
                  f"peer: new {gm['new']:.3f}, base {gm['base']:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-python", help="the other checkout's interpreter")
    parser.add_argument("--inputs", default="", help="comma-separated real matrix names")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--kernels", default=",".join(KERNELS),
                        help=f"comma-separated, of {', '.join(KERNELS)}")
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
    names = args.inputs.split(",") if args.inputs else real_matrix_names(False)
    kernels = tuple(args.kernels.split(","))
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        parser.error(f"unknown kernels {unknown}; known: {', '.join(KERNELS)}")
    run(args.base_python, names, args.rounds, kernels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
