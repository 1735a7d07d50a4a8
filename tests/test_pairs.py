"""Two rows at once (backends/llvm/pairs.py), the other form of a row-wise sum: both forms give the
numpy reference, and each other bit for bit, on every row-length pattern; on threads too."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
from llvsparse.calls.probe import Way


def _rows(lengths: list[int] | np.ndarray, cols: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    lengths = np.asarray(lengths, dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths]
                             + [np.zeros(0, np.int64)])
    values = rng.standard_normal(indptr[-1])
    return sp.csr_matrix((values, indices.astype(np.int32), indptr), shape=(len(lengths), cols))


def _patterns(seed: int) -> list[sp.csr_matrix]:
    """Rows of random lengths (odd and even counts), long rows paired with short ones and
    the other way round, equal rows, empty rows, one row, no rows, non-finite values."""
    rng = np.random.default_rng(seed)
    cols = 120
    nonfinite = _rows(rng.integers(0, 9, 40), cols, seed)
    nonfinite.data[::7] = [np.inf, -np.inf, np.nan, -0.0][seed % 4]
    return [_rows(rng.integers(0, 40, 101), cols, seed),
            _rows(rng.integers(0, 40, 100), cols, seed + 1),
            _rows([100, 1, 0, 100, 3, 90, 90, 0, 0, 7], cols, seed),
            _rows([0, 0, 0, 0], cols, seed), _rows([17], cols, seed),
            _rows(np.zeros(0, np.int64), cols, seed), nonfinite]


def _both_forms(kernel, monkeypatch, threads: int = 1, **operands) -> dict[str, np.ndarray]:
    results = {}
    for form in ("first", "other"):  # a binding reads FORCED when it is made
        monkeypatch.setitem(ls.calls.probe.FORCED, "form", form)
        call = kernel.bind(threads=threads, **operands)
        assert call.way == Way(form, "direct")
        results[form] = call().to_numpy()
    return results


def _row_sums_in_order(A: sp.csr_matrix, x: np.ndarray) -> np.ndarray:
    """Each row's sum strictly left to right from 0.0 (what an unreassociated loop adds)."""
    y = np.zeros(A.shape[0])
    for i in range(A.shape[0]):
        total = 0.0
        for q in range(A.indptr[i], A.indptr[i + 1]):
            total += A.data[q] * x[A.indices[q]]
        y[i] = total
    return y


@pytest.mark.parametrize("fmt", ["csr", "dcsr"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_spmv_forms_are_exact(fmt: str, threads: int, monkeypatch):
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 100)  # threads on small inputs
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A=fmt)
    assert kernel.instance().jit.other is not None and "pairs.body" in kernel.llvm_ir
    for seed in (1, 2, 3, 4):
        for A in _patterns(seed):
            x = np.random.default_rng(seed).standard_normal(A.shape[1])
            with np.errstate(invalid="ignore"):
                expected = _row_sums_in_order(A, x)
            results = _both_forms(kernel, monkeypatch, threads,
                                  A=ls.Tensor.from_scipy(A, fmt), x=x)
            np.testing.assert_array_equal(results["first"], expected)
            np.testing.assert_array_equal(results["other"], results["first"])


def test_transposed_spmv_pairs_columns(monkeypatch):
    kernel = ls.compile("y(j) = A(i,j) * x(i)", A="csc")
    kernel.instance()
    assert "pairs.body" in kernel.llvm_ir
    for A in _patterns(5):
        x = np.random.default_rng(6).standard_normal(A.shape[0])
        results = _both_forms(kernel, monkeypatch, A=ls.Tensor.from_scipy(A.T.tocsr().T, "csc"),
                              x=x)
        np.testing.assert_array_equal(results["first"], _row_sums_in_order(A.T.tocsr(), x))
        np.testing.assert_array_equal(results["other"], results["first"])


@pytest.mark.parametrize("expr, reference", [
    ("y(i) = z(i) * A(i,j) * x(j)", lambda A, x, z, D: (A @ x) * z),
    ("y(i) = A(i,j) * D(i,j)", lambda A, x, z, D: A.multiply(D).sum(axis=1).A1),
    ("y(i) = A(i,j) * (x(j) + z(i))", lambda A, x, z, D: A @ x + z * A.sum(axis=1).A1),
])
def test_paired_sums_with_located_operands(expr: str, reference, monkeypatch):
    rng = np.random.default_rng(7)
    for A in _patterns(8)[:5]:
        x, z = rng.standard_normal(A.shape[1]), rng.standard_normal(A.shape[0])
        D = rng.standard_normal(A.shape)
        operands = {"A": ls.Tensor.from_scipy(A, "csr"), "x": x, "z": z,
                    "D": ls.Tensor.from_numpy(D, "dense")}
        used = {name: value for name, value in operands.items() if f"{name}(" in expr}
        kernel = ls.compile(expr, A="csr", **({"D": "dense"} if "D" in used else {}))
        kernel.instance()
        assert "pairs.body" in kernel.llvm_ir
        results = _both_forms(kernel, monkeypatch, **used)
        np.testing.assert_allclose(results["first"], reference(A, x, z, D), rtol=1e-12,
                                   atol=1e-12)
        np.testing.assert_array_equal(results["other"], results["first"])


def test_ttv_into_dense_pairs_fibers(monkeypatch):
    rng = np.random.default_rng(9)
    for shape, density in (((9, 13, 40), 0.3), ((1, 3, 5), 0.0), ((4, 7, 50), 0.9)):
        dense = np.where(rng.random(shape) < density, rng.standard_normal(shape), 0.0)
        c = rng.standard_normal(shape[2])
        kernel = ls.compile("B(i,j) = A(i,j,k) * c(k)", A="csf")
        kernel.instance()
        assert "pairs.body" in kernel.llvm_ir
        results = _both_forms(kernel, monkeypatch,
                              A=ls.Tensor.from_numpy(dense, format="csf"), c=c)
        np.testing.assert_allclose(results["first"], np.einsum("ijk,k->ij", dense, c),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(results["other"], results["first"])


def test_integer_spmv_pairs(monkeypatch):
    A = _rows([5, 0, 9, 9, 1, 30, 2], 40, seed=10)
    A.data = np.arange(1, A.nnz + 1, dtype=np.int64)
    x = np.arange(40, dtype=np.int64) - 20
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    results = _both_forms(kernel, monkeypatch, A=ls.Tensor.from_scipy(A, "csr"), x=x)
    np.testing.assert_array_equal(results["first"], A @ x)
    np.testing.assert_array_equal(results["other"], results["first"])


@pytest.mark.parametrize("expr, formats", [
    ("y(i) = A(i,j) * x(j)", {"A": "coo"}),  # non-unique rows: summed as runs
    ("y(i) = A(i,j) * x(j)", {"A": "ell"}),  # the inner loop runs over slots
    ("y(i) = A(i,j) * x(j) + 2", {"A": "csr"}),  # every coordinate of j, not a stored one
    ("y(i) = (A(i,j) - 3) * x(j)", {"A": "csr"}),  # the same
    ("y(i) = A(i,j) + B(i,j)", {"A": "csr", "B": "csr"}),  # a co-iteration (merges)
    ("C(i,j) = A(i,k) * B(k,j)", {"A": "csr", "B": "dense"}),  # scattered into
    ("y(i) = A(i,j) * x(j)", {"A": "hash"}),  # the inner lookup may miss
    ("y(i) = A(i,j) * x(j)", {"A": "bcsr"}),  # blocked levels (derived indices)
    ("y(i) = A(i,j) * (B(j,k) * x(k))", {"A": "csr", "B": "csr"}),  # a nested sum
])
def test_kernels_without_a_pairable_row_sum_do_not_pair(expr, formats):
    kernel = ls.compile(expr, **formats)
    kernel.instance()
    assert "pairs.body" not in kernel.llvm_ir


def test_fastmath_kernels_do_not_pair():
    """fastmath lets LLVM reassociate each row's sum instead, and the two forms' bits
    would differ."""
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", fastmath=True)
    assert kernel.instance().jit.other is None and "pairs.body" not in kernel.llvm_ir
    A = _rows([50, 3, 0, 70], 80, seed=12)
    x = np.random.default_rng(13).standard_normal(80)
    np.testing.assert_allclose(kernel(A=ls.Tensor.from_scipy(A, "csr"), x=x).to_numpy(),
                               A @ x, rtol=1e-12, atol=1e-12)
