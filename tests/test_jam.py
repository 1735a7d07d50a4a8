"""Unroll-and-jam (backends/llvm/jam.py): several positions of a sparse loop share its dense inner
loops, and every result stays bit-for-bit what the unjammed order computes."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls


def _ragged(rows: int, cols: int, seed: int) -> sp.csr_matrix:
    """Rows of 0..11 entries: every remainder of the jammed step, empty rows included."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 12, rows)
    lengths[:3] = [0, 1, 11]
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths])
    values = rng.standard_normal(indptr[-1])
    return sp.csr_matrix((values, indices.astype(np.int32), indptr), shape=(rows, cols))


def _in_order(terms: np.ndarray, axis: int) -> np.ndarray:
    """Sum along ``axis`` strictly left to right (what an unreassociated loop computes)."""
    if terms.shape[axis] == 0:
        return np.zeros(np.delete(terms.shape, axis))
    return np.add.accumulate(terms, axis=axis).take(-1, axis=axis)


@pytest.mark.parametrize("rank", [1, 7, 64])
@pytest.mark.parametrize("threads", [1, 2])
def test_sddmm_jammed_is_exact(rank: int, threads: int, monkeypatch):
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 1000)  # threads on small inputs
    S = _ragged(300, 200, seed=rank)
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((300, rank)), rng.standard_normal((200, rank))
    kernel = ls.compile("C(i,j) = S(i,j) * A(i,k) * B(j,k)", S="csr", A="dense", B="dense",
                        C="csr")
    assert "jammed" in kernel.lattices
    C = kernel(S=ls.Tensor.from_scipy(S, "csr"), A=ls.Tensor.from_numpy(A, "dense"),
               B=ls.Tensor.from_numpy(B, "dense"), threads=threads).to_scipy()
    rows = np.repeat(np.arange(300), np.diff(S.indptr))
    expected = _in_order((S.data[:, None] * A[rows]) * B[S.indices], axis=1)
    np.testing.assert_array_equal(C.indptr, S.indptr)
    np.testing.assert_array_equal(C.indices, S.indices)
    np.testing.assert_array_equal(C.data, expected)


def test_spmm_jammed_is_exact():
    A = _ragged(250, 180, seed=3)
    B = np.random.default_rng(4).standard_normal((180, 33))
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", B="dense")
    assert "jammed" in kernel.lattices
    C = kernel(A=ls.Tensor.from_scipy(A, "csr"), B=ls.Tensor.from_numpy(B, "dense")).to_numpy()
    expected = np.zeros((250, 33))
    for i in range(250):
        lo, hi = A.indptr[i], A.indptr[i + 1]
        expected[i] = 0.0 + _in_order(A.data[lo:hi, None] * B[A.indices[lo:hi]], axis=0)
    np.testing.assert_array_equal(C, expected)


def test_mttkrp_csf_jammed_matches_reference():
    rng = np.random.default_rng(5)
    shape, rank = (30, 20, 25), 9
    dense = np.where(rng.random(shape) < 0.15, rng.standard_normal(shape), 0.0)
    Bt = ls.Tensor.from_numpy(dense, format="csf")
    C, D = rng.standard_normal((20, rank)), rng.standard_normal((25, rank))
    kernel = ls.compile("A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", B="csf", C="dense",
                        D="dense")
    assert "jammed" in kernel.lattices
    result = kernel(B=Bt, C=ls.Tensor.from_numpy(C, "dense"),
                    D=ls.Tensor.from_numpy(D, "dense")).to_numpy()
    np.testing.assert_allclose(result, np.einsum("ikl,kj,lj->ij", dense, C, D), atol=1e-12)


@pytest.mark.parametrize("expression, formats", [
    ("y(i) = A(i,j) * x(j)", {"A": "csr", "x": "dense"}),  # no loop inside j
    ("C(i,j) = A(i,k) * B(k,j)", {"A": "csr", "B": "csr"}),  # a sparse loop inside k
])
def test_loops_without_dense_inner_loops_are_not_jammed(expression, formats):
    assert "jammed" not in ls.compile(expression, **formats).lattices


def test_jammed_loop_is_in_the_code():
    kernel = ls.compile("C(i,j) = S(i,j) * A(i,k) * B(j,k)", S="csr", A="dense", B="dense",
                        C="csr")
    assert "j.jam8.body:" in kernel.llvm_ir and "j.jam4.body:" in kernel.llvm_ir


@pytest.mark.parametrize("expression, formats", [
    ("C(i,j) = S(i,j) * A(i,k) * B(j,k)", {"S": "csr", "A": "dense", "B": "dense",
                                           "C": "dense"}),
    ("C(i,j) = A(i,j) * B(i,j)", {"A": "csr", "B": "csr", "C": "dense"}),  # galloping
])
def test_jammed_and_galloping_kernels_pass_ptxas(expression, formats, tool):
    """Into dense outputs: an assembled one has no GPU mapping yet (tests/test_gpu.py)."""
    from llvsparse.backends.cuda import check_ptx

    tool("ptxas")

    kernel = ls.compile(expression, **formats)
    check_ptx(kernel.ptx(sm="sm_80"), "sm_80")


HASHED_3D = ls.Format([ls.Level("hashed", 0), ls.Level("hashed", 1), ls.Level("hashed", 2)])


@pytest.mark.parametrize("b_format", ["hash", HASHED_3D])
@pytest.mark.parametrize("out_format", ["dense", "coo"])
def test_a_level_located_inside_the_inner_loop_may_miss(b_format, out_format):
    """B(k,j,l) under the loop order i, l, k, j: B's l level, whose index an outer loop
    binds, is located inside the j loop, after j's level. A hashed level may miss there,
    so k is not jammed (it raised 'a jammed locate may miss' while compiling)."""
    rng = np.random.default_rng(7)
    b = np.where(rng.random((6, 5, 4)) < 0.4, rng.integers(1, 9, (6, 5, 4)), 0.0)
    c = rng.integers(1, 9, (3, 4, 6)).astype(float)
    a = np.where(rng.random((6, 4)) < 0.5, rng.integers(1, 9, (6, 4)), 0.0)
    kernel = ls.compile("Y(i,j,l) = B(k,j,l) * C(i,l,k) * A(k,l)", B=b_format, C="dense",
                        A="dcsc", Y=out_format)
    operands = {"B": ls.Tensor.from_numpy(b, format=b_format), "C": c,
                "A": ls.Tensor.from_numpy(a, format="dcsc")}
    expected = np.einsum("kjl,ilk,kl->ijl", b, c, a)
    for _ in range(3):
        np.testing.assert_array_equal(kernel(**operands).to_numpy(), expected)
