"""Each loop-IR pass on programs, without LLVM: the program before and after the pass,
as ``--emit loops`` prints them. Every pass changes exactly the line of the loop it
applies to (a note, a tag, a field of the node); the rest of the program is the same."""

from __future__ import annotations

import difflib

import pytest
from llvsparse.ir.concrete.from_notation import to_concrete
from llvsparse.ir.loops.lower import lower
from llvsparse.ir.loops.nodes import Program, loops_of, show
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
    stmt = schedule(to_concrete(ls.parse(statement), types), types)
    return lower(stmt, types, statement.split("(")[0])


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
     "for i in coordinates of A.0:  [other form: pairs of acc over A.1]  {thread rows}"),
    ("gallop", "y(i) = A(i,j) * B(i,j)", {**SPMV_CSR, "B": ("csr", 2)}, passes.Target(),
     "  merge j over A.1, B.1:",
     ("  merge j over A.1, B.1:  [gallop when skewed 8x, lockstep when equal; other form: "
      "gallop always]")),
    ("gallop", "z(i) = x(i) * w(i)", {"z": ("dense", 1), "x": ("coo", 1), "w": ("coo", 1)},
     passes.Target(), "merge i over x.0, w.0:  {thread rows}",  # threads split it: no lockstep
     "merge i over x.0, w.0:  [gallop when skewed 8x; other form: gallop always]  {thread rows}"),
    ("running_sums", "y(i) = A(i,j) * x(j)", {**SPMV_CSR, "A": ("coo", 2)}, passes.Target(),
     "for i in runs of positions of A.0:  {thread rows}",
     "for i in runs of positions of A.0:  [running sums of acc, unroll 8]  {thread rows}"),
    ("select_cases", "C(i,j) = A(i,j) + B(i,j)", SPMM_SPARSE_B, passes.Target(),
     "  merge j over A.1, B.1:", "  merge j over A.1, B.1:  [other form: select cases]"),
    ("case_steps", "C(i,j) = A(i,j) + B(i,j)", SPMM_SPARSE_B, passes.Target(),
     "  merge j over A.1, B.1:", "  merge j over A.1, B.1:  [advance per case]"),
    ("clear_rows", "C(i,k) = A(i,j) * B(j,k)", SPMM_SPARSE_B, passes.Target(),
     "for i in coordinates of A.0:  {thread rows}",
     "for i in coordinates of A.0:  [clear rows]  {thread rows}"),
    ("prefetch", "C(i,k) = A(i,j) * B(j,k)", SPMM_SPARSE_B, passes.Target(),
     "  for j in positions of A.1:", "  for j in positions of A.1:  [other form: prefetch B.1 rows 4 ahead]"),
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
     "for i in coordinates of A.0:  [other form: pairs of acc over A.1]  {thread rows}",
     "for i in coordinates of A.0:  [pairs of acc over A.1]  {thread rows}"),
    ("y(i) = A(i,j) * B(i,j)", {**SPMV_CSR, "B": ("csr", 2)},
     ("  merge j over A.1, B.1:  [gallop when skewed 8x, lockstep when equal, advance per "
      "case; other form: gallop always]"),
     "  merge j over A.1, B.1:  [gallop always, lockstep when equal, advance per case]"),
    ("C(i,j) = A(i,j) + B(i,j)", SPMM_SPARSE_B,
     "  merge j over A.1, B.1:  [advance per case; other form: select cases]",
     "  merge j over A.1, B.1:  [advance per case, select cases]"),
    ("C(i,k) = A(i,j) * B(j,k)", SPMM_SPARSE_B,
     "  for j in positions of A.1:  [other form: prefetch B.1 rows 4 ahead]",
     "  for j in positions of A.1:  [prefetch B.1 rows 4 ahead]"),
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


def test_no_steps_inside_the_cases_of_a_merge_the_output_closes_segments_around() -> None:
    """A union of DCSR matrices into DCSR: the output closes a segment of appended
    entries around each row, after the row's cases, so the merge over rows steps its
    iterators after the cases; the merge over a row's entries steps inside them."""
    dcsr = {"C": ("dcsr", 2), "A": ("dcsr", 2), "B": ("dcsr", 2)}
    program = passes.optimize(lowered("C(i,j) = A(i,j) + B(i,j)", dcsr), passes.Target(),
                              (passes.thread_rows, passes.case_steps))
    merges = [line.strip() for line in show(program.root).splitlines() if "merge" in line]
    assert merges[0] == "merge i over A.0, B.0:  {thread rows}"
    assert merges[1] == "merge j over A.1, B.1:  [advance per case]"


def test_the_running_sum_and_the_prefetched_rows_are_named_in_the_program() -> None:
    """The running-sums pass names the temporary the run's sum is kept in; the prefetch
    pass names the level whose rows it reads ahead (the backend finds neither itself)."""
    coo = passes.optimize(lowered("y(i) = A(i,j) * x(j)", {**SPMV_CSR, "A": ("coo", 2)}))
    rows = loops_of(coo.root)[0]
    assert rows.forms.running_sums and rows.forms.run_sum == "acc"
    assert "allocate acc: float64" in show(rows.body)
    spgemm = passes.optimize(lowered("C(i,k) = A(i,j) * B(j,k)", SPMM_SPARSE_B))
    middle = loops_of(spgemm.root)[1]
    fetch = middle.other.prefetch
    assert middle.forms.prefetch is None and fetch.ahead == passes.AHEAD
    assert [(r.tensor, r.level) for r in fetch.rows] == [("B", 1)]
    assert [(r.tensor, r.level) for r in fetch.rows] == \
        [(n.iterator.tensor, n.iterator.level) for n in loops_of(middle.body)]


def test_room_is_reserved_for_the_appends_of_the_loops_that_append_one_entry_each() -> None:
    """A union into CSR: the merge over a row's entries and its two tails append one
    entry per iteration, so room for them is made before each (the emitter then tests
    no capacity inside); the loop over rows appends none itself."""
    csr = {"C": ("csr", 2), "A": ("csr", 2), "B": ("csr", 2)}
    program = lowered("C(i,j) = A(i,j) + B(i,j)", csr)
    before = show(passes.optimize(program, passes.Target(), ()).root)
    after = show(passes.optimize(program, passes.Target(), (passes.reserve_appends,)).root)
    changed = [line for line in difflib.ndiff(before.splitlines(), after.splitlines())
               if line[:2] in ("- ", "+ ")]
    assert changed == [
        "-   merge j over A.1, B.1:", "+   merge j over A.1, B.1:  [reserve appends]",
        "-   for j in positions of A.1, resuming:",
        "+   for j in positions of A.1, resuming:  [reserve appends]",
        "-   for j in positions of B.1, resuming:",
        "+   for j in positions of B.1, resuming:  [reserve appends]"]
    dense = passes.optimize(lowered("C(i,j) = A(i,j) + B(i,j)", {**csr, "C": ("dense", 2)}))
    assert not any(n.forms.reserve for n in loops_of(dense.root))  # it inserts


def test_straight_line_code_where_a_loop_would_run_once() -> None:
    """COO SpMV: the loop over a row's singleton level (one child per position) runs
    once per position of its parent, whose runs are summed as they come (one position
    at a time), so it is no loop; where the parent's runs are segments (no running
    sums: the range spans the run) it stays a loop."""
    coo = {**SPMV_CSR, "A": ("coo", 2)}
    program = lowered("y(i) = A(i,j) * x(j)", coo)
    runs = (passes.thread_rows, passes.running_sums)
    before = show(passes.optimize(program, passes.Target(), runs).root)
    after = show(passes.optimize(program, passes.Target(), (*runs, passes.straight_line)).root)
    changed = [line for line in difflib.ndiff(before.splitlines(), after.splitlines())
               if line[:2] in ("- ", "+ ")]
    assert changed == ["-   for j in positions of A.1:",
                       "+   for j in positions of A.1:  [straight-line]"]
    segments = passes.optimize(program, passes.Target(), (passes.straight_line,))
    assert not any(n.forms.straight for n in loops_of(segments.root))
    csr = passes.optimize(lowered("y(i) = A(i,j) * x(j)", SPMV_CSR))
    assert not any(n.forms.straight for n in loops_of(csr.root))  # compressed: a loop


def test_a_loop_threads_split_tests_its_range_where_its_level_is_unordered() -> None:
    """A hashed vector's positions hold its coordinates in no order: a thread's range
    cannot be found by a search, so the loop threads split tests each coordinate (the
    ``range test`` tag, which the emitter translates); an ordered level is clamped."""
    hashed = {"z": ("dense", 1), "x": ("hash", 1)}
    program = lowered("z(i) = x(i) * 2", hashed)
    before = show(passes.optimize(program, passes.Target(), ()).root)
    after = show(passes.optimize(program, passes.Target(), (passes.thread_rows,)).root)
    assert before.splitlines()[0] == "for i in positions of x.0:"
    assert after.splitlines()[0] == "for i in positions of x.0:  {thread rows, range test}"
    ordered = passes.optimize(lowered("z(i) = x(i) * 2", {**hashed, "x": ("coo", 1)}))
    assert show(ordered.root).splitlines()[0].endswith("{thread rows}")
