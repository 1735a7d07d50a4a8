"""What the generated code looks like: the properties the performance work relies on."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls


def _csr(seed: int = 0):
    return sp.random(60, 50, density=0.1, format="csr", random_state=seed)


def test_floating_point_reassociation_only_under_fastmath():
    strict = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    fast = ls.compile("y(i) = A(i,j) * x(j)", A="csr", fastmath=True)
    A = ls.Tensor.from_scipy(_csr(), format="csr")
    x = np.random.default_rng(0).random(50)
    np.testing.assert_allclose(fast(A=A, x=x).to_numpy(), _csr() @ x)
    assert " fast " not in strict.llvm_ir and "reassoc" not in strict.llvm_ir_optimized
    assert " fast " in fast.llvm_ir


def test_kernels_have_no_bounds_checks_or_calls_in_loops():
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    optimized = kernel.llvm_ir_optimized
    body = optimized.split("define", 2)[1]
    calls = [line for line in body.splitlines() if " call " in line]
    allowed = ("malloc", "free", "llvm.", "llvsparse_grow", "llvsparse_alloc",
               "posix_memalign", "madvise")
    assert all(any(name in c for name in allowed) for c in calls), calls


def test_entry_points_and_range_variant_exist():
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    assert 'define i32 @"llvsparse_kernel"' in kernel.llvm_ir
    assert 'define i32 @"llvsparse_kernel_range"' in kernel.llvm_ir
    assert set(kernel.compile_times) >= {"lower to IR", "optimize", "machine code"}
    assert "llvsparse_kernel" in kernel.asm


def _blocks(text: str) -> dict[str, str]:
    """The IR's basic blocks by label."""
    blocks, label = {}, None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            label = line[:-1]
            blocks[label] = ""
        elif label is not None:
            blocks[label] += line + "\n"
    return blocks


def test_union_merge_loop_has_no_grow_calls_and_steps_each_case_by_a_constant():
    """A + B: room for the whole merge is made before the loop (no capacity test or grow
    call per entry), and each case (both, A only, B only) branches and steps exactly
    its own operands by one, with no select: the next positions never wait on the
    coordinates just loaded (a load-compare-select chain per entry otherwise)."""
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", A="csr", B="csr", C="csr")
    text = kernel.llvm_ir
    # Blocks are printed in creation order: the merge loop's body follows its head,
    # body and exit labels, up to the room-making for the loop over what is left.
    before_loop = text.split("j.head:", 1)[0].split("j.done:", 1)[-1]
    merge_loop = text.split("\npos_access.exit:", 1)[1].split("\npos.length.exit", 1)[0]
    assert "llvsparse_grow" in before_loop
    assert "llvsparse_grow" not in merge_loop
    writes = [body for body in _blocks(merge_loop).values() if "store double" in body]
    stepped = [tuple(cur for cur in ("A1.cur", "B1.cur") if f'i64* %"{cur}"' in body)
               for body in writes]
    assert stepped == [("A1.cur", "B1.cur"), ("A1.cur",), ("B1.cur",)]
    assert not any(" select " in body for body in writes)
    a = _csr(1)
    b = sp.random(60, 50, density=0.1, format="csr", random_state=2)
    result = kernel(A=ls.Tensor.from_scipy(a, "csr"), B=ls.Tensor.from_scipy(b, "csr"))
    np.testing.assert_array_equal(result.to_scipy().toarray(), (a + b).toarray())


@pytest.mark.parametrize("reserved", [True, False])
def test_reduction_under_an_appending_loop_makes_room_before_the_loop(reserved, monkeypatch):
    """TTV into CSR: each j appends at most one sum of its k loop, so room for the j
    loop's entries is made before it, and the store of each sum has no capacity test or
    grow call; without any reservation ahead of the call the room is grown there."""
    if not reserved:
        monkeypatch.setattr(ls.calls.outputs.AssembledOutput, "_reservations", lambda self, n: [])
    kernel = ls.compile("A(i,j) = B(i,j,k) * c(k)", B="csf", out_format="csr")
    text = kernel.llvm_ir
    write = text.split("\nk.done.if:", 1)[1].split("store double", 1)  # sum to store
    assert len(write) == 2 and "llvsparse_grow" not in write[0]
    rng = np.random.default_rng(5)
    shape = (30, 40, 25)
    flat = np.unique(rng.integers(0, np.prod(shape), 2000))
    coords = np.stack(np.unravel_index(flat, shape))
    values, c = rng.standard_normal(flat.size), rng.standard_normal(shape[2])
    result = kernel(B=ls.Tensor.from_coo(coords, values, shape, format="csf"), c=c)
    expected = np.zeros(shape[:2])
    np.add.at(expected, (coords[0], coords[1]), values * c[coords[2]])
    np.testing.assert_allclose(result.to_scipy().toarray(), expected, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize(("expr", "fmt"), [("C(i,j) = A(i,k) * B(k,j)", "csr"),
                                           ("y(i) = A(i,j) * x(j)", "dia")])
def test_outputs_never_alias_inputs_so_vector_loops_need_no_overlap_checks(expr, fmt):
    kernel = ls.compile(expr, A=fmt)
    optimized = kernel.llvm_ir_optimized
    assert "x double>" in optimized and "memcheck" not in optimized


@pytest.mark.parametrize("threads", [1, 2])
def test_sorted_coo_spmv_sums_rows_in_order(threads, monkeypatch):
    """Runs of a sorted COO row are summed as they come (a branch writes the finished row
    and restarts the sum where the row changes): the result is the row's left-to-right
    sum, bit for bit, on rows of every length (empty ones included) and on threads' row
    ranges."""
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 100)
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 9, 500)
    rows = np.repeat(np.arange(500), lengths)
    cols = np.concatenate([np.sort(rng.choice(300, n, replace=False)) for n in lengths])
    values = rng.standard_normal(rows.size)
    x = rng.standard_normal(300)
    A = ls.Tensor.from_coo(np.stack([rows, cols]), values, (500, 300))
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="coo")
    y = kernel(A=A.asformat("coo"), x=x, threads=threads).to_numpy()
    expected = np.zeros(500)
    for row, col, value in zip(rows, cols, values):
        expected[row] += value * x[col]
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("entries", [0, 1, 7, 3000])
def test_sorted_coo_ttv_runs_restart_under_each_outer_coordinate(entries, threads,
                                                                 monkeypatch):
    """A running sum over a tensor's second level (COO under dense rows) is opened afresh
    for every i and
    its last run is written when i's loop ends: TTV into a dense matrix equals the
    in-order per-entry sum bit for bit, with no entries, one, and runs that end exactly
    where a thread's rows or an i end."""
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 100)
    rng = np.random.default_rng(entries)
    shape = (40, 30, 20)
    flat = np.unique(rng.integers(0, np.prod(shape), entries))
    coords = np.stack(np.unravel_index(flat, shape))
    values = rng.standard_normal(flat.size)
    c = rng.standard_normal(shape[2])
    rows_of_coo = ls.Format([ls.Level("dense", 0),
                             ls.Level("compressed", 1, {"unique": False, "ordered": True}),
                             ls.Level("singleton", 2, {"unique": True, "ordered": True})])
    A = ls.Tensor.from_coo(coords, values, shape, format=rows_of_coo)
    kernel = ls.compile("B(i,j) = A(i,j,k) * c(k)", A=rows_of_coo)
    assert "llvm.loop.unroll.count" in kernel.llvm_ir
    result = kernel(A=A, c=c, threads=threads).to_numpy()
    expected = np.zeros(shape[:2])
    for (i, j, k), value in zip(coords.T, values):
        expected[i, j] += value * c[k]
    np.testing.assert_array_equal(result, expected)


def test_count_phase_drops_the_dot_products():
    """SDDMM's count phase needs no values: its k loops only locate, so whether they run
    is decided from the extents and LLVM deletes them (a flag set inside them kept 64
    empty iterations per entry alive)."""
    kernel = ls.compile("C(i,j) = S(i,j) * A(i,k) * B(j,k)", S="csr", A="dense",
                        B="dense", C="csr")
    optimized = kernel.llvm_ir_optimized
    start = optimized.index("@llvsparse_kernel_count(")
    count = optimized[start:optimized.index("\ndefine", start)]
    assert "j.jam" in kernel.llvm_ir and "\nk.head:" in kernel.llvm_ir
    assert not re.search(r"^k\.head(\.\d+)?:", count, re.MULTILINE)
    S = _csr(3)
    rng = np.random.default_rng(3)
    A, B = rng.random((60, 5)), rng.random((50, 5))
    result = kernel(S=ls.Tensor.from_scipy(S, "csr"), A=ls.Tensor.from_numpy(A, "dense"),
                    B=ls.Tensor.from_numpy(B, "dense")).to_scipy()
    np.testing.assert_allclose(result.toarray(), S.multiply(A @ B.T).toarray(), rtol=1e-14)


def _rows_mixed(seed: int):
    """Two matrices whose rows agree in every way a merge can meet: identical rows,
    rows of equal length with other columns, rows of other lengths, empty rows."""
    rng = np.random.default_rng(seed)
    a = sp.random(200, 60, density=0.1, format="csr", random_state=seed).toarray()
    b = sp.random(200, 60, density=0.1, format="csr", random_state=seed + 1).toarray()
    for row in range(0, 200, 3):  # same columns, other values
        b[row] = np.where(a[row] != 0, rng.standard_normal(60), 0.0)
    for row in range(1, 200, 9):  # same length, columns shifted by one
        b[row] = np.roll(np.where(a[row] != 0, 1.5, 0.0), 1)
    a[5], b[5] = 0.0, 0.0
    a[7] = 0.0
    return sp.csr_matrix(a), sp.csr_matrix(b)


@pytest.mark.parametrize("seed", [0, 1])
def test_intersections_step_rows_with_the_same_columns_together(seed):
    """A .* B checks each pair of rows for the same columns (a vectorized scan) and
    steps those with one counter; other rows merge. Both give scipy's product."""
    a, b = _rows_mixed(seed)
    kernel = ls.compile("C(i,j) = A(i,j) * B(i,j)", A="csr", B="csr", C="csr")
    assert "same.head" in kernel.llvm_ir
    result = kernel(A=ls.Tensor.from_scipy(a, "csr"), B=ls.Tensor.from_scipy(b, "csr"))
    np.testing.assert_array_equal(result.to_scipy().toarray(), a.multiply(b).toarray())
    three = ls.compile("D(i,j) = A(i,j) * B(i,j) * E(i,j)", A="csr", B="csr", E="csr",
                       D="csr")
    result = three(A=ls.Tensor.from_scipy(a, "csr"), B=ls.Tensor.from_scipy(b, "csr"),
                   E=ls.Tensor.from_scipy(a, "csr"))
    np.testing.assert_allclose(result.to_scipy().toarray(),
                               a.multiply(b).multiply(a).toarray(), rtol=1e-15)


def test_unions_keep_their_merge():
    """A + B has no same-columns check: its merge branches on a match first already."""
    a, b = _rows_mixed(2)
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", A="csr", B="csr", C="csr")
    assert "same.head" not in kernel.llvm_ir
    result = kernel(A=ls.Tensor.from_scipy(a, "csr"), B=ls.Tensor.from_scipy(b, "csr"))
    np.testing.assert_array_equal(result.to_scipy().toarray(), (a + b).toarray())
