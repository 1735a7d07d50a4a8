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
