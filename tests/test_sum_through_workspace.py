"""A sum of a scattered product and another operand goes through one workspace row
(paper 002; issue 32): ``C = A @ B + D`` into CSR was an inner product over every (i, j)
of a transposed copy of B, storing an explicit zero at every coordinate it visited
(8,997,012 entries where scipy stores 323,555 at n = 3,000). Now each term scatters
into the workspace row and the row is appended: scipy's entries, in its time.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls

FORMATS = ["csr", "dcsr", "coo"]


def _random(n: int, density: float, seed: int) -> sp.csr_matrix:
    return sp.random(n, n, density=density, format="csr", random_state=seed)


def _same(result: ls.Tensor, expected: sp.spmatrix) -> None:
    got = result.to_scipy().tocsr()
    expected = sp.csr_matrix(expected)
    assert got.nnz == expected.nnz, f"{got.nnz} entries stored, scipy {expected.nnz}"
    np.testing.assert_allclose(got.toarray(), expected.toarray(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("out", ["csr", "dcsr"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("sign", ["+", "-"])
def test_product_plus_operand_stores_scipys_entries(out: str, fmt: str, sign: str) -> None:
    kernel = ls.compile(f"C(i,j) = A(i,k) * B(k,j) {sign} D(i,j)", A="csr", B="csr", D=fmt,
                        out_format=out)
    assert "w(j) += A(i,k) * B(k,j)" in kernel.concrete, kernel.concrete  # no inner product
    for n, density, seed in [(40, 0.05, 0), (1, 1.0, 1), (25, 0.0, 2), (60, 0.2, 3)]:
        a, b, d = (_random(n, density, seed + k) for k in range(3))
        result = kernel(A=ls.Tensor.from_scipy(a, "csr"), B=ls.Tensor.from_scipy(b, "csr"),
                        D=ls.Tensor.from_scipy(d, fmt))
        _same(result, a @ b + d if sign == "+" else a @ b - d)


def test_the_numpy_front_end_takes_the_workspace_too() -> None:
    a = _random(80, 0.03, 4)
    t = ls.asarray(a)
    _same(t @ t + t, a @ a + a)
    lazy = ls.lazy(t)
    _same(ls.compute(lazy @ lazy + lazy), a @ a + a)


def test_its_work_is_bounded_by_the_stored_entries() -> None:
    """Counted (a counting build): 4x dimensions, same entries, DCSR throughout."""
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j) + D(i,j)", A="dcsr", B="dcsr",
                        D="dcsr", out_format="dcsr", counting=True)
    counts = []
    for n in (4096, 16384):
        rng = np.random.default_rng(n)
        mats = [sp.coo_matrix((rng.random(300), tuple(rng.integers(0, n, (2, 300)))),
                              shape=(n, n)).tocsr() for _ in range(3)]
        result = kernel(**{name: ls.Tensor.from_scipy(m, "dcsr")
                           for name, m in zip("ABD", mats)})
        expected = (mats[0] @ mats[1] + mats[2]).tocsr()
        got = result.to_scipy().tocsr()
        assert got.nnz == expected.nnz
        np.testing.assert_allclose(abs(got - expected).max(), 0, atol=1e-12)
        counts.append(kernel.loop_count)
    assert counts[1] <= 1.5 * counts[0], counts


def test_a_workspace_that_does_not_apply_says_so() -> None:
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", workspace="dense")
    with pytest.raises(ls.ScheduleError, match="workspace='dense' does not apply"):
        kernel(A=ls.Tensor.from_numpy(np.eye(3), "csr"), x=np.ones(3))
