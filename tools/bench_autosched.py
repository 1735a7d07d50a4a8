"""The autoscheduler's picks against the ways it picks among, timed interleaved.

    python -m llvsparse.tools.bench_autosched [--sections forms,spgemm,split]
        [--inputs NAME,...] [--rounds N] [--cpu]

- forms: CSR SpMV, one thread, the loop's first form, its other form ("two rows"), and
  the binding the model makes (its pick, or the probe where it cannot decide): the
  model's time against the faster form's.
- spgemm: Gustavson A*A^T and A*A (CSR x CSR -> CSR), one thread: the workspace
  policies (dense in both loop forms; hash, sort, bucket), the model's binding, and the
  bench's 1-thread peers (bench_peers.discover: scipy, MKL, GraphBLAS where installed).
- split: CSR SpMV on 2 threads, equal row ranges against ranges of equal stored entries
  (thread_calls.split with weights) and windows of entries that cut rows (an entry split),
  and what the model picks (with fastmath, which the entry split needs on floats).

Medians of ``rounds`` interleaved rounds; each round calls each binding enough times for
bench_timing.MIN_MEASURE_S; thread pools pinned as the bench does (bench_timing.pin_threads). Read ratios, not milliseconds, on a shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator

import numpy as np
import scipy.sparse as sp

import llvsparse as ls
from llvsparse.calls import auto_choice, probe

from .bench_inputs import canonical_csr, load_real_matrix, powerlaw, stencil5, uniform
from .bench_kernels import Case, Impl
from .bench_peers import discover
from .bench_timing import MIN_MEASURE_S, pin_threads

SPMV = "y(i) = A(i,j) * x(j)"
SPGEMM = "C(i,j) = A(i,k) * B(k,j)"
# Threads take windows of A's entries that cut rows (ir/loops/entry_split.py).
ENTRY_SPLIT = "fuse(i,j,f); pos(f,fp,A(i,j)); parallelize(fp,cpu_thread,atomics)"
REAL = ("bcsstk13", "bcsstk33", "bayer10", "cage11", "crack", "fidapex6", "mbeacxc",
        "ca-GrQc", "add32", "soc-sign-bitcoin-otc", "p2p-Gnutella04", "cage10")


@contextlib.contextmanager
def fixed(model: dict[str, object], form: str | None = None) -> Iterator[None]:
    """Bindings made inside take these picks (auto_choice.FORCED, probe.FORCED)."""
    saved_model, saved_probe = dict(auto_choice.FORCED), dict(probe.FORCED)
    auto_choice.FORCED.clear()
    auto_choice.FORCED.update(model)
    if form is not None:
        probe.FORCED["form"] = form
    try:
        yield
    finally:
        auto_choice.FORCED.clear()
        auto_choice.FORCED.update(saved_model)
        probe.FORCED.clear()
        probe.FORCED.update(saved_probe)


# What a one-thread section times with: wall clock, or (``--cpu``) the process's CPU time,
# which a load average of 8-10 on the shared 2-core machine moves far less (wall-time
# medians of the same code swung 3x between neighbouring rows there).
CLOCK: dict[str, Callable[[], float]] = {"one thread": time.perf_counter}


def interleaved(calls: dict[str, Callable[[], object]], rounds: int,
                clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median seconds per call of each, over ``rounds`` rounds taking turns."""
    for call in calls.values():
        for _ in range(8):  # warm, and through the probe's timed calls
            call()
    repeat = {}
    for name, call in calls.items():
        start = time.perf_counter()
        call()
        repeat[name] = max(1, int(MIN_MEASURE_S / max(time.perf_counter() - start, 1e-7)))
    times: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for r in range(rounds):
        # Each round starts one later: a binding timed right after one that streams
        # through memory (a hash workspace's 150 ms SpAdd) finds the operands evicted,
        # which a fixed order charged to the same binding every round (SpAdd's auto
        # measured 3x the row split timed after it on bcsstk33).
        for name in names[r % len(names):] + names[:r % len(names)]:
            call = calls[name]
            start = clock()
            for _ in range(repeat[name]):
                call()
            times[name].append((clock() - start) / repeat[name])
    return {name: float(np.median(t)) for name, t in times.items()}


def matrices(names: list[str] | None) -> Iterator[tuple[str, sp.csr_matrix]]:
    generated = {"uniform-100k": lambda: uniform(100_000, 10),
                 "powerlaw-100k": lambda: powerlaw(100_000, 10),
                 "stencil5-300x300": lambda: stencil5(300),
                 "one-row-60%": lambda: heavy_rows(400_000, 1, 600_000, 1),
                 "4-rows-of-100k": lambda: heavy_rows(200_000, 4, 100_000, 3)}
    for name in names or [*generated, *REAL]:
        yield name, generated[name]() if name in generated else load_real_matrix(name).matrix


def heavy_rows(n: int, heavy: int, length: int, per_row: int) -> sp.csr_matrix:
    """n x n: ``heavy`` rows of ``length`` entries each, the others ``per_row`` at random
    columns (where a row split leaves threads idle behind the heavy rows)."""
    rng = np.random.default_rng(0)
    rows = np.concatenate([np.repeat(np.arange(heavy) * (n // max(heavy, 1)), length),
                           rng.integers(0, n, n * per_row)])
    cols = np.concatenate([rng.integers(0, n, heavy * length), rng.integers(0, n, n * per_row)])
    return canonical_csr(sp.csr_matrix((rng.random(len(rows)), (rows, cols)), shape=(n, n)))


def forms(names: list[str] | None, rounds: int) -> None:
    print("| input | mean/row | skew | first ms | other ms | model pick | model / best |")
    print("|---|---|---|---|---|---|---|")
    kernel = ls.compile(SPMV, "dense", A="csr", x="dense")
    for name, a in matrices(names):
        x = np.random.default_rng(0).random(a.shape[1])
        out = np.zeros(a.shape[0])
        binds = {}
        for form in ("first", "other"):
            with fixed({"off": True}, form):
                binds[form] = kernel.bind(A=a, x=x, threads=1)
        model = kernel.bind(A=a, x=x, threads=1)
        calls = {k: (lambda b=b, out=out: b(out=out)) for k, b in {**binds, "model": model}.items()}
        t = interleaved(calls, rounds, CLOCK["one thread"])
        pick = model.auto.form or f"probe: {model.probe.choice.form}"
        counts = np.diff(a.indptr)
        print(f"| {name} | {counts.mean():.1f} | {counts.max() / counts.mean():.1f} | "
              f"{t['first'] * 1e3:.3f} | {t['other'] * 1e3:.3f} | {pick} | "
              f"{t['model'] / min(t['first'], t['other']):.2f} |", flush=True)


def one_thread_peers() -> list[Impl]:
    """The bench's peers (bench_peers.discover) that run SpGEMM on one thread."""
    impls, _, _ = discover()
    return [impl for impl in impls if impl.is_peer and impl.threads == 1
            and "spgemm" in impl.kernels]


def spgemm(names: list[str] | None, rounds: int) -> None:
    peers = one_thread_peers()
    print(f"peers: {', '.join(p.name for p in peers)}\n")
    print("| input | product | dense first | dense other | hash | sort | bucket | model (pick) | "
          "fastest 1t peer | model / peer | model / best |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    kernel = ls.compile(SPGEMM, "csr", A="csr", B="csr")
    ratios: dict[str, list[float]] = {"AAt": [], "AA": []}
    for name, a in matrices(names):
        for product in ("AAt", "AA"):
            if product == "AA" and a.shape[0] != a.shape[1]:
                continue
            b = canonical_csr(a.T if product == "AAt" else a.copy())
            calls: dict[str, Callable[[], object]] = {}
            for policy, form in (("dense", "first"), ("dense", "other"), ("hash", "first"),
                                 ("sort", "first"), ("bucket", "first")):
                with fixed({"workspace": policy}, form):
                    calls[f"{policy} {form}"] = kernel.bind(A=a, B=b, threads=1)
            model = kernel.bind(A=a, B=b, threads=1)
            calls["model"] = model
            case = Case("spgemm", name, {}, {"A": a, "B": b})
            for peer in peers:
                peer.configure()
                calls[peer.name] = peer.kernels["spgemm"](case).call
            t = interleaved(calls, rounds, CLOCK["one thread"])
            ours = [k for k in calls if k == "model" or " " in k]
            best = min(t[k] for k in ours if k != "model")
            fastest = min((k for k in t if k not in ours), key=t.__getitem__)
            pick = f"{model.auto.workspace}, " \
                f"{model.auto.form or 'probe: ' + model.probe.choice.form}"
            cells = " | ".join(f"{t[k] * 1e3:.3g}" for k in ("dense first", "dense other",
                                                              "hash first", "sort first",
                                                              "bucket first"))
            ratios[product].append(t["model"] / t[fastest])
            print(f"| {name} | {product} | {cells} | {t['model'] * 1e3:.3g} ({pick}) | "
                  f"{fastest} {t[fastest] * 1e3:.3g} | {t['model'] / t[fastest]:.2f} | "
                  f"{t['model'] / best:.2f} |", flush=True)
    for product, values in ratios.items():
        if values:
            print(f"\ngeometric mean, {product}: model / fastest 1-thread peer "
                  f"{np.exp(np.mean(np.log(values))):.2f} over {len(values)} inputs")


def split(names: list[str] | None, rounds: int) -> None:
    print("| input | rows | stored | skew | top 1% rows' share | rows ms | entries ms | "
          "windows ms | entries / rows | windows / rows | model pick |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    kernel = ls.compile(SPMV, "dense", A="csr", x="dense")
    windowed = ls.compile(SPMV, "dense", A="csr", x="dense", schedule=ENTRY_SPLIT)
    for name, a in matrices(names):
        x = np.random.default_rng(0).random(a.shape[1])
        out = np.zeros(a.shape[0])
        binds = {}
        for kind in ("rows", "entries"):
            with fixed({"split": kind}, "first"):
                binds[kind] = kernel.bind(A=a, x=x, threads=2)
        if binds["rows"].plan is None:
            print(f"| {name} | too small for threads (api.PARALLEL_MIN_WORK) |", flush=True)
            continue
        binds["windows"] = windowed.bind(A=a, x=x, threads=2)
        model = ls.compile(SPMV, "dense", A="csr", x="dense", fastmath=True).bind(
            A=a, x=x, threads=2).auto.split
        t = interleaved({k: (lambda b=b, out=out: b(out=out)) for k, b in binds.items()}, rounds)
        counts = np.sort(np.diff(a.indptr))[::-1]
        top = counts[:max(1, len(counts) // 100)].sum() / max(a.nnz, 1)
        print(f"| {name} | {a.shape[0]} | {a.nnz} | {counts[0] / counts.mean():.0f} | "
              f"{top:.2f} | {t['rows'] * 1e3:.3f} | {t['entries'] * 1e3:.3f} | "
              f"{t['windows'] * 1e3:.3f} | {t['entries'] / t['rows']:.2f} | "
              f"{t['windows'] / t['rows']:.2f} | {model} |", flush=True)


SECTIONS = {"forms": forms, "spgemm": spgemm, "split": split}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default="forms,spgemm,split")
    parser.add_argument("--inputs", default=None, help="comma-separated input names")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--cpu", action="store_true",
                        help="one-thread sections time CPU time (time.process_time)")
    args = parser.parse_args(argv)
    if args.cpu:
        CLOCK["one thread"] = time.process_time
    names = args.inputs.split(",") if args.inputs else None
    for statement in pin_threads().statements:
        print(statement)
    for section in args.sections.split(","):
        if section not in SECTIONS:
            parser.error(f"unknown section {section!r}: use {', '.join(SECTIONS)}")
        print(f"\n{section}\n")
        SECTIONS[section](names, args.rounds)


if __name__ == "__main__":
    main()
