"""Concrete index notation statements: construction, printing, building them from the
scheduler's nests, and paper 002's workspace rule as a rewrite of them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.ir.concrete.expressions import Apply, Operand, hoist_sums, peel_sums
from llvsparse.ir.concrete.from_notation import to_concrete
from llvsparse.ir.concrete.statements import (
    Access,
    Affine,
    Assign,
    Derived,
    Forall,
    IndexVar,
    Sequence,
    TensorVar,
    Where,
    concrete_text,
    loop_nest,
    sequence,
    sequence_parts,
    show,
    show_indented,
)
from llvsparse.ir.loops.from_schedule import statement_of
from llvsparse.ir.notation.operators import ADD, MUL
from llvsparse.ir.schedule.scheduler import Nest, schedule
from llvsparse.ir.schedule.workspace import WorkspaceKind
from llvsparse.ir.schedule.workspace_schedule import schedule_kernel

import llvsparse as ls


def _types(dtype: str = "float64", **formats: tuple[str, int]):
    return {n: ls.tensors.format.as_format(f, order).tensor_type(dtype, "int32")
            for n, (f, order) in formats.items()}


def _scheduled(statement: str, types) -> list[Nest]:
    concrete = to_concrete(ls.parse(statement), types)
    try:
        return schedule(concrete, types)
    except ls.ScheduleError:
        return schedule(concrete, types, split=True)


def _nest(statement: str, order: str, types) -> Nest:
    """A nest in a loop order the scheduler would refuse (it needs a workspace)."""
    concrete = to_concrete(ls.parse(statement), types)
    return Nest(concrete, tuple(order), peel_sums(hoist_sums(concrete.rhs))[1])


def _matrix(rows: int, cols: int, seed: int, fmt: str) -> sp.spmatrix:
    return sp.random(rows, cols, density=0.2, format=fmt, random_state=seed)


# ------------------------------------------------------------------------- construction

def test_statements_are_frozen_values():
    i, j = IndexVar("i"), IndexVar("j")
    body = Apply(MUL, (Operand("A", ("i", "j"), 1), Operand("x", ("j",), 2)))
    stmt = Forall(i, Forall(j, Assign(Access("y", (i,)), ADD, body)))
    again = Forall(IndexVar("i"), Forall(IndexVar("j"),
                                         Assign(Access("y", (IndexVar("i"),)), ADD, body)))
    assert stmt == again and hash(stmt) == hash(again)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stmt.index = j  # type: ignore[misc]
    loops, inner = loop_nest(stmt)
    assert [loop.index for loop in loops] == [i, j] and inner.access.name == "y"
    assert show(stmt) == "forall(i, forall(j, y(i) += A(i,j) * x(j)))"


def test_index_expressions_print_as_trees():
    h, r = IndexVar("h"), IndexVar("r")
    assert str(Affine(((h, 1), (r, 1)))) == "h + r"
    assert str(Affine(((h, 4), (r, 1)), offset=2)) == "4*h + r + 2"
    outer = Derived("i0", "split_outer", (IndexVar("i"),), (8,))
    assert str(outer) == "i0" and outer.definition() == "i0 = split_outer(i, 8)"
    assert str(Access("O", (Affine(((h, 1), (r, 1))), outer))) == "O(h + r, i0)"


def test_sequences_fold_and_unfold():
    parts = [Assign(Access("y", (IndexVar("i"),)), None, Operand(n, ("i",), k))
             for k, n in enumerate("abc")]
    stmt = sequence(parts)
    assert isinstance(stmt, Sequence) and sequence_parts(stmt) == parts
    assert concrete_text(stmt) == "y(i) = a(i)\ny(i) = b(i)\ny(i) = c(i)"
    with pytest.raises(ValueError, match="at least one statement"):
        sequence([])


# ----------------------------------------------------------------- built from schedules

def test_spmv_prints_its_loop_nest():
    types = _types(y=("dense", 1), A=("csr", 2), x=("dense", 1))
    stmt = statement_of(_scheduled("y(i) = A(i,j) * x(j)", types), types)
    assert show(stmt) == "forall(i, forall(j, y(i) += A(i,j) * x(j)))"
    assert show_indented(stmt) == "forall i:\n  forall j:\n    y(i) += A(i,j) * x(j)"


def test_spadd_assigns_without_reduction():
    types = _types(C=("csr", 2), A=("csr", 2), B=("csr", 2))
    stmt = statement_of(_scheduled("C(i,j) = A(i,j) + B(i,j)", types), types)
    assert show(stmt) == "forall(i, forall(j, C(i,j) = A(i,j) + B(i,j)))"


def test_split_additive_statement_is_a_sequence():
    """CSR + CSC into a dense output: one nest per storage order, the second adding."""
    types = _types(C=("dense", 2), A=("csr", 2), B=("csc", 2))
    stmt = statement_of(_scheduled("C(i,j) = A(i,j) + B(i,j)", types), types)
    assert isinstance(stmt, Sequence)
    assert concrete_text(stmt) == ("forall(i, forall(j, C(i,j) = A(i,j)))\n"
                                   "forall(j, forall(i, C(i,j) += B(j,i)))")


def test_blocked_output_index_prints_its_derivation():
    types = _types(C=("dense", 2), A=("bcsr2x2", 2))
    stmt = statement_of(_scheduled("C(i,j) = A(i,j) * 2", types), types)
    _, inner = loop_nest(stmt)
    assert str(inner.access) == "C(2*A_0__1 + A_2__1, 2*A_1__1 + A_3__1)"


def test_inner_sum_becomes_a_scalar_temporary():
    """A sum under an addition is not a loop of the nest: code generation runs it as its
    own loop into a scalar, and the statement says so."""
    a = _matrix(25, 15, 7, "csr")
    x, z = np.arange(15.0), np.linspace(-1, 1, 25)
    kernel = ls.compile("y(i) = A(i,j) * x(j) + z(i)", A="csr", x="dense", z="dense")
    result = kernel(A=ls.Tensor.from_scipy(a, "csr"), x=x, z=z)
    np.testing.assert_allclose(result.to_numpy(), a @ x + z, rtol=1e-12)
    assert kernel.concrete == ("forall(i, where(y(i) = t() + z(i), "
                               "forall(j, t() += A(i,j) * x(j))) with t: float64 scalar)")
    types = _types("float32", y=("dense", 1), A=("csr", 2), x=("dense", 1), z=("dense", 1),
                   t=("dense", 1))
    stmt = statement_of(_scheduled("y(i) = A(i,j) * x(j) + z(i)", types), types)
    where = stmt.body
    assert isinstance(where, Where) and where.temporaries[0].name == "t1"
    assert where.temporaries[0].dtype == "float32" and where.temporaries[0].type.order == 0
    assert show_indented(stmt) == (
        "forall i:\n  where with t1: float32 scalar:\n    consumer:\n"
        "      y(i) = t1() + z(i)\n    producer:\n      forall j:\n"
        "        t1() += A(i,j) * x(j)")


def test_hidden_diagonal_level_is_a_loop():
    """DIA's storage-only diagonal level gets its own variable, summed by the outer loop."""
    a = sp.diags([np.arange(1.0, 9.0), np.ones(7)], [0, 1], format="dia")
    x = np.linspace(0, 1, 8)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="dia", x="dense")
    np.testing.assert_allclose(kernel(A=ls.Tensor.from_scipy(a, "dia"), x=x).to_numpy(),
                               a @ x, rtol=1e-12)
    assert kernel.concrete == "forall(A1_0, forall(i, forall(j, y(i) += A(A1_0,i,j) * x(j))))"


def test_kernel_concrete_is_the_statement_tree():
    """What the user reads is what the scheduler decided, and the kernel it describes
    computes the right thing."""
    a, b = _matrix(30, 20, 1, "csr"), _matrix(30, 20, 2, "csc")
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", A="csr", B="csc", C="dense")
    result = kernel(A=ls.Tensor.from_scipy(a, "csr"), B=ls.Tensor.from_scipy(b, "csc"))
    np.testing.assert_allclose(result.to_numpy(), (a + b).toarray(), rtol=1e-12)
    assert kernel.concrete == ("forall(i, forall(j, C(i,j) = A(i,j)))\n"
                               "forall(j, forall(i, C(i,j) += B(j,i)))")


# ----------------------------------------------------------------------------- workspaces

def _through_rule(statement: str, types, **options) -> tuple[list[Nest], str]:
    """The nests the scheduler makes with paper 002's workspace rule, and the concrete
    notation they print as."""
    nests = schedule_kernel(to_concrete(ls.parse(statement), types), types, **options)
    return nests, show(statement_of(nests, types))


def test_gustavson_spgemm_gets_a_dense_row_workspace():
    types = _types("float32", C=("csr", 2), A=("csr", 2), B=("csr", 2))
    (nest,), text = _through_rule("C(i,j) = A(i,k) * B(k,j)", types)
    plan = nest.workspace
    assert nest.order == ("i", "k", "j") and plan.kind is WorkspaceKind.DENSE
    assert plan.hoisted == ("i",) and plan.vars == ("j",)
    w = plan.temporary
    assert isinstance(w, TensorVar) and w.dtype == "float32" and w.type.order == 1
    assert all(lv.full and lv.can_insert for lv in w.type.levels)
    kind = w.type.levels[0].kind
    assert text == ("forall(i, where(forall(j, C(i,j) = w(j)), "
                    "forall(k, forall(j, w(j) += A(i,k) * B(k,j)))) "
                    f"with w: float32 [{kind}:0] (dense workspace))")


@pytest.mark.parametrize("policy", ["sort", "hash", "bucket"])
def test_outer_product_spgemm_gets_a_sparse_workspace(policy):
    """k outermost: two output variables follow the reduction, so a dense row
    accumulator cannot serve and nothing can be hoisted."""
    types = _types(C=("csr", 2), A=("csc", 2), B=("csr", 2))
    (nest,), text = _through_rule("C(i,j) = A(i,k) * B(k,j)", types, policy=policy)
    plan = nest.workspace
    assert nest.order == ("k", "i", "j") and plan.kind is WorkspaceKind.SPARSE
    assert plan.hoisted == () and plan.vars == ("i", "j")
    w = plan.temporary
    assert w.type.order == 2 and w.dtype == "float64"
    assert all(lv.can_insert and not lv.full for lv in w.type.levels)
    assert text.startswith("where(forall(i, forall(j, C(i,j) = w(i,j))), "
                           "forall(k, forall(i, forall(j, w(i,j) += A(k,i) * B(k,j))))) "
                           "with w: float64 [")
    assert text.endswith(f"] ({policy} workspace)")


def test_sparse_workspaces_wait_for_conversions_when_asked():
    """Without ``sparse`` the rule's sparse choice is left to the caller, which tries
    converting an operand first (lower_converting)."""
    types = _types(C=("csr", 2), A=("csc", 2), B=("csr", 2))
    with pytest.raises(ls.ScheduleError, match="scattered"):
        _through_rule("C(i,j) = A(i,k) * B(k,j)", types, sparse=False)


@pytest.mark.parametrize("out", ["dense", ["dense", "hashed"], "coo-unordered"])
def test_no_workspace_for_outputs_taking_scattered_entries(out):
    """The scheduler runs these k,i,j and the kernel is right without a workspace."""
    types = _types(C=(out, 2), A=("csc", 2), B=("csr", 2))
    (nest,), text = _through_rule("C(i,j) = A(i,k) * B(k,j)", types)
    assert nest.order == ("k", "i", "j") and nest.workspace is None
    assert "where" not in text
    a, b = _matrix(12, 9, 3, "csc"), _matrix(9, 11, 4, "csr")
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csc", B="csr", out_format=out)
    result = kernel(A=ls.Tensor.from_scipy(a, "csc"), B=ls.Tensor.from_scipy(b, "csr"))
    np.testing.assert_allclose(result.to_numpy(), (a @ b).toarray(), rtol=1e-12)


def test_no_workspace_when_loops_follow_the_output_order():
    types = _types(C=("csr", 2), A=("csr", 2), B=("csc", 2))
    nests, text = _through_rule("C(i,j) = A(i,k) * B(k,j)", types)
    assert [n.workspace for n in nests] == [None] * len(nests) and "where" not in text


def test_transposed_copy_needs_a_sparse_workspace():
    types = _types(C=("csr", 2), A=("csr", 2))
    (nest,), text = _through_rule("C(j,i) = A(i,j)", types)
    assert nest.workspace.kind is WorkspaceKind.SPARSE
    assert text.startswith(
        "where(forall(j, forall(i, C(j,i) = w(j,i))), forall(i, forall(j, w(j,i) += A(i,j)))) ")


def test_scalar_output_needs_no_workspace():
    types = _types(s=("dense", 0), A=("csr", 2), B=("csr", 2))
    (nest,), text = _through_rule("s = A(i,j) * B(i,j)", types)
    assert nest.workspace is None and text == "forall(i, forall(j, s() += A(i,j) * B(i,j)))"


def test_workspace_name_avoids_operands():
    types = _types(C=("csr", 2), w=("csr", 2), B=("csr", 2))
    (nest,), text = _through_rule("C(i,j) = w(i,k) * B(k,j)", types)
    assert nest.workspace.temporary.name == "w_" and "w_(j) += w(i,k) * B(k,j)" in text
