"""The scheduling language: directives parse from and print to the same text, and every
directive that does not fit a kernel is refused, before any IR is built, with a
ScheduleError that names why."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from llvsparse.ir.errors import ScheduleError
from llvsparse.ir.schedule import directives as dv
from llvsparse.ir.schedule.resolved import KernelIndices
from llvsparse.ir.schedule.user_plan import plan_schedule
from llvsparse.ir.schedule.user_statements import check_nest_order

from llvsparse.notation.parse import parse

SPMV = KernelIndices.of(parse("y(i) = A(i,j) * x(j)"))
SPGEMM = KernelIndices.of(parse("C(i,j) = A(i,k) * B(k,j)"))
MTTKRP = KernelIndices.of(parse("A(i,j) = B(i,k,l) * D(l,j) * C(k,j)"))
INNER = KernelIndices.of(parse("a = A(i,j) * B(i,j)"))

names = st.sampled_from(["i", "j", "k", "i0", "i1", "fp", "w"])
directive = st.one_of(
    st.lists(names, min_size=2, max_size=4, unique=True).map(lambda v: dv.Reorder(tuple(v))),
    st.builds(dv.Split, names, names, names, st.integers(1, 512)),
    st.builds(dv.Divide, names, names, names, st.integers(1, 64)),
    st.builds(dv.Fuse, names, names, names),
    st.builds(dv.Pos, names, names, st.sampled_from(["A", "B"]),
              st.lists(names, min_size=1, max_size=3).map(tuple)),
    st.builds(dv.Coord, names, names),
    st.builds(dv.Bound, names, names, st.integers(1, 99), st.sampled_from(dv.BOUND_KINDS)),
    st.builds(dv.Unroll, names, st.integers(1, 16)),
    st.builds(dv.Parallelize, names, st.sampled_from(dv.UNITS), st.sampled_from(dv.RACES)),
)


@given(st.lists(directive, max_size=6))
def test_text_round_trips(directives):
    schedule = dv.Schedule(tuple(directives))
    assert dv.parse_schedule(str(schedule)) == schedule
    assert dv.as_schedule(list(directives)) == schedule


def test_whitespace_and_empty_parts_are_ignored():
    text = " split( i , i0,i1 , 32 ) ;; parallelize(i0,cpu_thread,no_races) ; "
    assert str(dv.parse_schedule(text)) == \
        "split(i, i0, i1, 32); parallelize(i0, cpu_thread, no_races)"
    assert dv.parse_schedule("") == dv.Schedule()


def test_precompute_keeps_its_expression_whole():
    parsed = dv.parse_directive("precompute(A(i,k) * B(k,j), j, jw, hash)")
    assert parsed == dv.Precompute("A(i,k) * B(k,j)", "j", "jw", "hash")


@pytest.mark.parametrize(("text", "message"), [
    ("split(i, i0, i1, 0)", "the factor must be a positive integer, not 0"),
    ("split(i, i0, i1, four)", "the factor must be a positive integer, not 'four'"),
    ("divide(i, i0, i1)", "divide takes 4 arguments, got 3"),
    ("tile(i, 4)", "unknown scheduling directive 'tile'"),
    ("parallelize(i, cpu, no_races)", "the unit must be one of cpu_thread"),
    ("parallelize(i, cpu_thread, locks)", "the race strategy must be one of no_races"),
    ("bound(i, ib, 8, exactly)", "the kind must be one of max_exact"),
    ("reorder(i)", "reorder needs at least two index variables"),
    ("reorder(i, j, i)", "reorder names an index twice"),
    ("pos(i, ip, A)", "must be an access such as A(i,j)"),
    ("split(i, 2x, i1, 4)", "the outer index must be an index variable name"),
    ("split(i, i0, i1, 4", "unbalanced '('"),
    ("split i", "expected a directive such as split(i, i0, i1, 32)"),
])
def test_malformed_directives_say_what_is_wrong(text, message):
    with pytest.raises(ScheduleError, match=re.escape(message)):
        dv.parse_schedule(text)


def test_schedule_is_text_or_directives_only():
    with pytest.raises(TypeError, match="schedule must be a Schedule"):
        dv.as_schedule(42)
    with pytest.raises(TypeError, match="not a scheduling directive"):
        dv.as_schedule(["split(i, i0, i1, 4)"])


def _plan(text: str, kernel: KernelIndices = SPMV, target: str = "cpu"):
    return plan_schedule(dv.parse_schedule(text), kernel, target)


def test_provenance_traces_derived_indices_to_the_original():
    plan = _plan("fuse(i, j, f); pos(f, fp, A(i,j)); split(fp, c, t, 64); "
                 "parallelize(c, cpu_thread, no_races)")
    assert plan.root("c") == "i"
    assert plan.origins["fp"].param == "A(i,j)"
    assert plan.parallel.index == "i" and plan.parallel.loop == "c"
    assert plan.parallel.chunks.by == "entries" and plan.parallel.chunks.size == 64
    assert plan.loops == ("c", "t")


def test_chunks_follow_the_directives_that_derived_the_parallel_loop():
    assert _plan("split(i, i0, i1, 16); parallelize(i0, cpu_thread, no_races)"
                 ).parallel.chunks.describe() == "chunks of 16 coordinates"
    assert _plan("divide(i, i0, i1, 3); parallelize(i0, cpu_thread, no_races)"
                 ).parallel.chunks.describe() == "3 chunks of equal coordinates"
    assert _plan("pos(i, ip, A(i,j)); divide(ip, c, t, 5); parallelize(c, cpu_thread, "
                 "no_races)").parallel.chunks.describe() == \
        "5 chunks of A's stored entries, cut between coordinates"
    assert _plan("parallelize(i, cpu_thread, no_races)").parallel.chunks.by == "balanced"
    assert _plan("reorder(i, j)").serial


@pytest.mark.parametrize(("text", "kernel", "message"), [
    ("split(q, q0, q1, 4)", SPMV, "index q is not an index of this kernel"),
    ("split(i, j, i1, 4)", SPMV, "the outer index j is already an index"),
    ("split(i, i0, i0, 4)", SPMV, "the outer and inner index need two names"),
    ("split(i, i0, i1, 4); split(i, a, b, 2)", SPMV, "index i was replaced by an earlier"),
    ("pos(i, ip, x(j))", SPMV, "the loop over i does not iterate x"),
    ("pos(i, ip, Z(i,j))", SPMV, "Z is not an operand of this kernel"),
    ("pos(i, ip, A(j,i))", SPMV, r"A is accessed as A\(i,j\)"),
    ("fuse(j, i, f)", SPMV, "i must be the loop directly inside j"),
    ("coord(i, c)", SPMV, "i is not a position index"),
    ("parallelize(j, cpu_thread, no_races)", SPMV,
     "threads over j would reduce into the same entries of y"),
    ("parallelize(i, cpu_thread, no_races)", INNER,
     "threads over i would reduce into the same entries of a"),
    ("parallelize(i, cpu_thread, atomics)", INNER, "CPU threads do not add atomically"),
    ("parallelize(j, cpu_thread, temporaries)", KernelIndices.of(parse(
        "y(i) = A(i,j) * x(j) - z(i)")), "not a sum over j"),
    ("parallelize(k, cpu_thread, temporaries)", KernelIndices.of(parse(
        "y(i) = B(i,k) * x(k) + z(i)")), "not a sum over k"),
    ("parallelize(k, cpu_thread, temporaries)", KernelIndices.of(parse(
        "y(i) = max(B(i,k) * x(k), 1)")), "not a sum over k"),
    ("split(i, i0, i1, 8); parallelize(i1, cpu_thread, no_races)", SPMV,
     "i1 is the inner loop of a split"),
    ("split(i, i0, i1, 8); reorder(i0, j, i1)", SPMV, "tiling"),
    ("split(i, i0, i1, 8); reorder(i1, i0)", SPMV, "runs i1 outside i0"),
    ("parallelize(i, gpu_block, no_races)", SPMV, "unit gpu_block needs target='cuda'"),
    ("split(j, j0, j1, 4); unroll(j0, 4)", SPMV, "outer loop of a split"),
    ("fuse(i, j, f); unroll(f, 4)", SPMV, "unroll an original index"),
    ("unroll(j, 1)", SPMV, "at least 2"),
    ("unroll(j, 4); unroll(j, 2)", SPMV, "unrolled twice"),
    ("bound(i, ib, 8, min_exact)", SPMV, "only max_exact and max_constraint"),
    ("precompute(A(i,k), j, jw, hash)", SPGEMM, "sums an index the other factors lack"),
    ("precompute(A(i,k) * X(k,j), j, jw, dense)", SPGEMM, "or a product of some of its"),
    ("precompute(B(i,k,l) * D(l,j), j, j, hash)", MTTKRP, "reduced into a dense row"),
    ("precompute(C(k,j), j, j, w)", MTTKRP, "sums an index the other factors lack"),
    ("precompute(A(i,k) * B(k,j), i, iw, hash)", SPGEMM, "over the output's last index"),
    ("parallelize(i, cpu_thread, no_races); parallelize(i, cpu_thread, no_races)", SPMV,
     "already parallel"),
])
def test_illegal_schedules_name_why(text, kernel, message):
    with pytest.raises(ScheduleError, match=message):
        _plan(text, kernel)


def test_cpu_units_need_a_cpu_target():
    with pytest.raises(ScheduleError, match="unit cpu_thread needs a CPU target"):
        _plan("parallelize(i, cpu_thread, no_races)", target="cuda-emulated")
    assert _plan("parallelize(i, gpu_thread, no_races)", target="cuda").gpu


def test_the_parallel_loop_kind_follows_the_index():
    assert _plan("parallelize(i, cpu_thread, no_races)", SPGEMM).parallel.kind == "rows"
    assert _plan("reorder(k, i, j); parallelize(i, cpu_thread, no_races)",
                 SPGEMM).parallel.kind == "nested"
    assert _plan("parallelize(j, cpu_thread, no_races)", SPGEMM).parallel.kind == "nested"
    reduced = _plan("parallelize(k, cpu_thread, temporaries)", SPGEMM).parallel
    assert reduced.kind == "reduced" and reduced.operator.name == "add"


def test_nest_order_must_keep_the_schedule():
    plan = _plan("reorder(j, i)")
    check_nest_order(plan, ("j", "i"))
    with pytest.raises(ScheduleError, match="not the schedule's j, i"):
        check_nest_order(plan, ("i", "j"))
    fused = _plan("reorder(i, k, j); fuse(k, j, f)", SPGEMM)
    check_nest_order(fused, ("i", "k", "j"))
    parallel = _plan("parallelize(i, cpu_thread, no_races)", SPGEMM)
    with pytest.raises(ScheduleError, match="parallel loop over i is not outermost"):
        check_nest_order(parallel, ("k", "i", "j"))
