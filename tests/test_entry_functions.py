"""np.clip, np.interp and np.diagonal on tensors (llvsparse/frontend/entry_functions.py), against
numpy on random and edge inputs in COO, CSR and CSC, with fills other than 0."""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls

FORMATS = ("coo", "csr", "csc")


def _pair(seed: int, fmt: str, shape=(6, 5), density=0.4, fill=None):
    rng = np.random.default_rng(seed)
    a = np.where(rng.random(shape) < density, rng.standard_normal(shape) * 3, 0.0)
    if fill is not None:
        a = np.where(a == 0, fill, a)
    return a, ls.Tensor.from_numpy(a, format=fmt, fill=fill)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill", [None, 2.0, np.nan])
def test_clip_matches_numpy(fmt, fill):
    a, A = _pair(1, fmt, fill=fill)
    bounds = np.linspace(-1, 1, 5)
    for low, high in [(-1, 1), (0.5, None), (None, -0.5), (bounds, 2.0), (None, None)]:
        got = np.clip(A, low, high)
        want = np.clip(a, low, high)
        assert got.dtype == want.dtype
        assert np.allclose(got.todense(), want, equal_nan=True), (low, high)
    assert np.allclose(A.clip(min=-1, max=1).todense(), a.clip(-1, 1), equal_nan=True)
    i = np.array([[0, 0, 1, 0, 2], [5, 0, 0, 3, 0]])
    I = ls.Tensor.from_numpy(i, format=fmt)
    assert np.clip(I, 1, 3).dtype == np.clip(i, 1, 3).dtype  # int stays int
    assert np.clip(I, 1, 3.0).dtype == np.clip(i, 1, 3.0).dtype  # a float bound: float64
    assert np.array_equal(np.clip(I, 1, 3).todense(), np.clip(i, 1, 3))


def test_clip_into_out_keeps_out_and_its_dtype():
    i = np.array([[0, 0, 1, 0, 2], [5, 0, 0, 3, 0]])
    I = ls.Tensor.from_numpy(i, format="coo")
    out = ls.Tensor.from_numpy(np.zeros_like(i), format="coo")
    assert I.clip(min=1, max=3, out=out) is out
    assert np.array_equal(out.todense(), i.clip(1, 3)) and out.dtype == i.dtype
    with pytest.raises(TypeError, match="same_kind"):
        I.clip(min=0.5, out=out)
    with pytest.raises(ValueError, match="shape"):
        I.clip(min=1, out=ls.Tensor.from_numpy(np.zeros((3, 3), int), format="coo"))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill", [None, 0.5])
def test_interp_maps_entries_and_fill(fmt, fill):
    a, A = _pair(2, fmt, fill=fill)
    xp, fp = np.array([-2.0, 0.0, 2.0]), np.array([1.0, 4.0, -3.0])
    got = np.interp(A, xp, fp)
    assert np.allclose(got.todense(), np.interp(a, xp, fp))
    assert got.fill_value == np.interp(A.fill_value, xp, fp)
    complex_fp = fp + 1j
    assert np.allclose(np.interp(A, xp, complex_fp).todense(), np.interp(a, xp, complex_fp))
    assert np.allclose(np.interp(a, ls.Tensor.from_numpy(xp, format="coo"), fp),
                       np.interp(a, xp, fp))  # an array x: numpy's result


@pytest.mark.parametrize("fmt", FORMATS)
def test_diagonal_matches_numpy(fmt):
    for shape in [(4, 4), (2, 5), (5, 2), (1, 1), (0, 3)]:
        a, A = _pair(3, fmt, shape)
        for offset in range(-6, 7):
            got = np.diagonal(A, offset)
            assert got.shape == np.diagonal(a, offset).shape
            assert np.array_equal(got.todense(), np.diagonal(a, offset)), (shape, offset)
    a, A = _pair(4, fmt, fill=1.5)
    assert A.diagonal(-1).fill_value == 1.5
    assert np.array_equal(A.diagonal(-1).todense(), a.diagonal(-1))


def test_diagonal_of_more_axes_and_refusals():
    rng = np.random.default_rng(5)
    a = np.where(rng.random((3, 4, 5)) < 0.5, rng.random((3, 4, 5)), 0.0)
    A = ls.Tensor.from_numpy(a, format="coo")
    for axes in [(0, 1), (1, 2), (0, 2), (-2, -1), (2, 0)]:
        for offset in (-2, 0, 1):
            assert np.array_equal(np.diagonal(A, offset, *axes).todense(),
                                  np.diagonal(a, offset, *axes)), (axes, offset)
    with pytest.raises(ValueError, match="at least 2-d"):
        np.diagonal(ls.Tensor.from_numpy(np.arange(3.0), format="coo"))
    with pytest.raises(ValueError, match="cannot be the same"):
        np.diagonal(A, 0, 1, -2)
