"""CPU threads that cut rows: ``fuse(i,j,f); pos(f,fp,A(i,j)); split(fp,c,t,N);
parallelize(c, cpu_thread, atomics)`` gives each thread windows of A's stored entries,
wherever they fall, so one heavy row is shared (ir/loops/entry_split.py). Checked against
numpy on skewed rows, empty rows at window edges, every dtype atomic adds take, and
with ``out=`` arrays that hold garbage; refused by name where it cannot apply."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.ir.loops.entry_split import ATOMIC_TAG, ENTRY_SPLIT_TAG, ENTRY_WINDOW_TAG
from llvsparse.ir.loops.nodes import loops_of
from llvsparse.ir.loops.notes import Forms
from llvsparse.ir.schedule.resolved import Chunks

import llvsparse as ls
from llvsparse.calls.scheduling import windowed_chunks

SPMV = "y(i) = A(i,j) * x(j)"


def shared_rows(size: int | str, access: str = "A(i,j)") -> str:
    cut = f"split(fp, c, t, {size})" if isinstance(size, int) else f"divide(fp, c, t, {size[1:]})"
    return f"fuse(i,j,f); pos(f,fp,{access}); {cut}; parallelize(c,cpu_thread,atomics)"


def skewed(n: int, seed: int, dtype=np.float64) -> sp.csr_matrix:
    """Random rows, two of them nearly full (a power-law matrix's few heavy rows), and
    runs of empty rows, the first and last rows among them."""
    rng = np.random.default_rng(seed)
    dense = (rng.random((n, n)) < 0.01) * rng.integers(-5, 6, (n, n))
    dense[n // 3, :] = rng.integers(1, 4, n)
    dense[n - 2, : n - 3] = rng.integers(-3, 4, n - 3)
    dense[:2] = 0
    dense[n // 2: n // 2 + 5] = 0
    dense[-1] = 0
    return sp.csr_matrix(dense.astype(dtype))


@pytest.mark.parametrize("size", [1, 7, 256, 100_000, "/3"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threads_sharing_rows_match_numpy(size, threads) -> None:
    matrix = skewed(300, seed=threads)
    x = np.random.default_rng(5).random(300)
    kernel = ls.compile(SPMV, A="csr", schedule=shared_rows(size))
    A = ls.Tensor.from_scipy(matrix)
    expected = matrix @ x
    np.testing.assert_allclose(kernel(A=A, x=x, threads=threads).to_numpy(), expected,
                               rtol=1e-12, atol=1e-12)
    bound = kernel.bind(A=A, x=x, threads=threads)
    for _ in range(3):
        np.testing.assert_allclose(bound().to_numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_atomic_adds_in_every_dtype_they_take(dtype) -> None:
    matrix = skewed(200, seed=7, dtype=dtype)
    x = np.arange(200).astype(dtype) % 7 - 3
    kernel = ls.compile(SPMV, A="csr", schedule=shared_rows(5))
    result = kernel(A=ls.Tensor.from_scipy(matrix), x=x, threads=2).to_numpy()
    assert result.dtype == dtype
    if np.issubdtype(dtype, np.integer):
        np.testing.assert_array_equal(result, matrix @ x)
    else:
        np.testing.assert_allclose(result, matrix @ x, rtol=1e-4)


def test_an_out_array_of_garbage_is_zeroed_before_threads_add_into_it() -> None:
    matrix = skewed(400, seed=3)
    x = np.random.default_rng(1).random(400)
    kernel = ls.compile(SPMV, A="csr", schedule=shared_rows(16))
    bound = kernel.bind(A=ls.Tensor.from_scipy(matrix), x=x, threads=2)
    out = np.full(400, np.nan)
    for _ in range(2):
        bound(out=out)
        np.testing.assert_allclose(out, matrix @ x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("matrix", [sp.csr_matrix((50, 40)),  # no entries at all
                                    sp.csr_matrix(np.ones((1, 40))),  # one row
                                    sp.csr_matrix(np.eye(50, 40))])
def test_edge_shapes(matrix) -> None:
    x = np.linspace(-1, 1, matrix.shape[1])
    kernel = ls.compile(SPMV, A="csr", schedule=shared_rows(3))
    result = kernel(A=ls.Tensor.from_scipy(matrix), x=x, threads=2).to_numpy()
    np.testing.assert_allclose(result, matrix @ x, rtol=1e-12, atol=1e-15)


def test_the_loop_ir_shows_the_split_and_the_window() -> None:
    kernel = ls.compile(SPMV, A="csr", schedule=shared_rows(64))
    A = ls.Tensor.from_scipy(skewed(100, seed=1))
    kernel(A=A, x=np.ones(100))
    rows, window = loops_of(kernel.program(kernel.last).root)
    assert {ENTRY_SPLIT_TAG, ATOMIC_TAG} <= set(rows.tags) and rows.forms == Forms()
    assert ENTRY_WINDOW_TAG in window.tags and window.forms == Forms()
    assert rows.other is None and window.other is None and not rows.jam
    text = kernel.loops
    assert "{thread rows, entry split, atomic adds}" in text and "{entry window}" in text
    assert "cut anywhere" in kernel.schedule and "added atomically" in kernel.schedule


def test_windows_end_at_multiples_of_the_size_and_cover_every_entry() -> None:
    matrix = skewed(500, seed=2)
    tensor = ls.Tensor.from_scipy(matrix)
    split = windowed_chunks(Chunks("entries", 10, "A", within=True), 2, tensor)
    assert len(split.chunks) <= 2 * 8  # grouped: a few windows a thread
    starts = [lo for lo, _ in split.windows]
    assert all(start % 10 == 0 for start in starts[1:])
    assert split.windows[0][0] == 0 and split.windows[-1][1] == matrix.nnz
    assert all(a[1] == b[0] for a, b in zip(split.windows, split.windows[1:]))
    for (first, end), (lo, hi) in zip(split.chunks, split.windows):
        # each window's rows: exactly those holding one of its positions
        owners = np.searchsorted(matrix.indptr, np.arange(lo, hi), side="right") - 1
        assert (first, end) == (owners.min(), owners.max() + 1)


@pytest.mark.parametrize("statement, formats, dtype, reason", [
    ("y(i) = A(i,j,k) * x(k)", {"A": ls.Format(["dense", "compressed", "compressed"])},
     "float64",
     "not one loop over the stored positions"),
    (SPMV, {"A": "dcsr"}, "float64", "does not run over the coordinates of a full level"),
    (SPMV, {"A": "csr"}, "int16", "atomic adds do not take"),
    ("y(i) = A(i,j) * B(i,j)", {"A": "csr", "B": "csr"}, "float64", "merges operands"),
])
def test_refusals_name_why(statement, formats, dtype, reason) -> None:
    access = "A(i,j,k)" if "A(i,j,k)" in statement else "A(i,j)"
    kernel = ls.compile(statement, **formats, schedule=shared_rows(8, access))
    rng = np.random.default_rng(0)
    operands = {}
    for name, fmt in formats.items():
        shape = (30,) * (3 if "A(i,j,k)" in statement else 2)
        dense = (rng.random(shape) < 0.2) * rng.integers(1, 9, shape)
        operands[name] = ls.Tensor.from_numpy(dense.astype(dtype), format=fmt)
    if "x(" in statement:
        operands["x"] = np.ones(30, dtype=dtype)
    with pytest.raises(ls.ScheduleError, match=reason):
        kernel(**operands, threads=2)


def one_heavy_row(dtype=np.float64) -> sp.csr_matrix:
    """Enough entries for threads (api.PARALLEL_MIN_WORK), most of them in one row."""
    rng = np.random.default_rng(4)
    n = 600_000
    rows = np.concatenate([np.full(n, 7), rng.integers(0, n, 40_000)])
    cols = np.concatenate([np.arange(n), rng.integers(0, n, 40_000)])
    values = rng.integers(-9, 10, len(rows)).astype(dtype)
    return sp.csr_matrix((values, (rows, cols)), shape=(n, n))


@pytest.mark.parametrize("dtype, fastmath, windows", [
    (np.float64, True, True),
    (np.int64, False, True),  # integer sums are exact in any order
    (np.float64, False, False),  # a cut row's float sum would be reassociated
])
def test_auto_cuts_a_row_heavier_than_a_threads_share(dtype, fastmath, windows) -> None:
    matrix = one_heavy_row(dtype)
    x = (np.arange(matrix.shape[1]) % 5 - 2).astype(dtype)
    kernel = ls.compile(SPMV, A="csr", fastmath=fastmath)
    bound = kernel.bind(A=ls.Tensor.from_scipy(matrix), x=x, threads=2)
    assert bool(bound.plan.windows) == windows
    assert bound.auto.split == ("windows" if windows else "entries")
    explained = str(bound.auto)
    assert "one row holds 600" in explained
    assert ("fuse(i, j" in explained) if windows else ("fastmath=True" in explained)
    np.testing.assert_array_equal(bound().to_numpy(), matrix @ x)


def test_auto_keeps_whole_rows_where_no_entry_split_fits() -> None:
    matrix = one_heavy_row()
    dense = np.random.default_rng(0).random((matrix.shape[1], 2))
    kernel = ls.compile("C(i,k) = A(i,j) * B(j,k)", A="csr", fastmath=True)
    bound = kernel.bind(A=ls.Tensor.from_scipy(matrix), B=dense, threads=2)
    assert bound.auto.split == "entries" and not bound.plan.windows
    assert "no entry split fits" in str(bound.auto)
    np.testing.assert_allclose(bound().to_numpy(), matrix @ dense, rtol=1e-12)
