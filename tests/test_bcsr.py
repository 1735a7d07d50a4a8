"""BCSR: blocked levels whose coordinates combine into tensor indices (digest 003 §3.2)."""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls

B = np.array([[5, 1, 0, 0, 0, 0], [7, 3, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0],
              [8, 0, 0, 4, 9, 0]], dtype=float)


def test_golden_arrays_2x2():
    A = ls.Tensor.from_numpy(B, format="bcsr")
    pos, crd = A.level_arrays[1]["pos"], A.level_arrays[1]["crd"]
    assert pos.tolist() == [0, 1, 4]
    assert crd.tolist() == [0, 0, 1, 2]
    assert A.values.tolist() == [5, 1, 7, 3, 0, 0, 8, 0, 0, 0, 0, 4, 0, 0, 9, 0]
    np.testing.assert_array_equal(A.to_numpy(), B)


@pytest.mark.parametrize("block", ["bcsr2x2", "bcsr1x3", "bcsr4x2", "bcsr2x6"])
def test_spmv_golden(block):
    A = ls.Tensor.from_numpy(B, format=block)
    y = ls.evaluate("y(i) = A(i,j) * x(j)", A=A, x=np.arange(1, 7.0))
    assert y.to_numpy().tolist() == [7, 13, 0, 69]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("other", ["dense", "hash", "csr"])
def test_kernels_against_numpy(seed, other):
    rng = np.random.default_rng(seed)
    M = rng.random((8, 12))
    M[rng.random(M.shape) > 0.3] = 0
    N = rng.random((8, 12))
    N[rng.random(N.shape) > 0.5] = 0
    A = ls.Tensor.from_numpy(M, format="bcsr2x3")
    C = ls.Tensor.from_numpy(N, format=other)
    D = rng.random((12, 5))
    np.testing.assert_allclose(ls.evaluate("Y(i,k) = A(i,j) * D(j,k)", A=A, D=D).to_numpy(),
                               M @ D)
    for out in ("dense", "hash"):
        np.testing.assert_allclose(
            ls.evaluate("Y(i,j) = A(i,j) * C(i,j)", out_format=out, A=A, C=C).to_numpy(),
            M * N)
        np.testing.assert_allclose(
            ls.evaluate("Y(i,j) = A(i,j) + C(i,j)", out_format=out, A=A, C=C).to_numpy(),
            M + N)
    r = ls.evaluate("r(i) = b(i) - A(i,j) * x(j)", A=A, b=np.ones(8), x=np.ones(12))
    np.testing.assert_allclose(r.to_numpy(), 1 - M.sum(axis=1))


def test_blocked_output_and_bad_shape_are_rejected():
    A = ls.Tensor.from_numpy(B, format="bcsr")
    with pytest.raises(ls.ScheduleError):
        ls.evaluate("Y(i,j) = A(i,j)", out_format="bcsr", A=ls.Tensor.from_numpy(B, "csr"))
    with pytest.raises(ValueError, match="multiple of the block"):
        ls.Tensor.from_numpy(B, format="bcsr3x3")
    with pytest.raises(ls.CorruptTensorError):
        A.level_arrays[1]["crd"] = np.array([0, 0, 1, 7], dtype=np.int32)
        A.validate()
