"""Kernels under user schedules: every legal schedule computes what numpy computes, on
every format pair here; the printed concrete notation shows each transformation; the
threads' chunks are the ones the schedule names; a schedule keys caches and survives
pickling; what a kernel cannot do under a schedule is refused by name."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llvsparse.ir.errors import ScheduleError

import llvsparse as ls


def _csr(rows: int, cols: int, density: float, seed: int, skew: bool = False) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    matrix = sp.random(rows, cols, density, format="csr", random_state=rng)
    if skew and rows:  # one row holds most entries (power-law inputs)
        dense_row = sp.csr_matrix((rng.random(cols), ([0] * cols, range(cols))), (rows, cols))
        matrix = (matrix + dense_row).tocsr()
    return matrix


def _dense(result) -> np.ndarray:
    return np.asarray(result.to_numpy() if hasattr(result, "to_numpy") else result)


# (expression, formats, operands from (A, rng), numpy reference, output format)
KERNELS = [
    ("y(i) = A(i,j) * x(j)", {"A": "csr"}, lambda A, rng: {"x": rng.random(A.shape[1])},
     lambda o: o["A"] @ o["x"], "dense"),
    ("C(i,j) = A(i,k) * B(k,j)", {"A": "csr"}, lambda A, rng: {"B": rng.random((A.shape[1], 5))},
     lambda o: o["A"] @ o["B"], "dense"),
    ("C(i,j) = A(i,k) * B(k,j)", {"A": "csr", "B": "csr"},
     lambda A, rng: {"B": _csr(A.shape[1], 7, 0.3, 5)}, lambda o: (o["A"] @ o["B"]).toarray(),
     "csr"),
    ("C(i,j) = A(i,j) + B(i,j)", {"A": "csr", "B": "csr"},
     lambda A, rng: {"B": _csr(*A.shape, 0.2, 9)}, lambda o: (o["A"] + o["B"]).toarray(), "csr"),
    ("C(i,j) = A(i,j) * D(i,k) * E(j,k)", {"A": "csr"},
     lambda A, rng: {"D": rng.random((A.shape[0], 3)), "E": rng.random((A.shape[1], 3))},
     lambda o: o["A"].multiply(o["D"] @ o["E"].T).toarray(), "csr"),
    ("y(i) = A(i,j) * x(j)", {"A": "dcsr"}, lambda A, rng: {"x": rng.random(A.shape[1])},
     lambda o: o["A"] @ o["x"], "dense"),
    ("y(i) = A(i,j) * x(j)", {"A": "coo"}, lambda A, rng: {"x": rng.random(A.shape[1])},
     lambda o: o["A"] @ o["x"], "dense"),
]


def _schedules(kernel_case: int) -> st.SearchStrategy[str]:
    """Random legal schedules over the output's first index i."""
    chunked = st.one_of(
        st.just("parallelize(i, cpu_thread, no_races)"),
        st.integers(1, 40).map(lambda f: f"split(i, i0, i1, {f}); "
                               "parallelize(i0, cpu_thread, no_races)"),
        st.integers(1, 9).map(lambda p: f"divide(i, i0, i1, {p}); "
                              "parallelize(i0, cpu_thread, no_races)"),
        st.integers(1, 60).map(lambda f: f"pos(i, ip, A(i,{'jk'[kernel_case in (1, 2)]})); "
                               f"split(ip, c, t, {f}); parallelize(c, cpu_thread, no_races)"),
        st.integers(1, 9).map(lambda p: f"pos(i, ip, A(i,{'jk'[kernel_case in (1, 2)]})); "
                              f"divide(ip, c, t, {p}); parallelize(c, cpu_thread, no_races)"),
        st.integers(1, 20).map(lambda f: f"split(i, i0, i1, {f})"),
        st.just(""),
    )
    return chunked


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.integers(0, len(KERNELS) - 1), data=st.data(),
       shape=st.tuples(st.integers(0, 40), st.integers(1, 30)),
       density=st.sampled_from([0.0, 0.05, 0.3, 1.0]), skew=st.booleans(),
       threads=st.integers(1, 3), seed=st.integers(0, 10**6))
def test_legal_schedules_compute_what_numpy_computes(case, data, shape, density, skew,
                                                     threads, seed):
    expression, formats, make, reference, out_format = KERNELS[case]
    if "dcsr" in formats.values() or "coo" in formats.values():
        schedule = data.draw(st.sampled_from(["", "parallelize(i, cpu_thread, no_races)",
                                              "split(i, i0, i1, 3)"]))
    else:
        schedule = data.draw(_schedules(case))
    rng = np.random.default_rng(seed)
    A = _csr(*shape, density, seed, skew)
    operands = {"A": A, **make(A, rng)}
    kernel = ls.compile(expression, out_format=out_format, schedule=schedule, **formats)
    result = kernel(**operands, threads=threads)
    np.testing.assert_allclose(_dense(result), reference(operands), rtol=1e-12, atol=1e-12)


def _spmv(schedule: str, **kw) -> ls.Kernel:
    return ls.compile("y(i) = A(i,j) * x(j)", A="csr", out_format="dense", schedule=schedule,
                      **kw)


def test_concrete_notation_after_each_transformation():
    base = ls.compile("y(i) = A(i,j) * x(j)", A="csr", out_format="dense")
    steps = [
        (base.split("i", "i0", "i1", 32),
         ("forall(i0 = split_outer(i, 32), forall(i1 = split_inner(i, 32), "
          "forall(j, y(i) += A(i,j) * x(j))))")),
        (base.split("i", "i0", "i1", 32).parallelize("i0", "cpu_thread", "no_races"),
         ("forall(i0 = split_outer(i, 32):cpu_thread:no_races, forall(i1 = split_inner(i, 32), "
          "forall(j, y(i) += A(i,j) * x(j))))")),
        (base.divide("i", "i0", "i1", 4),
         ("forall(i0 = divide_outer(i, 4), forall(i1 = divide_inner(i, 4), "
          "forall(j, y(i) += A(i,j) * x(j))))")),
        (base.fuse("i", "j", "f"), "forall(f = fuse(i, j), y(i) += A(i,j) * x(j))"),
        (base.fuse("i", "j", "f").pos("f", "fp", "A(i,j)").split("fp", "c", "t", 256)
         .parallelize("c", "cpu_thread", "no_races"),
         ("forall(c = split_outer(pos(fuse(i, j), A(i,j)), 256):cpu_thread:no_races, "
          "forall(t = split_inner(pos(fuse(i, j), A(i,j)), 256), y(i) += A(i,j) * x(j)))")),
        (base.bound("i", "ib", 50, "max_constraint"),
         "forall(ib = bound(i, 50), forall(j, y(i) += A(i,j) * x(j)))"),
    ]
    for kernel, text in steps:
        assert kernel.concrete == text
    assert "schedule" not in base.concrete


def test_reorder_changes_the_loop_order_and_keeps_the_result():
    rng = np.random.default_rng(3)
    A, B = _csr(30, 20, 0.2, 1), rng.random((20, 6))
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", out_format="dense",
                        schedule="reorder(i, j, k)")
    assert kernel.concrete.startswith("forall(i, forall(j, forall(k,")
    default = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", out_format="dense")
    assert default.concrete.startswith("forall(i, forall(k, forall(j,")
    np.testing.assert_allclose(_dense(kernel(A=A, B=B)), A @ B)


def test_a_reorder_against_storage_converts_an_operand_or_is_refused():
    A, x = _csr(25, 15, 0.3, 2), np.arange(15.0)
    converted = _spmv("reorder(j, i)")
    np.testing.assert_allclose(_dense(converted(A=A, x=x)), A @ x)
    assert converted.concrete.startswith("forall(j, forall(i,")
    with pytest.raises(ScheduleError, match=r"loop order \(j, i\) cannot be kept"):
        ls.Kernel("y(i) = A(i,j) * x(j)", {"A": "csr"}, "dense", convert=False,
                  schedule="reorder(j, i)")(A=A, x=x)


def _bound_plan(kernel: ls.Kernel, operands: dict, threads: int = 2):
    return kernel.bind(threads=threads, **operands).plan


def test_threads_get_the_chunks_the_schedule_names():
    A, x = _csr(100, 400, 0.01, 4, skew=True), np.ones(400)
    coords = _bound_plan(_spmv("split(i, i0, i1, 16); parallelize(i0, cpu_thread, no_races)"),
                         {"A": A, "x": x})
    assert sorted(coords.chunks) == [(lo, min(lo + 16, 100)) for lo in range(0, 100, 16)]
    parts = _bound_plan(_spmv("divide(i, i0, i1, 4); parallelize(i0, cpu_thread, no_races)"),
                        {"A": A, "x": x})
    assert sorted(parts.chunks) == [(0, 25), (25, 50), (50, 75), (75, 100)]
    entries = _bound_plan(_spmv("pos(i, ip, A(i,j)); divide(ip, c, t, 4); "
                                "parallelize(c, cpu_thread, no_races)"), {"A": A, "x": x})
    # Row 0 holds half of A's entries: a chunk of its own, the rest share the others.
    assert min(entries.chunks) == (0, 1)
    assert max(entries.chunks)[1] == 100
    per_chunk = [A.indptr[hi] - A.indptr[lo] for lo, hi in entries.chunks]
    assert max(per_chunk) == A.indptr[1]
    assert _bound_plan(_spmv("split(i, i0, i1, 8)"), {"A": A, "x": x}) is None
    assert _bound_plan(_spmv("parallelize(i, cpu_thread, no_races)"), {"A": A, "x": x},
                       threads=1) is None


def test_kernel_schedule_says_what_runs():
    kernel = _spmv("pos(i, ip, A(i,j)); split(ip, c, t, 64); parallelize(c, cpu_thread, "
                   "no_races)")
    text = kernel.schedule
    assert text.splitlines()[0] == str(kernel.plan.schedule)
    assert "chunks of about 64 A's stored entries" in text
    assert "one thread" in _spmv("split(i, i0, i1, 4)").schedule
    assert ls.compile("y(i) = A(i,j) * x(j)", A="csr").schedule.startswith("auto:")


def test_schedules_key_caches_and_survive_pickling():
    A, x = _csr(40, 30, 0.2, 6), np.arange(30.0)
    plain, split = _spmv(""), _spmv("split(i, i0, i1, 8)")
    plain(A=A, x=x)
    split(A=A, x=x)
    assert plain.instance_keys(None, None)[2] != split.instance_keys(None, None)[2]
    types = split.instance_keys(None, None)[0]
    assert plain.disk_key(types) != split.disk_key(types)
    again = pickle.loads(pickle.dumps(split))
    assert again.schedule_text == split.schedule_text
    assert again.concrete == split.concrete
    np.testing.assert_allclose(_dense(again(A=A, x=x)), A @ x)


def test_bound_is_checked_on_every_call():
    A, x = _csr(40, 30, 0.2, 6), np.arange(30.0)
    kernel = _spmv("bound(i, ib, 40, max_exact)")
    np.testing.assert_allclose(_dense(kernel(A=A, x=x)), A @ x)
    with pytest.raises(ScheduleError, match="index i has extent 39 in this call"):
        kernel(A=_csr(39, 30, 0.2, 6), x=x)
    loose = _spmv("bound(i, ib, 64, max_constraint)")
    np.testing.assert_allclose(_dense(loose(A=A, x=x)), A @ x)
    with pytest.raises(ScheduleError, match="extent 65"):
        loose(A=_csr(65, 30, 0.2, 6), x=x)


def test_precompute_names_the_workspace():
    A, B = _csr(30, 25, 0.2, 7), _csr(25, 20, 0.2, 8)
    for policy in ("dense", "hash", "sort"):
        kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", B="csr", out_format="csr",
                            schedule=f"precompute(A(i,k) * B(k,j), j, jw, {policy})")
        assert kernel.workspace == policy
        assert f"({policy} workspace)" in kernel.concrete
        np.testing.assert_allclose(_dense(kernel(A=A, B=B)), (A @ B).toarray())
    with pytest.raises(ValueError, match="but the schedule precomputes into 'hash'"):
        ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", B="csr", out_format="csr",
                   workspace="sort", schedule="precompute(A(i,k)*B(k,j), j, jw, hash)")


def test_a_parallel_loop_threads_cannot_own_is_refused():
    A, B = _csr(30, 30, 0.2, 1), _csr(30, 30, 0.2, 2)
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", A="csr", B="csr", out_format="coo",
                        schedule="parallelize(i, cpu_thread, no_races)")
    with pytest.raises(ScheduleError, match="threads cannot own rows of this kernel's output"):
        kernel(A=A, B=B, threads=2)


def test_gpu_units_choose_the_gpu_mapping():
    cases = {
        "parallelize(i, gpu_thread, no_races)": "thread_per_row",
        "pos(i, ip, A(i,j)); split(ip, b, t, 32); parallelize(b, gpu_block, no_races)":
            "nonzero_split",
        "fuse(i, j, f); pos(f, fp, A(i,j)); split(fp, b, t, 64); "
        "parallelize(b, gpu_block, atomics); parallelize(t, gpu_thread, atomics)":
            ("thread_per_nonzero", "coo"),
        "parallelize(i, gpu_warp, parallel_reduction)": "warp_per_row",
    }
    A, x = _csr(50, 40, 0.2, 3), np.random.default_rng(0).random(40)
    for schedule, mapping in cases.items():
        mapping, fmt = mapping if isinstance(mapping, tuple) else (mapping, "csr")
        kernel = ls.compile("y(i) = A(i,j) * x(j)", A=fmt, out_format="dense",
                            target="cuda-emulated", schedule=schedule)
        assert kernel.gpu_schedule == mapping
        np.testing.assert_allclose(_dense(kernel(A=A, x=x)), A @ x)
    with pytest.raises(ValueError, match="but the schedule's GPU units map to"):
        ls.compile("y(i) = A(i,j) * x(j)", A="csr", target="cuda-emulated",
                   gpu_schedule="warp_per_row",
                   schedule="parallelize(i, gpu_thread, no_races)")


def test_the_exported_header_names_the_schedule(tmp_path):
    kernel = _spmv("split(i, i0, i1, 8); parallelize(i0, cpu_thread, no_races)")
    _, header = kernel.export(tmp_path / "k.o", name="spmv")
    assert " * schedule: split(i, i0, i1, 8); parallelize(i0, cpu_thread, no_races)" in \
        header.read_text()


REDUCTIONS = [
    ("a = A(i,j) * B(i,j)", {"A": "csr", "B": "csr"}, None,
     lambda o: o["A"].multiply(o["B"]).sum(), "i"),
    ("y(j) = A(i,j,k) * x(k)", {"A": "csf"}, "dense",
     lambda o: np.einsum("ijk,k->j", o["A"], o["x"]), "i"),
    ("y(j) = A(i,j) * x(i)", {"A": "csr"}, "dense", lambda o: o["A"].T @ o["x"], "i"),
    ("a = A(i,j) * x(j) * 2", {"A": "dcsr"}, None, lambda o: 2 * (o["A"] @ o["x"]).sum(), "i"),
]


def _reduction_operands(case: int, rows: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    A = _csr(rows, 12, 0.3, seed, skew=seed % 2 == 0)
    if case == 0:
        return {"A": A, "B": _csr(rows, 12, 0.4, seed + 1)}
    if case == 1:
        tensor = rng.random((rows, 6, 5))
        tensor[tensor < 0.7] = 0
        return {"A": tensor, "x": rng.random(5)}
    if case == 2:
        return {"A": A, "x": rng.random(rows)}
    return {"A": A, "x": rng.random(12)}


@settings(max_examples=40, deadline=None)
@given(case=st.integers(0, len(REDUCTIONS) - 1), rows=st.integers(0, 50),
       threads=st.integers(1, 3), seed=st.integers(0, 10**6),
       schedule=st.sampled_from(["parallelize({i}, cpu_thread, temporaries)",
                                 "divide({i}, i0, i1, 5); "
                                 + "parallelize(i0, cpu_thread, parallel_reduction)",
                                 "split({i}, i0, i1, 7); "
                                 + "parallelize(i0, cpu_thread, temporaries)"]))
def test_threads_over_a_reduced_index_add_private_outputs(case, rows, threads, seed,
                                                          schedule):
    expression, formats, out_format, reference, index = REDUCTIONS[case]
    operands = _reduction_operands(case, rows, seed)
    kernel = ls.compile(expression, out_format=out_format,
                        schedule=schedule.format(i=index), **formats)
    np.testing.assert_allclose(_dense(kernel(**operands, threads=threads)),
                               reference(operands), rtol=1e-12, atol=1e-12)


def test_reduced_chunks_each_get_a_private_output():
    operands = _reduction_operands(0, 40, 3)
    kernel = ls.compile("a = A(i,j) * B(i,j)", A="csr", B="csr",
                        schedule="divide(i, i0, i1, 4); parallelize(i0, cpu_thread, "
                                 "temporaries)")
    bound = kernel.bind(threads=2, **operands)
    assert sorted(bound.plan.chunks) == [(0, 10), (10, 20), (20, 30), (30, 40)]
    assert bound.combine is not None
    assert "each into a private output, combined by add after" in kernel.schedule
    assert "for i in coordinates of A.0:  {thread range}" in kernel.loops
    default = ls.compile("a = A(i,j) * B(i,j)", A="csr", B="csr",
                         schedule="parallelize(i, cpu_thread, temporaries)")
    assert len(default.bind(threads=3, **operands).plan.chunks) == 3


def test_threads_over_a_reduced_index_need_a_dense_like_output():
    A = _csr(20, 10, 0.3, 1)
    kernel = ls.compile("y(j) = A(i,j)", A="csr", out_format="coo",
                        schedule="parallelize(i, cpu_thread, temporaries)")
    with pytest.raises(ScheduleError, match="needs a dense-like output format"):
        kernel(A=A, threads=2)


def test_threads_over_an_inner_output_index_own_its_coordinates():
    """Nested parallelism: the rows' loop is too short to share (4 rows), so threads
    split the columns under it, each running the loops outside whole."""
    rng = np.random.default_rng(5)
    A, B = _csr(4, 300, 0.2, 1), rng.random((300, 90))
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", out_format="dense",
                        schedule="divide(j, j0, j1, 5); parallelize(j0, cpu_thread, no_races)")
    assert "for j in coordinates of B.1:  {thread range}" in kernel.loops
    assert "under other loops: 5 chunks of equal coordinates" in kernel.schedule
    bound = kernel.bind(A=A, B=B, threads=2)
    assert sorted(bound.plan.chunks) == [(0, 18), (18, 36), (36, 54), (54, 72), (72, 90)]
    for call in range(3):  # a binding's calls alternate loop forms
        np.testing.assert_allclose(bound().to_numpy(), A @ B, err_msg=f"call {call}")
    reordered = _spmv("reorder(j, i); parallelize(i, cpu_thread, no_races)")
    x = rng.random(300)
    np.testing.assert_allclose(_dense(reordered(A=A, x=x, threads=3)), A @ x)
    inner_sum = _spmv("parallelize(j, cpu_thread, temporaries)")
    np.testing.assert_allclose(_dense(inner_sum(A=A, x=x, threads=2)), A @ x)
    sparse_out = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", out_format="csr",
                            schedule="parallelize(j, cpu_thread, no_races)")
    with pytest.raises(ScheduleError, match="needs a dense-like output format"):
        sparse_out(A=A, B=B, threads=2)


def test_gpu_splits_size_the_grid():
    A, x = _csr(300, 40, 0.2, 3, skew=True), np.random.default_rng(0).random(40)
    rows = ls.compile("y(i) = A(i,j) * x(j)", A="csr", out_format="dense",
                      target="cuda-emulated",
                      schedule="split(i, b, t, 64); parallelize(b, gpu_block, no_races); "
                               "parallelize(t, gpu_thread, no_races)")
    assert rows.gpu_plan().block == 64
    np.testing.assert_allclose(_dense(rows(A=A, x=x)), A @ x)
    entries = ls.compile("y(i) = A(i,j) * x(j)", A="csr", out_format="dense",
                         target="cuda-emulated",
                         schedule="pos(i, ip, A(i,j)); split(ip, t, e, 8); "
                                  "parallelize(t, gpu_thread, no_races)")
    plan = entries.gpu_plan()
    assert (plan.schedule, plan.entries) == ("nonzero_split", 8)
    np.testing.assert_allclose(_dense(entries(A=A, x=x)), A @ x)
    with pytest.raises(ScheduleError, match="a GPU block holds a multiple of 32 threads"):
        ls.compile("y(i) = A(i,j) * x(j)", A="csr", target="cuda-emulated",
                   schedule="split(i, b, t, 48); parallelize(b, gpu_block, no_races); "
                            "parallelize(t, gpu_thread, no_races)")
