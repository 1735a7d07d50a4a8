"""Operand workspaces (ir/schedule/precompute.py): an operand invariant in a loop nested between
its own loops is scattered into a dense temporary and located there. Results against
numpy / scipy, where the rule fires and where it must not."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
from llvsparse import graphs

TRIANGLES = graphs.TRIANGLES
PRODUCT = "t = A(i,j) * B(i,k) * C(k,j)"


def _lower(n: int, density: float, seed: int) -> sp.csr_array:
    upper = sp.random(n, n, density=density, random_state=seed, format="csr")
    return sp.csr_array(sp.tril(upper + upper.T, k=-1, format="csr"))


def _triangles_scipy(lower: sp.csr_array) -> float:
    pattern = lower.copy()
    pattern.data[:] = 1
    return float(pattern.multiply(pattern @ pattern).sum())


def _precomputed(kernel) -> bool:
    return "_ws" in kernel.concrete and "where(" in kernel.concrete


@pytest.mark.parametrize("n,density,seed", [(1, 0.0, 0), (5, 0.0, 1), (2, 1.0, 2), (12, 0.4, 3),
                                            (60, 0.1, 4), (40, 0.9, 5), (200, 0.03, 6)])
def test_triangle_count_matches_scipy(n, density, seed):
    lower = _lower(n, density, seed)
    kernel = ls.compile(TRIANGLES, L="csr")
    t = kernel(L=ls.Tensor.from_scipy(lower, format="csr")).to_numpy()
    pattern = lower.copy()
    pattern.data[:] = 1
    np.testing.assert_allclose(t, float(lower.multiply(lower @ lower).sum()))
    assert _precomputed(kernel)
    assert graphs.triangle_count(lower + lower.T) == _triangles_scipy(lower)


def test_triangle_count_of_a_hub_and_a_clique():
    """A vertex joined to every other (long rows) over a clique of 30 (C(30,3) + C(30,2)
    triangles with the hub)."""
    n = 31
    dense = np.zeros((n, n))
    dense[1:, 1:] = 1 - np.eye(n - 1)
    dense[0, 1:] = dense[1:, 0] = 1
    expected = 30 * 29 * 28 // 6 + 30 * 29 // 2
    assert graphs.triangle_count(sp.csr_array(dense)) == expected
    lower = sp.csr_array(np.tril(dense, -1))
    assert _triangles_scipy(lower) == expected


@pytest.mark.parametrize("formats", [("csr", "csr", "csr"), ("dcsr", "csr", "csr"),
                                     ("csr", "dcsr", "dcsr"), ("dcsr", "dcsr", "csr")])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_product_through_an_operand_workspace(formats, dtype):
    rng = np.random.default_rng(len(formats[0]) + len(dtype))
    shape_a, shape_b, shape_c = (9, 11), (9, 7), (7, 11)
    arrays = [np.where(rng.random(s) < 0.35, rng.integers(1, 5, s), 0).astype(dtype)
              for s in (shape_a, shape_b, shape_c)]
    tensors = {name: ls.Tensor.from_numpy(a, format=f)
               for name, a, f in zip("ABC", arrays, formats)}
    kernel = ls.compile(PRODUCT, **dict(zip("ABC", formats)))
    t = kernel(**tensors).to_numpy()
    assert _precomputed(kernel), kernel.concrete
    np.testing.assert_allclose(t, np.einsum("ij,ik,kj->", *[a.astype(np.float64)
                                                            for a in arrays]), rtol=1e-6)


def test_vector_result_on_threads_matches_serial(monkeypatch):
    """y(i) = sum over k, j of A(i,j) B(i,k) C(k,j): rows split among threads, each with
    its own temporary."""
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 100)
    A, B, C = (sp.random(300, 300, density=0.05, random_state=s, format="csr")
               for s in (7, 8, 9))
    kernel = ls.compile("y(i) = A(i,j) * B(i,k) * C(k,j)", A="csr", B="csr", C="csr")
    operands = {n: ls.Tensor.from_scipy(m, format="csr") for n, m in zip("ABC", (A, B, C))}
    serial = kernel(threads=1, **operands).to_numpy()
    assert kernel.bind(threads=2, **operands).plan is not None
    threaded = kernel(threads=2, **operands).to_numpy()
    assert _precomputed(kernel)
    expected = np.asarray(A.multiply(B @ C).sum(axis=1)).ravel()
    np.testing.assert_allclose(serial, expected, rtol=1e-12)
    np.testing.assert_array_equal(threaded, serial)


def test_infinities_where_the_precomputed_operand_stores_nothing():
    """The temporary marks what the operand stores: an infinite C(k,j) under an absent
    A(i,j) contributes nothing (0 * inf would be NaN): the sum runs over A's entries and
    scipy's sparse product B @ C (which multiplies stored entries only)."""
    A = sp.csr_array(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]))
    B = sp.csr_array(np.array([[1.0, 2.0], [0.0, 1.0]]))
    C = sp.csr_array(np.array([[np.inf, 1.0, 1.0], [2.0, np.inf, 0.0]]))
    kernel = ls.compile(PRODUCT, A="csr", B="csr", C="csr")
    t = kernel(**{n: ls.Tensor.from_scipy(m, format="csr") for n, m in zip("ABC", (A, B, C))})
    assert _precomputed(kernel)
    stored, product = A.tocoo(), (B @ C).toarray()
    expected = (stored.data * product[stored.row, stored.col]).sum()
    assert t.to_numpy() == expected == np.inf


@pytest.mark.parametrize("force", [None, True])
def test_operand_whose_fill_is_one(force):
    """A's absent entries are 1, so the body is not zero where A stores nothing: the rule
    leaves A alone; forced, the temporary is iterated and stays correct."""
    rng = np.random.default_rng(3)
    a = np.where(rng.random((6, 5)) < 0.4, 2.0, 1.0)
    b = np.where(rng.random((6, 4)) < 0.5, rng.random((6, 4)), 0.0)
    c = np.where(rng.random((4, 5)) < 0.5, rng.random((4, 5)), 0.0)
    A = ls.Tensor.from_numpy(a, format="csr", fill=1.0)
    kernel = ls.compile(PRODUCT, A=A.format, B="csr", C="csr", precompute=force)
    t = kernel(A=A, B=ls.Tensor.from_numpy(b, format="csr"),
               C=ls.Tensor.from_numpy(c, format="csr")).to_numpy()
    assert _precomputed(kernel) == bool(force)
    np.testing.assert_allclose(t, np.einsum("ij,ik,kj->", a, b, c), rtol=1e-12)


@pytest.mark.parametrize("expr,formats,reference", [
    ("y(i) = A(i,j) * x(j)", {"A": "csr", "x": "dense"}, lambda A, B, C, x: A @ x),
    ("C(i,j) = S(i,j) * B(i,k) * D(k,j)", {"S": "csr", "B": "dense", "D": "dense"},
     lambda A, B, C, x: A * (B @ C)),
    ("X(i,j) = B(i,k) * D(k,j)", {"B": "csr", "D": "csr"}, lambda A, B, C, x: B @ C),
])
def test_not_chosen_where_nothing_is_invariant(expr, formats, reference):
    """SpMV, SDDMM and SpGEMM: the rule precomputes nothing (SpMV's A and SpGEMM's
    operands have no loop between their own; SDDMM's S(i,j) is iterated, its dense
    B(i,k) locates already). Forced, an operand invariant in a loop (SpMV's x in i,
    SDDMM's B(i,k) in j) is copied, with the same result."""
    rng = np.random.default_rng(0)
    A = np.where(rng.random((6, 6)) < 0.4, rng.random((6, 6)), 0.0)
    B, C, x = rng.random((6, 6)), rng.random((6, 6)), rng.random(6)
    values = {"A": A, "S": A, "B": B, "D": C, "x": x}
    for force in (None, True):
        kernel = ls.compile(expr, precompute=force, **formats)
        result = kernel(**{n: ls.Tensor.from_numpy(values[n], format=f)
                           for n, f in formats.items()}).to_numpy()
        assert _precomputed(kernel) == bool(force and "x" in formats or
                                            force and "S" in formats)
        np.testing.assert_allclose(result, reference(A, B, C, x), rtol=1e-12)


def test_forced_and_forbidden():
    """Beside a dense C no operand iterates j, so the rule leaves A; forced, it is copied
    anyway (and located while C's row is scanned);
    forbidden, triangle counting merges rows again. Same results."""
    rng = np.random.default_rng(1)
    a, b, c = (np.where(rng.random(s) < 0.5, rng.random(s), 0.0) for s in ((5, 6), (5, 4), (4, 6)))
    expected = np.einsum("ij,ik,kj->", a, b, c)
    for force in (None, True):
        kernel = ls.compile(PRODUCT, A="csr", B="csr", C="dense", precompute=force)
        t = kernel(A=ls.Tensor.from_numpy(a, format="csr"), B=ls.Tensor.from_numpy(b, format="csr"),
                   C=c).to_numpy()
        assert _precomputed(kernel) == bool(force)
        np.testing.assert_allclose(t, expected, rtol=1e-12)
    lower = _lower(40, 0.2, 2)
    merging = ls.compile(TRIANGLES, L="csr", precompute=False)
    t = merging(L=ls.Tensor.from_scipy(lower, format="csr")).to_numpy()
    assert not _precomputed(merging)
    np.testing.assert_allclose(t, float(lower.multiply(lower @ lower).sum()))
    with pytest.raises(ValueError, match="precompute must be True, False or None"):
        ls.compile(TRIANGLES, L="csr", precompute="yes")


def test_loop_ir_shows_the_scatter_and_the_clear():
    kernel = ls.compile(TRIANGLES, L="csr")
    kernel(L=ls.Tensor.from_scipy(_lower(10, 0.3, 0), format="csr"))
    loops = kernel.loops
    assert "allocate L_ws: float64" in loops
    assert "insert L_ws(j) = L(i,j)" in loops and "clear L_ws(j) = 0.0" in loops
    assert "locate L_ws.0 at j" in loops
    assert "forall(i, where(forall(k, forall(j, t() += (L_ws(j) * L__1(i,k)) * L__2(k,j)))" \
        ", forall(j, L_ws(j) = L(i,j)))" in kernel.concrete


def test_temporary_too_large_for_memory(monkeypatch):
    """A temporary over C's 2**40 columns: refused with a MemoryError before running when
    forced, merged instead (same result) when the rule chose it."""
    n = 2**40
    A = sp.csr_array((np.array([1.0, 2.0]), np.array([3, n - 1]), np.array([0, 1, 2])),
                     shape=(2, n))
    B = sp.csr_array(np.array([[1.0, 1.0], [0.0, 2.0]]))
    C = sp.csr_array((np.array([5.0, 7.0]), np.array([3, n - 1]), np.array([0, 1, 2])),
                     shape=(2, n))
    operands = {k: ls.Tensor.from_scipy(m, format="csr") for k, m in zip("ABC", (A, B, C))}
    expected = 1 * 1 * 5 + 2 * 2 * 7
    forced = ls.compile(PRODUCT, A="csr", B="csr", C="csr", precompute=True)
    monkeypatch.setattr(ls.calls.workspaces, "physical_memory", lambda: 2**30)
    with pytest.raises(MemoryError, match=r"operand workspace A_ws\(j\) need 9216\.0 GiB"):
        forced(**operands)
    chosen = ls.compile(PRODUCT, A="csr", B="csr", C="csr")
    assert chosen(**operands).to_numpy() == expected


def test_pickled_kernel_keeps_the_choice():
    kernel = ls.compile(TRIANGLES, L="csr", precompute=False)
    lower = ls.Tensor.from_scipy(_lower(20, 0.3, 1), format="csr")
    first = kernel(L=lower).to_numpy()
    again = pickle.loads(pickle.dumps(kernel))
    assert again.precompute is False
    assert again(L=lower).to_numpy() == first
    assert not _precomputed(again)


def test_scalar_operand_is_never_copied():
    """An order-0 operand has no slice to scatter, even when asked for."""
    c = ls.Tensor.from_numpy(np.float64(3.0))
    A = sp.random(5, 4, density=0.5, random_state=2, format="csr")
    kernel = ls.compile("C(i,j) = c * A(i,j)", "csr", precompute=True, c=c.format, A="csr")
    result = kernel(c=c, A=ls.Tensor.from_scipy(A, format="csr")).to_scipy().toarray()
    np.testing.assert_allclose(result, 3.0 * A.toarray())


def test_kernel_from_disk_keeps_its_memory_check(tmp_path, monkeypatch):
    """The operand workspaces' sizes travel with the object code: a kernel loaded from
    the disk cache still refuses a temporary larger than memory before running."""
    from llvsparse.backends.cpu import STATS

    from llvsparse.kernel import api

    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(api, "_CACHE", {})
    assert ls.compile(PRODUCT, A="csr", B="csr", C="csr", precompute=True).instance().precomputes
    monkeypatch.setattr(api, "_CACHE", {})
    loads = STATS.get("disk_loads", 0)
    kernel = ls.compile(PRODUCT, A="csr", B="csr", C="csr", precompute=True)
    A = sp.random(6, 5, density=0.5, random_state=3, format="csr")
    B = sp.random(6, 4, density=0.5, random_state=4, format="csr")
    C = sp.random(4, 5, density=0.5, random_state=5, format="csr")
    operands = {n: ls.Tensor.from_scipy(m, format="csr") for n, m in zip("ABC", (A, B, C))}
    with monkeypatch.context() as small:
        small.setattr(ls.calls.workspaces, "physical_memory", lambda: 8)  # < 5 x 9 bytes
        with pytest.raises(MemoryError, match=r"operand workspace A_ws\(j\) need 45 bytes"):
            kernel(**operands)
    assert STATS.get("disk_loads", 0) == loads + 1
    np.testing.assert_allclose(kernel(**operands).to_numpy(), A.multiply(B @ C).sum())
