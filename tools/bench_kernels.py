"""The kernels of ``llvsparse bench``: what each computes and on which inputs, the operands
and scipy/numpy reference of each case, and the check of a result against it.

An implementation (``Impl``) has a ``prepare`` per kernel that converts the operands to its
own storage (not timed) and returns a zero-argument call (timed) plus a function that
turns the call's result into a numpy array or scipy CSR matrix for verification (not
timed).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from .bench_inputs import MatrixInput, TensorInput, banded, canonical_csr, ell_friendly

RANK_SPMM = 64
RANK_SDDMM = 64
RANK_MTTKRP = 32
CHUNK = 65_536  # nonzeros per numpy gather in the chunked SDDMM/MTTKRP baselines
# SpGEMM's output can dwarf its inputs (A·Aᵀ of ego-Twitter: 163M entries, 2 GB, from
# 2.7M stored), and a case holds it many times over: the reference, then every
# implementation prepared and timed in one process, each with its result, its
# verification's copy and difference, and what it keeps between calls (11-12x the
# output's bytes above the reference for the whole case; tools/bench_spgemm_memory.py).
# Where the output would exceed this many entries (480 MB), the case takes A's leading
# rows up to it, so a case stays within 8 GB (BENCHMARKS.md).
SPGEMM_MAX_OUTPUT = 40_000_000

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
    KernelSpec("spgemm_aa", "matrix", "medium", "C(i,j) = A(i,k) * B(k,j)",
               {"A": "csr", "B": "csr"}, "csr",
               "SpGEMM, CSR x CSR -> CSR (B = A, square inputs only)"),
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
    if kernel == "spgemm_aa":
        rows, cols = item.matrix.shape  # type: ignore[union-attr]
        if rows != cols:
            return "not square: A*A is undefined"
    return None


def _second_operand(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """B for SpAdd/Hadamard: the transpose of a square A, else A with its rows reversed."""
    return canonical_csr(matrix.T if matrix.shape[0] == matrix.shape[1] else matrix[::-1])


def make_case(kernel: str, item: MatrixInput | TensorInput, seed: int = 7) -> Case:
    """Operands for ``kernel`` on ``item`` and the scipy/numpy reference result."""
    rng = np.random.default_rng(seed)
    ops: dict[str, Any] = {}
    meta = item.meta
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
        elif kernel.startswith("spgemm"):  # A*A^T, or A*A (a copy: operands are distinct)
            B = canonical_csr(A.T if kernel == "spgemm" else A)
            kept = spgemm_rows(A, B)
            if kept < rows:
                A = canonical_csr(A[:kept])
                meta = dict(meta, sample=f"A's first {kept:,} of {rows:,} rows: "
                                         f"{SPGEMM_MAX_OUTPUT:,} entries of A·B at most")
            ops = {"A": A, "B": B}
            reference = sp.csr_matrix(A @ ops["B"])
        elif kernel == "sddmm":
            ops = {"S": A, "U": rng.uniform(-1, 1, (rows, RANK_SDDMM)),
                   "V": rng.uniform(-1, 1, (cols, RANK_SDDMM))}
            reference = sddmm_numpy(A, ops["U"], ops["V"])
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
    return Case(kernel, item.name, meta, ops, reference)


def spgemm_rows(A: sp.csr_matrix, B: sp.csr_matrix) -> int:
    """How many leading rows of A keep the entries of their rows of A·B within
    ``SPGEMM_MAX_OUTPUT`` (all of them where the whole product does). The products
    A(i,k) x B(k,:) bound them, O(nnz) to count; only past that bound are the rows'
    entries counted, a block of rows at a time (the pattern's product, bounded memory)."""
    products = np.diff(B.indptr).astype(np.int64)[A.indices]
    if products.sum() <= SPGEMM_MAX_OUTPUT:
        return A.shape[0]
    ones = sp.csr_matrix((np.ones(A.nnz, np.float32), A.indices, A.indptr), shape=A.shape)
    pattern = sp.csr_matrix((np.ones(B.nnz, np.float32), B.indices, B.indptr), shape=B.shape)
    per_row = np.concatenate([[0], np.cumsum(products)])[A.indptr]  # products before row i
    counts, start = [], 0
    while start < A.shape[0]:  # blocks of about 4M products
        stop = int(np.searchsorted(per_row, per_row[start] + 4_000_000, side="right")) - 1
        stop = min(A.shape[0], max(start + 1, stop))
        counts.append(np.diff((ones[start:stop] @ pattern).indptr))
        start = stop
    before = np.concatenate([[0], np.cumsum(np.concatenate(counts))])
    return max(1, int(np.searchsorted(before, SPGEMM_MAX_OUTPUT, side="right")) - 1)


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


def sddmm_numpy(S: sp.csr_matrix, U: np.ndarray, V: np.ndarray) -> sp.csr_matrix:
    """Gather rows of U and V per stored entry, in chunks, and take row-wise dot products
    (the SDDMM reference, and the scipy column's numpy baseline)."""
    rows = np.repeat(np.arange(S.shape[0], dtype=np.int32), np.diff(S.indptr))
    out = np.empty(S.nnz)
    for lo in range(0, S.nnz, CHUNK):
        hi = lo + CHUNK
        out[lo:hi] = np.einsum("ij,ij->i", U[rows[lo:hi]], V[S.indices[lo:hi]])
    out *= S.data
    return sp.csr_matrix((out, S.indices, S.indptr), shape=S.shape)


def as_dia(A: sp.csr_matrix) -> sp.dia_matrix:
    """scipy DIA (its warning about many diagonals is moot: inputs are pre-filtered)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sp.SparseEfficiencyWarning)
        return sp.dia_matrix(A)
