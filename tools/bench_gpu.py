"""``llvsparse bench --gpu``: llvsparse's GPU kernels (target="cuda") against cuSPARSE
through cupy, on the bench's generated matrices: SpMV (each GPU schedule) and SpMM; each
result verified against scipy first, then timed in interleaved rounds (medians reported,
ratios against cuSPARSE). SDDMM is not compared yet: no cuSPARSE SDDMM call
(cusparseSDDMM) is wired up here.

Both sides keep the matrix and the dense operands on the device. A llvsparse call still
copies its descriptors over and its dense result back each call (gpu_device.py), which
cupy's does not: the ratio includes that, and the report says so. Needs a CUDA GPU,
cuda-python (``pip install 'llvsparse[cuda]'``) and cupy; without them it says which is
missing and runs nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

import llvsparse as ls

from ..backends.cuda import driver
from .bench_inputs import powerlaw, stencil5, uniform

NEEDS = ("llvsparse bench --gpu needs a CUDA GPU, cuda-python (pip install "
         "'llvsparse[cuda]') and cupy (whose cupyx.scipy.sparse calls cuSPARSE)")
SPMM_COLUMNS = 32


@dataclass
class GpuCase:
    """One kernel on one input: a verified call per implementation, timed as a thunk
    (each thunk waits for its device work to finish)."""

    kernel: str
    input: str
    reference: np.ndarray
    calls: dict[str, Callable[[], Any]]  # name -> call returning a host-comparable result


def missing() -> list[str]:
    """What ``--gpu`` needs and does not find here (empty: it can run)."""
    absent = []
    if importlib.util.find_spec("cupy") is None:
        absent.append("cupy is not installed")
    try:
        driver.device(0)
    except driver.NoDevice as error:
        absent.append(str(error))
    return absent


def _inputs(quick: bool) -> list[tuple[str, sp.csr_matrix]]:
    rows = 20_000 if quick else 1_000_000
    side = 100 if quick else 1000
    return [(f"uniform-{rows}", uniform(rows, 10)), (f"powerlaw-{rows}", powerlaw(rows, 10)),
            (f"stencil5-{side}x{side}", stencil5(side))]


def _input_cases(cupy: Any, name: str, A: sp.csr_matrix) -> list[GpuCase]:
    """SpMV (each llvsparse schedule that fits) and SpMM on ``A``, against cupy's
    cuSPARSE calls."""
    cusparse = importlib.import_module("cupyx.scipy.sparse")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(A.shape[1])
    B = rng.standard_normal((A.shape[1], SPMM_COLUMNS))
    A_gpu, x_gpu, B_gpu = cusparse.csr_matrix(A), cupy.asarray(x), cupy.asarray(B)
    A_dev = ls.Tensor.from_scipy(A, format="csr").to_device()
    A_coo = ls.Tensor.from_scipy(A, format="coo").to_device()
    x_dev, B_dev = ls.Tensor.from_numpy(x).to_device(), ls.Tensor.from_numpy(B).to_device()

    def synced(call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            out = call()
            cupy.cuda.runtime.deviceSynchronize()
            return out
        return run

    def spmv(fmt: str, schedule: str, operand: Any) -> Callable[[], np.ndarray]:
        kernel = ls.compile("y(i) = A(i,j) * x(j)", A=fmt, x="dense", target="cuda",
                            gpu_schedule=schedule)
        return lambda: kernel(A=operand, x=x_dev).to_numpy()

    spmm = ls.compile("C(i,k) = A(i,j) * B(j,k)", A="csr", B="dense", C="dense",
                      target="cuda")
    return [
        GpuCase("spmv_csr", name, A @ x, {
            "llvsparse-thread_per_row": spmv("csr", "thread_per_row", A_dev),
            "llvsparse-nonzero_split": spmv("csr", "nonzero_split", A_dev),
            "llvsparse-coo-thread_per_nonzero": spmv("coo", "thread_per_nonzero", A_coo),
            "cusparse": synced(lambda: (A_gpu @ x_gpu).get())}),
        GpuCase("spmm_csr", name, A @ B, {
            "llvsparse": lambda: spmm(A=A_dev, B=B_dev).to_numpy(),
            "cusparse": synced(lambda: (A_gpu @ B_gpu).get())}),
    ]


def time_case(case: GpuCase, rounds: int) -> dict[str, float]:
    """Median seconds per call of each verified implementation, in rotated order; an
    implementation whose result differs from the reference is left out (named)."""
    ready = {}
    for name, call in case.calls.items():
        got = np.asarray(call())
        if got.shape == case.reference.shape and np.allclose(got, case.reference):
            ready[name] = call
        else:
            print(f"NOT VERIFIED: {name} {case.kernel} {case.input}")
    samples: dict[str, list[float]] = {name: [] for name in ready}
    names = list(ready)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            ready[name]()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, times in samples.items()}


def report(results: list[tuple[GpuCase, dict[str, float]]]) -> str:
    """A table: median ms per call and the ratio cuSPARSE / implementation (above 1:
    faster than cuSPARSE)."""
    header = (f"{'kernel':<10} {'input':<21} {'implementation':<33} {'median ms':>9}  "
              f"{'vs cuSPARSE':>10}")
    lines = [header]
    for case, medians in results:
        base = medians.get("cusparse")
        for name, seconds in sorted(medians.items(), key=lambda item: item[1]):
            ratio = f"{base / seconds:.2f}x" if base else "-"
            lines.append(f"{case.kernel:<10} {case.input:<21} {name:<33} "
                         f"{seconds * 1e3:9.3f}  {ratio:>10}")
    lines.append("llvsparse calls copy descriptors in and the dense result out per call; "
                 "cuSPARSE's keep the result on the device until .get()")
    return "\n".join(lines)


def run(quick: bool, rounds: int) -> int:
    """The GPU comparison; 2 (saying what is missing) where it cannot run, 1 where a
    result did not verify, else 0."""
    absent = missing()
    if absent:
        print(f"{NEEDS}; here: {'; '.join(absent)}")
        return 2
    cupy = importlib.import_module("cupy")
    cases = [case for name, A in _inputs(quick) for case in _input_cases(cupy, name, A)]
    results = [(case, time_case(case, rounds)) for case in cases]
    print(report(results))
    complete = all(len(m) == len(c.calls) for c, m in results)
    return 0 if complete else 1
