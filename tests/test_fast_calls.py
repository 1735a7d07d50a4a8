"""The operator path's fast lane (llvsparse/frontend/fast_calls.py): repeated ``A @ x``, ``A * 2.0``,
``A + B`` on operands seen before call the bound kernel directly. Each checked against
numpy on every call (the first calls take the plan's path, the later ones the fast
lane), on random and edge inputs, in COO, CSR and CSC and with a fill other than 0; and
every change the fast lane must notice (new values, corrupted index arrays, other
shapes, dtypes and memory layouts of an ndarray) noticed."""

from __future__ import annotations

import numpy as np
import pytest
from llvsparse.formats.interpret import CorruptTensorError

import llvsparse as ls
from llvsparse.frontend import eager_plans, fast_calls
from llvsparse.kernel import api

FORMATS = ("coo", "csr", "csc")
CALLS = 6  # enough for the probe to settle and the fast lane to serve several


def _pair(seed: int, fmt: str, shape=(7, 5), density=0.3, fill=None, dtype=np.float64):
    """A random matrix with an explicit zero, as (dense array, Tensor)."""
    rng = np.random.default_rng(seed)
    a = np.where(rng.random(shape) < density, rng.standard_normal(shape) * 4, 0.0)
    if a.size:
        a.flat[rng.integers(0, a.size)] = 0.0
    if fill is not None:
        a = np.where(a == 0, fill, a)
    a = a.astype(dtype)
    return a, ls.Tensor.from_numpy(a, format=fmt, fill=fill)


def _dense(value) -> np.ndarray:
    return np.asarray(value.todense() if isinstance(value, ls.Tensor) else value)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill", [None, 2.5])
def test_repeated_operations_match_numpy_every_call(fmt, fill):
    eager_plans.forget()
    (a, A), (b, B) = _pair(1, fmt, fill=fill), _pair(2, fmt, fill=fill)
    x = np.linspace(-1, 1, 5)
    X = np.arange(10.0).reshape(5, 2)
    for _ in range(CALLS):
        for got, want in [(A @ x, a @ x), (A @ X, a @ X), (A * 2.0, a * 2.0),
                          (2.0 - A, 2.0 - a), (A + B, a + b), (A - B, a - b),
                          (A * B, a * b), (A / 4, a / 4), (A + A, a + a)]:
            assert _dense(got).dtype == want.dtype
            assert np.allclose(_dense(got), want), got
    assert fast_calls._FAST  # the fast lane served some of them


def test_products_with_an_ndarray_are_ndarrays():
    """As pydata/sparse and scipy.sparse give them; products of tensors stay tensors."""
    (a, A), (b, B) = _pair(3, "csr"), _pair(4, "csc", shape=(5, 4))
    x, X = np.linspace(0, 1, 5), np.ones((4, 7))
    for _ in range(3):
        for got, want in [(A @ x, a @ x), (x @ B, x @ b), (B @ X[:, :3], b @ X[:, :3]),
                          (np.dot(A, x), a @ x), (np.matmul(A, x), a @ x),
                          (np.tensordot(A, x, 1), a @ x), (A.dot(x), a @ x),
                          (np.dot(np.ones((3, 5)), B), np.ones((3, 5)) @ b)]:
            assert type(got) is np.ndarray and np.allclose(got, want)
        assert isinstance(A @ B, ls.Tensor) and np.allclose(_dense(A @ B), a @ b)
        assert isinstance(np.dot(A, B), ls.Tensor)
    stacked = np.random.default_rng(0).random((3, 5, 2))
    got = ls.Tensor.from_numpy(a, format="csr") @ stacked  # broadcast stacks
    assert type(got) is np.ndarray and np.allclose(got, a @ stacked)


def test_tensordot_return_type():
    a, A = _pair(5, "coo", shape=(4, 6))
    b = np.random.default_rng(5).random((6, 3))
    want = a @ b
    for return_type in ("coo", "csr", "COO"):
        got = ls.tensordot(A, b, 1, return_type=return_type)
        assert isinstance(got, ls.Tensor) and np.allclose(_dense(got), want)
    assert type(ls.tensordot(A, b, 1, return_type=np.ndarray)) is np.ndarray
    assert type(ls.tensordot(A, A.T, 1, return_type=np.ndarray)) is np.ndarray
    assert isinstance(ls.tensordot(A, A.T, 1), ls.Tensor)
    with pytest.raises(TypeError, match="return_type must be"):
        ls.tensordot(A, b, 1, return_type=list)


def test_a_new_vector_every_call_and_other_layouts():
    """A solver's new ``x`` each iteration is pointed to where it lies; one of another
    dtype, shape or layout (strided, read-only, Fortran) takes the plan's path."""
    a, A = _pair(6, "csr", shape=(9, 8), density=0.4)
    rng = np.random.default_rng(6)
    for _ in range(CALLS):
        x = rng.standard_normal(8)
        assert np.allclose(A @ x, a @ x)
    strided = rng.standard_normal(16)[::2]
    readonly = rng.standard_normal(8)
    readonly.flags.writeable = False
    X = np.asfortranarray(rng.standard_normal((8, 3)))
    for x in [strided, readonly, rng.standard_normal(8).astype(np.float32),
              rng.integers(-3, 3, 8), X, np.ascontiguousarray(X), readonly]:
        for _ in range(3):
            got = A @ x
            assert type(got) is np.ndarray and got.dtype == (a @ x).dtype
            assert np.allclose(got, a @ x)
    with pytest.raises(ValueError):
        A @ np.ones(7)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (1, 1), (6, 6)])
def test_edge_shapes_and_empty_tensors(shape):
    for density in (0.0, 1.0):
        a, A = _pair(7, "csr", shape=shape, density=density)
        x = np.arange(shape[1], dtype=np.float64)
        for _ in range(CALLS):
            assert np.allclose(A @ x, a @ x) and (A @ x).shape == (shape[0],)
            assert np.allclose(_dense(A * 3.0), a * 3.0)
            assert np.allclose(_dense(A + A), a + a)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32])
def test_other_dtypes(dtype):
    a, A = _pair(8, "csr", dtype=dtype)
    x = np.arange(5).astype(dtype)
    for _ in range(CALLS):
        got = A @ x
        assert got.dtype == (a @ x).dtype and np.allclose(got, a @ x)
        assert np.array_equal(_dense(A * 2), a * 2) and (A * 2).dtype == (a * 2).dtype


def test_the_fast_lane_skips_the_kernel_call_path(monkeypatch):
    """After the first calls, ``A @ x`` and ``A + B`` no longer go through
    ``Kernel.__call__`` (its reuse check was most of the fixed cost)."""
    eager_plans.forget()
    (a, A), (b, B) = _pair(9, "csr"), _pair(10, "csr")
    x = np.ones(5)
    for _ in range(50):  # until the probes of the kernels' forms have settled
        A @ x, A + B
        if len(fast_calls._FAST) == 2:
            break
    calls = []
    original = api.Kernel.__call__
    monkeypatch.setattr(api.Kernel, "__call__",
                        lambda self, **kw: calls.append(1) or original(self, **kw))
    for _ in range(3):
        assert np.allclose(A @ x, a @ x) and np.allclose(_dense(A + B), a + b)
    assert not calls


def test_changes_to_a_tensor_are_noticed():
    """New values, corrupted or replaced index arrays and changed extents: the fast lane
    gives way to the checked path (the new values, or a clear error; never a stale
    result or a read out of bounds)."""
    a, A = _pair(11, "csr", shape=(6, 6), density=0.5)
    x = np.arange(6.0)
    for _ in range(CALLS):
        assert np.allclose(A @ x, a @ x)
    A.values = A.values * 3  # a new values array
    for _ in range(2):
        assert np.allclose(A @ x, 3 * a @ x)
        assert np.allclose(_dense(A * 2.0), 6 * a)
    A.values[...] = 1.0  # written in place: the kernel reads them where they lie
    assert np.allclose(A @ x, (a != 0) @ x)
    crd = A.level_arrays[1]["crd"].copy()
    crd[0] = 60  # out of bounds, in a writeable array
    A.level_arrays[1]["crd"] = crd
    with pytest.raises(CorruptTensorError):
        A @ x
    with pytest.raises(CorruptTensorError):
        A * 2.0


def test_threads_and_kept_entries():
    """Changing the thread count is noticed; the table of fast calls stays bounded."""
    a, A = _pair(13, "csr")
    x = np.ones(5)
    before = ls.get_num_threads()
    for threads in (1, 2, 1):
        ls.set_num_threads(threads)
        try:
            for _ in range(3):
                assert np.allclose(A @ x, a @ x)
        finally:
            ls.set_num_threads(before)
    for k in range(fast_calls.FAST_KEPT + 8):
        A * float(k + 1)
    assert len(fast_calls._FAST) <= fast_calls.FAST_KEPT


def test_new_vectors_on_a_threaded_binding_are_not_bound_again(monkeypatch):
    """A binding whose calls run on threads (no fast call) serves a new ndarray of its
    shape and dtype through a sibling, not a new binding (10 ms at 10^6 entries), and
    gives numpy's values; one of another shape or layout is bound afresh."""
    from llvsparse.calls import kernel_calls

    monkeypatch.setattr(kernel_calls, "PARALLEL_MIN_WORK", 0)
    a, A = _pair(14, "csr", shape=(300, 40), density=0.2)
    rng = np.random.default_rng(14)
    before = ls.get_num_threads()
    ls.set_num_threads(2)
    try:
        for _ in range(CALLS):
            x = rng.standard_normal(40)
            assert np.allclose(A @ x, a @ x)
        binds = []
        original = kernel_calls.KernelCalls.bind
        monkeypatch.setattr(kernel_calls.KernelCalls, "bind",
                            lambda self, **kw: binds.append(1) or original(self, **kw))
        for _ in range(4):
            x = rng.standard_normal(40)
            assert np.allclose(A @ x, a @ x)
        assert not binds
        strided = rng.standard_normal(80)[::2]
        assert np.allclose(A @ strided, a @ strided)
        assert np.allclose(A @ x.astype(np.float32), a @ x.astype(np.float32), rtol=1e-5)
    finally:
        ls.set_num_threads(before)


def _chains(A, B, C, a, b, c):
    """Eager chains and their numpy values: each operation reads the previous one's
    result, a new tensor every call."""
    return [((A + B) * 2 - C, (a + b) * 2 - c), (A * B + C, a * b + c),
            (((A + B) * 2 - A * 3).sum(axis=1), ((a + b) * 2 - a * 3).sum(axis=1)),
            ((A - B).max(axis=0), (a - b).max(axis=0)), ((A + B) @ np.ones(5), (a + b).sum(1)),
            ((A * B + C) / 4 + (A + B), (a * b + c) / 4 + (a + b))]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill", [None, 1.5])
def test_chains_match_numpy_every_call(fmt, fill):
    """A chain's intermediate results take the fast lane too (by the fast call that made
    them): every call's result against numpy, on random inputs and an empty one."""
    eager_plans.forget()
    (a, A), (b, B), (c, C) = (_pair(s, fmt, fill=fill) for s in (21, 22, 23))
    empty, E = _pair(24, fmt, density=0.0, fill=fill)
    laned = 0
    for _ in range(3 * CALLS):
        for got, want in _chains(A, B, C, a, b, c) + _chains(E, B, E, empty, b, empty):
            assert np.allclose(_dense(got), want), got
            laned += "_lane" in getattr(got, "__dict__", {})
    assert laned  # results of fast calls served some


def test_chain_steps_skip_the_kernel_call_path(monkeypatch):
    """Once settled, every step of ``(A + B) * 2 - C`` and of the sum chain is a fast
    call: no ``Kernel.__call__``, no plan."""
    eager_plans.forget()
    (a, A), (b, B), (c, C) = (_pair(s, "csr") for s in (25, 26, 27))
    for _ in range(60):  # until the probes of the kernels' forms have settled
        (A + B) * 2 - C, ((A + B) * 2 - A * 3).sum(axis=1)
    calls = []
    original = api.Kernel.__call__
    monkeypatch.setattr(api.Kernel, "__call__",
                        lambda self, **kw: calls.append(1) or original(self, **kw))
    monkeypatch.setattr(eager_plans, "_ran", lambda *args: calls.append(2))
    for _ in range(3):
        assert np.allclose(_dense((A + B) * 2 - C), (a + b) * 2 - c)
        assert np.allclose(_dense(((A + B) * 2 - A * 3).sum(axis=1)),
                           ((a + b) * 2 - a * 3).sum(axis=1))
    assert not calls


def test_changes_to_a_chain_result_are_noticed():
    """A fast call's result changed after it was made (its values written or replaced,
    an index array replaced by a corrupt writeable one) is read as it is now, or
    refused; never through the arrays it held before."""
    eager_plans.forget()
    (a, A), (b, B) = _pair(28, "csr", shape=(6, 6), density=0.5), \
        _pair(29, "csr", shape=(6, 6), density=0.5)
    for _ in range(3 * CALLS):
        R = A + B
        assert np.allclose(_dense(R - B), a)
    assert "_lane" in R.__dict__
    R.values[...] = 1.0  # in place: read where it lies
    assert np.allclose(_dense(R - B), (a + b != 0) - b)
    R = A + B
    R.values = R.values * 3  # a new array: the lane no longer holds
    assert np.allclose(_dense(R - B), 3 * (a + b) - b)
    R = A + B
    crd = R.level_arrays[1]["crd"].copy()
    crd[0] = 60
    R.level_arrays[1]["crd"] = crd
    with pytest.raises(CorruptTensorError):
        R - B
    with pytest.raises(CorruptTensorError):
        R * 2.0
