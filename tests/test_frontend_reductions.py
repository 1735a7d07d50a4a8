"""max, min and prod of the NumPy front end compile a reduction over their monoid
(``max(j, ...)``), as sum does; they were computed first and folded on the host in numpy.
Checked against numpy's dense reductions: every axis form, empty tensors (numpy's
ValueError where the operator has no identity), NaN and inf fills, bools and ints."""

from __future__ import annotations

import math

import numpy as np
import pytest

import llvsparse as ls

AXES = {2: [None, 0, 1, -1, (0, 1)], 3: [None, 0, 1, 2, (0, 2), (1, 2)], 1: [None, 0]}
FORMATS = {2: ["csr", "csc", "coo", "dense"], 3: ["csf", "dense"], 1: ["coo", "dense"]}


def _array(shape, fill, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    values = rng.integers(-4, 5, shape) if np.dtype(dtype).kind == "i" else \
        rng.uniform(-2, 2, shape)
    return np.where(rng.random(shape) < 0.4, values, fill).astype(dtype)


def _same(got, expected) -> None:
    array, expected = np.asarray(got), np.asarray(expected)
    assert array.dtype == expected.dtype, (array.dtype, expected.dtype)
    assert array.shape == expected.shape
    np.testing.assert_allclose(array, expected, rtol=1e-12, atol=0, equal_nan=True)


@pytest.mark.parametrize("fill", [0.0, 1.5, math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("shape", [(6, 5), (3, 4, 5), (7,), (4, 1)])
def test_reductions_match_numpy(shape, fill):
    a = _array(shape, fill, seed=len(shape))
    for fmt in FORMATS[len(shape)]:
        A = ls.Tensor.from_numpy(a, fmt, fill=fill)
        for axis in AXES[len(shape)]:
            with np.errstate(all="ignore"):
                for name in ("max", "min", "prod", "sum"):
                    _same(getattr(A, name)(axis=axis), getattr(a, name)(axis=axis))
                    _same(getattr(np, name)(A, axis=axis), getattr(np, name)(a, axis=axis))
                _same(np.maximum.reduce(A, axis=axis), np.maximum.reduce(a, axis=axis))
                _same(A.max(axis=axis, keepdims=True), a.max(axis=axis, keepdims=True))


@pytest.mark.parametrize("shape", [(0, 4), (3, 0), (0,)])
def test_empty_tensors_reduce_or_raise_as_numpy(shape):
    a = np.zeros(shape)
    A = ls.Tensor.from_numpy(a, "csr" if len(shape) == 2 else "coo")
    for axis in AXES[len(shape)]:
        for name in ("sum", "prod"):
            _same(getattr(A, name)(axis=axis), getattr(a, name)(axis=axis))
        for name in ("max", "min"):
            try:
                expected = getattr(a, name)(axis=axis)
            except ValueError:
                with pytest.raises(ValueError, match="zero-size array"):
                    getattr(A, name)(axis=axis)
            else:
                _same(getattr(A, name)(axis=axis), expected)


def test_bool_and_int_reductions_keep_numpys_dtypes():
    c = _array((6, 5), 0, seed=7, dtype=np.int64)
    C = ls.Tensor.from_numpy(c, "csr")
    m, M = c > 0, C > 0
    for axis in (None, 0, 1):
        for name in ("max", "min", "prod", "sum"):
            _same(getattr(C, name)(axis=axis), getattr(c, name)(axis=axis))
            _same(getattr(M, name)(axis=axis), getattr(m, name)(axis=axis))
    nothing = ls.Tensor.from_numpy(np.zeros((3, 4), bool), "csr")
    _same(nothing.max(axis=1), np.zeros(3, bool))
    _same(nothing.min(axis=0), np.zeros(4, bool))


def test_a_lazy_chain_fuses_its_max_into_one_kernel():
    a = _array((8, 6), 0.0, seed=9)
    A = ls.Tensor.from_numpy(a, "csr")
    expr = (ls.lazy(A) * 2 - 1).max(axis=1)
    assert isinstance(expr, ls.LazyTensor)
    assert str(expr.assignment) == "OUT(i0) = max(i1, T0(i0,i1) * 2 - 1)"
    _same(expr.compute(), (a * 2 - 1).max(axis=1))
    _same(ls.compute(ls.lazy(A).prod(axis=0) + 1), a.prod(axis=0) + 1)
    _same(ls.compute(ls.lazy(A).min()), a.min())


def test_monoid_reductions_over_blocked_levels_are_not_sums():
    """A reduction over an index of BCSR's blocked levels was dropped for the loops'
    ``+=``: ``max(j, A(i,j))`` of a BCSR gave each row's sum. Such a reduction is refused
    as lowered (the kernel converts the operand instead), and the front end converts it."""
    a = _array((6, 6), 0.0, seed=11)
    a[a < 0] = 0.0
    A = ls.Tensor.from_numpy(a, "bcsr2x2")
    for text, expected in [("y(i) = max(j, A(i,j))", a.max(axis=1)),
                           ("y(j) = min(i, A(i,j))", a.min(axis=0)),
                           ("y(i) = prod(j, A(i,j) + 1)", (a + 1).prod(axis=1)),
                           ("y(i) = sum_j(A(i,j))", a.sum(axis=1))]:
        _same(ls.evaluate(text, A=A).to_numpy(), expected)
    with pytest.raises(ls.ScheduleError, match="blocked"):
        ls.Kernel("y(i) = max(j, A(i,j))", {"A": "bcsr2x2"}, convert=False)(A=A)
    _same(A.max(axis=1), a.max(axis=1))
    _same(np.prod(A, axis=0), a.prod(axis=0))


def test_sums_and_products_of_small_integers_accumulate_in_int64():
    """numpy sums and multiplies bools and integers narrower than its default integer in
    int64; an int32 tensor's sum stayed int32 and wrapped (three entries of 2**30 summed
    to -1073741824)."""
    a = np.array([[2**30, 0, 2**30], [2**30, 3, 0], [2**30, 1, 2]], np.int32)
    for fmt in ("csr", "coo", "dense"):
        A = ls.Tensor.from_numpy(a, fmt)
        for axis in (None, 0, 1, (0, 1)):
            for name in ("sum", "prod"):
                _same(getattr(A, name)(axis=axis), getattr(a, name)(axis=axis))
                _same(getattr(np, name)(A, axis=axis), getattr(np, name)(a, axis=axis))
            _same(np.add.reduce(A, axis=axis), np.add.reduce(a, axis=axis))
            _same(A.max(axis=axis), a.max(axis=axis))  # max and min keep int32
        _same(ls.compute(ls.lazy(A).sum(axis=0) * 2), a.sum(axis=0) * 2)
        _same(A.sum(axis=1, keepdims=True), a.sum(axis=1, keepdims=True))
    b = a > 1
    B = ls.Tensor.from_numpy(b, "csr")
    for name in ("sum", "prod"):
        _same(getattr(B, name)(axis=0), getattr(b, name)(axis=0))


@pytest.mark.parametrize("fill", [0.0, 1.5, math.nan])
def test_mean_any_and_all_match_numpy(fill):
    """They raised AttributeError (methods) and numpy's TypeError (np.mean, np.any,
    np.all); any and all read NaN as true, as numpy does."""
    for shape in ((6, 5), (7,)):
        a = _array(shape, fill, seed=13)
        for fmt in FORMATS[len(shape)]:
            A = ls.Tensor.from_numpy(a, fmt, fill=fill)
            for axis in AXES[len(shape)]:
                _same(A.mean(axis=axis), a.mean(axis=axis))
                _same(np.mean(A, axis=axis), np.mean(a, axis=axis))
                _same(A.mean(axis=axis, keepdims=True), a.mean(axis=axis, keepdims=True))
                for name in ("any", "all"):
                    _same(getattr(A, name)(axis=axis), getattr(a, name)(axis=axis))
                    _same(getattr(np, name)(A, axis=axis), getattr(np, name)(a, axis=axis))
            _same(np.logical_or.reduce(A, axis=0), a.any(axis=0))
    c = _array((6, 5), 0, seed=14, dtype=np.int32)
    C = ls.Tensor.from_numpy(c, "csr")
    for matrix, array in ((C, c), (C > 0, c > 0)):
        for axis in (None, 0, 1):
            _same(matrix.mean(axis=axis), array.mean(axis=axis))  # float64, as numpy's
            _same(matrix.all(axis=axis), array.all(axis=axis))
    _same(ls.compute(ls.lazy(C).mean(axis=0) * 2), c.mean(axis=0) * 2)
    _same(ls.compute(ls.lazy(C).any(axis=1)), c.any(axis=1))
