"""The scheduler's choices as rewrites of concrete notation (ir/schedule/rewrites.py), each
checked on the text it prints before and after, without generating code, and the
statement read back as the nests lowering walks (ir/schedule/statement_parts.py)."""

from __future__ import annotations

import pytest
from llvsparse.ir.concrete.expressions import peel_sums
from llvsparse.ir.concrete.from_notation import to_concrete
from llvsparse.ir.concrete.statements import TensorVar, concrete_text, sequence, show
from llvsparse.ir.schedule.precompute import plan_precomputes
from llvsparse.ir.schedule.rewrites import (
    assignment,
    declared,
    in_loops,
    through_workspace,
    with_precomputes,
)
from llvsparse.ir.schedule.scheduler import schedule
from llvsparse.ir.schedule.statement_parts import output_workspace, parts_of, precomputes_of
from llvsparse.ir.schedule.workspace_plan import WorkspacePlan
from llvsparse.ir.schedule.workspace_policies import DENSE
from llvsparse.ir.types import TensorType

import llvsparse as ls


def _types(**formats: tuple[str, int]) -> dict[str, TensorType]:
    return {n: ls.named_format(f, order).tensor_type("float64", "int32")
            for n, (f, order) in formats.items()}


def _assignment(statement: str, types: dict[str, TensorType]):
    concrete = to_concrete(ls.parse(statement), types)
    return concrete, assignment(concrete, peel_sums(concrete.rhs)[1])


def test_an_assignment_goes_under_its_loops_in_the_order_chosen() -> None:
    types = _types(y=("dense", 1), A=("csc", 2), x=("dense", 1))
    _, stmt = _assignment("y(i) = A(i,j) * x(j)", types)
    assert show(stmt) == "y(i) += A(j,i) * x(j)"  # CSC: its storage order
    assert show(in_loops(stmt, ("j", "i"), types)) == \
        "forall(j, forall(i, y(i) += A(j,i) * x(j)))"
    assert show(in_loops(stmt, ("i", "j"), types)) == \
        "forall(i, forall(j, y(i) += A(j,i) * x(j)))"


def test_a_sum_inside_an_expression_becomes_a_named_apart_temporary() -> None:
    types = _types(y=("dense", 1), A=("csr", 2), x=("dense", 1), z=("dense", 1))
    concrete = to_concrete(ls.parse("y(i) = A(i,j) * x(j) + z(i)"), types)
    stmt = assignment(concrete, concrete.rhs)
    assert show(in_loops(stmt, ("i",), types)) == (
        "forall(i, where(y(i) = t() + z(i), forall(j, t() += A(i,j) * x(j))) "
        "with t: float64 scalar)")
    later = in_loops(stmt, ("i",), types, {"t", "t1"})  # taken by an earlier statement
    assert declared(later) == {"t2"} and "t2() += A(i,j) * x(j)" in show(later)


def test_a_split_statement_names_each_terms_temporaries_apart() -> None:
    """One nest per term (CSR and CSC terms into a dense output), the scalar temporaries
    of its terms named t and t1, as when the terms are scheduled one after another."""
    types = _types(y=("dense", 1), A=("csr", 2), B=("csc", 2), x=("dense", 1),
                   z=("dense", 1))
    stmt = schedule(to_concrete(ls.parse("y(i) = sum_j(A(i,j) * x(j)) * z(i) + "
                                         "sum_j(A(i,j) * z(j)) * x(i) + B(i,j) * x(j)"),
                                types), types, split=True)
    assert concrete_text(stmt).splitlines() == [
        ("forall(i, where(y(i) += t() * z(i), forall(j, t() += A(i,j) * x(j))) "
        "with t: float64 scalar)"),
        ("forall(i, where(y(i) += t1() * x(i), forall(j, t1() += A(i,j) * z(j))) "
        "with t1: float64 scalar)"),
        "forall(j, forall(i, y(i) += B(j,i) * x(j)))"]
    parts = parts_of(stmt)
    assert [p.order for p in parts] == [("i",), ("i",), ("j", "i")]
    assert [p.assign.accumulate for p in parts] == [False, True, True]


def test_the_output_workspace_is_a_where_under_the_hoisted_loops() -> None:
    types = _types(C=("csr", 2), A=("csr", 2), B=("csr", 2))
    _, stmt = _assignment("C(i,j) = A(i,k) * B(k,j)", types)
    nest = in_loops(stmt, ("i", "k", "j"), types)
    assert show(nest) == "forall(i, forall(k, forall(j, C(i,j) += A(i,k) * B(k,j))))"
    level = ls.named_format("dense", 1).tensor_type("float64", "int32")
    w = TensorVar("w", level, DENSE.name)
    plan = WorkspacePlan(DENSE.kind, DENSE, ("i",), ("j",), w)
    rewritten = through_workspace(nest, plan)
    assert show(rewritten) == (
        "forall(i, where(forall(j, C(i,j) = w(j)), forall(k, forall(j, w(j) += "
        "A(i,k) * B(k,j)))) with w: float64 [dense:0] (dense workspace))")
    assert output_workspace(rewritten) == plan
    (part,) = parts_of(rewritten)
    assert part.order == ("i", "k", "j") and part.workspace == plan
    assert output_workspace(nest) is None
    with pytest.raises(ValueError, match="hoisted"):
        through_workspace(in_loops(stmt, ("k", "i", "j"), types), plan)


def test_an_operand_workspace_is_a_where_whose_temporary_says_what_it_copies() -> None:
    """Triangle counting: S(i,k) is invariant in the loop over j, copied once per i."""
    types = _types(t=("dense", 0), S=("csr", 2))
    stmt = schedule(to_concrete(ls.parse("t = S(i,j) * S(j,k) * S(i,k)"), types), types)
    assert show(stmt) == "forall(i, forall(j, forall(k, t() += (S(i,j) * S(j,k)) * S(i,k))))"
    planned = plan_precomputes(stmt, types, True, "float64")
    assert show(planned) == (
        "forall(i, where(forall(j, forall(k, t() += (S(i,j) * S(j,k)) * S_ws(k))), "
        "forall(k, S_ws(k) = S(i,k))) with S_ws: float64 [operand_workspace:0])")
    (plan,) = precomputes_of(planned)
    assert (plan.operand.tensor, plan.at, plan.var) == ("S", "j", "k")
    assert "invariant in the loop over j" in plan.reason
    assert with_precomputes(stmt, (plan,)) == planned
    (part,) = parts_of(planned)  # the loop order and expression are the nest's own
    assert part.order == ("i", "j", "k") and part.body == parts_of(stmt)[0].body
    assert plan_precomputes(stmt, types, False, "float64") is stmt


def test_a_sum_workspace_runs_the_summed_loops_in_its_producer() -> None:
    types = _types(A=("dense", 2), B=("csf", 3), C=("dense", 2), D=("dense", 2))
    stmt = schedule(to_concrete(ls.parse("A(i,j) = B(i,k,l) * C(k,j) * D(l,j)"), types),
                    types)
    assert show(stmt) == \
        "forall(i, forall(k, forall(l, forall(j, A(i,j) += (B(i,k,l) * C(k,j)) * D(l,j)))))"
    planned = plan_precomputes(stmt, types, True, "float64")
    assert show(planned).startswith(
        "forall(i, forall(k, where(forall(j, A(i,j) += w(j) * C(k,j)), "
        "forall(l, forall(j, w(j) += B(i,k,l) * D(l,j)))) with w: float64 [")
    (part,) = parts_of(planned)
    assert part.order == ("i", "k", "l", "j") and part.precomputes[0].summed == ("l",)


def test_a_statement_the_scheduler_did_not_build_is_refused() -> None:
    """Lowering reads each nest's source off its assignment: a hand-built one has none."""
    types = _types(y=("dense", 1), A=("csr", 2), x=("dense", 1))
    _, stmt = _assignment("y(i) = A(i,j) * x(j)", types)
    bare = in_loops(type(stmt)(stmt.access, stmt.reduce_op, stmt.expr), ("i", "j"), types)
    assert bare == in_loops(stmt, ("i", "j"), types)  # equal as printed
    with pytest.raises(ValueError, match="not built by the scheduler"):
        parts_of(sequence([bare]))
