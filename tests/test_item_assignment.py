"""numpy's item assignment into a Tensor (``A[1, 2] = 3``, slices, masks, integer
arrays; tensor_assign.assign_items): each checked against numpy's own assignment into
the dense array, on random and edge inputs, in COO, CSR and CSC, with fill 0 and
another, and the tensor's format, dtype and fill kept."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls

FORMATS = ("coo", "csr", "csc")


def _matrix(seed: int, shape=(5, 6), density=0.35, fill=None, dtype=np.float64):
    rng = np.random.default_rng(seed)
    a = np.where(rng.random(shape) < density, rng.integers(1, 9, shape), 0).astype(dtype)
    return a if fill is None else np.where(a == 0, fill, a)


def _keys_and_values(shape, seed):
    """Keys numpy takes, each with a value to broadcast to the positions it writes."""
    rng = np.random.default_rng(seed)
    mask = rng.random(shape) < 0.4
    return [((1, 2), 3.0), ((-1, -1), 4.5), ((slice(None), 0), np.arange(shape[0])),
            ((slice(None, None, -2), slice(1, 4)), 7.0), (2, np.full(shape[1], 2.0)),
            (mask, 0.0), (mask, 5.0), (([0, 2, 2], [1, 3, 3]), [1.0, 2.0, 6.0]),
            ((None, 0), 9.0), (Ellipsis, 1.0), ((Ellipsis, 1), 0.0),
            ((np.array([True, False, True, False, True]),), 8.0),
            ((slice(1, 3), slice(None)), np.arange(shape[1], dtype=float)),
            ((slice(4, 1), 0), 3.0), (([], []), 1.0)]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill", [None, 2.0, np.nan])
def test_item_assignment_matches_numpy(fmt, fill):
    a = _matrix(0, fill=fill)
    for key, value in _keys_and_values(a.shape, 1):
        tensor = ls.Tensor.from_numpy(a, format=fmt, fill=fill)
        expected = a.copy()
        expected[key] = value
        tensor[key] = value
        assert np.array_equal(tensor.todense(), expected, equal_nan=True), key
        assert tensor.format == ls.Tensor.from_numpy(a, format=fmt, fill=fill).format
        assert tensor.dtype == a.dtype
        assert np.array_equal(tensor.fill_value, 0.0 if fill is None else fill,
                              equal_nan=True)
        tensor.validate()


@pytest.mark.parametrize("fmt", ["coo", "csf", "dense"])
def test_three_axes_and_repeated_positions(fmt):
    a = _matrix(2, shape=(3, 4, 2))
    tensor = ls.Tensor.from_numpy(a, format=fmt)
    expected = a.copy()
    for key, value in [((0, slice(None), 1), np.arange(4.0)), ((..., 0), 5.0),
                       (([0, 0, 1], [1, 1, 2], [0, 0, 1]), [1.0, 2.0, 3.0]),
                       (a > 4, -1.0)]:
        expected[key] = value
        tensor[key] = value
        assert np.array_equal(tensor.todense(), expected), key


def test_values_and_dtypes_as_numpy_casts_them():
    """Integer tensors truncate as numpy's assignment does; bools; sparse values (a
    Tensor, a scipy matrix) are read densely over the positions written."""
    ints = np.arange(12, dtype=np.int32).reshape(3, 4)
    tensor = ls.Tensor.from_numpy(ints, format="csr")
    expected = ints.copy()
    expected[0, 0], expected[1] = 2.7, 9
    tensor[0, 0], tensor[1] = 2.7, 9
    assert tensor.dtype == np.int32 and np.array_equal(tensor.todense(), expected)
    flags = ls.Tensor.from_numpy(np.zeros((3, 3), bool), format="coo")
    flags[1, :] = True
    assert flags.dtype == np.bool_ and flags.todense().sum() == 3
    a = _matrix(3, shape=(4, 4))
    part = sp.random(2, 4, density=0.5, format="csr", random_state=4)
    tensor = ls.Tensor.from_numpy(a, format="csc")
    tensor[1:3, :] = part
    expected = a.copy()
    expected[1:3, :] = part.toarray()
    assert np.array_equal(tensor.todense(), expected)
    tensor[0, :] = ls.Tensor.from_numpy(np.arange(4.0), format="coo")
    expected[0, :] = np.arange(4.0)
    assert np.array_equal(tensor.todense(), expected)


def test_written_fill_values_are_not_stored():
    """As pydata/sparse's DOK: writing the fill removes the entry. A bool tensor is a
    mask as numpy's bool array is."""
    a = _matrix(5)
    tensor = ls.Tensor.from_numpy(a, format="csr")
    tensor[tensor > 4] = 0.0
    assert np.array_equal(tensor.todense(), np.where(a > 4, 0.0, a))
    tensor[a != 0] = 0.0
    assert tensor.nnz == 0 and not tensor.todense().any()
    tensor[2, 3] = 1.5
    assert tensor.nnz == 1


def test_results_and_kernels_after_assignment():
    """A tensor assigned to is read afresh by the operations repeated on it (their fast
    calls and bindings notice its new arrays)."""
    a = _matrix(6)
    tensor = ls.Tensor.from_numpy(a, format="csr")
    x = np.arange(6.0)
    for _ in range(8):
        assert np.allclose(tensor @ x, a @ x) and np.allclose((tensor * 2).todense(), a * 2)
    tensor[0, :] = 1.0
    a[0, :] = 1.0
    for _ in range(3):
        assert np.allclose(tensor @ x, a @ x) and np.allclose((tensor * 2).todense(), a * 2)


def test_bad_keys_and_values_are_refused_as_numpy_refuses_them():
    tensor = ls.Tensor.from_numpy(_matrix(7), format="coo")
    with pytest.raises(IndexError):
        tensor[5, 0] = 1.0
    with pytest.raises(IndexError):
        tensor[0, 0, 0] = 1.0
    with pytest.raises(ValueError):
        tensor[0, :] = np.arange(4.0)  # 4 values for 6 positions
    with pytest.raises(IndexError):
        tensor[np.ones((2, 2), bool)] = 1.0
    view = tensor[1:3, :]
    with pytest.raises(TypeError, match="read-only"):
        view[0, 0] = 1.0


def test_zero_d_and_empty_tensors():
    scalar = ls.asarray(np.float64(2.0))
    scalar[()] = 5.0
    assert float(scalar) == 5.0
    empty = ls.Tensor.from_numpy(np.zeros((0, 3)), format="csr")
    empty[:, 1] = 4.0
    assert empty.shape == (0, 3) and empty.nnz == 0
