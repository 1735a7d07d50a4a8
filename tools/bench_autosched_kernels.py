"""The autoscheduler's choice against hand-written schedules for SpMM, SDDMM, SpAdd, TTV
and MTTKRP (issue 34: "within 10% of the best hand-written schedule tried for each bench
kernel"); SpMV and SpGEMM are bench_autosched's sections.

    python -m llvsparse.tools.bench_autosched_kernels [--kernels spmm,sddmm,...]
        [--inputs NAME,...] [--rounds N] [--wall]

Per kernel and input, one thread: the kernel as the autoscheduler binds it ("auto", the
default ``schedule``) and each hand-written candidate (paper 001's schedule, a row split,
a pos + split tile, a reorder, a workspace form), every result checked against the
bench's scipy/numpy reference first. Samples are the process's CPU time
(``time.process_time``; ``--wall`` for wall clock), medians of interleaved rounds
(bench_autosched.interleaved). "auto / best" is auto's median over the fastest
candidate's; a ratio under 1 means auto beat every hand-written schedule tried.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import llvsparse as ls

from .bench_autosched import REAL, interleaved
from .bench_inputs import (
    MatrixInput,
    TensorInput,
    generated_tensors,
    load_real_matrix,
    load_real_tensor,
    powerlaw,
    real_matrix_names,
    real_tensor_entries,
    stencil5,
    uniform,
)
from .bench_kernels import KERNELS, make_case, verify

ROWS = "parallelize(i0,cpu_thread,no_races)"
# Hand-written candidates per bench kernel: a schedule string, or "workspace=POLICY". Left
# out: SDDMM's reorder(i,k,j) (8.5 s a call on add32, 7,000x auto's) and SpAdd through a
# dense workspace (it spans rows x columns: 60 ms on add32, 800x; 10^10 entries on
# uniform-100k).
CANDIDATES: dict[str, dict[str, str]] = {
    "spmm": {
        "row split": f"split(i,i0,i1,16); {ROWS}",
        "paper": "split(i,i0,i1,16); pos(k,kpos,A(i,k)); split(kpos,kpos0,kpos1,8); "
                 f"reorder(i0,i1,kpos0,j,kpos1); {ROWS}",
        "pos+split 4": "pos(k,kpos,A(i,k)); split(kpos,kpos0,kpos1,4); "
                       "reorder(i,kpos0,j,kpos1)",
        "reorder(i,j,k)": "reorder(i,j,k)",
    },
    "sddmm": {
        "row split": f"split(i,i0,i1,16); {ROWS}",
        "paper": "split(i,i0,i1,16); pos(j,jpos,S(i,j)); split(jpos,jpos0,jpos1,8); "
                 f"reorder(i0,i1,jpos0,k,jpos1); {ROWS}",
        "pos+split 4": "pos(j,jpos,S(i,j)); split(jpos,jpos0,jpos1,4); "
                       "reorder(i,jpos0,k,jpos1)",
    },
    "spadd": {
        "row split": f"split(i,i0,i1,16); {ROWS}",
        "workspace hash": "workspace=hash",
        "workspace sort": "workspace=sort",
    },
    "ttv_csf": {
        "row split": f"split(i,i0,i1,16); {ROWS}",
        "paper": "fuse(i,j,f); pos(f,fpos,B(i,j,k)); split(fpos,chunk,fpos2,16); "
                 "reorder(chunk,fpos2,k); parallelize(chunk,cpu_thread,no_races)",
    },
    "mttkrp_csf": {
        "paper": "split(i,i1,i2,16); reorder(i1,i2,k,l,j); "
                 "precompute(B(i,k,l) * D(l,j), j, j, w); parallelize(i1,cpu_thread,no_races)",
        "paper, no precompute": "split(i,i1,i2,16); reorder(i1,i2,k,l,j); "
                                "parallelize(i1,cpu_thread,no_races)",
        "reorder(i,k,l,j)": "reorder(i,k,l,j)",
        "row split": f"split(i,i0,i1,16); {ROWS}",
    },
}
SLOW = 4.0  # candidates whose first call takes more than this times auto's: timed apart
GENERATED = {"uniform-100k": lambda: uniform(100_000, 10),
             "powerlaw-100k": lambda: powerlaw(100_000, 10),
             "stencil5-300x300": lambda: stencil5(300)}


def matrix_inputs(names: list[str] | None) -> Iterator[MatrixInput]:
    """The bench's generated matrices and 10 of its real ones (bench_autosched.REAL)."""
    real = set(real_matrix_names(False))
    for name in names or [*GENERATED, *REAL[:10]]:
        if name in GENERATED:
            yield MatrixInput(name, GENERATED[name](), "generated", {})
        elif name in real:
            yield load_real_matrix(name)


def tensor_inputs(names: list[str] | None) -> Iterator[TensorInput]:
    """The bench's generated 3-tensors and the real ones of the data manifest."""
    for item in generated_tensors(False):
        if not names or item.name in names:
            yield item
    for entry in real_tensor_entries():
        if not names or entry["name"] in names:
            try:
                yield load_real_tensor(entry)
            except ValueError as error:  # not a 3-tensor (JF17K-3ary has 4 modes)
                print(f"| {entry['name']} | skipped: {error} |", flush=True)


def compile_candidate(spec: Any, candidate: str | None) -> ls.Kernel:
    """The bench kernel under a hand-written candidate (None: the autoscheduler's)."""
    if candidate is not None and candidate.startswith("workspace="):
        return ls.compile(spec.expr, spec.out_format, workspace=candidate.split("=")[1],
                          **spec.formats)
    return ls.compile(spec.expr, spec.out_format, schedule=candidate, **spec.formats)


def operands(kernel: str, ops: dict[str, Any]) -> dict[str, Any]:
    """The bench case's operands, packed once in the kernel's formats."""
    spec = KERNELS[kernel]
    if spec.kind == "tensor":
        ops = dict(ops)
        tensor = ls.Tensor.from_coo(ops.pop("coords"), ops.pop("values"), ops.pop("shape"),
                                    format=spec.formats["B"])
        return {"B": tensor, **ops}
    if kernel == "sddmm":
        ops = {"S": ops["S"], "A": ops["U"], "B": ops["V"]}
    return {name: ls.Tensor.from_scipy(value, format=spec.formats[name])
            if name in spec.formats else value for name, value in ops.items()}


def result(value: Any, dense: bool) -> Any:
    if dense:
        return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value)
    return value.to_scipy()


def picked(bound: Any) -> str:
    """What the autoscheduler's binding runs: its loop form, the model's or the probe's
    (timed on its first calls), or "-" where the kernel has one form."""
    auto, probe = getattr(bound, "auto", None), getattr(bound, "probe", None)
    if auto is not None and auto.form is not None:
        return f"{auto.form} (model)"
    if probe is not None and probe.choice is not None and len(probe.forms) > 1:
        return f"{probe.choice.form} (probe)"
    return "-"


def measure(kernel: str, item: MatrixInput | TensorInput, rounds: int,
            clock: Callable[[], float]) -> tuple[dict[str, float], str] | str:
    """Median seconds per call of auto and each candidate, and auto's loop form; or why
    the row is skipped."""
    spec = KERNELS[kernel]
    case = make_case(kernel, item)
    ops = operands(kernel, case.ops)
    calls: dict[str, Callable[[], object]] = {}
    for label, candidate in [("auto", None), *CANDIDATES[kernel].items()]:
        bound = compile_candidate(spec, candidate).bind(threads=1, **ops)
        problem = verify(result(bound(), spec.out_format == "dense"), case.reference)
        if problem is not None:
            return f"{label}: wrong result ({problem})"
        calls[label] = bound
    # Candidates far slower than auto are timed in rounds of their own: interleaved with
    # auto they can only lose, and one of them (SpAdd through a sort workspace) made the
    # auto binding timed beside it take 4.4 ms a call instead of 1.7 (bcsstk33; the row
    # split's binding kept 1.8), by what it leaves in the shared result memory pool.
    first = {label: _once(call) for label, call in calls.items()}
    near = {k: c for k, c in calls.items() if first[k] <= SLOW * first["auto"]}
    times = interleaved(near, rounds, clock)
    far = {k: c for k, c in calls.items() if k not in near}
    if far:
        times.update(interleaved(far, rounds, clock))
    return times, picked(calls["auto"])


def _once(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default=",".join(CANDIDATES))
    parser.add_argument("--inputs", default=None, help="comma-separated input names")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--wall", action="store_true", help="wall clock, not CPU time")
    args = parser.parse_args(argv)
    clock = time.perf_counter if args.wall else time.process_time
    names = args.inputs.split(",") if args.inputs else None
    ratios: dict[str, list[float]] = {}
    for kernel in args.kernels.split(","):
        labels = list(CANDIDATES[kernel])
        print(f"\n{kernel}: {KERNELS[kernel].expr}\n")
        print("| input | auto ms | " + " | ".join(f"{x} ms" for x in labels)
              + " | best | auto / best | auto's form | load |")
        print("|---|---|" + "---|" * len(labels) + "---|---|---|---|")
        inputs = tensor_inputs(names) if KERNELS[kernel].kind == "tensor" \
            else matrix_inputs(names)
        for item in inputs:
            measured = measure(kernel, item, args.rounds, clock)
            if isinstance(measured, str):
                print(f"| {item.name} | skipped: {measured} |", flush=True)
                continue
            t, form = measured
            best = min(labels, key=t.__getitem__)
            ratio = t["auto"] / t[best]
            ratios.setdefault(kernel, []).append(ratio)
            cells = " | ".join(f"{t[x] * 1e3:.3g}" for x in labels)
            print(f"| {item.name} | {t['auto'] * 1e3:.3g} | {cells} | {best} | {ratio:.2f} | "
                  f"{form} | {os.getloadavg()[0]:.1f} |", flush=True)
    print()
    for kernel, values in ratios.items():
        mean = math.exp(sum(math.log(v) for v in values) / len(values))
        print(f"{kernel}: auto / best hand-written, geometric mean {mean:.3f} over "
              f"{len(values)} inputs; within 10% on {sum(v <= 1.1 for v in values)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
