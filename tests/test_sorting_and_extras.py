"""np.sort (ls.sort's descending=), argmax/argmin, take, pad and vecdot on tensors
(issue 33), computed on the stored entries, checked against numpy on several formats,
fill values (NaN included) and dtypes. Before, numpy raised "no implementation found"."""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls

ARRAYS = [
    np.array([[0, 0, 1, 5, 3, 0], [1, 0, 4, 0, 3, 0], [0, 1, 0, 1, 1, 0]], np.int64),
    np.array([[[2, 0], [0, 5]], [[1, 0], [4, 0]], [[0, 1], [0, -1]]], np.float64),
    np.array([[np.nan, 0, 2, -1], [0, 0, np.nan, 0], [3, 3, 3, 3]]),
    np.array([[3, 0, 0], [0, 200, 0]], np.uint8),
]


def _cases():
    for k, arr in enumerate(ARRAYS):
        for fill in [-1, 0, 3, np.nan]:
            if (np.isnan(fill) and arr.dtype.kind != "f") or (fill < 0 and arr.dtype.kind == "u"):
                continue
            for fmt in ["coo", "csr"] if arr.ndim == 2 else ["coo"]:
                yield pytest.param(arr, fill, fmt, id=f"{k}-{fill}-{fmt}")


@pytest.mark.parametrize("arr, fill, fmt", list(_cases()))
def test_sort_and_extremes_match_numpy(arr, fill, fmt):
    S = ls.Tensor.from_numpy(arr, format=fmt, fill=fill)
    for axis in range(-1, arr.ndim):
        np.testing.assert_array_equal(np.asarray(np.sort(S, axis=axis)), np.sort(arr, axis=axis))
        descending = np.flip(np.sort(arr, axis=axis), axis) if arr.dtype.kind == "u" \
            else -np.sort(-arr, axis=axis)
        np.testing.assert_array_equal(np.asarray(ls.sort(S, axis=axis, descending=True)),
                                      descending)
    for axis in [None, *range(-1, arr.ndim)]:
        for keepdims in [False, True]:
            for name in ["argmax", "argmin"]:
                got = getattr(np, name)(S, axis=axis, keepdims=keepdims)
                expected = getattr(np, name)(arr, axis=axis, keepdims=keepdims)
                assert isinstance(got, ls.Tensor)  # a 0-d one too, as pydata/sparse's
                np.testing.assert_array_equal(np.asarray(got), expected)


def test_argmax_of_empty_line_is_refused():
    with pytest.raises(ValueError, match="empty sequence"):
        np.argmax(ls.Tensor.from_numpy(np.zeros((3, 0))), axis=1)


@pytest.mark.parametrize("fill", [0, 7])
def test_take_and_pad_match_numpy(fill):
    arr = np.arange(24).reshape(2, 3, 4) % 5 * 7
    S = ls.Tensor.from_numpy(arr, format="coo", fill=fill)
    for indices, axis in [([1], 0), ([2, 1], 1), ([1, 2, 3], 2), ([2, 3], -1), ([5, 3, 7, 8], None)]:
        np.testing.assert_array_equal(np.asarray(np.take(S, np.array(indices), axis=axis)),
                                      np.take(arr, indices, axis))
    for width in [2, (2, 1), ((1, 2), (0, 0), (3, 0))]:
        padded = np.pad(S, width, constant_values=fill)
        assert padded.fill_value == fill
        np.testing.assert_array_equal(np.asarray(padded),
                                      np.pad(arr, width, constant_values=fill))
    with pytest.raises(ValueError, match="must equal the fill value"):
        np.pad(S, 1, constant_values=fill + 1)


@pytest.mark.parametrize("shape1, shape2, axis", [
    ((2, 3, 4), (3, 4), -2), ((3, 4), (2, 3, 4), -1), ((3, 1, 4), (3, 2, 4), 2),
    ((3, 4, 1), (3, 4, 2), 0), ((1, 4), (3, 4), 1)])
@pytest.mark.parametrize("complex_values", [False, True])
def test_vecdot_matches_numpy(shape1, shape2, axis, complex_values):
    rng = np.random.default_rng(5)
    a = rng.random(shape1) * (rng.random(shape1) < 0.4)
    b = rng.random(shape2) * (rng.random(shape2) < 0.4)
    if complex_values:
        a, b = a * (1 + 2j), b * (3 - 1j)
    got = np.vecdot(ls.Tensor.from_numpy(a, format="coo"), ls.Tensor.from_numpy(b, format="coo"),
                    axis=axis)
    np.testing.assert_allclose(np.asarray(got), np.vecdot(a, b, axis=axis))


def _sparse(shape, seed):
    x = np.random.default_rng(seed).random(shape)
    x[x < 0.5] = 0
    return x


@pytest.mark.parametrize("a_ndim, b_ndim", [(1, 1), (1, 3), (2, 2), (3, 1), (2, 3)])
def test_kron_outer_match_numpy(a_ndim, b_ndim):
    a, b = _sparse((2, 3, 4)[:a_ndim], 1), _sparse((5, 6, 7)[:b_ndim], 2)
    A, B = ls.Tensor.from_numpy(a, format="coo"), ls.Tensor.from_numpy(b, format="coo")
    for got in [np.kron(A, B), np.kron(A, b), np.kron(a, B)]:
        np.testing.assert_allclose(np.asarray(got), np.kron(a, b))
    np.testing.assert_allclose(np.asarray(np.outer(A, B)), np.outer(a, b))
    np.testing.assert_allclose(np.asarray(np.multiply.outer(A, B)), np.multiply.outer(a, b))
    np.testing.assert_array_equal(np.asarray(np.less.outer(A, B)), np.less.outer(a, b))
    with pytest.raises(ValueError, match="fill value 0"):
        np.kron(ls.Tensor.from_numpy(a, format="coo", fill=1.0), B)


@pytest.mark.parametrize("shape, k, fmt", [
    ((3, 4), 0, "coo"), ((3, 4), 0, "csr"), ((3, 4, 5), 1, "coo"), ((4, 2), -1, "csc"),
    ((4, 4), 1000, "coo"), ((2, 4), -2, "csr")])
def test_triangles_and_flip_match_numpy(shape, k, fmt):
    x = _sparse(shape, 3)
    X = ls.Tensor.from_numpy(x, format=fmt)
    np.testing.assert_array_equal(np.asarray(np.triu(X, k)), np.triu(x, k))
    np.testing.assert_array_equal(np.asarray(np.tril(X, k)), np.tril(x, k))
    for axis in [None, 0, -1, (0, 1)]:
        np.testing.assert_array_equal(np.asarray(np.flip(X, axis=axis)), np.flip(x, axis=axis))


@pytest.mark.parametrize("fill", [0.0, 2.25])
def test_round_and_in_place_ufuncs(fill):
    x = _sparse((3, 4), 4) * 10
    x[x == 0] = fill
    X = ls.Tensor.from_numpy(x, format="coo", fill=fill)
    np.testing.assert_allclose(np.asarray(X.round(1)), x.round(1))
    assert np.round(X).fill_value == np.round(fill)
    result = np.sin(X, out=X)  # written into X, as numpy's in-place ufunc
    assert result is X
    np.testing.assert_allclose(np.asarray(X), np.sin(x))
    X.round(decimals=2, out=X)
    np.testing.assert_allclose(np.asarray(X), np.sin(x).round(2))
    integers = ls.Tensor.from_numpy(np.arange(4), format="coo")
    with pytest.raises(TypeError, match="same_kind"):
        np.sqrt(integers, out=integers)


@pytest.mark.parametrize("ndim", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 2])
def test_diff_repeat_and_matrix_transpose_match_numpy(ndim, n):
    rng = np.random.default_rng(ndim * 10 + n)
    x = rng.integers(0, 4, size=(3, 4, 2)[:ndim])
    X = ls.Tensor.from_numpy(x, format="coo", fill=1)
    edge = rng.integers(0, 4, size=x.shape)
    for axis in range(-ndim, ndim):
        np.testing.assert_array_equal(np.asarray(np.diff(X, n=n, axis=axis)),
                                      np.diff(x, n=n, axis=axis))
        got = np.diff(X, n=n, axis=axis, prepend=ls.Tensor.from_numpy(edge, format="coo", fill=1),
                      append=edge)
        np.testing.assert_array_equal(np.asarray(got), np.diff(x, n=n, axis=axis,
                                                               prepend=edge, append=edge))
        np.testing.assert_array_equal(np.asarray(np.repeat(X, n + 1, axis=axis)),
                                      np.repeat(x, n + 1, axis=axis))
    np.testing.assert_array_equal(np.asarray(np.repeat(X, 2)), np.repeat(x, 2))
    with pytest.raises(ValueError, match="repeats must be an integer"):
        np.repeat(X, [1] * x.shape[0], axis=0)
    if ndim >= 2:
        np.testing.assert_array_equal(np.asarray(X.mT), np.matrix_transpose(x))


@pytest.mark.parametrize("fill", [-1, 0, 1])
def test_unique_counts_count_the_fill(fill):
    for arr in [np.array([[-3, -2, 0, 0], [-1, 2, 0, -2]]), np.zeros((3, 3), int),
                np.arange(1, 10)]:
        X = ls.Tensor.from_numpy(arr, format="coo", fill=fill)
        values, counts = np.unique_counts(X)
        expected_values, expected_counts = np.unique(arr, return_counts=True)
        np.testing.assert_array_equal(values, expected_values)
        np.testing.assert_array_equal(counts, expected_counts)
        np.testing.assert_array_equal(np.unique_values(X), expected_values)


def test_unique_keeps_nans_distinct():
    """numpy's unique_values and unique_counts keep every NaN (a stored one, or the
    NaN fill of each entry not stored) as its own value."""
    stored = np.array([np.nan, 1.0, np.nan, 0.0])
    X = ls.Tensor.from_numpy(stored, format="coo")
    np.testing.assert_array_equal(np.unique_values(X), np.unique_values(stored))
    filled = ls.Tensor.from_coo([[0, 2]], [1.0, 2.0], (4,), fill=np.nan)
    dense = np.array([1.0, np.nan, 2.0, np.nan])
    np.testing.assert_array_equal(np.unique_values(filled), np.unique_values(dense))
    values, counts = np.unique_counts(filled)
    expected = np.unique_counts(dense)
    np.testing.assert_array_equal(values, expected.values)
    np.testing.assert_array_equal(counts, expected.counts)
