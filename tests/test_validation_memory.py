"""Validation is remembered for tensors llvsparse packed (their index arrays are made
read-only), and redone whenever those arrays could have changed."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
from llvsparse.tensors import tensor_validation

MATRIX = sp.random(40, 30, density=0.2, format="csr", random_state=3)
X = np.random.default_rng(3).random(30)


@pytest.fixture
def full_checks(monkeypatch) -> list[int]:
    """Counts the full O(nnz) validations (walks with check=True) of sparse tensors."""
    calls: list[int] = []
    walk = tensor_validation.walk_levels

    def counting(tensor, check=True):
        if check and any(tensor.level_arrays):
            calls.append(1)
        return walk(tensor, check=check)

    monkeypatch.setattr(tensor_validation, "walk_levels", counting)
    return calls


@pytest.fixture(scope="module")
def spmv() -> ls.Kernel:
    return ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")


def _spmv_result(kernel: ls.Kernel, A: ls.Tensor) -> np.ndarray:
    return kernel(A=A, x=X).to_numpy()


@pytest.mark.parametrize("fmt", ["csr", "coo", "dcsr", "ell", "dia", "csc", "hash"])
def test_packed_tensor_valid_by_construction(fmt, full_checks):
    """Packed from range-checked, sorted, deduplicated coordinates: never walked, and
    still equal to what a walk accepts."""
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A=fmt, x="dense")
    A = ls.Tensor.from_scipy(MATRIX, format=fmt)
    for _ in range(3):
        np.testing.assert_allclose(kernel(A=A, x=X).to_numpy(), MATRIX @ X, rtol=1e-12)
    assert len(full_checks) == 0
    tensor_validation.walk_levels(A, check=True)  # what was skipped would have passed


def test_packed_index_arrays_are_read_only():
    A = ls.Tensor.from_scipy(MATRIX, format="csr")
    crd = A.level_arrays[1]["crd"]
    with pytest.raises(ValueError, match="read-only"):
        crd[0] = 5
    with pytest.raises(ValueError, match="read-only"):
        crd[:3][0] = 5
    A.values[0] = 7.0  # values stay writeable: a new pattern needs new index arrays
    assert A.values[0] == 7.0


def test_replaced_array_is_validated_again(spmv, full_checks):
    A = ls.Tensor.from_scipy(MATRIX, format="csr")
    _spmv_result(spmv, A)
    corrupt = A.level_arrays[1]["crd"].copy()
    corrupt[0] = 10_000
    A.level_arrays[1]["crd"] = corrupt
    with pytest.raises(ls.CorruptTensorError):
        _spmv_result(spmv, A)
    assert len(full_checks) == 1


def test_made_writeable_again_is_validated_again(full_checks):
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="coo", x="dense")
    A = ls.Tensor.from_scipy(MATRIX, format="coo")
    kernel(A=A, x=X)
    crd = A.level_arrays[1]["crd"]
    crd.flags.writeable = True  # it owns its memory, so numpy allows this
    crd[0] = 10_000
    with pytest.raises(ls.CorruptTensorError):
        kernel(A=A, x=X)
    assert len(full_checks) == 1


def test_kernel_made_arrays_cannot_be_made_writeable():
    # Converted by a kernel (CSR, CSC and COO are converted by scipy, into arrays numpy
    # owns: made writeable again, they are validated again, as above).
    A = ls.Tensor.from_scipy(MATRIX, format="dcsr")
    with pytest.raises(ValueError):
        A.level_arrays[1]["pos"].flags.writeable = True


def test_changed_extent_is_validated_again(spmv, full_checks):
    A = ls.Tensor.from_scipy(MATRIX, format="csr")
    _spmv_result(spmv, A)
    A.shape, A.level_extents[1] = (40, 5), 5  # consistent, so only the walk sees the columns
    with pytest.raises(ls.CorruptTensorError, match="outside"):
        A.validate()
    assert len(full_checks) == 1


def test_user_arrays_are_checked_every_call_and_left_writeable(spmv, full_checks):
    packed = ls.Tensor.from_scipy(MATRIX, format="csr")
    pos = np.array(packed.level_arrays[1]["pos"])
    crd = np.array(packed.level_arrays[1]["crd"])
    A = ls.Tensor(packed.shape, packed.format, packed.dtype, packed.index_dtype,
                  packed.level_extents, [{}, {"pos": pos, "crd": crd}], [{}, {}],
                  packed.values.copy())
    for _ in range(2):
        np.testing.assert_allclose(_spmv_result(spmv, A), MATRIX @ X, rtol=1e-12)
    assert len(full_checks) == 2
    assert crd.flags.writeable
    crd[0] = 10_000
    with pytest.raises(ls.CorruptTensorError):
        _spmv_result(spmv, A)


def test_kernel_outputs_are_sealed(full_checks):
    add = ls.compile("C(i,j) = A(i,j) + B(i,j)", "csr", A="csr", B="csr")
    A = ls.Tensor.from_scipy(MATRIX, format="csr")
    C = add(A=A, B=A)
    for arrays in C.level_arrays:  # every index array, and every array it views
        for array in arrays.values():
            while isinstance(array, np.ndarray):
                assert not array.flags.writeable
                array = array.base
    assert C.values.flags.writeable
    checks = len(full_checks)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    for _ in range(2):
        np.testing.assert_allclose(kernel(A=C, x=X).to_numpy(), 2 * (MATRIX @ X),
                                   rtol=1e-12)
    # Assembled through shipped level formats, an output is valid as adopted: no walk.
    assert len(full_checks) == checks


@pytest.mark.parametrize("check", [True, False])
def test_numpy_operand_reused_in_place(spmv, check):
    """The same numpy vector again reuses the binding (no copy was made), so changes to
    its contents are seen; a vector that needed a copy is wrapped anew each call."""
    A = ls.Tensor.from_scipy(MATRIX, format="csr")
    x = X.copy()
    first = spmv(check=check, A=A, x=x).to_numpy()
    x *= 2.0
    np.testing.assert_allclose(spmv(check=check, A=A, x=x).to_numpy(), 2 * first,
                               rtol=1e-12)
    ints = np.arange(30)  # int64: converted to float64, a copy
    np.testing.assert_allclose(spmv(check=check, A=A, x=ints).to_numpy(), MATRIX @ ints,
                               rtol=1e-12)
    ints[:] = 1
    np.testing.assert_allclose(spmv(check=check, A=A, x=ints).to_numpy(), MATRIX @ ints,
                               rtol=1e-12)


def test_numpy_view_operand_reused_in_place(spmv):
    """A contiguous view of a bigger array (a row of a matrix) is used without a copy too."""
    A = ls.Tensor.from_scipy(MATRIX, format="csr")
    rows = np.tile(X, (3, 1))
    x = rows[1]
    first = spmv(A=A, x=x).to_numpy()
    rows[1] *= 3.0
    np.testing.assert_allclose(spmv(A=A, x=x).to_numpy(), 3 * first, rtol=1e-12)
    assert spmv._last_bound.wrapped == {"x": (x.shape, x.dtype)}


def test_numpy_operand_reshaped_in_place_is_not_reused(spmv):
    A = ls.Tensor.from_scipy(MATRIX, format="csr")
    x = X.copy()
    spmv(A=A, x=x)
    x.shape = (3, 10)
    with pytest.raises(ValueError):
        spmv(A=A, x=x)


def test_dense_operand_too_short_is_rejected_after_a_good_call(spmv):
    A = ls.Tensor.from_scipy(MATRIX, format="csr")
    x = ls.Tensor.from_numpy(X)
    spmv(A=A, x=x)
    x.values = x.values[:10].copy()
    with pytest.raises(ls.CorruptTensorError):
        spmv(A=A, x=x)
