"""Sparse outputs: reserved up front from the operands' sizes, trimmed when adopted, and
still grown by the kernel when the reservation is too small."""

from __future__ import annotations

import ast

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from llvsparse.formats.interpret import evaluate_expr, length_function

import llvsparse as ls


def _buffer_elements(array: np.ndarray) -> int:
    """Elements in the buffer behind an adopted output array (its base)."""
    return array.base.size if array.base is not None else array.size


@pytest.mark.parametrize("op", ["+", "*"])
def test_reserved_outputs_are_exact_after_adoption(op):
    a = sp.random(300, 200, density=0.05, format="csr", random_state=1)
    b = sp.random(300, 200, density=0.05, format="csr", random_state=2)
    kernel = ls.compile(f"C(i,j) = A(i,j) {op} B(i,j)", A="csr", B="csr", C="csr")
    result = kernel(A=ls.Tensor.from_scipy(a, "csr"), B=ls.Tensor.from_scipy(b, "csr"))
    expected = (a + b) if op == "+" else a.multiply(b)
    np.testing.assert_allclose(result.to_scipy().toarray(), expected.toarray())
    crd = result.level_arrays[1]["crd"]
    assert len(crd) == len(result.values) == expected.nnz
    # The reservation was nnz(A) + nnz(B); what the caller holds is trimmed to the result.
    assert _buffer_elements(crd) == len(crd)
    assert _buffer_elements(result.values) == len(result.values)


@pytest.mark.parametrize("out", ["csr", "dcsr", "coo"])
def test_outputs_larger_than_the_reservation_still_grow(out):
    rng = np.random.default_rng(3)
    a = np.where(rng.random(120) < 0.3, rng.random(120), 0.0)
    b = np.where(rng.random(90) < 0.3, rng.random(90), 0.0)
    kernel = ls.compile("C(i,j) = a(i) * b(j)", a="sparse", b="sparse", C=out)
    result = kernel(a=ls.Tensor.from_numpy(a, "sparse"),
                    b=ls.Tensor.from_numpy(b, "sparse"))
    np.testing.assert_array_equal(result.to_numpy(), np.outer(a, b))
    assert len(result.values) == np.count_nonzero(a) * np.count_nonzero(b)


def test_empty_result_from_reserved_output():
    a = sp.random(50, 40, density=0.1, format="csr", random_state=4)
    b = sp.csr_matrix(a.shape)
    kernel = ls.compile("C(i,j) = A(i,j) * B(i,j)", A="csr", B="csr", C="csr")
    result = kernel(A=ls.Tensor.from_scipy(a, "csr"), B=ls.Tensor.from_scipy(b, "csr"))
    assert len(result.values) == 0
    assert result.to_scipy().nnz == 0
    np.testing.assert_array_equal(result.level_arrays[1]["pos"], np.zeros(51, np.int32))


def test_scattered_product_into_unordered_coordinates():
    """CSC x CSR runs k outermost and scatters into C: an unordered coordinate output
    takes the entries as they come (duplicates included) and converts exactly."""
    a = sp.random(30, 20, density=0.2, format="csc", random_state=5)
    b = sp.random(20, 25, density=0.2, format="csr", random_state=6)
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csc", B="csr", out_format="coo-unordered")
    result = kernel(A=ls.Tensor.from_scipy(a, "csc"), B=ls.Tensor.from_scipy(b, "csr"))
    assert kernel.concrete.startswith("forall(k, forall(i, forall(j, C(i,j) += ")
    np.testing.assert_allclose(result.to_numpy(), (a @ b).toarray(), rtol=1e-12)
    assert len(result.values) >= (a @ b).nnz


def test_bound_sparse_output_descriptor_is_reused_safely():
    """A bound call reuses one output descriptor: every result owns its own arrays, and
    calls racing from several Python threads each get a correct, separate result."""
    from concurrent.futures import ThreadPoolExecutor

    a = sp.random(80, 70, density=0.1, format="csr", random_state=11)
    b = sp.random(80, 70, density=0.1, format="csr", random_state=12)
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", A="csr", B="csr", C="csr")
    bound = kernel.bind(check=False, A=ls.Tensor.from_scipy(a, "csr"),
                        B=ls.Tensor.from_scipy(b, "csr"))
    first, second = bound(), bound()
    assert not np.shares_memory(first.values, second.values)
    second.values[:] = -1.0  # writing one result leaves the other alone
    np.testing.assert_array_equal(first.to_scipy().toarray(), (a + b).toarray())
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: bound(), range(64)))
    for result in results:
        np.testing.assert_array_equal(result.to_scipy().toarray(), (a + b).toarray())


_LEAVES = st.one_of(st.integers(0, 9).map(str), st.sampled_from(["size", "parent_size", "N", "k"]))


def _combine(parts: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.tuples(parts, st.sampled_from(["+", "-", "*"]), parts).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})")
    divided = st.tuples(parts, st.sampled_from(["//", "%"]), st.integers(1, 5)).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})")
    called = st.tuples(st.sampled_from(["min", "max"]), parts, parts).map(
        lambda t: f"{t[0]}({t[1]}, {t[2]})")
    return st.one_of(binary, divided, called, parts.map(lambda p: f"-{p}"),
                     parts.map(lambda p: f"abs({p})"),
                     st.tuples(parts, parts).map(lambda t: f"({t[0]} if {t[1]} > 2 else 1)"))


@settings(max_examples=300, deadline=None)
@given(text=st.recursive(_LEAVES, _combine, max_leaves=8), size=st.integers(0, 10**6),
       parent=st.integers(0, 10**6), n=st.integers(1, 10**6), k=st.integers(1, 64))
def test_compiled_length_expressions_agree_with_the_interpreter(text, size, parent, n, k):
    """Adopting an output evaluates each array's length through a function compiled once
    per binding (or, outside the scalar subset, e.g. a conditional, the interpreter):
    it must give the interpreter's value for any expression a level may declare."""
    expr = ast.parse(text, mode="eval").body
    compiled = length_function(expr, {"N": n, "k": k})
    expected = evaluate_expr(expr, {"N": n, "k": k, "size": size, "parent_size": parent})
    assert compiled(size, parent) == expected


@pytest.mark.parametrize("out_format, n, stored", [(ls.Format(["dense", "hashed"]), 300, 300 * 300 * (4 + 8)),
                                                   ("dense", 800, 800 * 800 * 8)])
def test_an_output_larger_than_memory_is_refused_before_the_kernel_runs(
        monkeypatch, out_format, n, stored):
    """A hashed output keeps W = N buckets per row: SpGEMM of two 50k x 50k matrices into
    one asked for 28 GiB on a 23 GiB machine, the allocation succeeded (memory is
    committed lazily) and the kernel's writes got the process killed. Outputs sized
    before any entry is known are now measured against the machine's memory first
    (a dense result the caller passes as out= is the caller's memory)."""
    a = sp.random(n, n, density=0.01, format="csr", random_state=3)
    A = ls.Tensor.from_scipy(a, "csr")
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", B="csr", out_format=out_format)
    monkeypatch.setattr(ls.abi.results, "physical_memory", lambda: stored - 1)
    with pytest.raises(MemoryError, match=r"GiB, more than this machine's"):
        kernel(A=A, B=A)
    if isinstance(out_format, str):  # dense
        into = np.empty((n, n))
        kernel(A=A, B=A, out=into)
        np.testing.assert_allclose(into, (a @ a).toarray())
    monkeypatch.setattr(ls.abi.results, "physical_memory", lambda: stored)
    np.testing.assert_allclose(kernel(A=A, B=A).to_numpy(), (a @ a).toarray())


def test_up_front_sizes_are_counted_without_wrapping():
    """2**32 rows of 2**32 buckets wrapped to 0 bytes in int64 and passed the check."""
    from llvsparse.calls.outputs import AssembledOutput

    fmt = ls.Format(["dense", "hashed"])
    with pytest.raises(MemoryError, match="GiB, more than this machine's"):
        AssembledOutput((2**32, 2**32), fmt, fmt.tensor_type("float64", "int64"), 0)
