"""Code generation follows the loop IR node by node (backends/llvm/emit_nodes.py): the write forms
are the loop IR's, printed and tested here, and changing a node changes the kernel."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.backends.llvm.codegen import KernelCompiler
from llvsparse.ir.concrete.from_notation import to_concrete
from llvsparse.ir.loops.nodes import (
    Block,
    CallingConvention,
    Case,
    Clear,
    If,
    Loop,
    Merge,
    Node,
    Sort,
    show,
)
from llvsparse.ir.opt import loop_ir
from llvsparse.ir.plan import lowering
from llvsparse.ir.schedule.scheduler import schedule

import llvsparse as ls


def _types(**formats: tuple[str, int]):
    return {n: ls.named_format(f, order).tensor_type("float64", "int32")
            for n, (f, order) in formats.items()}


def _program(statement: str, **formats: tuple[str, int]):
    types = _types(**formats)
    nests = schedule(to_concrete(ls.parse(statement), types), types)
    return loop_ir(nests, types, statement.split("(")[0])


def _rewrite(node: Node, change) -> Node:
    """``node`` with ``change`` applied to every node, innermost first."""
    if isinstance(node, Block):
        node = Block(tuple(_rewrite(item, change) for item in node.items))
    elif isinstance(node, Loop):
        node = replace(node, body=_rewrite(node.body, change))
    elif isinstance(node, Merge):
        node = replace(node, cases=tuple(Case(c.present, _rewrite(c.body, change))
                                         for c in node.cases))
    elif isinstance(node, If):
        node = replace(node, then=_rewrite(node.then, change))
    return change(node)


def test_a_sum_into_full_storage_is_stored_unconditionally_from_zero() -> None:
    text = show(_program("y(i) = A(i,j) * x(j)", y=("dense", 1), A=("csr", 2),
                         x=("dense", 1)).root)
    assert "  clear acc = 0.0\n" in text and "\n  insert y(i) = acc()" in text
    assert " if " not in text


def test_a_sum_into_sparse_storage_is_written_where_something_was_added() -> None:
    program = _program("y(i) = A(i,j) * x(j)", y=("sparse", 1), A=("csr", 2),
                       x=("sparse", 1))
    text = show(program.root)
    assert "  clear acc = -0.0\n" in text
    assert "\n  if acc touched:\n    append y(i) = acc()" in text
    a = sp.random(30, 20, density=0.1, format="csr", random_state=4)
    x = np.where(np.random.default_rng(4).random(20) < 0.3, 1.5, 0.0)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", "sparse", A="csr", x="sparse")
    got = kernel(A=a, x=ls.Tensor.from_numpy(x, format="sparse"))
    np.testing.assert_allclose(got.to_numpy(), a @ x)
    touched = (abs(a) @ (x != 0).astype(float)) > 0  # rows with a stored product
    assert got.nnz == np.count_nonzero(touched)


def test_a_sum_over_loops_that_only_locate_is_written_when_they_run() -> None:
    statement = "C(i,j) = S(i,j) * A(i,k) * B(j,k)"
    program = _program(statement, C=("csr", 2), S=("csr", 2), A=("dense", 2),
                       B=("dense", 2))
    assert "\n    if k nonempty:\n      append C(i,j) = acc()" in show(program.root)
    rng = np.random.default_rng(5)
    s = sp.random(40, 30, density=0.2, format="csr", random_state=5)
    for rank in (0, 3):  # no k at all: nothing is written
        a, b = rng.random((40, rank)), rng.random((30, rank))
        got = ls.compile(statement, "csr", S="csr", A="dense", B="dense")(S=s, A=a, B=b)
        expected = s.multiply(a @ b.T).toarray()
        np.testing.assert_allclose(got.to_numpy(), expected)
        assert got.nnz == (s.nnz if rank else 0)


@pytest.mark.parametrize("op, reduce", [("min", np.min), ("max", np.max)])
def test_a_fold_adds_the_fill_of_missed_coordinates(op: str, reduce) -> None:
    """``min(j, A(i,j))`` folds A's fill 0 once where a row misses a column: the loop IR
    says so (``if t missed some j``), and the kernel matches numpy's reduction."""
    statement = f"y(i) = {op}(j, A(i,j))"
    text = show(_program(statement, y=("dense", 1), A=("csr", 2)).root)
    assert "  if t missed some j:\n" in text
    a = sp.random(25, 6, density=0.7, format="csr", random_state=6)
    a.data -= 0.5
    a = a.tolil()
    a[3, :] = np.arange(1.0, 7.0)  # a full row: nothing missed
    a = a.tocsr()
    got = ls.compile(statement, A="csr")(A=a).to_numpy()
    np.testing.assert_array_equal(got, reduce(a.toarray(), axis=1))


def test_code_generation_takes_the_start_of_a_sum_from_its_clear_node(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Clear that starts the sum at 1.0 gives y = A x + 1: the emitter reads the node
    rather than deciding the start itself."""
    monkeypatch.setenv("LLVSPARSE_CACHE", "0")
    original = lowering.loop_ir

    def starting_at_one(*args, **kwargs):
        program = original(*args, **kwargs)
        bump = lambda n: replace(n, value=1.0) if isinstance(n, Clear) else n
        return replace(program, root=_rewrite(program.root, bump))

    monkeypatch.setattr(lowering, "loop_ir", starting_at_one)
    kernel = ls.compile("yq(i) = Aq(i,j) * xq(j)", Aq="csr", xq="dense")
    a = sp.random(12, 9, density=0.3, format="csr", random_state=7)
    x = np.arange(9.0)
    np.testing.assert_allclose(kernel(Aq=a, xq=x).to_numpy(), a @ x + 1)


def test_a_node_code_generation_does_not_know_is_an_internal_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    formats = {"y": ("dense", 1), "A": ("csr", 2), "x": ("dense", 1)}
    types = _types(**formats)
    nests = schedule(to_concrete(ls.parse("y(i) = A(i,j) * x(j)"), types), types)
    program = loop_ir(nests, types, "y")
    with_a_sort = replace(program, root=Block((Sort("w", "radix"), program.root)))
    with pytest.raises(ls.InternalCompilerError, match="Sort"):
        KernelCompiler(with_a_sort, CallingConvention(tuple(formats), types)).compile()


def test_two_sums_over_one_index_fill_two_temporaries() -> None:
    """Each sum of an expression has a temporary of its own, named as concrete notation
    names it (both sums once took the first's name, and the kernel added one sum twice)."""
    statement = "y(i) = min(j, A(i,j)) + sum_j(A(i,j) * x(j))"
    kernel = ls.compile(statement, A="csr", x="dense")
    assert "where(y(i) = t() + t1()" in kernel.concrete
    assert "  allocate t: float64\n" in kernel.loops
    assert "  allocate t1: float64\n" in kernel.loops
    a = sp.random(20, 7, density=0.5, format="csr", random_state=8)
    x = np.linspace(-1.0, 1.0, 7)
    expected = a.toarray().min(axis=1) + a @ x
    np.testing.assert_allclose(kernel(A=a, x=x).to_numpy(), expected, rtol=1e-12)
