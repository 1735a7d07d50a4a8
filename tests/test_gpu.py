"""GPU kernels without a GPU: the planning rule's tags, the emulator (the device kernel
run over its whole grid on the CPU) against numpy, the PTX catalog through ptxas, and
refusals of what has no GPU mapping yet."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.backends.cuda import check_ptx, driver
from llvsparse.ir.loops.gpu_plan import (
    BLOCK_SIZE,
    COUNT_FILL,
    ENTRIES_PER_THREAD,
    ENTRY_SPLIT,
    NONZERO_SPLIT,
    THREAD_PER_NONZERO,
    THREAD_PER_ROW,
    WARP_COLUMNS,
    WARP_PER_ROW,
    GpuMappingError,
    plan_gpu,
)
from llvsparse.ir.plan.autoschedule import ENTRY_SPLIT_ROW_SHARES, gpu_schedule

import llvsparse as ls
from llvsparse.calls import gpu_launch
from llvsparse.calls.gpu_call import call_schedule
from llvsparse.calls.gpu_launch import launch_of, split_points
from llvsparse.tensors.walk import entry_windows

# The catalog: (name, expression, formats, GPU schedule, reference(operands) -> dense).
CSR_ADD = {"A": "csr", "F": "csr"}
SDDMM = {"A": "csr", "D": "dense", "E": "dense"}
CATALOG: list[tuple[str, str, dict[str, str], str, Callable[..., np.ndarray]]] = [
    ("csr_spmv_thread_per_row", "y(i) = A(i,j) * x(j)", {"A": "csr", "x": "dense"},
     THREAD_PER_ROW, lambda A, x: A @ x),
    ("csr_spmv_nonzero_split", "y(i) = A(i,j) * x(j)", {"A": "csr", "x": "dense"},
     NONZERO_SPLIT, lambda A, x: A @ x),
    ("csr_spmv_warp_per_row", "y(i) = A(i,j) * x(j)", {"A": "csr", "x": "dense"},
     WARP_PER_ROW, lambda A, x: A @ x),
    ("csr_spmv_entry_split", "y(i) = A(i,j) * x(j)", {"A": "csr", "x": "dense"},
     ENTRY_SPLIT, lambda A, x: A @ x),
    ("csr_row_dot_entry_split", "y(i) = A(i,j) * F(i,j)", {"A": "csr", "F": "dense"},
     ENTRY_SPLIT, lambda A, F: np.asarray(A.multiply(F).sum(axis=1)).ravel()),
    ("csr_row_dot_warp_per_row", "y(i) = A(i,j) * F(i,j)", {"A": "csr", "F": "dense"},
     WARP_PER_ROW, lambda A, F: np.asarray(A.multiply(F).sum(axis=1)).ravel()),
    ("coo_spmv_thread_per_row", "y(i) = A(i,j) * x(j)", {"A": "coo", "x": "dense"},
     THREAD_PER_ROW, lambda A, x: A @ x),
    ("coo_spmv_nonzero_split", "y(i) = A(i,j) * x(j)", {"A": "coo", "x": "dense"},
     NONZERO_SPLIT, lambda A, x: A @ x),
    ("coo_spmv_thread_per_nonzero", "y(i) = A(i,j) * x(j)", {"A": "coo", "x": "dense"},
     THREAD_PER_NONZERO, lambda A, x: A @ x),
    ("coo_spmm_thread_per_nonzero", "C(i,k) = A(i,j) * B(j,k)",
     {"A": "coo", "B": "dense", "C": "dense"}, THREAD_PER_NONZERO, lambda A, B: A @ B),
    ("csr_spmm_thread_per_row", "C(i,k) = A(i,j) * B(j,k)",
     {"A": "csr", "B": "dense", "C": "dense"}, THREAD_PER_ROW, lambda A, B: A @ B),
    ("csr_spmm_nonzero_split", "C(i,k) = A(i,j) * B(j,k)",
     {"A": "csr", "B": "dense", "C": "dense"}, NONZERO_SPLIT, lambda A, B: A @ B),
    ("csr_spmm_warp_columns", "C(i,k) = A(i,j) * B(j,k)",
     {"A": "csr", "B": "dense", "C": "dense"}, WARP_COLUMNS, lambda A, B: A @ B),
    ("sddmm_into_dense", "C(i,j) = A(i,j) * D(i,k) * E(j,k)", {**SDDMM, "C": "dense"},
     NONZERO_SPLIT, lambda A, D, E: A.multiply(D @ E.T).toarray()),
    ("sddmm_warp_per_row", "C(i,j) = A(i,j) * D(i,k) * E(j,k)", {**SDDMM, "C": "dense"},
     WARP_PER_ROW, lambda A, D, E: A.multiply(D @ E.T).toarray()),
    ("sddmm_into_csr", "C(i,j) = A(i,j) * D(i,k) * E(j,k)", {**SDDMM, "C": "csr"},
     COUNT_FILL, lambda A, D, E: A.multiply(D @ E.T).toarray()),
    ("csr_add_into_dense", "C(i,j) = A(i,j) + F(i,j)", {**CSR_ADD, "C": "dense"},
     THREAD_PER_ROW, lambda A, F: (A + F).toarray()),
    ("csr_add_into_csr", "C(i,j) = A(i,j) + F(i,j)", {**CSR_ADD, "C": "csr"},
     COUNT_FILL, lambda A, F: (A + F).toarray()),
    ("csr_multiply_into_csr", "C(i,j) = A(i,j) * F(i,j)", {**CSR_ADD, "C": "csr"},
     COUNT_FILL, lambda A, F: A.multiply(F).toarray()),
    ("csr_spgemm_into_csr", "C(i,j) = A(i,k) * G(k,j)", {"A": "csr", "G": "csr", "C": "csr"},
     COUNT_FILL, lambda A, G: (A @ G).toarray()),
]
IDS = [entry[0] for entry in CATALOG]
ENTRIES = ("name", "expression", "formats", "schedule", "reference")
# Shapes around a block's edge, edge cases (0x0, one row, empty rows, no entries) and a
# larger grid.
SHAPES = [(0, 0), (1, 5), (BLOCK_SIZE - 1, 9), (BLOCK_SIZE, 4), (BLOCK_SIZE + 1, 17), (300, 40)]


def _operands(formats: dict[str, str], rows: int, cols: int, rng: np.random.Generator,
              pattern: str) -> dict[str, object]:
    """Random operands of the catalog's kernels: sparse ones with every row stored, some
    rows left empty, no entries at all, or one row holding most entries (``pattern``)."""
    inner = 3
    made: dict[str, object] = {}
    for name in formats:
        if name in ("y", "C"):
            continue
        if name in ("A", "F"):
            density = 0.0 if pattern == "no entries" else 0.2
            m = sp.random(rows, cols, density=density, format="csr", random_state=rng)
            if pattern == "empty rows" and rows:
                keep = np.ones(rows)
                keep[::3] = 0
                m = sp.csr_matrix(sp.diags(keep) @ m)
            if pattern == "one heavy row" and rows and cols:
                heavy = sp.lil_matrix((rows, cols))
                heavy[rows // 2, :] = rng.standard_normal(cols)
                m = sp.csr_matrix(m + heavy)
            made[name] = m
        elif name == "G":
            made[name] = sp.random(cols, 7, density=0.3, format="csr", random_state=rng)
        elif name == "x":
            made[name] = rng.standard_normal(cols)
        elif name == "B":
            made[name] = rng.standard_normal((cols, 6))
        elif name == "D":
            made[name] = rng.standard_normal((rows, inner))
        elif name == "E":
            made[name] = rng.standard_normal((cols, inner))
    return made


PATTERNS = ("random", "empty rows", "no entries", "one heavy row")


def _matches_numpy(target: str, name: str, expression: str, formats: dict[str, str],
                   schedule: str, reference: Callable[..., np.ndarray]) -> None:
    kernel = ls.compile(expression, target=target, gpu_schedule=schedule, **formats)
    assert kernel.gpu_plan().schedule == schedule
    rng = np.random.default_rng(len(name))
    for rows, cols in SHAPES:
        for pattern in PATTERNS:
            operands = _operands(formats, rows, cols, rng, pattern)
            got = kernel(**operands)
            expected = np.asarray(reference(**operands))
            assert got.shape == expected.shape, (rows, cols)
            assert np.allclose(got.to_numpy(), expected), (name, rows, cols, pattern)
            if schedule == COUNT_FILL:  # assembled into the format asked for
                assert got.format.name == formats["C"]


# A warp schedule's emulation runs each warp's lanes as host threads meeting at every
# shuffle: seconds per kernel over SHAPES (test_warp_lanes_meet is the quick check).
EMULATED = [pytest.param(*entry, id=entry[0], marks=[pytest.mark.slow] * (
    entry[3] == WARP_PER_ROW)) for entry in CATALOG]


@pytest.mark.parametrize(ENTRIES, EMULATED)
def test_emulator_matches_numpy(name, expression, formats, schedule, reference) -> None:
    _matches_numpy("cuda-emulated", name, expression, formats, schedule, reference)


@pytest.mark.gpu
@pytest.mark.parametrize(ENTRIES, CATALOG, ids=IDS)
def test_catalog_on_a_gpu(name, expression, formats, schedule, reference) -> None:
    """The emulator's checks, on a real GPU (skipped, saying why, without one)."""
    try:
        driver.device(0)
    except driver.NoDevice as error:
        pytest.skip(f"no GPU here: {error}")
    _matches_numpy("cuda", name, expression, formats, schedule, reference)


def test_emulator_runs_every_thread_of_the_grid() -> None:
    """Every row is written by its own thread: a row past the first block's is right,
    and so is one whose thread is the last of a partial block."""
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", target="cuda-emulated",
                        gpu_schedule=THREAD_PER_ROW)
    rows = 2 * BLOCK_SIZE + 3
    A = sp.csr_matrix(np.eye(rows) * np.arange(1, rows + 1))
    x = np.ones(rows)
    assert np.array_equal(kernel(A=A, x=x).to_numpy(), np.arange(1, rows + 1.0))


@pytest.mark.parametrize(ENTRIES, CATALOG, ids=IDS)
def test_plan_tags_the_split_loop(name, expression, formats, schedule, reference) -> None:
    kernel = ls.compile(expression, gpu_schedule=schedule, **formats)
    plan = kernel.gpu_plan()
    assert plan.block == BLOCK_SIZE and plan.schedule == schedule
    shown = ls.ir.loops.nodes.show(plan.program.root)
    head = next(line for line in shown.splitlines() if "gpu_block" in line)
    assert head.lstrip().startswith(f"for {plan.index}")
    assert ("gpu_warp, warp sums" in head) == (schedule == WARP_PER_ROW)
    assert ("{warp lanes}" in shown) == (schedule in (WARP_PER_ROW, WARP_COLUMNS))
    assert ("gpu_thread" in head) == (schedule not in (WARP_PER_ROW, WARP_COLUMNS))
    assert ("nonzero split" in head) == (schedule == NONZERO_SPLIT)
    assert ("count, fill" in head) == (schedule == COUNT_FILL)
    assert ("position split, atomic adds" in head) == (schedule == THREAD_PER_NONZERO)
    assert ("entry split, atomic adds" in head) == (schedule == ENTRY_SPLIT)
    assert ("{entry window}" in shown) == (schedule == ENTRY_SPLIT)
    assert plan.grid(0) == 1 and plan.grid(BLOCK_SIZE) == 1 and plan.grid(BLOCK_SIZE + 1) == 2


@pytest.mark.parametrize(("expression", "formats", "expected"), [
    ("y(i) = A(i,j) * x(j)", {"A": "csr", "x": "dense"}, NONZERO_SPLIT),
    ("C(i,k) = A(i,j) * B(j,k)", {"A": "csr", "B": "dense", "C": "dense"}, WARP_COLUMNS),
    ("C(i,j) = A(i,j) * D(i,k) * E(j,k)", {**SDDMM, "C": "dense"}, NONZERO_SPLIT),
    ("y(i) = A(i,j) * x(j)", {"A": "coo", "x": "dense"}, THREAD_PER_NONZERO),
    ("C(i,k) = A(i,j) * B(j,k)", {"A": "coo", "B": "dense", "C": "dense"},
     THREAD_PER_NONZERO),
    ("y(i) = A(i,j) * x(j)", {"A": "dcsr", "x": "dense"}, THREAD_PER_ROW),
    ("C(i,j) = A(i,j) * D(i,k) * E(j,k)", {**SDDMM, "A": "coo", "C": "dense"},
     THREAD_PER_ROW),
    ("C(i,j) = A(i,j) + F(i,j)", {**CSR_ADD, "C": "csr"}, COUNT_FILL),
    ("C(i,j) = A(i,j) * D(i,k) * E(j,k)", {**SDDMM, "C": "csr"}, COUNT_FILL),
])
def test_default_schedule_per_kernel_class(expression, formats, expected) -> None:
    """The autoscheduler's rule: rows that lead to runs of entries share entries; a loop
    over a coordinate list's entries splits them, adding atomically; a loop over unique
    stored rows, or one beside another operand's rows, runs a thread per row; a sparse
    output is counted, then filled."""
    assert ls.compile(expression, **formats).gpu_plan().schedule == expected


@pytest.mark.parametrize(("expression", "formats", "expected"), [
    ("y(i) = A(i,j) * x(j)", {"A": "csr", "x": "dense"}, NONZERO_SPLIT),
    ("C(i,k) = A(i,j) * B(j,k)", {"A": "csr", "B": "dense", "C": "dense"}, WARP_COLUMNS),
    ("C(i,j) = A(i,j) * D(i,k) * E(j,k)", {**SDDMM, "C": "csr"}, COUNT_FILL),
    ("C(i,j) = A(i,j) + F(i,j)", {**CSR_ADD, "C": "csr"}, COUNT_FILL),
])
def test_schedule_names_the_default_gpu_schedule(expression, formats, expected) -> None:
    """On a GPU target ``kernel.schedule`` names the schedule the rule gives the kernel
    class when none is asked for, the one its calls run; on the CPU it names none."""
    kernel = ls.compile(expression, target="cuda-emulated", **formats)
    assert f"GPU schedule: {expected} (the default for this kernel class)" in kernel.schedule
    assert kernel.gpu_plan().schedule == expected
    assert "GPU schedule" not in ls.compile(expression, **formats).schedule


def test_nonzero_split_evens_out_skewed_rows() -> None:
    """A heavy row gets a thread to itself; the other threads take about ENTRIES_PER_THREAD
    entries each, so the grid is sized by entries, not rows."""
    weights = np.ones(1000, np.int64)
    weights[500] = 5000
    bounds = split_points(weights, ENTRIES_PER_THREAD)
    assert bounds[0] == 0 and bounds[-1] == 1000 and np.all(np.diff(bounds) > 0)
    assert [500, 501] == [b for b in bounds if b in (500, 501)]
    cost = np.concatenate([[0], np.cumsum(weights + 1)])
    shares = np.diff(cost[bounds])
    assert shares.max() == 5001 and len(bounds) - 1 <= 3 * (cost[-1] // ENTRIES_PER_THREAD)
    assert np.array_equal(split_points(np.zeros(0, np.int64), 8), [0])
    assert np.array_equal(split_points(np.zeros(5, np.int64), 100), [0, 5])


def test_nonzero_split_launch_on_a_power_law_matrix() -> None:
    """The emulated launch runs one thread per range, fewer threads than rows, and the
    result matches scipy on rows of very different lengths."""
    rng = np.random.default_rng(7)
    rows = 400
    lengths = np.minimum((rng.pareto(1.2, rows) * 3).astype(int), 300)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(300, n, replace=False)) for n in lengths])
    A = sp.csr_matrix((rng.standard_normal(indptr[-1]), indices, indptr), shape=(rows, 300))
    x = rng.standard_normal(300)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", target="cuda-emulated")
    bound = kernel.bind(A=A, x=x)
    launch = launch_of(kernel, kernel.gpu_plan(), bound)
    assert launch.bounds is not None and launch.threads == len(launch.bounds) - 1 < rows
    assert np.allclose(kernel(A=A, x=x).to_numpy(), A @ x)


@pytest.mark.parametrize(ENTRIES, CATALOG, ids=IDS)
@pytest.mark.parametrize(("sm", "arch"), [("sm_70", "sm_75"), ("sm_80", "sm_80"),
                                          ("sm_90", "sm_90")])
def test_catalog_ptx_passes_ptxas(name, expression, formats, schedule, reference, sm, arch,
                                  tool) -> None:
    """PTX for sm_70 is assembled for sm_75: ptxas of CUDA 13 (the toolkit here) takes
    neither sm_70 nor compute_70 any more, and PTX of a target assembles for every later
    one, so the sm_70 PTX is checked by the oldest architecture it still accepts."""
    tool("ptxas")
    ptx = ls.compile(expression, gpu_schedule=schedule, **formats).ptx(sm)
    assert f".target {sm}" in ptx
    entries = ["llvsparse_kernel_count_device", "llvsparse_kernel_fill_device"] \
        if schedule == COUNT_FILL else ["llvsparse_kernel_device"]
    assert all(f".entry {entry}(" in ptx for entry in entries)
    assert "%ctaid.x" in ptx and "%tid.x" in ptx and "%ntid.x" in ptx
    assert "malloc" not in ptx  # no device heap: outputs are sized on the host
    assert ("atom.add.f64" in ptx or "atom.global.add.f64" in ptx) == \
        (schedule in (THREAD_PER_NONZERO, ENTRY_SPLIT))  # threads sharing rows add atomically
    if schedule != WARP_COLUMNS:  # (which defines the warp sums without calling them)
        assert ("shfl.sync.bfly" in ptx) == (schedule == WARP_PER_ROW)  # lanes' sums meet
    check_ptx(ptx, arch)


@pytest.mark.parametrize(("expression", "formats", "match"), [
    ("a = A(i,j) * F(i,j)", {"A": "csr", "F": "csr"}, "no loop"),
    ("y(j) = A(i,j) * x(i)", {"A": "csr", "x": "dense"}, "no loop"),
])
def test_no_gpu_mapping_is_refused(expression, formats, match) -> None:
    kernel = ls.compile(expression, **formats)
    with pytest.raises(GpuMappingError, match=match):
        kernel.ptx("sm_80")
    emulated = ls.compile(expression, target="cuda-emulated", **formats)
    rng = np.random.default_rng(0)
    operands = {"A": sp.random(4, 4, density=0.5, format="csr", random_state=rng),
                "F": sp.random(4, 4, density=0.5, format="csr", random_state=rng),
                "x": rng.random(4)}
    with pytest.raises(GpuMappingError, match=match):
        emulated(**{n: operands[n] for n in formats if n in operands})


ADD = "C(i,j) = A(i,j) + F(i,j)"
SDDMM_EXPR = "C(i,j) = A(i,j) * D(i,k) * E(j,k)"


@pytest.mark.parametrize(("expression", "formats", "schedule", "match"), [
    (ADD, {**CSR_ADD, "C": "dense"}, THREAD_PER_NONZERO, "does not step over the stored"),
    (SDDMM_EXPR, {**SDDMM, "A": "coo", "C": "dense"}, THREAD_PER_NONZERO,
     "another operand's level"),
    (ADD, {**CSR_ADD, "C": "dense"}, COUNT_FILL, "dense-like"),
    (SDDMM_EXPR, {**SDDMM, "C": "dense"}, WARP_COLUMNS, "sums across the columns"),
    ("y(i) = A(i,j) * F(i,j)", {"A": "csr", "F": "dense"}, WARP_COLUMNS,
     "does not run over a full range"),
    (ADD, {**CSR_ADD, "C": "dense"}, WARP_PER_ROW, "other than a sum the lanes hold"),
    (ADD, {**CSR_ADD, "C": "dense"}, ENTRY_SPLIT, "merges operands. levels"),
    (SDDMM_EXPR, {**SDDMM, "C": "dense"}, ENTRY_SPLIT, "not one loop over the stored"),
    ("y(i) = A(i,j) * x(j)", {"A": "coo", "x": "dense"}, ENTRY_SPLIT,
     "does not run over the coordinates of a full level"),
    (ADD, {**CSR_ADD, "C": "csr"}, THREAD_PER_ROW, "needs count_fill"),
    (ADD, {**CSR_ADD, "C": "csr"}, NONZERO_SPLIT, "needs count_fill"),
])
def test_schedule_that_does_not_fit_is_refused(expression, formats, schedule, match) -> None:
    kernel = ls.compile(expression, gpu_schedule=schedule, **formats)
    with pytest.raises(GpuMappingError, match=match):
        kernel.gpu_plan()


def test_unknown_schedule_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="gpu_schedule must be one of thread_per_row, "
                                         "nonzero_split, thread_per_nonzero, warp_per_row, "
                                         "warp_per_row_columns, count_fill"):
        ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", gpu_schedule="warp")


@pytest.mark.parametrize("block", [0, 33, 2048, "128"])
def test_block_size_is_checked(block) -> None:
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    program = kernel.program(kernel._with_code())
    with pytest.raises(ValueError, match="multiple of 32"):
        plan_gpu(program, True, block)


def test_thread_per_nonzero_splits_rows_and_adds_atomically() -> None:
    """One row of 1000 entries falls to many threads of ENTRIES_PER_THREAD positions
    each; their partial sums meet in the output through atomic adds (emulated on the
    host's atomics), and the launch's bounds are position ranges, not rows."""
    rng = np.random.default_rng(11)
    A = sp.coo_matrix(np.vstack([np.zeros((2, 1000)), rng.standard_normal((1, 1000)),
                                 np.eye(5, 1000)]))
    x = rng.standard_normal(1000)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="coo", x="dense", target="cuda-emulated")
    launch = launch_of(kernel, kernel.gpu_plan(), kernel.bind(A=A, x=x))
    assert launch.bounds is not None and launch.bounds[-1] == A.nnz
    assert launch.threads == -(-A.nnz // ENTRIES_PER_THREAD)
    assert np.allclose(kernel(A=A, x=x).to_numpy(), A @ x)


def test_entry_split_spreads_a_heavy_row_over_threads() -> None:
    """A power-law matrix whose one row holds most entries: each thread takes a window
    of ENTRIES_PER_THREAD positions, so the heavy row falls to many threads whose
    partial sums meet by atomic adds; windows cut rows mid-way; rows before, after and
    between (some empty) come out right. Against numpy."""
    rng = np.random.default_rng(12)
    rows, cols = 300, 5000
    lengths = np.minimum((rng.pareto(1.5, rows) * 2).astype(int), 40)
    lengths[[0, 17, rows - 1]] = 0
    lengths[150] = 4000  # most of the entries
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths])
    A = sp.csr_matrix((rng.standard_normal(indptr[-1]), indices, indptr), shape=(rows, cols))
    x = rng.standard_normal(cols)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", target="cuda-emulated",
                        gpu_schedule=ENTRY_SPLIT)
    launch = launch_of(kernel, kernel.gpu_plan(), kernel.bind(A=A, x=x))
    assert launch.threads == -(-A.nnz // ENTRIES_PER_THREAD)
    assert np.array_equal(launch.windows, np.append(np.arange(0, A.nnz, ENTRIES_PER_THREAD),
                                                    A.nnz))
    first, end = launch.bounds[:launch.threads], launch.bounds[launch.threads:]
    on_heavy = np.flatnonzero((first <= 150) & (end > 150))
    assert len(on_heavy) >= 4000 // ENTRIES_PER_THREAD  # the heavy row is shared
    assert np.all(end - first >= 1)
    assert np.allclose(kernel(A=A, x=x).to_numpy(), A @ x)
    for bad in (np.zeros((0, 0)), np.zeros((4, 3)), np.eye(3)):  # no entries, a diagonal
        assert np.allclose(kernel(A=sp.csr_matrix(bad), x=np.ones(bad.shape[1])).to_numpy(),
                           bad @ np.ones(bad.shape[1]))


def test_autoscheduler_splits_inside_a_long_row() -> None:
    """Without a named GPU schedule, a call whose operand holds a row longer than
    ENTRY_SPLIT_ROW_SHARES threads' shares of a nonzero split runs as an entry split;
    other calls, kernels the split does not fit and named schedules keep theirs."""
    shares = ENTRY_SPLIT_ROW_SHARES * ENTRIES_PER_THREAD
    assert gpu_schedule(NONZERO_SPLIT, shares, ENTRIES_PER_THREAD)[0] == NONZERO_SPLIT
    pick, why = gpu_schedule(NONZERO_SPLIT, shares + 1, ENTRIES_PER_THREAD)
    assert pick == ENTRY_SPLIT and f"a row of {shares + 1} entries" in why
    assert gpu_schedule(WARP_COLUMNS, 10**6, ENTRIES_PER_THREAD)[0] == WARP_COLUMNS
    rng = np.random.default_rng(9)
    heavy = rng.standard_normal((60, 2000)) * (rng.random((60, 2000)) < 0.01)
    heavy[20] = rng.standard_normal(2000)
    even = sp.random(60, 2000, density=0.01, format="csr", random_state=rng)
    x = rng.standard_normal(2000)
    spmv = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", target="cuda-emulated")
    named = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", target="cuda-emulated",
                       gpu_schedule=NONZERO_SPLIT)
    for A, expected in ((sp.csr_matrix(heavy), ENTRY_SPLIT), (even, None)):
        assert call_schedule(spmv, spmv.bind(A=A, x=x)) == expected
        assert call_schedule(named, named.bind(A=A, x=x)) is None
        assert np.allclose(spmv(A=A, x=x).to_numpy(), A @ x)
    sddmm = ls.compile(SDDMM_EXPR, target="cuda-emulated", **SDDMM, C="dense")
    D, E = rng.standard_normal((60, 3)), rng.standard_normal((2000, 3))
    assert call_schedule(sddmm, sddmm.bind(A=sp.csr_matrix(heavy), D=D, E=E)) is None


def test_fused_position_schedule_on_csr_is_an_entry_split() -> None:
    """Paper 001's nonzero-split SpMV schedule (fuse i and j, split the fused positions
    over blocks and threads, atomics) on CSR runs as an entry split with the
    schedule's block size; thread_per_nonzero asked by name does the same."""
    schedule = ("fuse(i, j, f); pos(f, fp, A(i,j)); split(fp, b, t, 256); "
                "parallelize(b, gpu_block, no_races); parallelize(t, gpu_thread, atomics)")
    rng = np.random.default_rng(8)
    A = sp.random(400, 300, density=0.03, format="csr", random_state=rng)
    A = sp.csr_matrix(A + sp.csr_matrix((rng.standard_normal(300), ([5] * 300,
                                                                     np.arange(300))),
                                        shape=(400, 300)))
    x = rng.standard_normal(300)
    blocks = []
    for kernel in (ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense",
                              target="cuda-emulated", schedule=schedule),
                   ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense",
                              target="cuda-emulated", gpu_schedule=THREAD_PER_NONZERO)):
        plan = kernel.gpu_plan()
        assert plan.schedule == ENTRY_SPLIT
        assert np.allclose(kernel(A=A, x=x).to_numpy(), A @ x)
        blocks.append(plan.block)
    assert blocks == [256, BLOCK_SIZE]


def test_entry_windows_find_the_rows_each_window_touches() -> None:
    """Row bounds of windows over rows [begin, end) of positions, empty rows among
    them; rows out of position order are refused."""
    begin, end = np.array([0, 3, 3, 10]), np.array([3, 3, 10, 12])
    windows, rows = entry_windows(begin, end, 4)
    assert np.array_equal(windows, [0, 4, 8, 12])
    assert np.array_equal(rows, [0, 2, 2, 3, 3, 4])  # firsts, then ends (row 1 is empty)
    with pytest.raises(ValueError, match="position order"):
        entry_windows(np.array([5, 0]), np.array([8, 5]), 4)


SPGEMM = "C(i,j) = A(i,k) * F(k,j)"


@pytest.mark.parametrize("policy", [None, "hash", "sort"])
def test_spgemm_workspace_in_arena_slices(policy, monkeypatch) -> None:
    """SpGEMM into CSR on the emulated device, each workspace policy: count and fill
    grids whose threads take their row workspace from their own slice of a host-sized
    arena (no device heap). An arena too small for a thread a row gives threads equal
    ranges of rows; a slice too small for the workspace is the kernel's out-of-memory
    error, not a wrong result."""
    rng = np.random.default_rng(5)
    A = sp.random(150, 90, density=0.05, format="csr", random_state=rng)
    F = sp.random(90, 70, density=0.08, format="csr", random_state=rng)
    kernel = ls.compile(SPGEMM, A="csr", F="csr", C="csr", target="cuda-emulated",
                        workspace=policy)
    plan = kernel.gpu_plan()
    assert plan.schedule == COUNT_FILL and plan.workspace
    launch = launch_of(kernel, plan, kernel.bind(A=A, F=F))
    assert launch.threads == 150 and launch.bounds is None
    assert launch.arena_slice == gpu_launch.ARENA_BYTES_PER_COLUMN * 70 + gpu_launch.ARENA_SLACK
    got = kernel(A=A, F=F)
    assert got.format.name == "csr" and np.allclose(got.to_numpy(), (A @ F).toarray())
    monkeypatch.setattr(gpu_launch, "ARENA_BUDGET", 7 * launch.arena_slice)
    launch = launch_of(kernel, plan, kernel.bind(A=A, F=F))
    assert launch.threads == 7 and launch.bounds[0] == 0 and launch.bounds[-1] == 150
    assert np.allclose(kernel(A=A, F=F).to_numpy(), (A @ F).toarray())
    monkeypatch.setattr(gpu_launch, "ARENA_BYTES_PER_COLUMN", 0)
    monkeypatch.setattr(gpu_launch, "ARENA_SLACK", 64)
    with pytest.raises(ls.KernelRuntimeError, match="out of memory"):
        kernel(A=A, F=F)


def test_warp_lanes_meet() -> None:
    """A warp per row: rows shorter than a warp (some lanes idle), empty rows and a row
    of 100 entries (lanes take several strided steps) sum right; the grid holds 32
    threads a row."""
    rng = np.random.default_rng(3)
    dense = rng.standard_normal((9, 120)) * (rng.random((9, 120)) < 0.1)
    dense[[0, 4]] = 0.0
    dense[6, :100] = rng.standard_normal(100)
    A, x = sp.csr_matrix(dense), rng.standard_normal(120)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", target="cuda-emulated",
                        gpu_schedule=WARP_PER_ROW)
    launch = launch_of(kernel, kernel.gpu_plan(), kernel.bind(A=A, x=x))
    assert launch.threads == 9 * 32 and launch.grid == 3 and launch.bounds is None
    assert np.allclose(kernel(A=A, x=x).to_numpy(), A @ x)


def test_warp_lanes_share_a_dot_product() -> None:
    """SDDMM with a warp per row, its lanes over the dense k of each entry's dot product:
    k shorter and longer than a warp."""
    rng = np.random.default_rng(4)
    kernel = ls.compile("C(i,j) = A(i,j) * D(i,k) * E(j,k)", A="csr", D="dense",
                        E="dense", C="dense", target="cuda-emulated",
                        gpu_schedule=WARP_PER_ROW)
    for inner in (3, 45):
        A = sp.random(12, 10, density=0.3, format="csr", random_state=rng)
        D, E = rng.standard_normal((12, inner)), rng.standard_normal((10, inner))
        assert np.allclose(kernel(A=A, D=D, E=E).to_numpy(), A.multiply(D @ E.T).toarray())


@pytest.mark.parametrize("columns", [1, 31, 32, 70])
def test_warp_lanes_share_dense_columns(columns) -> None:
    """SpMM with a warp per row and its lanes over the dense columns: fewer columns than
    lanes (idle lanes), exactly a warp, and more (each lane takes several)."""
    rng = np.random.default_rng(columns)
    A = sp.random(40, 30, density=0.2, format="csr", random_state=rng)
    B = rng.standard_normal((30, columns))
    kernel = ls.compile("C(i,k) = A(i,j) * B(j,k)", A="csr", B="dense", C="dense",
                        target="cuda-emulated")
    assert kernel.gpu_plan().schedule == WARP_COLUMNS
    assert np.allclose(kernel(A=A, B=B).to_numpy(), A @ B)
