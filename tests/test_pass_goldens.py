"""Each loop-IR pass on programs, without LLVM: the program before and after the pass,
as ``--emit loops`` prints them. Every pass changes exactly the line of the loop it
applies to (a note, a tag, a field of the node); the rest of the program is the same."""

from __future__ import annotations

import difflib

import pytest
from llvsparse.ir.from_schedule import statement_of
from llvsparse.ir.frontend import to_concrete
from llvsparse.ir.loops import Program, show
from llvsparse.ir.lower_loops import lower
from llvsparse.ir.opt import passes
from llvsparse.ir.schedule import schedule

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
