"""The lean call path: bound kernels, reused bindings, and their safety."""

from __future__ import annotations

import gc
import threading
import weakref

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


@pytest.mark.parametrize("fmt", ["csr", "coo", "dia", "dcsr", "hash"])
def test_small_fresh_results_ignore_freed_garbage(fmt):
    """Small results come straight from numpy, uncleared only where the kernel sets every
    entry: rows without entries must read 0 even when malloc hands back the memory of a
    dropped result that was filled with NaN."""
    rng = np.random.default_rng(3)
    dense = np.where(rng.random((300, 200)) < 0.05, rng.random((300, 200)), 0.0)
    dense[::7] = 0.0  # empty rows
    if fmt == "dia":
        dense = np.triu(np.tril(dense, 2), -3)
    matrix = sp.csr_matrix(dense)
    x = rng.random(200)
    A, xt = ls.Tensor.from_scipy(matrix, format=fmt), ls.Tensor.from_numpy(x)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A=fmt)
    bound = kernel.bind(A=A, x=xt)
    for call in (bound, lambda: kernel(check=False, A=A, x=xt)):
        for _ in range(3):
            result = call()
            np.testing.assert_allclose(result.to_numpy(), matrix @ x, rtol=1e-12, atol=0)
            assert result.values.flags.owndata and result.format == kernel.formats["y"]
            result.values[:] = np.nan
            del result


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


@pytest.mark.parametrize(("threads", "shared_clear_bytes"), [(1, 0), (2, 0), (2, 1 << 40)])
def test_bound_call_writes_into_out(threads, shared_clear_bytes, monkeypatch):
    """``call(out=...)`` overwrites the caller's array (garbage in it is cleared first, by
    the threads or before them) and returns a Tensor over it, equal bit for bit to a fresh
    result (paged in by the threads or not)."""
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 100)
    monkeypatch.setattr(ls.calls.binding, "SHARED_CLEAR_BYTES", shared_clear_bytes)
    a = sp.random(300, 200, density=0.05, format="csr", random_state=4)
    b = np.random.default_rng(4).random((200, 16))
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", B="dense")
    call = kernel.bind(check=False, threads=threads, A=ls.Tensor.from_scipy(a, "csr"),
                       B=ls.Tensor.from_numpy(b, "dense"))
    out = np.full((300, 16), np.nan)
    for _ in range(2):
        result = call(out=out)
        assert np.shares_memory(result.values, out)
        np.testing.assert_array_equal(out, call().to_numpy())
    np.testing.assert_allclose(out, a @ b, rtol=1e-13)


def test_bound_call_out_is_checked():
    a = sp.random(30, 30, density=0.2, format="csr", random_state=5)
    A = ls.Tensor.from_scipy(a, "csr")
    x = ls.Tensor.from_numpy(np.ones(30), "dense")
    spmv = ls.compile("y(i) = A(i,j) * x(j)", A="csr").bind(A=A, x=x)
    with pytest.raises(ValueError, match="shape"):
        spmv(out=np.zeros(31))
    with pytest.raises(ValueError, match="float64"):
        spmv(out=np.zeros(30, dtype=np.float32))
    with pytest.raises(ValueError, match="overlaps"):
        spmv(out=x.values)
    add = ls.compile("C(i,j) = A(i,j) + B(i,j)", A="csr", B="csr", C="csr").bind(A=A, B=A)
    with pytest.raises(TypeError, match="dense-like"):
        add(out=np.zeros((30, 30)))


def test_out_checked_once_is_checked_again_when_it_changes():
    """The overlap check is remembered for the last out= array, weakly, and never stands
    in for the checks of shape, dtype and writability."""
    a = sp.random(30, 30, density=0.2, format="csr", random_state=6)
    x = np.arange(30.0)
    spmv = ls.compile("y(i) = A(i,j) * x(j)", A="csr").bind(
        A=ls.Tensor.from_scipy(a, "csr"), x=x)
    out = np.full(30, np.nan)
    for _ in range(2):
        np.testing.assert_allclose(spmv(out=out).to_numpy(), a @ x, rtol=1e-13)
    with pytest.raises(ValueError, match="overlaps"):
        spmv(out=x)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        spmv(out=out)
    out.flags.writeable = True
    out.shape = (5, 6)
    with pytest.raises(ValueError, match="shape"):
        spmv(out=out)
    out.shape = (30,)
    gone = weakref.ref(out)
    del out
    gc.collect()
    assert gone() is None


def test_kernel_call_writes_into_out():
    """out= reached only bindings; a kernel call ignored it and returned a fresh result."""
    spmv = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    A = ls.Tensor.from_numpy(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]), format="csr")
    out = np.full(2, np.nan)
    result = spmv(A=A, x=np.ones(3), out=out)
    np.testing.assert_array_equal(out, [3.0, 3.0])
    assert np.shares_memory(result.values, out)


DUP_FORMAT = ls.Format([ls.Level("compressed", 0, {"unique": False, "ordered": False}),
                        ls.Level("singleton", 1, {"unique": False, "ordered": False})])


def _converted_operand(kind: str) -> tuple[ls.Tensor, object]:
    """A matrix whose uses below need a conversion: packed by llvsparse (sealed), built on
    the caller's own arrays, or with repeated coordinates (the copy sums them)."""
    matrix = sp.random(30, 30, density=0.2, format="csr", random_state=4)
    if kind == "packed":
        return ls.Tensor.from_scipy(matrix, format="csr"), "csr"
    if kind == "own arrays":
        return ls.Tensor((30, 30), ls.named_format("csr", 2), "float64", "int32", [30, 30],
                         [{}, {"pos": matrix.indptr.astype(np.int32),
                               "crd": matrix.indices.astype(np.int32)}],
                         [{}, {}], matrix.data.copy()), "csr"
    coo = matrix.tocoo()
    rows, cols = np.concatenate([coo.row, coo.row[:5]]), np.concatenate([coo.col, coo.col[:5]])
    return ls.Tensor((30, 30), DUP_FORMAT, "float64", "int32", [30, 30],
                     [{"pos": np.array([0, len(rows)], np.int32),
                       "crd": rows.astype(np.int32)}, {"crd": cols.astype(np.int32)}],
                     [{}, {}], np.arange(1.0, len(rows) + 1)), DUP_FORMAT


@pytest.mark.parametrize("kind", ["packed", "own arrays", "duplicates"])
@pytest.mark.parametrize("text", ["C(i,j) = A(i,j) + A(j,i)", "C(i,j) = B(i,j) * A(j,i)"])
def test_binding_with_a_conversion_reads_current_values(kind, text):
    """A binding converts an operand once, when it is made; changing the tensor's values
    in place afterwards must still change the binding's results, as for kernel(...)
    (the copy kept the values it was made with)."""
    A, fmt = _converted_operand(kind)
    B = ls.Tensor.from_scipy(sp.random(30, 30, density=0.3, format="csr", random_state=5))
    kernel = ls.compile(text, A=fmt, **({"B": "csr"} if "B(" in text else {}), C="csr")
    operands = {"A": A, "B": B} if "B(" in text else {"A": A}
    call = kernel.bind(**operands)
    converted = {kernel.aliases[n].tensor if n in kernel.aliases else n
                 for n in kernel.last.conversions}
    assert "A" in converted, kernel.last.conversions
    b = B.to_numpy()
    for scale in (1.0, 3.0, -0.5):
        A.values[:] *= scale
        a = A.to_numpy()
        expected = a + a.T if "+" in text else b * a.T
        for result in (call(), call(), kernel(**operands)):
            np.testing.assert_array_equal(result.to_numpy(), expected)


def test_binding_refuses_an_operand_whose_entries_changed():
    A, _ = _converted_operand("own arrays")
    kernel = ls.compile("C(i,j) = A(i,j) + A(j,i)", A="csr", C="csr")
    call = kernel.bind(A=A)
    A.values = A.values[:3].copy()
    with pytest.raises(ValueError, match="bind it again"):
        call()
