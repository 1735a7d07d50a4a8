"""Complex tensors (issue 33): stored with complex fill values, computed by exact routes
over the real kernels (pointwise functions on the stored entries and the fill, products
as real and imaginary parts, sums by parts), each checked against numpy. Before, a
complex tensor was refused by Tensor."""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls

FORMATS = ["coo", "csr", "csc"]


def _complex(shape, seed, dtype="complex128", density=0.4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.normal(size=shape) + 1j * rng.normal(size=shape)
    values[rng.random(shape) > density] = 0
    return values.astype(dtype)


def _close(got, expected) -> None:
    array = np.asarray(got)
    assert array.dtype == np.asarray(expected).dtype
    assert array.shape == np.shape(expected)
    np.testing.assert_allclose(array, expected, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_pointwise_operations_match_numpy(dtype, fmt):
    a, b = _complex((5, 6), 1, dtype), _complex((5, 6), 2, dtype)
    A, B = ls.Tensor.from_numpy(a, format=fmt), ls.Tensor.from_numpy(b, format="coo")
    _close(A + B, a + b)
    _close(A * B, a * b)
    _close(A - 2.5, a - 2.5)
    _close(A * (1 - 2j), a * (1 - 2j))
    _close(-A, -a)
    _close(abs(A), abs(a))
    _close(np.exp(A), np.exp(a))
    _close(np.conj(A), np.conj(a))
    _close(A == B, a == b)
    _close(A.real, a.real)
    _close(np.imag(A), a.imag)
    _close(A.real.astype(dtype) + B, (a.real + b).astype(dtype))


@pytest.mark.parametrize("fmt", FORMATS)
def test_products_split_into_real_kernels(fmt):
    a, b = _complex((5, 6), 3), _complex((6, 4), 4)
    A, B = ls.Tensor.from_numpy(a, format=fmt), ls.Tensor.from_numpy(b, format="csr")
    R = ls.Tensor.from_numpy(a.real.copy(), format=fmt)
    _close(A @ B, a @ b)
    _close(R @ B, a.real @ b)  # one complex operand: two real products
    _close(np.dot(A, B), np.dot(a, b))
    _close(np.tensordot(A, B, 1), np.tensordot(a, b, 1))
    _close(np.einsum("ij,jk->ik", A, B), np.einsum("ij,jk->ik", a, b))
    _close(np.einsum("ij,jk,ik->i", A, B, A @ B), np.einsum("ij,jk,ik->i", a, b, a @ b))
    x = _complex(6, 5, density=1.0)
    _close(A @ x, a @ x)
    _close(np.vecdot(A, A, axis=1), np.vecdot(a, a, axis=1))


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_reductions_match_numpy(axis):
    a = _complex((4, 5), 6)
    A = ls.Tensor.from_numpy(a, format="csr")
    _close(A.sum(axis=axis), a.sum(axis=axis))
    _close(A.mean(axis=axis), a.mean(axis=axis))
    _close(A.prod(axis=axis), a.prod(axis=axis))
    _close(np.any(A, axis=axis), np.any(a, axis=axis))
    with pytest.raises(TypeError, match="max of complex values is not supported"):
        A.max(axis=axis)


@pytest.mark.parametrize("fill", [1 + 1j, complex(np.nan, 0), complex(0, np.nan)])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_complex_fills_and_nan_reductions(fill, axis):
    x = np.array([[1 + 2j, complex(np.nan, 0), complex(0, np.nan), complex(np.nan, np.nan)],
                  [fill, 1 + 1j, 2 - 1j, fill]])
    X = ls.Tensor.from_numpy(x, format="coo", fill=fill)
    assert len(X.values) < x.size  # the fill is not stored
    np.testing.assert_array_equal(np.asarray(X), x)
    _close(np.nansum(X, axis=axis), np.nansum(x, axis=axis))
    _close(np.nanprod(X, axis=axis), np.nanprod(x, axis=axis))
    _close(X.sum(axis=axis), x.sum(axis=axis))
    _close(X * 2, x * 2)


def test_real_fill_on_complex_and_complex_fill_on_real():
    with pytest.raises(ValueError, match="cannot have fill value"):
        ls.Tensor.from_numpy(np.array([1.0, 0.0]), format="coo", fill=1j)
    X = ls.Tensor.from_numpy(np.array([1j, 2.0, 2.0]), format="coo", fill=2.0)
    _close(X + 1, np.array([1 + 1j, 3.0, 3.0]))


@pytest.mark.parametrize("fmt, fill", [(f, 0) for f in ("csf", "dense", "dcsr", "csr", "csc")]
                         + [(f, 1 + 1j) for f in ("csf", "dense", "dcsr", "coo")])
def test_conversions_keep_complex_values(fmt, fill):
    """Formats a copy kernel would pack take the host sort (no kernel holds complex)."""
    x = _complex((4, 5), 7)
    x[x == 0] = fill
    X = ls.Tensor.from_numpy(x, format="coo", fill=fill)
    converted = X.asformat(fmt)
    assert converted.fill_value == fill
    np.testing.assert_array_equal(converted.to_numpy(), x)
    v = _complex(5, 8)
    _close(ls.Tensor.from_numpy(v, format="coo") @ ls.Tensor.from_numpy(v, format="csf"), v @ v)
