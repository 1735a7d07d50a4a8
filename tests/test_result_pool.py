"""Large dense results reuse the memory of collected ones, cleared, and never memory that
an array still views."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
from llvsparse.abi.results import BUFFERS, DEFAULT_LIMIT, MIN_BYTES, RESULTS, ResultPool, with_spare
from llvsparse.calls import binding, kernel_calls

ROWS = 12_000  # C is ROWS x 64 doubles: 6 MB, above MIN_BYTES


@pytest.fixture
def spmm():
    """A kernel, A with empty rows (whose rows of C only a clear sets), and B's maker."""
    RESULTS.set_limit(64 << 20)
    RESULTS.idle.clear()
    A = sp.random(ROWS, 40, density=0.05, format="csr", random_state=3)
    assert (np.diff(A.indptr) == 0).any()
    kernel = ls.compile("C(i,k) = A(i,j) * B(j,k)", A="csr")
    rng = np.random.default_rng(4)
    yield kernel, ls.Tensor.from_scipy(A, format="csr"), A, lambda: rng.random((40, 64))
    RESULTS.set_limit(DEFAULT_LIMIT)


def _address(result: ls.Tensor) -> int:
    return result.values.ctypes.data


@pytest.mark.parametrize("threads", [1, 2])
def test_a_collected_result_is_reused_cleared(spmm, threads, monkeypatch):
    monkeypatch.setattr(kernel_calls, "PARALLEL_MIN_WORK", 100)
    monkeypatch.setattr(binding, "SHARED_CLEAR_BYTES", MIN_BYTES)  # threads clear their rows
    kernel, A, scipy_A, make_B = spmm
    first = kernel(A=A, B=make_B(), threads=threads)
    address = _address(first)
    del first
    B = make_B()
    second = kernel(A=A, B=B, threads=threads)
    assert _address(second) == address
    np.testing.assert_allclose(second.to_numpy(), scipy_A @ B, rtol=1e-13)


def test_live_results_and_their_views_keep_their_memory(spmm):
    kernel, A, scipy_A, make_B = spmm
    B1, B2, B3 = make_B(), make_B(), make_B()
    first = kernel(A=A, B=B1)
    second = kernel(A=A, B=B2)
    assert _address(first) != _address(second)
    view = first.to_numpy()[5:]
    del first
    third = kernel(A=A, B=B3)
    assert _address(third) != view.ctypes.data - 5 * view.strides[0]
    np.testing.assert_allclose(view, (scipy_A @ B1)[5:], rtol=1e-13)
    np.testing.assert_allclose(second.to_numpy(), scipy_A @ B2, rtol=1e-13)
    np.testing.assert_allclose(third.to_numpy(), scipy_A @ B3, rtol=1e-13)


def test_a_limit_of_zero_keeps_nothing_and_small_results_are_not_kept(spmm):
    kernel, A, _, make_B = spmm
    ls.set_result_pool_bytes(0)
    result = kernel(A=A, B=make_B())
    del result
    assert RESULTS.idle == []
    RESULTS.set_limit(64 << 20)
    small = ls.compile("y(i) = A(i,j) * x(j)", A="csr")(A=A, x=np.ones(40))
    assert small.values.nbytes < MIN_BYTES
    del small
    assert RESULTS.idle == []
    with pytest.raises(ValueError, match="0 or more"):
        ls.set_result_pool_bytes(-1)


def test_idle_memory_beyond_the_limit_is_dropped_oldest_first(spmm):
    kernel, A, _, make_B = spmm
    nbytes = ROWS * 64 * 8
    RESULTS.set_limit(2 * nbytes)
    results = [kernel(A=A, B=make_B()) for _ in range(3)]
    addresses = [_address(r) for r in results]
    while results:
        results.pop(0)  # collected in call order
    assert [m.ctypes.data for m in RESULTS.idle] == addresses[1:]


def _nan_out(kernel, **operands) -> np.ndarray:
    shape = tuple(kernel.bind(check=False, **operands).extents)
    return np.full(shape, np.nan)


@pytest.mark.parametrize("threads", [1, 2])
def test_scattering_kernels_zero_their_rows_so_out_is_not_cleared_first(threads, monkeypatch):
    """SpMM visits every row of C and zeroes it before adding into it, so an ``out=``
    full of NaN (never cleared by the caller) comes back exact, empty rows included."""
    monkeypatch.setattr(kernel_calls, "PARALLEL_MIN_WORK", 100)
    A = sp.random(300, 40, density=0.05, format="csr", random_state=6)
    B = np.random.default_rng(6).random((40, 16))
    kernel = ls.compile("C(i,k) = A(i,j) * B(j,k)", A="csr")
    operands = {"A": ls.Tensor.from_scipy(A, format="csr"), "B": B}
    out = _nan_out(kernel, **operands)
    result = kernel.bind(check=False, threads=threads, **operands)(out=out)
    assert kernel._default().initializes_output
    np.testing.assert_allclose(result.to_numpy(), A @ B, rtol=1e-13)


@pytest.mark.parametrize("threads", [1, 2])
def test_row_sums_stored_everywhere_need_no_clear(threads, monkeypatch):
    """CSR SpMV stores a sum (0.0 for an empty row) at every row, so ``out=`` full of
    NaN is not cleared by the caller and comes back exact."""
    monkeypatch.setattr(kernel_calls, "PARALLEL_MIN_WORK", 100)
    A = sp.random(300, 40, density=0.03, format="csr", random_state=11)
    assert (np.diff(A.indptr) == 0).any()
    x = np.random.default_rng(11).random(40)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    operands = {"A": ls.Tensor.from_scipy(A, format="csr"), "x": x}
    result = kernel.bind(check=False, threads=threads, **operands)(out=_nan_out(kernel, **operands))
    assert kernel._default().initializes_output
    np.testing.assert_array_equal(result.to_numpy(), A @ x)


@pytest.mark.parametrize(("expr", "fmt"), [
    ("C(i,k) = A(i,j) * B(j,k)", "dcsr"),  # rows without entries are never visited
    ("y(i) = A(i,j) * x(j)", "dcsr"),
    ("y(i) = A(i,j) * x(j)", "coo"),  # summed in place, not scattered
])
def test_kernels_that_skip_rows_leave_the_clear_to_the_caller(expr, fmt):
    A = sp.random(300, 40, density=0.01, format="csr", random_state=7)
    second = np.random.default_rng(7).random((40, 16) if "B" in expr else 40)
    kernel = ls.compile(expr, A=fmt)
    name = "B" if "B" in expr else "x"
    operands = {"A": ls.Tensor.from_scipy(A, format=fmt), name: second}
    result = kernel(out=_nan_out(kernel, **operands), **operands)
    assert not kernel._default().initializes_output
    np.testing.assert_allclose(result.to_numpy(), A @ second, rtol=1e-13)


@pytest.mark.parametrize("expr", ["C(i,j) = sum_k(A(i,k) * B(k,j) * 0)",
                                  "C(i,j) = sum_k((A(i,k) + B(k,j)) * (2 - 2))"])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_a_product_with_a_zero_literal_sets_every_entry_of_out(expr, fmt):
    """A scatter whose expression is zero everywhere: once its body was folded away and
    cleared no row, and claiming it did left np.empty garbage in the result. Literals
    are now computed with (IEEE), so every entry is written, NaN-filled out= included."""
    A = sp.random(30, 20, density=0.3, format="csr", random_state=8)
    B = np.random.default_rng(8).random((20, 16))
    kernel = ls.compile(expr, A=fmt, B="dense")
    operands = {"A": ls.Tensor.from_scipy(A, format=fmt), "B": B}
    np.testing.assert_array_equal(kernel(**operands).to_numpy(), np.zeros((30, 16)))
    result = kernel(out=_nan_out(kernel, **operands), **operands)
    np.testing.assert_array_equal(result.to_numpy(), np.zeros((30, 16)))


def test_sparse_results_recycle_their_arrays_when_a_binding_repeats():
    """A binding reserves what its last call assembled (plus a little), so a collected
    result's large arrays fit the next call's exactly and are reused; the values are
    recomputed (the operand's values change in place between calls)."""
    BUFFERS.idle.clear()
    a = sp.random(2000, 2000, density=0.2, format="csr", random_state=9)
    b = sp.random(2000, 2000, density=0.2, format="csr", random_state=10)
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", A="csr", B="csr", C="csr")
    A = ls.Tensor.from_scipy(a, format="csr")
    call = kernel.bind(A=A, B=ls.Tensor.from_scipy(b, format="csr"), threads=1)
    entries = (a + b).nnz
    assert entries * 8 >= MIN_BYTES
    for _ in range(2):  # the first call reserved nnz(A) + nnz(B), the second with_spare
        call()  # collected at once
    result = call()
    address, buffer = result.values.ctypes.data, result.values.base
    assert len(result.values) == entries and buffer.nbytes == with_spare(entries) * 8
    del result, buffer
    A.values[:] *= 2
    again = call()
    assert again.values.ctypes.data == address
    expected = (2 * a + b).tocsr()
    expected.sort_indices()
    np.testing.assert_allclose(again.values, expected.data, rtol=1e-14)
    np.testing.assert_array_equal(again.level_arrays[1]["crd"], expected.indices)


def test_small_results_that_kernels_overwrite_are_not_zeroed(monkeypatch):
    """A small result of a kernel that sets every entry comes from ``np.empty``: memory
    full of NaN comes back exact; one that skips rows still gets zeros."""
    from types import SimpleNamespace

    from llvsparse.abi import results

    def nan_empty(count, dtype):
        return np.full(count, np.nan, dtype)

    monkeypatch.setattr(results, "np", SimpleNamespace(
        empty=nan_empty, zeros=np.zeros, asarray=np.asarray, uint8=np.uint8))
    A = sp.random(300, 40, density=0.03, format="csr", random_state=12)
    x = np.random.default_rng(12).random(40)
    for fmt in ("csr", "dcsr"):
        kernel = ls.compile("y(i) = A(i,j) * x(j)", A=fmt)
        y = kernel(A=ls.Tensor.from_scipy(A, format=fmt), x=x).to_numpy()
        np.testing.assert_array_equal(y, A @ x)


def test_a_sample_located_in_a_hash_leaves_the_clear_to_the_caller():
    """SDDMM into a dense C with S hashed: j runs over B's rows and S(i,j) is looked up,
    so where it is missing nothing is stored, and ``out=`` must be cleared first."""
    S = sp.random(30, 20, density=0.2, format="csr", random_state=13)
    rng = np.random.default_rng(13)
    A, B = rng.random((30, 4)), rng.random((20, 4))
    kernel = ls.compile("C(i,j) = S(i,j) * A(i,k) * B(j,k)", S="hash", A="dense",
                        B="dense")
    result = kernel(S=ls.Tensor.from_scipy(S, format="hash"), A=A, B=B,
                    out=np.full((30, 20), np.nan))
    assert not kernel._default().initializes_output
    np.testing.assert_allclose(result.to_numpy(), S.multiply(A @ B.T).toarray(), rtol=1e-13)


def test_giving_back_never_waits_for_the_pool_lock():
    """A result collected while its own thread holds the pool's lock (garbage collection
    run by an allocation inside ``take``) is queued, not waited for, and becomes idle
    when the lock's holder settles the pool."""
    pool = ResultPool(limit=1 << 30)
    memory = np.zeros(MIN_BYTES, np.uint8)
    with pool.lock:
        pool.give_back(memory)  # would deadlock if it took the lock
        assert pool.idle == []
    assert pool.take(MIN_BYTES) is memory
