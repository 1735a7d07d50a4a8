"""Intersections whose ranges are skewed skip ahead by search (galloping) instead of
stepping; the results must equal the plain merge's on every shape of skew."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import llvsparse as ls


def _skewed(rows: int, cols: int, seed: int) -> sp.csr_matrix:
    """Rows from empty to full, so that every pair of rows is skewed one way or the other."""
    rng = np.random.default_rng(seed)
    lengths = rng.choice([0, 1, 2, 5, cols // 3, cols], rows)
    indices = [np.sort(rng.choice(cols, n, replace=False)) for n in lengths]
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    values = rng.standard_normal(indptr[-1])
    return sp.csr_matrix((values, np.concatenate(indices).astype(np.int32), indptr),
                         shape=(rows, cols))


def test_intersection_code_gallops():
    kernel = ls.compile("C(i,j) = A(i,j) * B(i,j)", A="csr", B="csr", C="csr")
    assert "gallop.head" in kernel.llvm_ir


@pytest.mark.parametrize("seed", range(6))
def test_skewed_hadamard_matches_scipy(seed):
    a, b = _skewed(40, 300, seed), _skewed(40, 300, seed + 100)
    kernel = ls.compile("C(i,j) = A(i,j) * B(i,j)", A="csr", B="csr", C="csr")
    result = kernel(A=ls.Tensor.from_scipy(a, "csr"), B=ls.Tensor.from_scipy(b, "csr"))
    expected = a.multiply(b).tocsr()
    expected.eliminate_zeros()
    got = result.to_scipy()
    np.testing.assert_array_equal(got.toarray(), expected.toarray())
    assert got.nnz == len(set(zip(*a.nonzero())) & set(zip(*b.nonzero())))


def test_three_way_skewed_intersection():
    a, b, c = _skewed(30, 200, 1), _skewed(30, 200, 2), _skewed(30, 200, 3)
    kernel = ls.compile("D(i,j) = A(i,j) * B(i,j) * C(i,j)", A="csr", B="csr", C="csr",
                        D="csr")
    result = kernel(A=ls.Tensor.from_scipy(a, "csr"), B=ls.Tensor.from_scipy(b, "csr"),
                    C=ls.Tensor.from_scipy(c, "csr"))
    np.testing.assert_array_equal(result.to_scipy().toarray(),
                                  a.multiply(b).multiply(c).toarray())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 499), max_size=60, unique=True),
       st.lists(st.integers(0, 499), min_size=0, max_size=500, unique=True))
def test_sparse_vector_dot_any_skew(short, long):
    """A dot product of two sparse vectors: every gap, match and end position."""
    x, y = np.zeros(500), np.zeros(500)
    x[short] = np.arange(1, len(short) + 1)
    y[long] = np.arange(1, len(long) + 1) * 0.5
    kernel = ls.compile("s = x(i) * y(i)", x="csf", y="csf")
    result = kernel(x=ls.Tensor.from_numpy(x, "csf"), y=ls.Tensor.from_numpy(y, "csf"))
    assert float(result.to_numpy()) == float(np.dot(x, y))


def _hypersparse(n: int, rows: int, seed: int) -> sp.csr_matrix:
    """An n x n matrix storing entries in ``rows`` random rows only."""
    rng = np.random.default_rng(seed)
    which = rng.choice(n, rows, replace=False)
    cols = rng.integers(0, n, rows * 3)
    return sp.coo_matrix((rng.standard_normal(rows * 3), (np.repeat(which, 3), cols)),
                         shape=(n, n)).tocsr()


@pytest.mark.parametrize("workspace", ["dense", "hash", "sort", "bucket", None])
def test_dcsr_spgemm_gallops_over_the_other_rows(workspace):
    """DCSR x DCSR merged each row of A's k list against every stored row of B (issue
    32: O(rows(A) x rows(B)), 821 ms where scipy took 5 ms); a workspace kernel's merge
    gallops too, so a short list skips through the long one by search. (By default B is
    read with a full top level and located instead, test_complexity.py: here it is read
    as stored, convert=False.)"""
    kernel = ls.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "dcsr", "B": "dcsr"}, "dcsr",
                       convert=False, workspace=workspace)
    for n, rows_a, rows_b, seed in [(300, 5, 250, 0), (300, 250, 5, 1), (50, 50, 50, 2),
                                    (1, 1, 1, 3), (400, 0, 40, 4)]:
        a, b = _hypersparse(n, rows_a, seed), _hypersparse(n, rows_b, seed + 10)
        result = kernel(A=ls.Tensor.from_scipy(a, "dcsr"), B=ls.Tensor.from_scipy(b, "dcsr"))
        np.testing.assert_allclose(result.to_numpy(), (a @ b).toarray(), rtol=1e-12,
                                   atol=1e-12)
    assert "gallop when skewed" in kernel.loops
