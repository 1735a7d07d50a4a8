"""The lean call path: bound kernels, reused bindings, and their safety."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls


def _operands(seed: int = 0):
    matrix = sp.random(40, 30, density=0.2, format="csr", random_state=seed)
    x = np.random.default_rng(seed).random(30)
    return matrix, ls.Tensor.from_scipy(matrix, format="csr"), ls.Tensor.from_numpy(x), x


def test_bound_call_matches_reference_and_allocates_fresh_outputs():
    matrix, A, xt, x = _operands()
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    bound = kernel.bind(A=A, x=xt)
    first, second = bound(), bound()
    np.testing.assert_allclose(first.to_numpy(), matrix @ x)
    assert first.values is not second.values
    np.testing.assert_array_equal(first.to_numpy(), second.to_numpy())


def test_reused_binding_notices_replaced_arrays():
    matrix, A, xt, x = _operands(1)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    kernel(check=False, A=A, x=xt)
    A.values = A.values * 2
    np.testing.assert_allclose(kernel(check=False, A=A, x=xt).to_numpy(), 2 * (matrix @ x))
    A.level_arrays[1]["crd"] = np.full_like(A.level_arrays[1]["crd"], 40)
    with pytest.raises(ls.CorruptTensorError, match="outside"):
        kernel(check=True, A=A, x=xt)
    A.level_arrays[1]["crd"] = A.level_arrays[1]["crd"].astype(np.int64)
    with pytest.raises(ls.CorruptTensorError, match="int32"):
        kernel(check=False, A=A, x=xt)  # the O(1) checks still see a replaced array


def test_concurrent_calls_on_one_binding():
    matrix, A, xt, x = _operands(2)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    bound = kernel.bind(A=A, x=xt, check=False)
    expected = matrix @ x
    failures: list[str] = []

    def work() -> None:
        for _ in range(200):
            if not np.allclose(bound().to_numpy(), expected):
                failures.append("wrong")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
