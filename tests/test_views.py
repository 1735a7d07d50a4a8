"""Slicing without copies: views against numpy slicing, in every format, as kernel
operands; one compiled kernel for every window of a shape class; refusals."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from llvsparse.formats import registry
from plugin_text import without_subsection

import llvsparse as ls
from llvsparse.frontend.tensor import TensorView
from llvsparse.kernel import api

MATRIX_FORMATS = ["csr", "csc", "coo", "dcsr", "dense", "hash", "dia", "ell"]
TENSOR3_FORMATS = ["csf", "coo", "dense", "hash"]


def rand(shape, seed, density=0.3):
    rng = np.random.default_rng(seed)
    return (rng.integers(1, 10, size=shape) * (rng.random(shape) < density)).astype(float)


def random_key(rng, extent: int):
    """A slice like numpy users write: starts and stops may be negative, beyond the
    extent, absent, or make the window empty; steps 1 to 3."""
    start, stop = (int(v) if rng.random() < 0.8 else None
                   for v in rng.integers(-extent - 3, extent + 3, 2))
    return slice(start, stop, int(rng.integers(1, 4)))


def random_index(rng, shape):
    """Per dimension a random slice, sometimes an integer (which drops the dimension)."""
    keys = []
    for extent in shape:
        if rng.random() < 0.2 and extent:
            keys.append(int(rng.integers(-extent, extent)))
        else:
            keys.append(random_key(rng, extent))
    return tuple(keys)


@pytest.mark.parametrize("fmt", MATRIX_FORMATS)
def test_matrix_views_match_numpy_slicing(fmt):
    rng = np.random.default_rng(1)
    M = rand((17, 13), seed=2)
    A = ls.Tensor.from_numpy(M, format=fmt)
    for _ in range(12):
        key = random_index(rng, M.shape)
        V = A[key]
        expected = M[key]
        if not isinstance(V, TensorView):  # every index an integer: the entry itself
            assert V == expected
            continue
        assert V.shape == expected.shape
        np.testing.assert_array_equal(V.to_numpy(), expected)
        inner = random_index(rng, V.shape)
        again = V[inner]
        np.testing.assert_array_equal(again.to_numpy() if isinstance(again, TensorView)
                                      else again, expected[inner])
    stored = np.argwhere(M)
    for i, j in stored[:5]:
        assert A[int(i), int(j)] == M[i, j]
        assert A[int(i) - 17, int(j) - 13] == M[i, j]
    assert A[0, 0] == M[0, 0]


@pytest.mark.parametrize("fmt", TENSOR3_FORMATS)
def test_order3_views_match_numpy_slicing(fmt):
    rng = np.random.default_rng(3)
    T = rand((7, 8, 9), seed=4)
    B = ls.Tensor.from_numpy(T, format=fmt)
    for _ in range(10):
        key = random_index(rng, T.shape)
        V = B[key]
        if not isinstance(V, TensorView):
            assert V == T[key]
            continue
        np.testing.assert_array_equal(V.to_numpy(), T[key])
        inner = random_index(rng, V.shape)
        again = V[inner]
        np.testing.assert_array_equal(again.to_numpy() if isinstance(again, TensorView)
                                      else again, T[key][inner])


@pytest.mark.slow  # see tests/conftest.py
@pytest.mark.parametrize("fmt", MATRIX_FORMATS)
def test_views_as_kernel_operands(fmt):
    """SpMV on a row window, the sum and the elementwise sum of two views, each kernel
    called three times, on windows of every kind (empty ones included)."""
    M = rand((23, 19), seed=5)
    x = np.random.default_rng(6).random(19)
    A = ls.Tensor.from_numpy(M, format=fmt)
    spmv = ls.compile("y(i) = A(i,j) * x(j)", A=A[2:20:3, 1:18:2].format)
    total = ls.compile("s = A(i,j)", A=A[2:20:3, 1:18:2].format)
    for rows, cols in [(slice(2, 20, 3), slice(1, 18, 2)), (slice(-5, None, 2), slice(0, 9, 3)),
                       (slice(9, 9, 2), slice(None, None, 2)), (slice(0, 30, 3), slice(4, 5, 2))]:
        for _ in range(3):
            y = spmv(A=A[rows, cols], x=x[cols]).to_numpy()
            np.testing.assert_allclose(y, M[rows, cols] @ x[cols], rtol=1e-13)
            s = total(A=A[rows, cols]).to_numpy()
            np.testing.assert_allclose(s, M[rows, cols].sum(), rtol=1e-13)
    for _ in range(3):
        y = ls.evaluate("y(i) = A(i,j) * x(j)", A=A[5:17], x=x).to_numpy()
        np.testing.assert_allclose(y, M[5:17] @ x, rtol=1e-13)
        both = ls.evaluate("C(i,j) = P(i,j) + Q(i,j)", P=A[3:15, :9], Q=A[::2, 10:]).to_numpy()
        np.testing.assert_array_equal(both, M[3:15, :9] + M[::2, 10:])
        product = ls.evaluate("C(i,j) = P(i,j) * Q(i,j)", P=A[3:15, :9], Q=A[::2, 10:],
                              out_format="csr").to_numpy()
        np.testing.assert_array_equal(product, M[3:15, :9] * M[::2, 10:])
        column = ls.evaluate("y(i) = c(i) * x(i)", c=A[:, 4], x=np.arange(23.0)).to_numpy()
        np.testing.assert_array_equal(column, M[:, 4] * np.arange(23.0))
        y = ls.einsum("ij,j->i", A[1::2, ::3], x[::3]).to_numpy()
        np.testing.assert_allclose(y, M[1::2, ::3] @ x[::3], rtol=1e-13)


@pytest.mark.slow  # see tests/conftest.py
@pytest.mark.parametrize("fmt", ["csr", "coo", "dcsr", "hash"])
def test_random_windows_as_kernel_operands(fmt):
    """Random windows (empty ones, steps 1 to 3, views of views) in SpMV, a sum and
    the elementwise sum of two views of equal shape, each called three times."""
    rng = np.random.default_rng(18)
    M = rand((21, 16), seed=19)
    A = ls.Tensor.from_numpy(M, format=fmt)
    x = rng.random(16)
    for _ in range(6):
        rows, cols = random_key(rng, 21), random_key(rng, 16)
        V, expected = A[rows, cols], M[rows, cols]
        inner = (random_key(rng, V.shape[0]), slice(None))
        for view, dense in [(V, expected), (V[inner], expected[inner])]:
            for _ in range(3):
                y = ls.evaluate("y(i) = A(i,j) * x(j)", A=view, x=x[cols]).to_numpy()
                np.testing.assert_allclose(y, dense @ x[cols], rtol=1e-13)
                s = ls.evaluate("s = A(i,j)", A=view).to_numpy()
                np.testing.assert_allclose(s, dense.sum(), rtol=1e-13)
        n, m = V.shape
        other = A[21 - n:, :m]  # same shape, another window
        for _ in range(3):
            both = ls.evaluate("C(i,j) = P(i,j) + Q(i,j)", P=V, Q=other).to_numpy()
            np.testing.assert_array_equal(both, expected + M[21 - n:, :m])


@pytest.mark.slow  # see tests/conftest.py
@pytest.mark.parametrize("fmt", TENSOR3_FORMATS)
def test_order3_views_as_kernel_operands(fmt):
    T = rand((7, 8, 9), seed=7)
    B = ls.Tensor.from_numpy(T, format=fmt)
    v = np.arange(1.0, 4.0)
    for _ in range(3):
        y = ls.evaluate("Y(i,j) = B(i,j,k) * v(k)", B=B[1:6, ::2, 2:9:3], v=v).to_numpy()
        np.testing.assert_allclose(y, T[1:6, ::2, 2:9:3] @ v, rtol=1e-13)
        s = ls.evaluate("s = B(i,j)", B=B[2, 1:7, ::2]).to_numpy()
        np.testing.assert_allclose(s, T[2, 1:7, ::2].sum(), rtol=1e-13)
        both = ls.evaluate("C(i,j) = P(i,j) + Q(i,j)", P=B[:, 3, 1:], Q=B[:, :8, 0]).to_numpy()
        np.testing.assert_array_equal(both, T[:, 3, 1:] + T[:, :8, 0])


def test_one_kernel_serves_every_window_of_a_shape_class():
    """The window's numbers are runtime parameters: only whether a dimension is windowed
    or strided selects the machine code."""
    M = rand((30, 20), seed=8)
    A = ls.Tensor.from_numpy(M, format="csr")
    x = np.arange(20.0)
    spmv = ls.compile("y(i) = A(i,j) * x(j)", A=A[1:5].format)
    spmv(A=A[1:5], x=x)
    first = spmv.last
    for rows in [slice(0, 30), slice(7, 8), slice(12, 3), slice(-4, None)]:
        np.testing.assert_array_equal(spmv(A=A[rows], x=x).to_numpy(), M[rows] @ x)
        assert spmv.last is first
    assert A[::2].format != A[1:5].format  # strided: another shape class
    assert A[::2].format == A[3:29:5].format
    assert A[:, 2:9].format != A[1:5].format
    whole = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    np.testing.assert_array_equal(whole(A=A[:, ...], x=x).to_numpy(), M @ x)


def test_a_view_shares_its_tensors_arrays():
    M = rand((12, 10), seed=9)
    A = ls.Tensor.from_numpy(M, format="csr")
    V = A[2:10:2, 3:]
    assert V.values is A.values
    assert all(V.level_arrays[k][name] is array for k, level in enumerate(A.level_arrays)
               for name, array in level.items())
    x = np.ones(7)
    before = ls.evaluate("y(i) = A(i,j) * x(j)", A=V, x=x).to_numpy()
    A.values *= 2  # in place: the view reads the new values
    after = ls.evaluate("y(i) = A(i,j) * x(j)", A=V, x=x).to_numpy()
    np.testing.assert_array_equal(after, 2 * before)
    np.testing.assert_array_equal(after, (2 * M)[2:10:2, 3:] @ x)


def test_ordered_levels_search_the_window_and_others_test_each_coordinate():
    """A position level that is ordered and always finds is narrowed by binary search
    (the kernel's win.* blocks); an unordered one tests each stored coordinate."""
    M = rand((12, 10), seed=10)
    for fmt, searches in [("csr", True), ("hash", False)]:
        A = ls.Tensor.from_numpy(M, format=fmt)
        kernel = ls.compile("y(i) = A(i,j) * x(j)", A=A[:, 2:8].format)
        np.testing.assert_array_equal(kernel(A=A[:, 2:8], x=np.ones(6)).to_numpy(),
                                      M[:, 2:8].sum(axis=1))
        assert ("win.head" in kernel.llvm_ir) == searches


def test_views_in_parallel_calls_and_conversions():
    M = rand((400, 300), seed=11, density=0.2)
    A = ls.Tensor.from_numpy(M, format="csr")
    x = np.random.default_rng(12).random(300)
    spmv = ls.compile("y(i) = A(i,j) * x(j)", A=A[10:390:3, 5:].format)
    for _ in range(3):
        y = spmv(A=A[10:390:3, 5:], x=x[5:], threads=2).to_numpy()
        np.testing.assert_allclose(y, M[10:390:3, 5:] @ x[5:], rtol=1e-13)
    V = A[50:300:2, 7:200]
    np.testing.assert_array_equal(V.to_scipy("csc").toarray(), M[50:300:2, 7:200])
    np.testing.assert_array_equal(V.asformat("coo").to_numpy(), M[50:300:2, 7:200])
    assert V.nnz == np.count_nonzero(M[50:300:2, 7:200])
    # A + A(j,i) on a view: its transposed copy holds the window's entries only.
    S = A[20:60, 100:140]
    both = ls.evaluate("C(i,j) = S(i,j) + S(j,i)", S=S).to_numpy()
    np.testing.assert_array_equal(both, M[20:60, 100:140] + M[20:60, 100:140].T)


def test_slicing_refusals():
    M = rand((4, 6), seed=13)
    A = ls.Tensor.from_numpy(M, format="csr")
    reversed_rows = A[::-1]  # a negative step copies (fancy_index.py): no view reads down
    assert not isinstance(reversed_rows, TensorView)
    np.testing.assert_array_equal(np.asarray(reversed_rows), M[::-1])
    with pytest.raises(ValueError, match="step cannot be zero"):
        A[::0]
    with pytest.raises(IndexError, match="index 4 is out of bounds"):
        A[4]
    with pytest.raises(IndexError, match="index -7 is out of bounds"):
        A[:, -7]
    with pytest.raises(IndexError, match="too many indices"):
        A[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        A[..., ...]
    with pytest.raises(TypeError, match="read-only"):
        A[1:][0, 0] = 1.0
    with pytest.raises(ValueError, match="slicing a blocked format"):
        ls.Tensor.from_numpy(np.ones((4, 4)), format="bcsr")[1:]
    with pytest.raises(ls.ScheduleError, match="cannot be an output"):
        ls.compile("C(i,j) = A(i,j)", A="csr", out_format=A[1:].format)(A=A)
    np.testing.assert_array_equal(A[..., 2].to_numpy(), M[..., 2])
    np.testing.assert_array_equal(A[2:1].to_numpy(), M[2:1])
    np.testing.assert_array_equal(A[-100:100, 5:100].to_numpy(), M[-100:100, 5:100])


PLUGINS = {
    # Coordinates stored times two, read back by its own pos_access: the binary search
    # must go through pos_access, not the array.
    "scaled": (("name: compressed", "name: scaled"),
               ("pos_access: return crd[p], True", "pos_access: return crd[p] // 2, True"),
               ("append_coord: crd[p] = i", "append_coord: crd[p] = i * 2")),
    # An unordered list: each coordinate is tested against the window.
    "unordered": (("name: compressed", "name: unordered"),
                  ("  ordered: [true, configurable]", "  ordered: false")),
}


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_views_of_plugin_levels(tmp_path, monkeypatch, plugin):
    monkeypatch.setattr(registry, "_user", {})
    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path / "cache"))
    text = without_subsection((Path(registry.__file__).parent / "compressed.yaml").read_text())
    for old, new in PLUGINS[plugin]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / f"{plugin}.yaml"
    path.write_text(text)
    ls.register_level_format(path)
    M = rand((9, 11), seed=14)
    fmt = ls.Format([ls.Level("dense", 0), ls.Level(plugin, 1)])
    A = ls.Tensor.from_numpy(M, format=fmt)
    x = np.arange(11.0)
    for rows, cols in [(slice(1, 8), slice(2, 10)), (slice(None, None, 2), slice(1, 11, 3)),
                       (slice(4, 4), slice(None)), (slice(None), 5)]:
        V = A[rows, cols]
        np.testing.assert_array_equal(V.to_numpy(), M[rows, cols])
        if V.order == 2:
            for _ in range(3):
                y = ls.evaluate("y(i) = A(i,j) * x(j)", A=V, x=x[cols]).to_numpy()
                np.testing.assert_allclose(y, M[rows, cols] @ x[cols], rtol=1e-13)


def test_the_kernel_cache_key_has_no_window_numbers():
    M = rand((10, 10), seed=15)
    A = ls.Tensor.from_numpy(M, format="dcsr")
    kernel = ls.compile("s = A(i,j)", A=A[1:3, 2:9:2].format)
    kernel(A=A[1:3, 2:9:2])
    cached = len(api._CACHE)
    for rows, cols in [(slice(0, 9), slice(1, 2, 3)), (slice(5, None), slice(None, None, 2))]:
        np.testing.assert_allclose(kernel(A=A[rows, cols]).to_numpy(), M[rows, cols].sum())
    assert len(api._CACHE) == cached


def test_a_view_of_a_tensor_assigned_to_since_is_refused():
    """``A[i, j] = ...`` gives A new arrays; a view made before still held the old ones,
    and the base's checks would have vouched for the new ones instead."""
    M = rand((6, 6), seed=16)
    A = ls.Tensor.from_numpy(M, format="csr")
    V = A[1:4]
    np.testing.assert_array_equal(V.to_numpy(), M[1:4])
    i, j = ls.index_vars("i j")
    A[i, j] = ls.Tensor.from_numpy(2 * M, format="csr")[i, j] * 1.0
    with pytest.raises(ValueError, match="has changed since"):
        V.to_numpy()
    np.testing.assert_array_equal(A[1:4].to_numpy(), 2 * M[1:4])


def test_diagonal_uses_pickles_and_scalars_of_views():
    M = rand((8, 8), seed=17, density=0.6)
    A = ls.Tensor.from_numpy(M, format="csr")
    for key in [(slice(1, 7), slice(1, 7)), (slice(0, 8, 2), slice(0, 8, 2)),
                (slice(2, 8, 3), slice(0, 6, 3))]:
        trace = ls.evaluate("s = A(i,i)", A=A[key]).to_numpy()
        np.testing.assert_allclose(trace, np.trace(M[key]), rtol=1e-13)
    V = pickle.loads(pickle.dumps(A[1:7:2, 3:]))
    np.testing.assert_array_equal(V.to_numpy(), M[1:7:2, 3:])
    assert A[np.int64(2), np.int32(-1)] == M[2, -1]
    x = ls.Tensor.from_numpy(M[3], format="coo")
    np.testing.assert_array_equal(x[2:7:2].to_numpy(), M[3, 2:7:2])
    assert x[-2] == M[3, -2]


@pytest.mark.parametrize("fmt", ["csr", "dcsr", "coo", "hash", "csc", "dense"])
def test_a_view_keeps_its_base_fill_value(fmt):
    """A view reads its base's fill: an entry the base does not store, in the window or
    at a dropped (integer-indexed) dimension, is the fill (inf here), as numpy's slice of
    the dense array says; a kernel over the view computes with it (V + 1 keeps fill inf).
    A dense view with a fill copied to numpy recursed without end once formats compared
    their levels without the windows."""
    rng = np.random.default_rng(5)
    M = np.where(rng.random((6, 7)) < 0.4, rng.standard_normal((6, 7)), np.inf)
    M[2, :] = np.inf  # a row with no stored entry
    A = ls.Tensor.from_numpy(M, format=fmt, fill=np.inf)
    for key in ((slice(1, 5), slice(None, None, 2)), (2, slice(None)), (slice(None), 3),
                (slice(0, 6, 2), 4), (3, slice(1, 6, 2))):
        V = A[key]
        assert V.fill_value == np.inf
        np.testing.assert_array_equal(V.to_numpy(), M[key])
        text = "Y(i) = V(i) + 1" if V.order == 1 else "Y(i,j) = V(i,j) + 1"
        got = ls.evaluate(text, V=V)
        np.testing.assert_array_equal(got.to_numpy(), M[key] + 1)


@pytest.mark.parametrize("fmt", ["coo", "ell", "ell-rows", "csr", "dia", "dense"])
def test_a_column_window_read_by_the_output_index_loop(fmt: str) -> None:
    """``y(j) = V(i,j) * z(i)`` over a column window that starts past 0: the loop over
    V's column level binds the output's first index and is clamped to a thread's range;
    over a branchless level (COO's, ELL's) that range can be empty, and straight-line
    code read the next row's entry (review of issue 31's work: COO gave 16 for 13)."""
    a = np.array([[1, 3, 4, 2], [0, 5, 1, 0], [4, 0, 8, 7]], dtype=float)
    z = np.array([1.0, 2.0, 3.0])
    base = ls.Tensor.from_numpy(a, fmt)
    for key in [(slice(None), slice(1, 2)), (slice(None), slice(1, None, 2)),
                (slice(None), slice(1, 4)), (slice(1, 3), slice(2, 4))]:
        view = base[key]
        kernel = ls.compile("y(j) = V(i,j) * z(i)", V=view.format)
        assert np.allclose(kernel(V=view, z=z[key[0]]).to_numpy(), z[key[0]] @ a[key]), key
