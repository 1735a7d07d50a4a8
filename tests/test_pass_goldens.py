"""Each loop-IR pass on programs, without LLVM: the program before and after the pass,
as ``--emit loops`` prints them. Every pass changes exactly the line of the loop it
applies to (a note, a tag, a field of the node); the rest of the program is the same."""

from __future__ import annotations

import difflib

import pytest
from llvsparse.ir.concrete.from_notation import to_concrete
from llvsparse.ir.loops.from_schedule import statement_of
from llvsparse.ir.loops.lower import lower
from llvsparse.ir.loops.nodes import Program, show
from llvsparse.ir.opt import passes
from llvsparse.ir.schedule.scheduler import schedule

import llvsparse as ls

SPMV_CSR = {"y": ("dense", 1), "A": ("csr", 2), "x": ("dense", 1)}
SPMM_DENSE_B = {"C": ("dense", 2), "A": ("csr", 2), "B": ("dense", 2)}
SPMM_SPARSE_B = {"C": ("dense", 2), "A": ("csr", 2), "B": ("csr", 2)}


def lowered(statement: str, formats: dict[str, tuple[str, int]]) -> Program:
    """The program loop lowering builds, before any pass."""
    types = {n: ls.named_format(f, order).tensor_type("float64", "int32")
             for n, (f, order) in formats.items()}
    nests = schedule(to_concrete(ls.parse(statement), types), types)
    return lower(statement_of(nests, types), types, statement.split("(")[0], nests)


def test_the_thread_rows_pass_in_full() -> None:
    program = lowered("y(i) = A(i,j) * x(j)", SPMV_CSR)
    before = show(passes.optimize(program, passes.Target(), ()).root)
    after = show(passes.optimize(program, passes.Target(), (passes.thread_rows,)).root)
    assert before == """\
for i in coordinates of A.0:
  allocate acc: float64
  clear acc = 0.0
  for j in positions of A.1:
    locate x.0 at j
    acc += A(i,j) * x(j)
  insert y(i) = acc()"""
    assert after == before.replace("for i in coordinates of A.0:",
                                   "for i in coordinates of A.0:  {thread rows}")


@pytest.mark.parametrize("name, statement, formats, target, was, becomes", [
    ("jam", "C(i,k) = A(i,j) * B(j,k)", SPMM_DENSE_B, passes.Target(),
     "  for j in positions of A.1:", "  for j in positions of A.1:  [jam 8, 4]"),
    ("jam", "C(i,k) = A(i,j) * B(j,k)", SPMM_DENSE_B, passes.Target(tiles=(("j", 16),)),
     "  for j in positions of A.1:", "  for j in positions of A.1:  [jam 16]"),
    ("pairs", "y(i) = A(i,j) * x(j)", SPMV_CSR, passes.Target(),
     "for i in coordinates of A.0:  {thread rows}",
     "for i in coordinates of A.0:  [other form: pairs]  {thread rows}"),
    ("gallop", "y(i) = A(i,j) * B(i,j)", {**SPMV_CSR, "B": ("csr", 2)}, passes.Target(),
     "  merge j over A.1, B.1:",
     ("  merge j over A.1, B.1:  [gallop when skewed 8x, lockstep when equal; other form: "
      "gallop always]")),
    ("gallop", "z(i) = x(i) * w(i)", {"z": ("dense", 1), "x": ("coo", 1), "w": ("coo", 1)},
     passes.Target(), "merge i over x.0, w.0:  {thread rows}",  # threads split it: no lockstep
     "merge i over x.0, w.0:  [gallop when skewed 8x; other form: gallop always]  {thread rows}"),
    ("running_sums", "y(i) = A(i,j) * x(j)", {**SPMV_CSR, "A": ("coo", 2)}, passes.Target(),
     "for i in runs of positions of A.0:  {thread rows}",
     "for i in runs of positions of A.0:  [running sums, unroll 8]  {thread rows}"),
    ("select_cases", "C(i,j) = A(i,j) + B(i,j)", SPMM_SPARSE_B, passes.Target(),
     "  merge j over A.1, B.1:", "  merge j over A.1, B.1:  [other form: select cases]"),
    ("clear_rows", "C(i,k) = A(i,j) * B(j,k)", SPMM_SPARSE_B, passes.Target(),
     "for i in coordinates of A.0:  {thread rows}",
     "for i in coordinates of A.0:  [clear rows]  {thread rows}"),
    ("prefetch", "C(i,k) = A(i,j) * B(j,k)", SPMM_SPARSE_B, passes.Target(),
     "  for j in positions of A.1:", "  for j in positions of A.1:  [other form: prefetch 4 ahead]"),
    ("unroll_loops", "y(i) = A(i,j) * x(j)", SPMV_CSR, passes.Target(unrolls=(("j", 4),)),
     "  for j in positions of A.1:", "  for j in positions of A.1:  [unroll 4]"),
])
def test_a_pass_changes_only_the_line_of_its_loop(name, statement, formats, target, was,
                                                  becomes) -> None:
    program = lowered(statement, formats)
    before = show(passes.optimize(program, target, (passes.thread_rows,)).root)
    after = show(passes.optimize(program, target,
                                 (passes.thread_rows, getattr(passes, name))).root)
    changed = [line for line in difflib.ndiff(before.splitlines(), after.splitlines())
               if line[:2] in ("- ", "+ ")]
    assert changed == [f"- {was}", f"+ {becomes}"]


@pytest.mark.parametrize("statement, formats, was, becomes", [
    ("y(i) = A(i,j) * x(j)", SPMV_CSR,
     "for i in coordinates of A.0:  [other form: pairs]  {thread rows}",
     "for i in coordinates of A.0:  [pairs]  {thread rows}"),
    ("y(i) = A(i,j) * B(i,j)", {**SPMV_CSR, "B": ("csr", 2)},
     ("  merge j over A.1, B.1:  [gallop when skewed 8x, lockstep when equal; other form: "
      "gallop always]"),
     "  merge j over A.1, B.1:  [gallop always, lockstep when equal]"),
    ("C(i,j) = A(i,j) + B(i,j)", SPMM_SPARSE_B,
     "  merge j over A.1, B.1:  [other form: select cases]",
     "  merge j over A.1, B.1:  [select cases]"),
    ("C(i,k) = A(i,j) * B(j,k)", SPMM_SPARSE_B,
     "  for j in positions of A.1:  [other form: prefetch 4 ahead]",
     "  for j in positions of A.1:  [prefetch 4 ahead]"),
])
def test_the_other_form_is_a_second_program(statement, formats, was, becomes) -> None:
    """The kernel's other form, which the runtime times against the first, is the
    program rewritten (passes.other_form): each loop's other forms become its forms,
    and the line of that loop alone changes; the rewritten program has no other form."""
    first = passes.optimize(lowered(statement, formats))
    other = passes.other_form(first)
    changed = [line for line in difflib.ndiff(show(first.root).splitlines(),
                                              show(other.root).splitlines())
               if line[:2] in ("- ", "+ ")]
    assert changed == [f"- {was}", f"+ {becomes}"]
    assert passes.has_other_form(first) and not passes.has_other_form(other)
    assert passes.other_form(other) == other


def test_a_program_without_other_forms_is_its_own_other_form() -> None:
    """Row-wise SpMM into a dense result: jammed and its rows cleared, in one form."""
    first = passes.optimize(lowered("C(i,k) = A(i,j) * B(j,k)", SPMM_DENSE_B))
    assert show(first.root) == """\
for i in coordinates of A.0:  [clear rows]  {thread rows}
  for j in positions of A.1:  [jam 8, 4]
    locate B.0 at j
    for k in coordinates of B.1:
      C(i,k) += A(i,j) * B(j,k)"""
    assert not passes.has_other_form(first) and passes.other_form(first) == first
