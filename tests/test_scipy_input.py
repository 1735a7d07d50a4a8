"""``Tensor.from_scipy`` checks a scipy matrix's arrays (what scipy's check_format with
full_check does) and refuses corrupt ones rather than silently dropping entries; it
takes every scipy sparse kind, matrices and arrays, and numpy arrays."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls

DENSE = sp.random(12, 10, density=0.3, format="csr", random_state=5).toarray()
DENSE[3, 3] = 2.5  # a diagonal entry so that dia has offset 0 stored
KINDS = ["csr", "csc", "coo", "bsr", "dia", "lil", "dok"]


def _spmv(A: ls.Tensor) -> np.ndarray:
    x = np.arange(1.0, A.shape[1] + 1)
    return ls.evaluate("y(i) = A(i,j) * x(j)", A=A, x=x).to_numpy()


@pytest.mark.parametrize("array", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_every_scipy_kind_is_taken(kind, array):
    matrix = (sp.csr_array if array else sp.csr_matrix)(DENSE).asformat(kind)
    if kind == "bsr":
        matrix = sp.bsr_array(DENSE, blocksize=(2, 2)) if array else \
            sp.bsr_matrix(DENSE, blocksize=(2, 2))
    A = ls.Tensor.from_scipy(matrix)
    np.testing.assert_array_equal(A.to_numpy(), DENSE)
    np.testing.assert_allclose(_spmv(A), DENSE @ np.arange(1.0, 11))


def test_numpy_array_is_packed_and_other_types_are_refused():
    A = ls.Tensor.from_scipy(DENSE)
    assert A.format == ls.named_format("csr", 2)
    np.testing.assert_array_equal(A.to_numpy(), DENSE)
    with pytest.raises(TypeError, match="not list"):
        ls.Tensor.from_scipy(DENSE.tolist())


def test_one_dimensional_sparse_arrays():
    vector = np.array([0.0, 2.0, 0.0, 3.5])
    for kind in ("coo", "csr", "dok"):
        A = ls.Tensor.from_scipy(sp.coo_array(vector).asformat(kind), format="sparse")
        np.testing.assert_array_equal(A.to_numpy(), vector)


def test_shifted_indptr_entry_is_refused_not_dropped():
    A = sp.random(20, 20, density=0.3, format="csr", random_state=0)
    A.indptr[10] = A.indptr[11] + 5  # the reproduction
    with pytest.raises(ls.CorruptTensorError, match="indptr decreases"):
        ls.Tensor.from_scipy(A)


def _compressed(kind: str):
    return sp.csr_matrix(DENSE).asformat(kind)


@pytest.mark.parametrize("kind", ["csr", "csc", "bsr"])
@pytest.mark.parametrize("corrupt, match", [
    (lambda m: m.indptr.__setitem__(0, 1), "starts at 1"),
    (lambda m: m.indptr.__setitem__(-1, m.indptr[-1] + 1), "past the"),
    (lambda m: m.indptr.__setitem__(2, m.indptr[3] + 1), "decreases"),
    (lambda m: setattr(m, "indptr", m.indptr[:-1]), "the shape needs"),
    (lambda m: m.indices.__setitem__(0, -1), "holds -1, outside"),
    (lambda m: m.indices.__setitem__(-1, 99), "holds 99, outside"),
    (lambda m: setattr(m, "data", m.data[:-1]), "data has"),
    (lambda m: setattr(m, "indices", m.indices.astype(float)), "1-d integer array"),
])
def test_corrupt_compressed_arrays_are_refused(kind, corrupt, match):
    matrix = sp.bsr_matrix(DENSE, blocksize=(2, 2)) if kind == "bsr" else _compressed(kind)
    corrupt(matrix)
    with pytest.raises(ls.CorruptTensorError, match=match):
        ls.Tensor.from_scipy(matrix)


@pytest.mark.parametrize("corrupt, match", [
    (lambda m: m.row.__setitem__(0, 12), "holds 12, outside"),
    (lambda m: m.col.__setitem__(0, -3), "holds -3, outside"),
    (lambda m: setattr(m, "data", m.data[:-1]), "coordinates of mode 0 but"),
])
def test_corrupt_coo_arrays_are_refused(corrupt, match):
    for make in (sp.coo_matrix, sp.coo_array):
        matrix = make(DENSE)
        corrupt(matrix)
        with pytest.raises(ls.CorruptTensorError, match=match):
            ls.Tensor.from_scipy(matrix)


@pytest.mark.parametrize("corrupt, match", [
    (lambda m: m.offsets.__setitem__(1, m.offsets[0]), "repeat a diagonal"),
    (lambda m: setattr(m, "data", m.data[:-1]), "diagonals but offsets"),
    (lambda m: setattr(m, "data", m.data[0]), "must be 2-d"),
])
def test_corrupt_dia_arrays_are_refused(corrupt, match):
    matrix = sp.dia_matrix(DENSE)
    corrupt(matrix)
    with pytest.raises(ls.CorruptTensorError, match=match):
        ls.Tensor.from_scipy(matrix)


def test_dia_with_data_narrower_and_wider_than_the_matrix():
    data = np.arange(1.0, 25.0).reshape(3, 8)
    for width in (5, 8):  # 5 columns short of the 6-column matrix's, 8 past them
        matrix = sp.dia_matrix((data[:, :width], [-2, 0, 3]), shape=(7, 6))
        np.testing.assert_array_equal(ls.Tensor.from_scipy(matrix).to_numpy(),
                                      matrix.toarray())

