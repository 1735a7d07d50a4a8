"""Reductions other than + scattered into a dense output (backends/llvm/scatter_reduce.py): the
reduction's loops outside the output's, the output set to the operator's identity
first. Results against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls
from llvsparse import graphs


def _sparse(rng, shape, density, absent, scale=10.0):
    return np.where(rng.random(shape) < density, rng.random(shape) * scale, absent)


@pytest.mark.parametrize("shape,density", [((7, 5), 0.4), ((1, 1), 1.0), ((4, 6), 0.0),
                                           ((40, 30), 0.1), ((3, 50), 0.5)])
def test_min_plus_push_matches_numpy(shape, density):
    """dist(j) = min over i of W(i,j) + d(i), W stored by rows (a Bellman-Ford push):
    the loops run i outer over W's rows only; an empty column stays inf."""
    rng = np.random.default_rng(sum(shape))
    W, d = _sparse(rng, shape, density, np.inf), rng.random(shape[0])
    Wt = ls.Tensor.from_numpy(W, format="csr", fill=np.inf)
    kernel = ls.compile(graphs._sums_over("y(j) = W(i,j) * d(i)", "min", "+"), W=Wt.format,
                        d="dense")
    y = kernel(W=Wt, d=d).to_numpy()
    np.testing.assert_array_equal(y, np.min(W + d[:, None], axis=0))
    assert kernel.concrete == "forall(i, forall(j, y(j) min= W(i,j) + d(i)))"
    assert not kernel.last.conversions
    loops = kernel.loops
    assert "clear y(j) = inf" in loops and "for j in positions of W.1:" in loops


@pytest.mark.parametrize("op,absent,reduce", [("min", np.inf, np.min),
                                              ("max", -np.inf, np.max)])
def test_min_and_max_with_their_identity_as_fill(op, absent, reduce):
    """Plain min/max over W(i,j) + x(i), W's fill the operator's identity: where W stores
    nothing the body is that identity, so no skipped coordinate changes the result."""
    rng = np.random.default_rng(4)
    W, x = _sparse(rng, (9, 6), 0.3, absent), rng.random(9)
    Wt = ls.Tensor.from_numpy(W, format="csr", fill=absent)
    kernel = ls.compile(f"y(j) = {op}(i, W(i,j) + x(i))", W=Wt.format, x="dense")
    out = np.full(6, np.nan)  # the kernel sets every entry itself
    y = kernel(W=Wt, x=x, out=out).to_numpy()
    np.testing.assert_array_equal(y, reduce(W + x[:, None], axis=0))
    assert kernel.concrete.startswith("forall(i, forall(j, y(j)")
    assert not kernel.last.conversions


def test_matrix_output_and_threads():
    """Y(j,l) = min over i of W(i,j) + X(i,l) into a dense matrix; the same on two
    threads (the rows are not split: i runs outside them)."""
    rng = np.random.default_rng(5)
    W, X = _sparse(rng, (12, 8), 0.3, np.inf), rng.random((12, 3))
    Wt = ls.Tensor.from_numpy(W, format="csr", fill=np.inf)
    kernel = ls.compile("Y(j,l) = min(i, W(i,j) + X(i,l))", W=Wt.format, X="dense")
    expected = np.min(W[:, :, None] + X[:, None, :], axis=0)
    for threads in (1, 2):
        np.testing.assert_array_equal(kernel(threads=threads, W=Wt, X=X).to_numpy(), expected)
    assert " min= " in kernel.concrete and kernel.concrete.startswith("forall(i,")


def test_not_scattered_where_a_skipped_coordinate_counts():
    """With fill 0, min over i of A(i,j) + x(i) meets x(i) where A stores nothing, and
    a coordinate the loops skip would be missed: the reduction stays folded inside the
    loop over j (A converted to be read by columns), with numpy's result."""
    rng = np.random.default_rng(6)
    A, x = _sparse(rng, (8, 5), 0.4, 0.0), rng.random(8) - 0.5
    kernel = ls.compile("y(j) = min(i, A(i,j) + x(i))", A="csr", x="dense")
    y = kernel(A=ls.Tensor.from_numpy(A, format="csr"), x=x).to_numpy()
    np.testing.assert_allclose(y, np.min(A + x[:, None], axis=0))
    assert kernel.concrete.startswith("forall(j,") and kernel.last.conversions


def test_user_monoid_scatters():
    """A user function declared a monoid (identity inf, commutative, associative)
    reduces the same way: its declared identity, not its name, starts the output."""
    ls.function("smaller_tri", body="a if a < b else b", identity=np.inf, commutative=True,
                associative=True)
    rng = np.random.default_rng(7)
    W, x = _sparse(rng, (10, 7), 0.3, np.inf), rng.random(10)
    Wt = ls.Tensor.from_numpy(W, format="csr", fill=np.inf)
    kernel = ls.compile("y(j) = smaller_tri(i, W(i,j) + x(i))", W=Wt.format, x="dense")
    np.testing.assert_array_equal(kernel(W=Wt, x=x).to_numpy(), np.min(W + x[:, None], axis=0))
    assert kernel.concrete.startswith("forall(i, forall(j, y(j) smaller_tri= ")
    assert not kernel.last.conversions
