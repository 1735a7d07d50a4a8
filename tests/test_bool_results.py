"""Comparisons and logical functions give bool tensors, as numpy's do (issue 23's front
end). They gave 1 or 0 in the operands' dtype: ``A < 0.5`` of a float64 CSR was float64
with fill 1.0. Each result is checked against numpy on the dense arrays, value and dtype,
eagerly, lazily, through numpy's ufuncs and in notation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls

FILLS = [0.0, 1.0, math.nan, math.inf]


def _pair(fill: float, fmt: str = "csr", shape=(9, 7), seed: int = 0):
    rng = np.random.default_rng(seed)
    a = np.where(rng.random(shape) < 0.35, rng.uniform(-1, 1, shape).round(1), fill)
    return a, ls.Tensor.from_numpy(a, fmt, fill=fill)


def _same(got, expected) -> None:
    array = np.asarray(got)
    expected = np.asarray(expected)
    assert array.dtype == expected.dtype, (array.dtype, expected.dtype)
    assert array.shape == expected.shape
    np.testing.assert_array_equal(array, expected)


@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("fmt", ["csr", "coo", "dense"])
def test_comparisons_and_logic_give_bool(fill, fmt):
    a, A = _pair(fill, fmt, seed=1)
    b, B = _pair(0.0, "csr", seed=2)
    with np.errstate(invalid="ignore"):
        for got, expected in [
                (A < 0.5, a < 0.5), (A <= 0.0, a <= 0.0), (A == 0.0, a == 0.0),
                (A != 0.5, a != 0.5), (A > B, a > b), (A >= -0.2, a >= -0.2),
                (np.less(A, 0.5), np.less(a, 0.5)), (np.greater_equal(0.1, A), 0.1 >= a),
                (np.logical_and(A, B), np.logical_and(a, b)),
                (np.logical_or(A > 0.2, B), np.logical_or(a > 0.2, b)),
                (np.logical_xor(A, B), np.logical_xor(a, b)),
                (np.logical_not(A), np.logical_not(a)),
                ((A > 0.2) & (B < 0.1), (a > 0.2) & (b < 0.1)),
                ((A > 0.2) | (B < 0.1), (a > 0.2) | (b < 0.1)),
                ((A > 0.2) ^ (B < 0.1), (a > 0.2) ^ (b < 0.1)),
                (~(A > 0.2), ~(a > 0.2)), ((a > 0.2) & (B < 0.1), (a > 0.2) & (b < 0.1))]:
            _same(got, expected)
    result = A < 0.5
    assert result.dtype == np.bool_
    if fmt != "dense":  # a dense operand's fill is never read
        with np.errstate(invalid="ignore"):
            assert bool(result.fill_value) == bool(np.float64(fill) < 0.5)


@pytest.mark.parametrize("fill", FILLS)
def test_bool_values_in_arithmetic_promote_as_numpy(fill):
    a, A = _pair(fill, seed=3)
    b, B = _pair(0.0, seed=4)
    c = np.random.default_rng(5).integers(-3, 4, a.shape)
    C = ls.Tensor.from_numpy(c, "csr")
    with np.errstate(invalid="ignore"):
        for got, expected in [
                ((A < 0.3) * B, (a < 0.3) * b), ((A < 0.3) + 1.5, (a < 0.3) + 1.5),
                ((A < 0.3) * 2, (a < 0.3) * 2), ((A < 0.3) * C, (a < 0.3) * c),
                ((A > 0.1) + (B > 0.1), (a > 0.1) + (b > 0.1)),
                ((A > 0.1) * (B > 0.1), (a > 0.1) * (b > 0.1)),
                (((A > 0.1) + (B > 0.1)) * 2.5, ((a > 0.1) + (b > 0.1)) * 2.5),
                (np.where(A < 0.3, B, C), np.where(a < 0.3, b, c)),
                (np.where(A < 0.3, 1, C), np.where(a < 0.3, 1, c)),
                ((A < 0.3).sum(axis=1), (a < 0.3).sum(axis=1)),
                ((A < 0.3).sum(), (a < 0.3).sum())]:
            _same(got, expected)
    with pytest.raises(TypeError, match="bool tensors are refused"):
        _ = (A < 0.3) - (B < 0.3)
    with pytest.raises(TypeError, match="bool tensors are refused"):
        _ = -(A < 0.3)
    with pytest.raises(TypeError, match="bitwise"):
        _ = A & B


def test_a_lazy_chain_that_compares_then_multiplies_fuses():
    a, A = _pair(0.0, seed=6)
    b, B = _pair(0.0, seed=7)
    L = ls.lazy(A)
    expr = (L < 0.3) * B
    assert expr.dtype == np.float64 and (L < 0.3).dtype == np.bool_
    assert str(expr.assignment) == "OUT(i0,i1) = (T0(i0,i1) < 0.3) * T1(i0,i1)"
    _same(ls.compute(expr), (a < 0.3) * b)
    both = ls.lazy(A > 0.1) & (ls.lazy(B) < 0.5)
    assert "and(" in str(both.assignment) and both.dtype == np.bool_
    _same(both.compute(), (a > 0.1) & (b < 0.5))
    _same(ls.compute(((L > 0.1) + (B > 0.1)) * 2.5), ((a > 0.1) + (b > 0.1)) * 2.5)


@pytest.mark.parametrize("fill", FILLS)
def test_notation_comparisons_store_bool(fill):
    a, A = _pair(fill, seed=8)
    b, B = _pair(0.0, seed=9)
    with np.errstate(invalid="ignore"):
        lt = ls.evaluate("C(i,j) = A(i,j) < 0.5", out_format="csr", A=A)
        _same(lt.to_numpy(), a < 0.5)
        assert bool(lt.fill_value) == bool(np.float64(fill) < 0.5)
        _same(ls.evaluate("C(i,j) = and(A(i,j) > 0, B(i,j) != 0)", A=A, B=B).to_numpy(),
              np.logical_and(a > 0, b != 0))
        _same(ls.evaluate("C(i,j) = where(A(i,j) > B(i,j), 2, 3)", A=A, B=B).to_numpy(),
              np.where(a > b, 2, 3))
        # a sum of bools in notation counts them, as np.sum (np.einsum's is an or)
        _same(ls.evaluate("y(i) = sum_j(A(i,j) < 0.5)", A=A).to_numpy(),
              np.sum(a < 0.5, axis=1))
        # a bool + under a comparison is an or (1 + 1 would be 2, not below 2)
        _same(ls.evaluate("C(i,j) = (A(i,j) > 0) + (B(i,j) > 0) < 2", A=A, B=B).to_numpy(),
              ((a > 0) + (b > 0)) < 2)


def test_empty_and_all_fill_comparisons():
    empty = ls.Tensor.from_scipy(sp.csr_matrix((0, 4)))
    _same(empty < 0.5, np.zeros((0, 4)) < 0.5)
    nothing = ls.Tensor.from_scipy(sp.csr_matrix((3, 4)))
    result = nothing >= 0
    assert result.nnz == 0 and bool(result.fill_value)
    _same(result, np.ones((3, 4), bool))


@pytest.mark.parametrize("op, reference", [("or", np.logical_or), ("and", np.logical_and)])
@pytest.mark.parametrize("fills", [(0.0, 1.0), (1.0, 1.0), (1.0, 0.0)])
def test_logic_over_fills_0_and_1_reads_stored_zeros(op, reference, fills):
    """or(X, Y) with X's fill 0 and Y's 1 visited only where both store (X ∩ Y): the
    lattice probed Y with nonzero values only, for which or(0, y) is always 1, so X's
    absence looked like it fixed the result. A stored 0 is probed too."""
    x = np.array([[1.0, 0.0, 0.0, 1.0, 2.0], [0.0, 0.0, 1.0, 1.0, 0.0]])
    y = np.array([[1.0, 1.0, 0.0, 0.0, 3.0], [0.0, 1.0, 0.0, 1.0, 1.0]])
    X = ls.Tensor.from_numpy(x, "csr", fill=fills[0])
    Y = ls.Tensor.from_numpy(y, "csr", fill=fills[1])
    for out in ("csr", "dense"):
        result = ls.evaluate(f"C(i,j) = {op}(X(i,j), Y(i,j))", out_format=out, X=X, Y=Y)
        _same(result.to_numpy(), reference(x, y))


@pytest.mark.parametrize("fmt", ["csr", "coo", "dense"])
def test_a_sum_of_bools_in_notation_counts_them(fmt):
    """``sum_j`` over bools counts the true entries, in int64, as numpy's sum does. It
    was computed in bool, an or: the soak's case 1127:45 (below) gave -7 for -30."""
    rng = np.random.default_rng(45)
    for shape in ((8, 8), (1, 1), (5, 3)):
        a = rng.random(shape[0]) < 0.2
        b = rng.random(shape) < 0.5
        b[0] = False  # an empty row
        A, B = ls.Tensor.from_numpy(a, "sparse"), ls.Tensor.from_numpy(b, fmt)
        counts = ls.compile("y(i) = sum_j(B(i,j))", B=B.format)(B=B).to_numpy()
        _same(counts, b.sum(axis=1))
        either = ls.compile("y(i) = sum_j(B(i,j) + A(i))", B=B.format, A=A.format)
        _same(either(A=A, B=B).to_numpy(), (b | a[:, None]).sum(axis=1))
        soak = ls.compile("s = sum_i((A(i) - 1) * sum_j(B(i,j) + A(i)))", B=B.format,
                          A=A.format)
        expected = ((a.astype(np.int64) - 1) * (b | a[:, None]).sum(axis=1)).sum()
        _same(soak(A=A, B=B).to_numpy(), expected)
        biggest = ls.compile("y(i) = max(j, B(i,j))", B=B.format)(B=B).to_numpy()
        _same(biggest, b.max(axis=1))  # a max of bools stays bool


def test_einsum_over_bools_is_numpys_or_of_ands():
    """np.einsum over bools reduces by or; both einsum entry points do too, while a sum
    in notation counts."""
    rng = np.random.default_rng(11)
    for shape in ((6, 5), (1, 1), (4, 7)):
        a, b = rng.random(shape) < 0.3, rng.random(shape[::-1]) < 0.4
        A = ls.Tensor.from_numpy(a, "csr")
        expected = np.einsum("ij,jk->ik", a, b)
        _same(ls.einsum("ij,jk->ik", A, b).to_numpy(), expected)
        _same(np.einsum("ij,jk->ik", ls.lazy(A), b).compute().to_numpy(), expected)
        _same(ls.einsum("ij->i", A).to_numpy(), np.einsum("ij->i", a))


def test_a_diagonal_use_of_bools_is_no_sum():
    """A(i,i) is read through a sum the compiler writes (a hidden one): it selects, so
    bool subtraction with it is refused as numpy refuses it, not typed as a count."""
    A = ls.Tensor.from_numpy(np.eye(4, dtype=bool) | (np.arange(16).reshape(4, 4) % 3 == 0),
                             "csr")
    with pytest.raises(TypeError, match="subtraction and negation of bool"):
        ls.compile("Z(j,i) = A(i,j) - A(i,i)", A="csr")(A=A)
    a = A.to_numpy()
    _same(ls.evaluate("Z(i,j) = A(i,j) * A(i,i)", A=A).to_numpy(), a & np.diag(a)[:, None])


def test_products_of_bools_are_numpys_or_of_ands():
    """np.dot of two bool vectors gave np.int64(3), and A @ B and np.tensordot of bool
    tensors counted in int64: numpy's products of bools are logical, an or of ands.
    (np.einsum of two bool CSRs, an or already, raised ScheduleError.)"""
    rng = np.random.default_rng(13)
    a, b = rng.random((5, 6)) < 0.4, rng.random((6, 4)) < 0.4
    v = np.ones(3, bool)
    V = ls.asarray(v)
    for product in (np.dot(V, V), V @ V):  # a 0-d tensor, as pydata/sparse's 0-d array
        assert product.shape == () and product.dtype == bool and product.item() is True
    for fmt in ("csr", "dense"):
        A, B = ls.Tensor.from_numpy(a, fmt), ls.Tensor.from_numpy(b, fmt)
        _same(A @ B, a @ b)
        _same(np.matmul(A, b), a @ b)
        _same(np.dot(A, B), np.dot(a, b))
        _same(A @ b[:, 0], a @ b[:, 0])
        _same(np.tensordot(A, B, axes=1), np.tensordot(a, b, axes=1))
        _same(np.tensordot(A, A, axes=2), np.tensordot(a, a, axes=2))
        _same(np.tensordot(A, v, axes=0), np.tensordot(a, v, axes=0))
        _same(ls.compute(ls.lazy(A) @ B), a @ b)
        _same(np.einsum("ij,jk->ik", A, B), np.einsum("ij,jk->ik", a, b))  # CSR: counted
        counts = b.astype(np.int64)  # a bool by an int counts, as in numpy
        _same(A @ counts, a @ counts)
