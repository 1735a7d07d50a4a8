"""The peers' columns of ``llvsparse bench``: scipy/numpy, pydata/sparse, python-graphblas
and sparse_dot_mkl (numba's loops: bench_numba, llvsparse: bench_llvsparse), and the
discovery of which are importable."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

import llvsparse as ls

from .bench_kernels import CHUNK, Case, Impl, Prepared, Result, as_dia, sddmm_numpy
from .bench_llvsparse import llvsparse_impl
from .bench_mkl import set_mkl_rt
from .bench_numba import numba_impl


# -- numpy baselines (what a numpy user writes) ----------------------------------------------------
def _sddmm_prepared(case: Case) -> Prepared:
    S, U, V = case.ops["S"], case.ops["U"], case.ops["V"]
    return Prepared(lambda: sddmm_numpy(S, U, V), lambda r: r)


def _fibers(coords: np.ndarray) -> np.ndarray:
    """Start positions of each (i, j) fiber in lexicographically sorted coordinates."""
    new = np.ones(coords.shape[1], dtype=bool)
    new[1:] = (coords[0, 1:] != coords[0, :-1]) | (coords[1, 1:] != coords[1, :-1])
    return np.flatnonzero(new)


def _ttv_numpy(case: Case) -> Prepared:
    coords, values, shape, c = (case.ops[k] for k in ("coords", "values", "shape", "c"))
    starts = _fibers(coords)
    rows, cols = coords[0, starts], coords[1, starts].astype(np.int32)
    indptr = np.searchsorted(rows, np.arange(shape[0] + 1)).astype(np.int32)
    k = coords[2]

    def call() -> sp.csr_matrix:
        sums = np.add.reduceat(values * c[k], starts) if len(starts) else np.zeros(0)
        return sp.csr_matrix((sums, cols, indptr), shape=shape[:2])

    return Prepared(call, lambda r: r)


def _mttkrp_numpy(case: Case) -> Prepared:
    coords, values, shape, C, D = (case.ops[k] for k in ("coords", "values", "shape", "C", "D"))
    i, k, l = coords

    def call() -> np.ndarray:
        out = np.zeros((shape[0], C.shape[1]))
        for lo in range(0, len(values), CHUNK):
            hi = lo + CHUNK
            part = values[lo:hi, None] * C[k[lo:hi]] * D[l[lo:hi]]
            rows = i[lo:hi]
            new = np.ones(len(rows), dtype=bool)
            new[1:] = rows[1:] != rows[:-1]
            starts = np.flatnonzero(new)
            out[rows[starts]] += np.add.reduceat(part, starts, axis=0)
        return out

    return Prepared(call, lambda r: r)


def scipy_impl() -> Impl:
    """scipy.sparse for matrices; numpy gathers and segment sums for SDDMM, TTV, MTTKRP."""

    def spmv(fmt: str) -> Callable[[Case], Prepared]:
        def prepare(case: Case) -> Prepared:
            A, x = (as_dia(case.ops["A"]) if fmt == "dia" else case.ops["A"].asformat(fmt),
                    case.ops["x"])
            return Prepared(lambda: A @ x, lambda r: r)
        return prepare

    def spmm(case: Case) -> Prepared:
        A, B = case.ops["A"], case.ops["B"]
        return Prepared(lambda: A @ B, lambda r: r)

    def spadd(case: Case) -> Prepared:
        A, B = case.ops["A"], case.ops["B"]
        return Prepared(lambda: A + B, lambda r: r)

    def hadamard(case: Case) -> Prepared:
        A, B = case.ops["A"], case.ops["B"]
        return Prepared(lambda: A.multiply(B), lambda r: r)

    kernels = {"spmv_csr": spmv("csr"), "spmv_coo": spmv("coo"), "spmv_dia": spmv("dia"),
               "spmm": spmm, "spgemm": spmm, "spgemm_aa": spmm, "spadd": spadd,
               "hadamard": hadamard, "sddmm": _sddmm_prepared,
               "ttv_csf": _ttv_numpy, "ttv_coo": _ttv_numpy, "mttkrp_csf": _mttkrp_numpy,
               "mttkrp_coo": _mttkrp_numpy}
    return Impl("scipy", "scipy", 1, kernels, notes={
        "spgemm": "A @ B: columns left unsorted", "spgemm_aa": "A @ B: columns left unsorted",
        "sddmm": "numpy: chunked gathers of U, V rows + einsum",
        "ttv_csf": "numpy: np.add.reduceat over (i,j) fibers", "ttv_coo": "as ttv_csf",
        "mttkrp_csf": "numpy: chunked gathers + np.add.reduceat over i",
        "mttkrp_coo": "as mttkrp_csf"})


# -- pydata/sparse ---------------------------------------------------------------------------------
def pydata_sparse_impl(module: Any) -> Impl:
    """pydata/sparse: GCXS for CSR-like kernels, COO elsewhere (its home format)."""

    def dense_result(r: Any) -> Result:
        return r.todense() if hasattr(r, "todense") else np.asarray(r)

    def csr_result(r: Any) -> Result:
        return sp.csr_matrix(r.to_scipy_sparse()) if hasattr(r, "to_scipy_sparse") else \
            sp.csr_matrix(np.asarray(r))

    def spmv(kind: str) -> Callable[[Case], Prepared]:
        def prepare(case: Case) -> Prepared:
            cls = module.GCXS if kind == "gcxs" else module.COO
            A, x = cls.from_scipy_sparse(case.ops["A"]), case.ops["x"]
            return Prepared(lambda: A @ x, dense_result)
        return prepare

    def spmm(case: Case) -> Prepared:
        A, B = module.GCXS.from_scipy_sparse(case.ops["A"]), case.ops["B"]
        return Prepared(lambda: A @ B, dense_result)

    def elementwise(add: bool) -> Callable[[Case], Prepared]:
        def prepare(case: Case) -> Prepared:
            A = module.COO.from_scipy_sparse(case.ops["A"])
            B = module.COO.from_scipy_sparse(case.ops["B"])
            return Prepared((lambda: A + B) if add else (lambda: A * B), csr_result)
        return prepare

    def tensor(case: Case) -> Any:
        ops = case.ops
        return module.COO(ops["coords"], ops["values"], shape=ops["shape"], sorted=True,
                          has_duplicates=False)

    def ttv(case: Case) -> Prepared:
        B, c = tensor(case), case.ops["c"]
        return Prepared(lambda: module.tensordot(B, c, axes=((2,), (0,)),
                                                 return_type=module.COO), csr_result)

    def mttkrp(case: Case) -> Prepared:
        B, C, D = tensor(case), case.ops["C"], case.ops["D"]
        return Prepared(lambda: module.einsum("ikl,kj,lj->ij", B, C, D), dense_result)

    kernels = {"spmv_csr": spmv("gcxs"), "spmv_coo": spmv("coo"), "spmm": spmm,
               "spadd": elementwise(True), "hadamard": elementwise(False),
               "ttv_coo": ttv, "mttkrp_coo": mttkrp}
    return Impl("sparse", "sparse", 1, kernels, notes={
        "spmv_csr": "GCXS @ x", "spmm": "GCXS @ B", "spadd": "COO + COO",
        "hadamard": "COO * COO", "ttv_coo": "tensordot(B, c), COO result",
        "mttkrp_coo": "einsum('ikl,kj,lj->ij')"})


# -- python-graphblas ------------------------------------------------------------------------------
def graphblas_impl(gb: Any, threads: int) -> Impl:
    """python-graphblas (SuiteSparse:GraphBLAS) with its thread count set to ``threads``."""

    def configure() -> None:
        gb.ss.config["nthreads"] = threads

    def matrix(m: sp.csr_matrix) -> Any:
        return gb.io.from_scipy_sparse(m)

    def vector_result(r: Any) -> Result:
        return r.to_dense(fill_value=0.0)

    def dense_result(r: Any) -> Result:
        return r.to_dense(fill_value=0.0)

    def csr_result(r: Any) -> Result:
        return sp.csr_matrix(gb.io.to_scipy_sparse(r, format="csr"))

    def spmv(case: Case) -> Prepared:
        A, x = matrix(case.ops["A"]), gb.Vector.from_dense(case.ops["x"])
        return Prepared(lambda: A.mxv(x).new(), vector_result)

    def spmm(case: Case) -> Prepared:
        A, B = matrix(case.ops["A"]), gb.Matrix.from_dense(case.ops["B"])
        return Prepared(lambda: A.mxm(B).new(), dense_result)

    def elementwise(add: bool) -> Callable[[Case], Prepared]:
        def prepare(case: Case) -> Prepared:
            A, B = matrix(case.ops["A"]), matrix(case.ops["B"])
            if add:
                return Prepared(lambda: A.ewise_add(B).new(), csr_result)
            return Prepared(lambda: A.ewise_mult(B).new(), csr_result)
        return prepare

    def sddmm(case: Case) -> Prepared:
        S = matrix(case.ops["S"])
        U, V = gb.Matrix.from_dense(case.ops["U"]), gb.Matrix.from_dense(case.ops["V"])

        def call() -> Any:
            product = U.mxm(V.T).new(mask=S.S)
            return product.ewise_mult(S).new()

        return Prepared(call, csr_result)

    suffix = "" if threads == 1 else f"-{threads}t"
    def spgemm(case: Case) -> Prepared:
        A, B = matrix(case.ops["A"]), matrix(case.ops["B"])
        return Prepared(lambda: A.mxm(B).new(), csr_result)

    kernels = {"spmv_csr": spmv, "spmm": spmm, "spgemm": spgemm, "spgemm_aa": spgemm,
               "spadd": elementwise(True), "hadamard": elementwise(False), "sddmm": sddmm}
    unfinished = "A.mxm(B).new(): its pending work (wait()) is left to the untimed export"
    return Impl(f"graphblas{suffix}", "graphblas", threads, kernels, configure, notes={
        "sddmm": "U.mxm(V.T) masked by S's structure, then ewise_mult(S)",
        "spgemm": unfinished, "spgemm_aa": unfinished})


# -- sparse_dot_mkl --------------------------------------------------------------------------------
def mkl_impl(module: Any) -> Impl:
    """sparse_dot_mkl's dot_product_mkl (MKL inspector-executor) at one thread."""

    def configure() -> None:
        module.mkl_set_num_threads(1)

    def product(case: Case) -> Prepared:
        A = case.ops["A"]
        other = case.ops["x"] if "x" in case.ops else case.ops["B"]
        return Prepared(lambda: module.dot_product_mkl(A, other), lambda r: r)

    def spgemm(case: Case) -> Prepared:
        A, B = case.ops["A"], case.ops["B"]
        return Prepared(lambda: module.dot_product_mkl(A, B), sp.csr_matrix)

    spgemm_note = ("dot_product_mkl: mkl_sparse_spmm (columns left unsorted), then the "
                   "result's arrays copied out of MKL's handle")
    return Impl("mkl", "sparse_dot_mkl", 1,
                {"spmv_csr": product, "spmm": product, "spgemm": spgemm, "spgemm_aa": spgemm},
                configure, notes={"spgemm": spgemm_note, "spgemm_aa": spgemm_note})


# -- discovery -------------------------------------------------------------------------------------
PEER_MODULES = {
    "scipy": "scipy.sparse",
    "sparse": "sparse",
    "graphblas": "graphblas",
    "sparse_dot_mkl": "sparse_dot_mkl",
    "finch-tensor-lite": "finchlite",
    "numba": "numba",
}


def _import(name: str) -> tuple[Any, str | None]:
    try:
        return importlib.import_module(name), None
    except Exception as error:  # noqa: BLE001 - any import failure means "not available"
        return None, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


def discover(llvsparse_threads: tuple[int, ...] = (1,), llvsparse_out: bool = False
             ) -> tuple[list[Impl], list[str], dict]:
    """Implementations to run, notes on skipped peers, and the peers' versions."""
    impls = [llvsparse_impl(t) for t in llvsparse_threads]
    if llvsparse_out:
        impls += [llvsparse_impl(t, into_out=True) for t in llvsparse_threads]
    notes: list[str] = []
    versions: dict[str, str] = {"llvsparse": ls.__version__, "numpy": np.__version__}
    import scipy

    versions["scipy"] = scipy.__version__
    impls.append(scipy_impl())
    for peer, module_name in PEER_MODULES.items():
        if peer == "scipy":
            continue
        if peer == "sparse_dot_mkl":
            set_mkl_rt()  # before the import, which loads MKL
        module, error = _import(module_name)
        if module is None:
            notes.append(f"{peer}: not importable ({error}); skipped")
            continue
        versions[peer] = str(getattr(module, "__version__", "?"))
        if peer == "sparse":
            impls.append(pydata_sparse_impl(module))
        elif peer == "graphblas":
            impls += [graphblas_impl(module, 1), graphblas_impl(module, 2)]
        elif peer == "sparse_dot_mkl":
            impls.append(mkl_impl(module))
        elif peer == "numba":
            impls.append(numba_impl(module))
        elif peer == "finch-tensor-lite":
            notes.append("finch-tensor-lite: importable, but version 0.5 runs no sparse "
                         "kernel (BENCHMARKS.md, Results); no adapter, skipped")
    return impls, notes, versions
