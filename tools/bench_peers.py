"""Kernels and implementations for ``llvsparse bench``: llvsparse and every importable peer
(scipy/numpy, pydata/sparse, python-graphblas, sparse_dot_mkl, numba loops).

Each implementation's ``prepare`` converts the operands to its own storage (not timed) and
returns a zero-argument call (timed) plus a function that turns the call's result into a
numpy array or scipy CSR matrix for verification (not timed).
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import scipy.sparse as sp

import llvsparse as ls

from .bench_inputs import MatrixInput, TensorInput, banded, ell_friendly
from .bench_mkl import set_mkl_rt

RANK_SPMM = 64
RANK_SDDMM = 64
RANK_MTTKRP = 32
CHUNK = 65_536  # nonzeros per numpy gather in the chunked SDDMM/MTTKRP baselines

Result = np.ndarray | sp.csr_matrix


@dataclass
class Case:
    """One kernel on one input: numpy/scipy operands and the reference result."""

    kernel: str
    input_name: str
    meta: dict
    ops: dict[str, Any]
    reference: Result | None = None


@dataclass
class Prepared:
    call: Callable[[], Any]
    result: Callable[[Any], Result]


@dataclass
class Impl:
    """An implementation column: a library at a thread count, with one preparer per kernel."""

    name: str
    library: str
    threads: int
    kernels: dict[str, Callable[[Case], Prepared]]
    configure: Callable[[], None] = lambda: None  # set its thread count before timing
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def is_peer(self) -> bool:
        return self.library != "llvsparse"


@dataclass
class KernelSpec:
    name: str
    kind: str  # "matrix" or "tensor"
    family: str  # size family of generated matrices: "large" or "medium"
    expr: str
    formats: dict[str, str]
    out_format: str
    title: str


KERNELS: dict[str, KernelSpec] = {k.name: k for k in [
    KernelSpec("spmv_csr", "matrix", "large", "y(i) = A(i,j) * x(j)", {"A": "csr"}, "dense",
               "SpMV, A in CSR"),
    KernelSpec("spmv_coo", "matrix", "large", "y(i) = A(i,j) * x(j)", {"A": "coo"}, "dense",
               "SpMV, A in COO"),
    KernelSpec("spmv_dia", "matrix", "large", "y(i) = A(i,j) * x(j)", {"A": "dia"}, "dense",
               "SpMV, A in DIA (banded inputs only)"),
    KernelSpec("spmv_ell", "matrix", "large", "y(i) = A(i,j) * x(j)", {"A": "ell-rows"},
               "dense", "SpMV, A in row-major ELL (inputs whose padding stays under 4x nnz)"),
    KernelSpec("spmm", "matrix", "medium", "C(i,j) = A(i,k) * B(k,j)", {"A": "csr"}, "dense",
               f"SpMM, CSR x dense ({RANK_SPMM} columns)"),
    KernelSpec("spadd", "matrix", "large", "C(i,j) = A(i,j) + B(i,j)", {"A": "csr", "B": "csr"},
               "csr", "SpAdd, CSR + CSR -> CSR (B = A^T, or A with rows reversed)"),
    KernelSpec("hadamard", "matrix", "large", "C(i,j) = A(i,j) * B(i,j)",
               {"A": "csr", "B": "csr"}, "csr", "Hadamard, CSR .* CSR -> CSR (B as in SpAdd)"),
    KernelSpec("spgemm", "matrix", "medium", "C(i,j) = A(i,k) * B(k,j)",
               {"A": "csr", "B": "csr"}, "csr", "SpGEMM, CSR x CSR -> CSR (B = A^T)"),
    KernelSpec("sddmm", "matrix", "medium", "C(i,j) = S(i,j) * A(i,k) * B(j,k)", {"S": "csr"},
               "csr", f"SDDMM, CSR sampled by dense x dense^T (rank {RANK_SDDMM})"),
    KernelSpec("ttv_csf", "tensor", "", "A(i,j) = B(i,j,k) * c(k)", {"B": "csf"}, "csr",
               "TTV, 3-tensor in CSF -> CSR"),
    KernelSpec("ttv_coo", "tensor", "", "A(i,j) = B(i,j,k) * c(k)", {"B": "coo"}, "csr",
               "TTV, 3-tensor in COO -> CSR"),
    KernelSpec("mttkrp_csf", "tensor", "", "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", {"B": "csf"},
               "dense", f"MTTKRP, 3-tensor in CSF (rank {RANK_MTTKRP})"),
    KernelSpec("mttkrp_coo", "tensor", "", "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", {"B": "coo"},
               "dense", f"MTTKRP, 3-tensor in COO (rank {RANK_MTTKRP})"),
]}


# -- operands and references -------------------------------------------------------------------
def skip_reason(kernel: str, item: MatrixInput | TensorInput) -> str | None:
    """Why a kernel does not run on an input, or None."""
    spec = KERNELS[kernel]
    if (spec.kind == "tensor") != isinstance(item, TensorInput):
        return "wrong operand kind"
    if kernel == "spmv_dia" and not banded(item.matrix):  # type: ignore[union-attr]
        return "not banded: DIA storage would exceed 4x nnz"
    if kernel == "spmv_ell" and not ell_friendly(item.matrix):  # type: ignore[union-attr]
        return "row lengths too skewed: ELL padding would exceed 4x nnz"
    return None


def _second_operand(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """B for SpAdd/Hadamard: the transpose of a square A, else A with its rows reversed."""
    return _canonical_csr(matrix.T if matrix.shape[0] == matrix.shape[1] else matrix[::-1])


def _canonical_csr(matrix: sp.spmatrix) -> sp.csr_matrix:
    """CSR with sorted, summed entries and int32 indices, as the inputs are."""
    other = sp.csr_matrix(matrix)
    other.sum_duplicates()
    other.sort_indices()
    other.indices = other.indices.astype(np.int32)
    other.indptr = other.indptr.astype(np.int32)
    return other


def make_case(kernel: str, item: MatrixInput | TensorInput, seed: int = 7) -> Case:
    """Operands for ``kernel`` on ``item`` and the scipy/numpy reference result."""
    rng = np.random.default_rng(seed)
    ops: dict[str, Any] = {}
    if isinstance(item, MatrixInput):
        A = item.matrix
        rows, cols = A.shape
        if kernel.startswith("spmv"):
            ops = {"A": A, "x": rng.uniform(-1, 1, cols)}
            reference: Result = A @ ops["x"]
        elif kernel == "spmm":
            ops = {"A": A, "B": rng.uniform(-1, 1, (cols, RANK_SPMM))}
            reference = A @ ops["B"]
        elif kernel in ("spadd", "hadamard"):
            ops = {"A": A, "B": _second_operand(A)}
            reference = sp.csr_matrix(A + ops["B"] if kernel == "spadd"
                                      else A.multiply(ops["B"]))
        elif kernel == "spgemm":
            ops = {"A": A, "B": _canonical_csr(A.T)}
            reference = sp.csr_matrix(A @ ops["B"])
        elif kernel == "sddmm":
            ops = {"S": A, "U": rng.uniform(-1, 1, (rows, RANK_SDDMM)),
                   "V": rng.uniform(-1, 1, (cols, RANK_SDDMM))}
            reference = _sddmm_numpy(A, ops["U"], ops["V"])
        else:
            raise ValueError(kernel)
    else:
        coords, values, shape = item.coords, item.values, item.shape
        ops = {"coords": coords, "values": values, "shape": shape}
        if kernel.startswith("ttv"):
            ops["c"] = rng.uniform(-1, 1, shape[2])
            reference = sp.csr_matrix((values * ops["c"][coords[2]], (coords[0], coords[1])),
                                      shape=shape[:2])
        else:
            ops["C"] = rng.uniform(-1, 1, (shape[1], RANK_MTTKRP))
            ops["D"] = rng.uniform(-1, 1, (shape[2], RANK_MTTKRP))
            reference = np.zeros((shape[0], RANK_MTTKRP))
            for lo in range(0, len(values), CHUNK):
                hi = lo + CHUNK
                part = values[lo:hi, None] * ops["C"][coords[1, lo:hi]] * \
                    ops["D"][coords[2, lo:hi]]
                np.add.at(reference, coords[0, lo:hi], part)
    return Case(kernel, item.name, item.meta, ops, reference)


def verify(result: Result, reference: Result, rtol: float = 1e-9) -> str | None:
    """None when ``result`` matches ``reference``, else what differs."""
    if isinstance(reference, np.ndarray):
        got = np.asarray(result.toarray() if sp.issparse(result) else result, dtype=np.float64)
        if got.shape != reference.shape:
            return f"shape {got.shape}, expected {reference.shape}"
        scale = max(1.0, float(np.abs(reference).max(initial=0.0)))
        err = float(np.abs(got - reference).max(initial=0.0))
    else:
        got = sp.csr_matrix(result)
        if got.shape != reference.shape:
            return f"shape {got.shape}, expected {reference.shape}"
        scale = max(1.0, float(np.abs(reference.data).max(initial=0.0)))
        diff = (got - reference).tocsr()
        err = float(np.abs(diff.data).max(initial=0.0))
    if not np.isfinite(err) or err > rtol * scale:
        return f"max abs error {err:.3g} (scale {scale:.3g})"
    return None


# -- numpy baselines (what a numpy user writes) --------------------------------------------------
def _sddmm_numpy(S: sp.csr_matrix, U: np.ndarray, V: np.ndarray) -> sp.csr_matrix:
    """Gather rows of U and V per stored entry, in chunks, and take row-wise dot products."""
    rows = np.repeat(np.arange(S.shape[0], dtype=np.int32), np.diff(S.indptr))
    out = np.empty(S.nnz)
    for lo in range(0, S.nnz, CHUNK):
        hi = lo + CHUNK
        out[lo:hi] = np.einsum("ij,ij->i", U[rows[lo:hi]], V[S.indices[lo:hi]])
    out *= S.data
    return sp.csr_matrix((out, S.indices, S.indptr), shape=S.shape)


def _sddmm_prepared(case: Case) -> Prepared:
    S, U, V = case.ops["S"], case.ops["U"], case.ops["V"]
    return Prepared(lambda: _sddmm_numpy(S, U, V), lambda r: r)


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
            A, x = (_dia(case.ops["A"]) if fmt == "dia" else case.ops["A"].asformat(fmt),
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
               "spmm": spmm, "spgemm": spmm, "spadd": spadd, "hadamard": hadamard, "sddmm": _sddmm_prepared,
               "ttv_csf": _ttv_numpy, "ttv_coo": _ttv_numpy, "mttkrp_csf": _mttkrp_numpy,
               "mttkrp_coo": _mttkrp_numpy}
    return Impl("scipy", "scipy", 1, kernels, notes={
        "sddmm": "numpy: chunked gathers of U, V rows + einsum",
        "ttv_csf": "numpy: np.add.reduceat over (i,j) fibers", "ttv_coo": "as ttv_csf",
        "mttkrp_csf": "numpy: chunked gathers + np.add.reduceat over i",
        "mttkrp_coo": "as mttkrp_csf"})


# -- llvsparse ---------------------------------------------------------------------------------
def llvsparse_supports_threads() -> bool:
    """Whether kernels accept ``threads=`` per call."""
    try:
        return "threads" in inspect.signature(ls.Kernel.__call__).parameters
    except (TypeError, ValueError):
        return False


_LS_KERNELS: dict[tuple[str, str], Any] = {}
LS_NOTES: dict[str, str] = {}


def _ls_kernel(spec: KernelSpec, formats: dict[str, str], out: str) -> Any:
    key = (spec.expr, repr(sorted(formats.items())) + out)
    if key not in _LS_KERNELS:
        _LS_KERNELS[key] = ls.compile(spec.expr, out_format=out, **formats)
    return _LS_KERNELS[key]


def _ls_result(tensor: Any) -> Result:
    """A llvsparse output as numpy (dense) or scipy CSR, straight from its arrays."""
    name = getattr(tensor.format, "name", None)
    if name == "dense":
        return np.asarray(tensor.values).reshape(tensor.shape)
    if name == "csr":
        level = tensor.level_arrays[1]
        return sp.csr_matrix((tensor.values, level["crd"], level["pos"]), shape=tensor.shape)
    return tensor.to_scipy() if tensor.order == 2 else tensor.to_numpy()


def _dense(array: np.ndarray) -> Any:
    return ls.Tensor.from_numpy(np.ascontiguousarray(array), format="dense")


def llvsparse_impl(threads: int = 1, into_out: bool = False) -> Impl:
    """llvsparse kernels bound once with ``kernel.bind(check=False, ...)`` on operands packed
    ahead of time; the timed call is the bound zero-argument callable. ``into_out``: dense
    results are written into one array allocated ahead (``call(out=...)``), which shows
    the kernel's own thread scaling without the page faults of a fresh result."""
    pass_threads = llvsparse_supports_threads()

    def prepare_for(name: str) -> Callable[[Case], Prepared]:
        spec = KERNELS[name]

        def prepare(case: Case) -> Prepared:
            formats: dict[str, str] = dict(spec.formats)
            ops = case.ops
            if spec.kind == "matrix":
                tensors: dict[str, Any] = {}
                for operand, fmt in spec.formats.items():
                    tensors[operand] = ls.Tensor.from_scipy(ops[operand], format=fmt)
                if name.startswith("spmv"):
                    tensors["x"] = _dense(ops["x"])
                elif name == "spmm":
                    tensors["B"] = _dense(ops["B"])
                elif name == "sddmm":
                    tensors["A"], tensors["B"] = _dense(ops["U"]), _dense(ops["V"])
            else:
                fmt = spec.formats["B"]
                tensors = {"B": ls.Tensor.from_coo(ops["coords"], ops["values"], ops["shape"],
                                                   format=fmt)}
                if name.startswith("ttv"):
                    tensors["c"] = _dense(ops["c"])
                else:
                    tensors["C"], tensors["D"] = _dense(ops["C"]), _dense(ops["D"])
            for operand in tensors:
                formats.setdefault(operand, "dense")
            out = spec.out_format
            try:
                kernel = _ls_kernel(spec, formats, out)
                kernel(check=True, **tensors)
            except ls.ScheduleError as error:
                if out == "dense":
                    raise
                LS_NOTES[name] = f"out_format={out!r} raised ScheduleError ({error}); used dense"
                out = "dense"
                kernel = _ls_kernel(spec, formats, out)
            extra = {"threads": threads} if pass_threads else {}
            # Descriptors prepared once (not timed), like peers converting operands to their
            # own structures; the timed call runs the kernel and returns the output Tensor.
            call = kernel.bind(check=False, **extra, **tensors)
            if into_out and call.dense:
                buffer = np.empty(call.extents, dtype=call.dtype)
                return Prepared(lambda: call(out=buffer), _ls_result)
            return Prepared(call, _ls_result)

        return prepare

    suffix = ("" if threads == 1 else f"-{threads}t") + ("-out" if into_out else "")
    return Impl(f"llvsparse{suffix}", "llvsparse", threads,
                {name: prepare_for(name) for name in KERNELS})


# -- pydata/sparse --------------------------------------------------------------------------------
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


# -- python-graphblas -------------------------------------------------------------------------------
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

    kernels = {"spmv_csr": spmv, "spmm": spmm, "spgemm": spgemm, "spadd": elementwise(True),
               "hadamard": elementwise(False), "sddmm": sddmm}
    return Impl(f"graphblas{suffix}", "graphblas", threads, kernels, configure, notes={
        "sddmm": "U.mxm(V.T) masked by S's structure, then ewise_mult(S)"})


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

    return Impl("mkl", "sparse_dot_mkl", 1,
                {"spmv_csr": product, "spmm": product, "spgemm": spgemm}, configure)


# -- numba loops -------------------------------------------------------------------------------------
_NUMBA: list[SimpleNamespace] = []


def _numba_loops(numba: Any) -> SimpleNamespace:
    """Plain nested loops, compiled on first use, as a numba user would write them."""
    if _NUMBA:
        return _NUMBA[0]
    njit = numba.njit

    @njit
    def spmv_csr(indptr, indices, data, x, rows):
        y = np.empty(rows)
        for i in range(rows):
            total = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                total += data[p] * x[indices[p]]
            y[i] = total
        return y

    @njit
    def spmv_coo(row, col, data, x, rows):
        y = np.zeros(rows)
        for p in range(len(data)):
            y[row[p]] += data[p] * x[col[p]]
        return y

    @njit
    def spmv_dia(offsets, data, x, rows):
        y = np.zeros(rows)
        width = data.shape[1]
        cols = x.shape[0]
        for d in range(len(offsets)):
            k = offsets[d]
            lo = max(0, -k)
            hi = min(rows, min(cols, width) - k)
            for i in range(lo, hi):
                y[i] += data[d, i + k] * x[i + k]
        return y

    @njit
    def spmv_ell(cols, vals, x):
        rows, width = cols.shape
        y = np.empty(rows)
        for i in range(rows):
            total = 0.0
            for w in range(width):
                total += vals[i, w] * x[cols[i, w]]
            y[i] = total
        return y

    @njit
    def spmm_csr(indptr, indices, data, B, rows):
        C = np.zeros((rows, B.shape[1]))
        for i in range(rows):
            for p in range(indptr[i], indptr[i + 1]):
                a = data[p]
                j = indices[p]
                for c in range(B.shape[1]):
                    C[i, c] += a * B[j, c]
        return C

    @njit
    def merge(ap, ai, ax, bp, bi, bx, rows, union):
        cp = np.empty(rows + 1, np.int32)
        cp[0] = 0
        for i in range(rows):
            pa, pb, ea, eb = ap[i], bp[i], ap[i + 1], bp[i + 1]
            count = 0
            while pa < ea and pb < eb:
                if ai[pa] == bi[pb]:
                    pa += 1
                    pb += 1
                    count += 1
                elif ai[pa] < bi[pb]:
                    pa += 1
                    count += union
                else:
                    pb += 1
                    count += union
            if union:
                count += (ea - pa) + (eb - pb)
            cp[i + 1] = cp[i] + count
        ci = np.empty(cp[rows], np.int32)
        cx = np.empty(cp[rows])
        for i in range(rows):
            pa, pb, ea, eb = ap[i], bp[i], ap[i + 1], bp[i + 1]
            q = cp[i]
            while pa < ea and pb < eb:
                if ai[pa] == bi[pb]:
                    ci[q] = ai[pa]
                    cx[q] = ax[pa] + bx[pb] if union else ax[pa] * bx[pb]
                    q += 1
                    pa += 1
                    pb += 1
                elif ai[pa] < bi[pb]:
                    if union:
                        ci[q] = ai[pa]
                        cx[q] = ax[pa]
                        q += 1
                    pa += 1
                else:
                    if union:
                        ci[q] = bi[pb]
                        cx[q] = bx[pb]
                        q += 1
                    pb += 1
            if union:
                while pa < ea:
                    ci[q] = ai[pa]
                    cx[q] = ax[pa]
                    q += 1
                    pa += 1
                while pb < eb:
                    ci[q] = bi[pb]
                    cx[q] = bx[pb]
                    q += 1
                    pb += 1
        return cp, ci, cx

    @njit
    def sddmm(indptr, indices, data, U, V):
        out = np.empty(len(data))
        for i in range(len(indptr) - 1):
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                total = 0.0
                for k in range(U.shape[1]):
                    total += U[i, k] * V[j, k]
                out[p] = data[p] * total
        return out

    @njit
    def ttv_csf(i_crd, pos1, pos2, k_crd, vals, c, rows):
        indptr = np.zeros(rows + 1, np.int32)
        for a in range(len(i_crd)):
            indptr[i_crd[a] + 1] = pos1[a + 1] - pos1[a]
        for r in range(rows):
            indptr[r + 1] += indptr[r]
        out = np.empty(len(pos2) - 1)
        for f in range(len(pos2) - 1):
            total = 0.0
            for p in range(pos2[f], pos2[f + 1]):
                total += vals[p] * c[k_crd[p]]
            out[f] = total
        return indptr, out

    @njit
    def ttv_coo(i, j, k, vals, c, rows):
        indptr = np.zeros(rows + 1, np.int32)
        count = 0
        for p in range(len(vals)):
            if p == 0 or i[p] != i[p - 1] or j[p] != j[p - 1]:
                indptr[i[p] + 1] += 1
                count += 1
        for r in range(rows):
            indptr[r + 1] += indptr[r]
        cols = np.empty(count, np.int32)
        out = np.zeros(count)
        q = -1
        for p in range(len(vals)):
            if p == 0 or i[p] != i[p - 1] or j[p] != j[p - 1]:
                q += 1
                cols[q] = j[p]
            out[q] += vals[p] * c[k[p]]
        return indptr, cols, out

    @njit
    def mttkrp_csf(i_crd, pos1, k_crd, pos2, l_crd, vals, C, D, rows):
        rank = C.shape[1]
        out = np.zeros((rows, rank))
        tmp = np.empty(rank)
        for a in range(len(i_crd)):
            i = i_crd[a]
            for f in range(pos1[a], pos1[a + 1]):
                tmp[:] = 0.0
                for p in range(pos2[f], pos2[f + 1]):
                    v = vals[p]
                    lrow = l_crd[p]
                    for r in range(rank):
                        tmp[r] += v * D[lrow, r]
                k = k_crd[f]
                for r in range(rank):
                    out[i, r] += tmp[r] * C[k, r]
        return out

    @njit
    def mttkrp_coo(i, k, l, vals, C, D, rows):
        rank = C.shape[1]
        out = np.zeros((rows, rank))
        for p in range(len(vals)):
            v = vals[p]
            for r in range(rank):
                out[i[p], r] += v * C[k[p], r] * D[l[p], r]
        return out

    loops = SimpleNamespace(**{f.__name__: f for f in (
        spmv_csr, spmv_coo, spmv_dia, spmv_ell, spmm_csr, merge, sddmm, ttv_csf, ttv_coo,
        mttkrp_csf, mttkrp_coo)})
    _NUMBA.append(loops)
    return loops


def _dia(A: sp.csr_matrix) -> sp.dia_matrix:
    """scipy DIA (its warning about many diagonals is moot: inputs are pre-filtered)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sp.SparseEfficiencyWarning)
        return sp.dia_matrix(A)


def csf_arrays(coords: np.ndarray) -> tuple[np.ndarray, ...]:
    """CSF of sorted unique coordinates: (i_crd, pos1, j_crd, pos2, k_crd)."""
    nnz = coords.shape[1]
    fiber = np.ones(nnz, dtype=bool)
    fiber[1:] = (coords[0, 1:] != coords[0, :-1]) | (coords[1, 1:] != coords[1, :-1])
    fiber_starts = np.flatnonzero(fiber)
    fiber_i = coords[0, fiber_starts]
    slice_new = np.ones(len(fiber_starts), dtype=bool)
    slice_new[1:] = fiber_i[1:] != fiber_i[:-1]
    slice_starts = np.flatnonzero(slice_new)
    i32 = np.int32
    return (fiber_i[slice_starts].astype(i32), np.append(slice_starts, len(fiber_starts)).astype(i32),
            coords[1, fiber_starts].astype(i32), np.append(fiber_starts, nnz).astype(i32),
            coords[2].astype(i32))


def ell_arrays(A: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Row-major ELLPACK: (rows, width) columns and values, padded with (0, 0.0)."""
    counts = np.diff(A.indptr)
    width = int(counts.max()) if A.nnz else 0
    rows = np.repeat(np.arange(A.shape[0]), counts)
    slot = np.arange(A.nnz) - A.indptr[rows]
    cols = np.zeros((A.shape[0], width), np.int32)
    vals = np.zeros((A.shape[0], width))
    cols[rows, slot] = A.indices
    vals[rows, slot] = A.data
    return cols, vals


def numba_impl(numba: Any) -> Impl:
    """Hand-written numba loops over the same storage (one thread, no prange)."""

    def loops() -> SimpleNamespace:
        return _numba_loops(numba)

    def spmv_csr(case: Case) -> Prepared:
        A, x, f = case.ops["A"], case.ops["x"], loops().spmv_csr
        return Prepared(lambda: f(A.indptr, A.indices, A.data, x, A.shape[0]), lambda r: r)

    def spmv_coo(case: Case) -> Prepared:
        A, x, f = case.ops["A"].tocoo(), case.ops["x"], loops().spmv_coo
        row, col = A.row.astype(np.int32), A.col.astype(np.int32)
        return Prepared(lambda: f(row, col, A.data, x, A.shape[0]), lambda r: r)

    def spmv_dia(case: Case) -> Prepared:
        A, x, f = _dia(case.ops["A"]), case.ops["x"], loops().spmv_dia
        offsets = A.offsets.astype(np.int64)
        data = np.ascontiguousarray(A.data)
        return Prepared(lambda: f(offsets, data, x, A.shape[0]), lambda r: r)

    def spmv_ell(case: Case) -> Prepared:
        cols, vals = ell_arrays(case.ops["A"])
        x, f = case.ops["x"], loops().spmv_ell
        return Prepared(lambda: f(cols, vals, x), lambda r: r)

    def spmm(case: Case) -> Prepared:
        A, B, f = case.ops["A"], case.ops["B"], loops().spmm_csr
        return Prepared(lambda: f(A.indptr, A.indices, A.data, B, A.shape[0]), lambda r: r)

    def elementwise(union: int) -> Callable[[Case], Prepared]:
        def prepare(case: Case) -> Prepared:
            A, B, f = case.ops["A"], case.ops["B"], loops().merge

            def call() -> tuple:
                return f(A.indptr, A.indices, A.data, B.indptr, B.indices, B.data,
                         A.shape[0], union)

            return Prepared(call, lambda r: sp.csr_matrix((r[2], r[1], r[0]), shape=A.shape))
        return prepare

    def sddmm(case: Case) -> Prepared:
        S, U, V, f = case.ops["S"], case.ops["U"], case.ops["V"], loops().sddmm
        return Prepared(lambda: f(S.indptr, S.indices, S.data, U, V),
                        lambda r: sp.csr_matrix((r, S.indices, S.indptr), shape=S.shape))

    def ttv_csf(case: Case) -> Prepared:
        ops = case.ops
        i_crd, pos1, j_crd, pos2, k_crd = csf_arrays(ops["coords"])
        shape, vals, c, f = ops["shape"], ops["values"], ops["c"], loops().ttv_csf

        def call() -> tuple:
            indptr, out = f(i_crd, pos1, pos2, k_crd, vals, c, shape[0])
            return indptr, j_crd, out  # the output's columns are the CSF's j level

        return Prepared(call, lambda r: sp.csr_matrix((r[2], r[1], r[0]), shape=shape[:2]))

    def ttv_coo(case: Case) -> Prepared:
        ops = case.ops
        i, j, k = (ops["coords"][m].astype(np.int32) for m in range(3))
        shape, vals, c, f = ops["shape"], ops["values"], ops["c"], loops().ttv_coo
        return Prepared(lambda: f(i, j, k, vals, c, shape[0]),
                        lambda r: sp.csr_matrix((r[2], r[1], r[0]), shape=shape[:2]))

    def mttkrp_csf(case: Case) -> Prepared:
        ops = case.ops
        i_crd, pos1, k_crd, pos2, l_crd = csf_arrays(ops["coords"])
        vals, C, D, rows, f = ops["values"], ops["C"], ops["D"], ops["shape"][0], \
            loops().mttkrp_csf
        return Prepared(lambda: f(i_crd, pos1, k_crd, pos2, l_crd, vals, C, D, rows),
                        lambda r: r)

    def mttkrp_coo(case: Case) -> Prepared:
        ops = case.ops
        i, k, l = (ops["coords"][m].astype(np.int32) for m in range(3))
        vals, C, D, rows, f = ops["values"], ops["C"], ops["D"], ops["shape"][0], \
            loops().mttkrp_coo
        return Prepared(lambda: f(i, k, l, vals, C, D, rows), lambda r: r)

    kernels = {"spmv_csr": spmv_csr, "spmv_coo": spmv_coo, "spmv_dia": spmv_dia,
               "spmv_ell": spmv_ell, "spmm": spmm, "spadd": elementwise(1),
               "hadamard": elementwise(0), "sddmm": sddmm, "ttv_csf": ttv_csf,
               "ttv_coo": ttv_coo, "mttkrp_csf": mttkrp_csf, "mttkrp_coo": mttkrp_coo}
    return Impl("numba", "numba", 1, kernels)


# -- discovery -----------------------------------------------------------------------------------
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
