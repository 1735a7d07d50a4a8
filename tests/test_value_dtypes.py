"""Value dtypes beyond float64/float32/int64/int32/bool (issue 33): int8, int16,
uint8-uint64 computed in their own dtype (unsigned compared, converted and bounded as
unsigned), float16 computed in float32, each result in numpy's dtype. Before, each was
refused by Tensor ("value dtype must be one of ...")."""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls

FORMATS = ["coo", "csr", "csc"]
INT_DTYPES = ["int8", "int16", "uint8", "uint16", "uint32", "uint64"]


def _random(dtype: str, seed: int, shape=(6, 5)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    if info is None:
        values = rng.normal(scale=50.0, size=shape)
    else:  # the whole range, extremes included: wrapping and unsigned order show
        values = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
        values.flat[:2] = [info.min, info.max]
    values[rng.random(shape) < 0.5] = 0
    return values.astype(dtype)


def _same(got, expected) -> None:
    array = np.asarray(got)
    assert array.dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(array, expected)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_integer_operators_match_numpy(dtype, fmt):
    a, b = _random(dtype, 1), _random(dtype, 2)
    A, B = ls.Tensor.from_numpy(a, format=fmt), ls.Tensor.from_numpy(b, format="coo")
    with np.errstate(over="ignore"):
        _same(A + B, a + b)  # wraps as numpy's (uint8 + uint8 is uint8)
        _same(A - B, a - b)
        _same(A * B, a * b)
        _same(-A, -a)
    _same(A < B, a < b)  # unsigned compare: 200 > 100 in uint8, not -56 < 100
    _same(np.maximum(A, B), np.maximum(a, b))
    _same(np.minimum(A, B), np.minimum(a, b))
    _same(A.astype("float64") * 0.5, a * 0.5)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_reductions_match_numpy(dtype):
    a = _random(dtype, 3)
    A = ls.Tensor.from_numpy(a, format="csr")
    _same(A.sum(), a.sum())  # accumulated in numpy's platform (u)int
    _same(A.sum(axis=0), a.sum(axis=0))
    _same(A.max(axis=1), a.max(axis=1))
    _same(A.min(), a.min())


def test_integer_fill_values():
    a = np.array([[3, 7, 7], [7, 250, 7]], np.uint8)
    A = ls.Tensor.from_numpy(a, format="coo", fill=7)
    assert A.fill_value == 7
    _same(A + A, a + a)
    _same(A.sum(axis=1), a.sum(axis=1))
    with pytest.raises(ValueError, match="out of its range"):
        ls.Tensor.from_numpy(a, format="coo", fill=-1)


def test_literals_out_of_range_are_refused():
    A = ls.Tensor.from_numpy(np.array([1, 0, 2], np.uint8), format="coo")
    _same(A + 3, np.array([1, 0, 2], np.uint8) + 3)
    with pytest.raises(OverflowError):
        A + 300


@pytest.mark.parametrize("fmt", FORMATS)
def test_float16_is_computed_in_float32(fmt):
    a, b = _random("float16", 4), _random("float16", 5)
    A, B = ls.Tensor.from_numpy(a, format=fmt), ls.Tensor.from_numpy(b, format="csr")
    for got, expected in [(A + B, a + b), (A * B, a * b), (A - B, a - b)]:
        assert np.asarray(got).dtype == np.float16
        np.testing.assert_allclose(np.asarray(got, np.float32), expected, rtol=1e-3)
    total = A.sum(axis=0)
    assert np.asarray(total).dtype == a.sum(axis=0).dtype
    np.testing.assert_allclose(np.asarray(total, np.float32), a.sum(axis=0), rtol=2e-3)


def test_mixed_dtypes_promote_as_numpy():
    a, b = _random("int8", 6), _random("uint8", 7)
    A, B = ls.Tensor.from_numpy(a, format="csr"), ls.Tensor.from_numpy(b, format="csr")
    _same(A + B, a + b)  # int16, numpy's promotion
    c = _random("uint64", 8)
    C = ls.Tensor.from_numpy(c, format="coo")
    np.testing.assert_allclose(np.asarray(A * C), a * c)  # float64, as numpy's
    assert np.asarray(A * C).dtype == (a * c).dtype
