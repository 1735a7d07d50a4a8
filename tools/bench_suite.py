"""The suite of ``llvsparse bench``: each input loaded once, in turn, with every kernel
that runs on it timed for every implementation."""

from __future__ import annotations

import gc
from collections.abc import Iterator

from . import bench_inputs as inputs
from .bench_kernels import KERNELS, Impl, make_case, skip_reason
from .bench_progress import Progress, note
from .bench_timing import Record, run_case


def _inputs(kernels: list[str], quick: bool, only: list[str] | None,
            skipped: list[dict]) -> Iterator[tuple[inputs.MatrixInput | inputs.TensorInput,
                                                   list[str]]]:
    """Each input once, with the kernels that run on it (loaded lazily, one at a time)."""

    def wanted(name: str) -> bool:
        return not only or any(part in name for part in only)

    matrix_kernels = [k for k in kernels if KERNELS[k].kind == "matrix"]
    tensor_kernels = [k for k in kernels if KERNELS[k].kind == "tensor"]
    families = ["quick"] if quick else sorted({KERNELS[k].family for k in matrix_kernels})
    for family in families:
        chosen = [k for k in matrix_kernels if quick or KERNELS[k].family == family]
        if chosen:
            for item in inputs.generated_matrices(family):
                if wanted(item.name):
                    yield item, chosen
    if matrix_kernels:
        for name in inputs.real_matrix_names(quick):
            if wanted(name):
                yield inputs.load_real_matrix(name), matrix_kernels
    if tensor_kernels:
        for item in inputs.generated_tensors(quick):
            if wanted(item.name):
                yield item, tensor_kernels
        if not quick:
            for entry in inputs.real_tensor_entries():
                if not wanted(entry["name"]):
                    continue
                try:
                    yield inputs.load_real_tensor(entry), tensor_kernels
                except ValueError as error:
                    skipped.append({"input": entry["name"], "kernel": "*", "reason": str(error)})
                    note(f"{entry['name']}: skipped for 3-tensor kernels ({error})")


def _count_tasks(kernels: list[str], quick: bool, only: list[str] | None) -> int:
    """An estimate of (input, kernel) pairs for the progress bar."""
    matrix = [k for k in kernels if KERNELS[k].kind == "matrix"]
    tensor = [k for k in kernels if KERNELS[k].kind == "tensor"]
    count = 0
    if matrix:
        count += len(matrix) * (3 + len(inputs.real_matrix_names(quick)))
    if tensor:
        reals = 0 if quick else sum(1 for e in inputs.real_tensor_entries()
                                    if e.get("order", 3) == 3)
        count += len(tensor) * (2 + reals)
    return count


def run_suite(kernels: list[str], impls: list[Impl], rounds: int, quick: bool,
              only: list[str] | None, progress: bool = True) -> tuple[list[Record], list[dict]]:
    records: list[Record] = []
    skipped: list[dict] = []
    bar = Progress(_count_tasks(kernels, quick, only), enabled=progress)
    for item, chosen in _inputs(kernels, quick, only, skipped):
        for kernel in chosen:
            reason = skip_reason(kernel, item)
            if reason is not None:
                skipped.append({"input": item.name, "kernel": kernel, "reason": reason})
                bar.advance()
                continue
            bar.step(f"{kernel} on {item.name}")
            case = make_case(kernel, item)
            if "sample" in case.meta:  # (also in the JSON report's input_meta)
                note(f"{kernel} on {item.name}: {case.meta['sample']}")
            records += run_case(case, impls, rounds)
            del case
            bar.advance()
        del item
        gc.collect()
    bar.step("done")
    bar.close()
    return records, skipped
