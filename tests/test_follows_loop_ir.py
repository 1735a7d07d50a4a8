"""Code generation takes its loops from the loop IR (backends/llvm/emit_nodes.py): each
loop's lattice, points, iterated and located levels, cases and notes come from the
Loop/Merge node it walks to; the emitter derives none of them again."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.backends.llvm.codegen import KernelCompiler
from llvsparse.ir.concrete.from_notation import to_concrete
from llvsparse.ir.errors import InternalCompilerError
from llvsparse.ir.loops.nodes import Block, CallingConvention, Loop, Merge, loops_of
from llvsparse.ir.opt import loop_ir
from llvsparse.ir.plan import lowering
from llvsparse.ir.schedule.scheduler import schedule

import llvsparse as ls
from llvsparse.kernel import build as kernel_build

SPADD = "C(i,j) = A(i,j) + B(i,j)"


def _setup(statement: str, **formats: tuple[str, int]):
    types = {n: ls.named_format(f, order).tensor_type("float64", "int32")
             for n, (f, order) in formats.items()}
    return schedule(to_concrete(ls.parse(statement), types), types), types


def _compile(nests, types, order) -> KernelCompiler:
    compiler = KernelCompiler(loop_ir(nests, types, order[0]), CallingConvention(tuple(order), types))
    compiler.compile()
    return compiler


def test_a_loop_missing_from_the_loop_ir_is_an_internal_error() -> None:
    """The emitter does not build a loop the loop IR lacks: it says so."""
    nests, types = _setup(SPADD, C=("csr", 2), A=("csr", 2), B=("csr", 2))
    program = replace(loop_ir(nests, types, "C"), root=Block(()))
    with pytest.raises(InternalCompilerError, match="the loop IR has no loop over i in the nest"):
        KernelCompiler(program, CallingConvention(("C", "A", "B"), types)).compile()


def _intersection_only(node):
    """``node`` with the loop over j of every point but the first dropped, and that
    point's merge left with its first case (both operands stored)."""
    if isinstance(node, Block):
        items = [item for item in node.items if not (
            isinstance(item, (Loop, Merge)) and item.index == "j"
            and item.chosen.point != item.chosen.streams)]
        return Block(tuple(_intersection_only(item) for item in items))
    if isinstance(node, Merge) and node.index == "j":
        chosen = node.chosen
        chosen = replace(chosen, subpoints=(chosen.streams,), points=1,
                         case_exprs=chosen.case_exprs[:1])
        return replace(node, cases=node.cases[:1], chosen=chosen)
    if isinstance(node, Loop):
        return replace(node, body=_intersection_only(node.body))
    if isinstance(node, Merge):
        return replace(node, cases=tuple(replace(c, body=_intersection_only(c.body))
                                         for c in node.cases))
    return node


def test_the_cases_emitted_are_the_loop_irs(monkeypatch: pytest.MonkeyPatch) -> None:
    """SpAdd's loops over j (the union's three points) replaced by the intersection's
    merge with its one case: the kernel computes what the loop IR says, the sum where
    both operands are stored, so the cases come from the node."""
    statement = "Zc(i,j) = Pc(i,j) + Qc(i,j)"
    nests, types = _setup(statement, Zc=("csr", 2), Pc=("csr", 2), Qc=("csr", 2))
    narrowed = loop_ir(nests, types, "Zc")
    narrowed = replace(narrowed, root=_intersection_only(narrowed.root))
    assert [n.index for n in loops_of(narrowed.root)] == ["i", "j"]
    monkeypatch.setattr(lowering, "loop_ir", lambda *args: narrowed)
    monkeypatch.setattr(kernel_build, "loop_ir", lambda *args: narrowed)
    monkeypatch.setenv("LLVSPARSE_CACHE", "0")  # compiled here, not loaded from disk
    kernel = ls.compile(statement, "csr", Pc="csr", Qc="csr")
    rng = np.random.default_rng(7)
    for density in (0.5, 0.0, 1.0):
        p = sp.random(6, 5, density=density, format="csr", random_state=rng)
        q = sp.random(6, 5, density=0.5, format="csr", random_state=rng)
        both = (p != 0).multiply(q != 0).toarray()
        got = kernel(Pc=p, Qc=q).to_scipy().toarray()
        np.testing.assert_allclose(got, np.where(both, (p + q).toarray(), 0.0))


def test_a_sum_of_a_nonzero_fill_visits_every_coordinate() -> None:
    """sum_j(A(i,j) + 2) adds 2 where A stores nothing: the loop IR has the universe
    point and the case that adds the fill, and the kernel runs that loop."""
    kernel = ls.compile("y(i) = sum_j(A(i,j) + 2)", A="csr")
    lines = kernel.loops.splitlines()
    assert any(line.strip().startswith("merge j over U, A.1") for line in lines)
    assert "acc += 2.0" in kernel.loops
    for seed, density in ((0, 0.3), (1, 0.0), (2, 1.0)):
        dense = sp.random(7, 6, density=density, random_state=seed).toarray()
        dense[3] = 0.0  # an empty row: every coordinate adds the fill
        a = sp.csr_array(dense)
        np.testing.assert_allclose(kernel(A=a).to_numpy(), (a.toarray() + 2).sum(axis=1))


def test_a_nested_reduction_by_max_folds_one_index_at_a_time() -> None:
    kernel = ls.compile("y(i) = max(j, max(k, B(i,j,k)))", B="csf")
    rng = np.random.default_rng(3)
    for shape in ((5, 4, 3), (1, 1, 1), (3, 2, 6)):
        dense = rng.standard_normal(shape) * (rng.random(shape) < 0.4)
        dense[0] = 0.0
        got = kernel(B=ls.Tensor.from_numpy(dense, format="csf")).to_numpy()
        np.testing.assert_allclose(got, dense.max(axis=(1, 2)))
    inner = [n for n in loops_of(loop_ir(*_max_nests(), "y").root) if n.index == "k"]
    assert inner and all(n.expr is not None for n in inner)


def _max_nests():
    nests, types = _setup("y(i) = max(j, max(k, B(i,j,k)))", y=("dense", 1), B=("csf", 3))
    return nests, types


def test_the_pairs_driver_is_the_inner_loops_level() -> None:
    """Paired rows take the level their inner loop iterates from the loop IR."""
    from llvsparse.backends.llvm.pairs import driver_of

    nests, types = _setup("y(i) = A(i,j) * x(j)", y=("dense", 1), A=("csr", 2),
                          x=("dense", 1))
    (outer,) = [n for n in loops_of(loop_ir(nests, types, "y").root) if n.index == "i"]
    assert outer.other.pairs and not outer.forms.pairs
    driver = driver_of(outer)
    assert (driver.level, driver.uid) == (1, outer.iterator.uid)


def test_an_operand_workspaces_copy_loops_take_no_fast_form(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The loops that copy an operand into its workspace and clear it again take no
    pass's note: the case-selection pass noted the clear loop's merge, whose emitter has
    no value to select, and the kernel's other form failed (soak case 1130:104: a
    TypeError in point.py)."""
    from llvsparse.calls import probe

    statement = "Z(i,j) = 3 * max(A(j) * B(i,j), 2)"
    kernel = ls.compile(statement, A="sparse", B="ell")
    rng = np.random.default_rng(104)
    for density in (0.5, 0.0, 1.0):
        a = np.where(rng.random(5) < density, rng.integers(-3, 4, 5), 0).astype(np.int64)
        b = np.where(rng.random((6, 5)) < 0.5, rng.standard_normal((6, 5)), 0.0)
        operands = {"A": ls.Tensor.from_numpy(a, "sparse"), "B": ls.Tensor.from_numpy(b, "ell")}
        for form in probe.FORMS:
            monkeypatch.setitem(probe.FORCED, "form", form)
            got = kernel.bind(**operands)().to_numpy()
            np.testing.assert_allclose(got, 3 * np.maximum(a[None, :] * b, 2))
