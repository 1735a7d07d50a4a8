"""``llvsparse bench --gpu``: llvsparse's GPU kernels (target="cuda") against cuSPARSE
through cupy, on the bench's generated matrices: SpMV (each GPU schedule), SpMM and
SDDMM into CSR (count_fill); each result verified against scipy first, then timed in
interleaved rounds (medians reported, ratios against cuSPARSE).

SDDMM's peer is cusparseSDDMM through cupy's cuSPARSE binding where that binding has it
(``cupy_backends.cuda.libs.cusparse.sddmm``; its product with the sampled matrix's
values is one more elementwise kernel), else a cupy gather (each entry's row of D times
its column's row of E, summed), reported under that name, not as cuSPARSE.

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
SDDMM_RANK = 32
SDDMM_CHUNK = 1 << 20  # entries per slice of the host reference's gathers


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
    D, E = rng.standard_normal((A.shape[0], SDDMM_RANK)), rng.standard_normal((A.shape[1],
                                                                                SDDMM_RANK))
    sddmm = ls.compile("C(i,j) = A(i,j) * D(i,k) * E(j,k)", A="csr", D="dense", E="dense",
                       C="csr", target="cuda")
    D_dev, E_dev = ls.Tensor.from_numpy(D).to_device(), ls.Tensor.from_numpy(E).to_device()
    return [
        GpuCase("spmv_csr", name, A @ x, {
            "llvsparse-thread_per_row": spmv("csr", "thread_per_row", A_dev),
            "llvsparse-nonzero_split": spmv("csr", "nonzero_split", A_dev),
            "llvsparse-entry_split": spmv("csr", "entry_split", A_dev),
            "llvsparse-coo-thread_per_nonzero": spmv("coo", "thread_per_nonzero", A_coo),
            "cusparse": synced(lambda: (A_gpu @ x_gpu).get())}),
        GpuCase("spmm_csr", name, A @ B, {
            "llvsparse": lambda: spmm(A=A_dev, B=B_dev).to_numpy(),
            "cusparse": synced(lambda: (A_gpu @ B_gpu).get())}),
        GpuCase("sddmm_csr", name, sddmm_values(A, D, E), {
            "llvsparse-count_fill": lambda: sddmm(A=A_dev, D=D_dev, E=E_dev).values,
            **sddmm_peer(cupy, A_gpu, cupy.asarray(D), cupy.asarray(E), synced)}),
    ]


def sddmm_values(A: sp.csr_matrix, D: np.ndarray, E: np.ndarray) -> np.ndarray:
    """The stored values of A * (D @ E.T) on A's pattern, in A's order, by slices of
    entries (never the dense product)."""
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    out = np.empty(A.nnz)
    for start in range(0, A.nnz, SDDMM_CHUNK):
        part = slice(start, start + SDDMM_CHUNK)
        out[part] = A.data[part] * np.einsum("ij,ij->i", D[rows[part]], E[A.indices[part]])
    return out


def sddmm_peer(cupy: Any, A: Any, D: Any, E: Any,
               synced: Callable[[Callable[[], Any]], Callable[[], Any]]) -> dict[str, Any]:
    """cupy's SDDMM of ``A`` (cupyx CSR) with D, E on the device, by name: cusparseSDDMM
    where cupy's binding has it, else the gather (see the module's docstring)."""
    binding = importlib.import_module("cupy_backends.cuda.libs.cusparse")
    rows = cupy.asarray(np.repeat(np.arange(A.shape[0]), np.diff(A.indptr.get())))

    def gather() -> Any:
        return (A.data * cupy.einsum("ij,ij->i", D[rows], E[A.indices])).get()
    peers = {"cupy-gather": synced(gather)}
    if hasattr(binding, "sddmm"):
        try:
            peers["cusparse"] = synced(_cusparse_sddmm(cupy, binding, A, D, E))
        except (AttributeError, TypeError, RuntimeError) as error:  # CUSPARSEError too
            print(f"cusparseSDDMM through cupy unavailable: {error}")
    return peers


def _cusparse_sddmm(cupy: Any, binding: Any, A: Any, D: Any, E: Any) -> Callable[[], Any]:
    """cusparseSDDMM (generic API, float64, CSR of int32 indices, row-major D and E,
    E transposed) into a copy of A's pattern, then times A's values."""
    m, n = A.shape
    k = D.shape[1]
    values = cupy.zeros_like(A.data)
    handle = cupy.cuda.device.get_cusparse_handle()
    r64f, index32, base0, row_major, no_op, transposed = 1, 2, 0, 2, 0, 1  # enums' values
    sampled = binding.createCsr(m, n, A.nnz, A.indptr.data.ptr, A.indices.data.ptr,
                                values.data.ptr, index32, index32, base0, r64f)
    left = binding.createDnMat(m, k, k, D.data.ptr, r64f, row_major)
    right = binding.createDnMat(n, k, k, E.data.ptr, r64f, row_major)
    scalars = np.array([1.0, 0.0])
    alpha, beta = scalars.ctypes.data, scalars.ctypes.data + 8
    size = binding.sddmm_bufferSize(handle, no_op, transposed, alpha, left, right, beta,
                                    sampled, r64f, 0)
    buffer = cupy.empty(max(int(size), 1), cupy.uint8)

    def run() -> Any:
        binding.sddmm(handle, no_op, transposed, alpha, left, right, beta, sampled, r64f, 0,
                      buffer.data.ptr)
        return (values * A.data).get()
    run.keep = (scalars, buffer, sampled, left, right, values)  # alive while timed
    return run


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
