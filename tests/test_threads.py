"""Threaded kernels: the output's rows split among threads give the serial result bit for
bit (no reduction is reordered), for every kernel whose output rows do not race, with
the rows' loop outermost or under storage-only loops (DIA's diagonals, ELL's slots)."""

from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import llvsparse as ls
import llvsparse.calls.binding
import llvsparse.kernel.api
from llvsparse.abi import runtime, thread_calls


def _matrix(rows: int, cols: int, per_row: int, seed: int):
    rng = np.random.default_rng(seed)
    nnz = rows * per_row
    return sp.csr_matrix((rng.random(nnz), (rng.integers(0, rows, nnz),
                                            rng.integers(0, cols, nnz))), shape=(rows, cols))


CASES = [
    ("y(i) = A(i,j) * x(j)", {"A": "csr"}, lambda A, rng: {"x": rng.random(A.shape[1])}),
    ("C(i,j) = A(i,k) * B(k,j)", {"A": "csr"},
     lambda A, rng: {"B": rng.random((A.shape[1], 8))}),
    ("C(i,j) = A(i,j) * B(i,k) * D(j,k)", {"A": "csr"},
     lambda A, rng: {"B": rng.random((A.shape[0], 4)), "D": rng.random((A.shape[1], 4))}),
    ("C(i,j) = A(i,j) * B(i,j)", {"A": "csr"},
     lambda A, rng: {"B": rng.random(A.shape)}),
    ("y(i) = A(i,j) * x(j)", {"A": "dia"}, lambda A, rng: {"x": rng.random(A.shape[1])}),
    ("y(i) = A(i,j) * x(j)", {"A": "ell"}, lambda A, rng: {"x": rng.random(A.shape[1])}),
    ("C(i,j) = A(i,k) * B(k,j)", {"A": "dia"},
     lambda A, rng: {"B": rng.random((A.shape[1], 8))}),
    ("y(i) = A(i,j) * x(j)", {"A": "coo"}, lambda A, rng: {"x": rng.random(A.shape[1])}),
    ("C(i,j) = A(i,k) * B(k,j)", {"A": "dcsr"},
     lambda A, rng: {"B": rng.random((A.shape[1], 8))}),
]


@pytest.fixture(autouse=True)
def _threads_for_small_inputs(monkeypatch):
    """Exercise the threaded path, with outputs paged in by the threads, on test-sized
    inputs."""
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 1000)
    monkeypatch.setattr(ls.calls.kernel_calls, "ASSEMBLY_MIN_ENTRIES", 1000)
    monkeypatch.setattr(ls.calls.binding, "SHARED_CLEAR_BYTES", 0)


@pytest.mark.slow
@pytest.mark.parametrize("page_in", [True, False], ids=["paged-in", "native-chunks"])
@pytest.mark.parametrize(("expr", "formats", "make"), CASES)
def test_threads_match_serial_bit_for_bit(expr, formats, make, page_in, monkeypatch):
    if not page_in:  # one kernel phase: the chunk loop runs in native code
        monkeypatch.setattr(ls.calls.binding, "SHARED_CLEAR_BYTES", 1 << 40)
    rng = np.random.default_rng(3)
    matrix = _matrix(3000, 2500, 12, 7)
    if formats["A"] in ("dia", "ell"):  # banded
        offsets = (-9, -4, -2, 0, 1, 3, 5, 8)
        matrix = sp.diags([rng.random(3000 - abs(k)) for k in offsets], offsets,
                          shape=(3000, 3000)).tocsr()
    assert matrix.nnz >= ls.calls.kernel_calls.PARALLEL_MIN_WORK
    operands = {"A": ls.Tensor.from_scipy(matrix, format=formats["A"]), **make(matrix, rng)}
    kernel = ls.compile(expr, **{n: f for n, f in formats.items()})
    serial = kernel(threads=1, **operands).to_numpy()
    threaded = kernel(threads=2, **operands).to_numpy()
    np.testing.assert_array_equal(serial, threaded)
    dense = {n: (v.to_numpy() if isinstance(v, ls.Tensor) else v) for n, v in operands.items()}
    subscripts = {"y(i) = A(i,j) * x(j)": "ij,j->i", "C(i,j) = A(i,k) * B(k,j)": "ik,kj->ij",
                  "C(i,j) = A(i,j) * B(i,k) * D(j,k)": "ij,ik,jk->ij",
                  "C(i,j) = A(i,j) * B(i,j)": "ij,ij->ij"}[expr]
    names = [n for n in ("A", "B", "D", "x") if n in dense]
    np.testing.assert_allclose(threaded, np.einsum(subscripts, *[dense[n] for n in names]))
    assert kernel.last.parallel_mode == 0  # under the diagonals / slots for DIA and ELL


SPARSE_OUTPUT_CASES = [
    # expression, operand formats, output format, how threads assemble it: "split"
    # (count, then fill from offsets: kernels with dense loops inside the output's
    # indices, whose count pass is much cheaper), "gather" (one pass into private
    # buffers, then concatenated), or None (one thread: the rows are not full and
    # array-free, or a non-unique level starts the append group)
    ("C(i,j) = A(i,j) * U(i,k) * V(j,k)", {"A": "csr"}, "csr", "split"),
    ("C(i,j) = (A(i,j) + B(i,j)) * U(i,k) * V(j,k)", {"A": "csr", "B": "csr"}, "csr", "split"),
    ("C(i,j) = A(i,j) * B(i,j) * U(i,k) * V(j,k)", {"A": "csr", "B": "csr"}, "csr", "split"),
    ("C(i,j) = A(i,j) + B(i,j)", {"A": "csr", "B": "csr"}, "csr", "gather"),
    ("C(i,j) = A(i,j) * B(i,j)", {"A": "csr", "B": "csr"}, "csr", "gather"),
    ("C(i,j) = A(i,j) - B(i,j)", {"A": "csr", "B": "csr"}, "csr", "gather"),
    ("C(i,j) = A(i,j) - B(i,j)", {"A": "csr", "B": "csr"}, "dcsr", None),
    ("C(i,j) = A(i,j) + B(i,j)", {"A": "csr", "B": "csr"}, "coo", None),
]
STRATEGY_PHASES = {"split": {"setup", "count", "fill", "finish"},
                   "gather": {"setup", "append", "finish"}, None: set()}


def _arrays(tensor: ls.Tensor) -> list[np.ndarray]:
    return [a for level in tensor.level_arrays for a in level.values()] + [tensor.values]


@pytest.mark.slow
@pytest.mark.parametrize(("expr", "formats", "out", "strategy"), SPARSE_OUTPUT_CASES)
def test_sparse_outputs_assembled_by_threads_match_serial(expr, formats, out, strategy,
                                                         always_gather):
    rng = np.random.default_rng(5)
    a, b = _matrix(3000, 2500, 12, 1), _matrix(3000, 2500, 12, 2)
    a = sp.diags((np.arange(3000) // 400 != 2).astype(float)) @ a  # rows 800-1199 empty
    a.eliminate_zeros()
    operands = {"A": ls.Tensor.from_scipy(a, "csr"), "B": ls.Tensor.from_scipy(b, "csr"),
                "U": rng.random((3000, 4)), "V": rng.random((2500, 4))}
    operands = {n: v for n, v in operands.items() if f"{n}(" in expr}
    kernel = ls.compile(expr, out_format=out, **formats)
    serial = kernel(threads=1, **operands)
    always_gather.clear()  # (conversions of operands may gather too)
    threaded = kernel(threads=2, **operands)
    assert set(kernel.last.jit.assembly) == STRATEGY_PHASES[strategy]
    assert (kernel.bind(threads=2, **operands).plan is not None) == bool(strategy)
    assert len(always_gather) == (strategy == "gather")
    for one, two in zip(_arrays(serial), _arrays(threaded), strict=True):
        np.testing.assert_array_equal(one, two)
    A, B = a.toarray(), b.toarray()
    UV = operands["U"] @ operands["V"].T if "U" in operands else None
    reference = {"C(i,j) = A(i,j) * U(i,k) * V(j,k)": lambda: A * UV,
                 "C(i,j) = (A(i,j) + B(i,j)) * U(i,k) * V(j,k)": lambda: (A + B) * UV,
                 "C(i,j) = A(i,j) * B(i,j) * U(i,k) * V(j,k)": lambda: A * B * UV,
                 "C(i,j) = A(i,j) + B(i,j)": lambda: A + B,
                 "C(i,j) = A(i,j) * B(i,j)": lambda: A * B,
                 "C(i,j) = A(i,j) - B(i,j)": lambda: A - B}[expr]()
    np.testing.assert_allclose(threaded.to_numpy(), reference, rtol=1e-12)


@pytest.mark.parametrize("out", ["csr", "csf"])
def test_ttv_into_sparse_rows_gathered_by_threads_matches_serial(out, always_gather):
    """TTV into CSR (and a 2-D CSF, compressed rows over dense ones: not gathered, the
    row level is not full) with empty rows and chunks of a few rows."""
    rng = np.random.default_rng(6)
    coords = rng.integers(0, [400, 300, 200], size=(20000, 3)).T
    coords = coords[:, (coords[0] % 50) != 7]  # some empty rows
    dense = np.zeros((400, 300, 200))
    np.add.at(dense, tuple(coords), rng.random(coords.shape[1]))
    c = rng.random(200)
    B = ls.Tensor.from_numpy(dense, "csf")
    kernel = ls.compile("A(i,j) = B(i,j,k) * c(k)", out_format=out, B="csf")
    serial = kernel(threads=1, B=B, c=c)
    always_gather.clear()
    threaded = kernel(threads=2, B=B, c=c)
    gathered = out == "csr"
    assert set(kernel.last.jit.assembly) == STRATEGY_PHASES["gather" if gathered else None]
    assert (kernel.bind(threads=2, B=B, c=c).plan is not None) == gathered
    assert len(always_gather) == gathered
    for one, two in zip(_arrays(serial), _arrays(threaded), strict=True):
        np.testing.assert_array_equal(one, two)
    np.testing.assert_allclose(threaded.to_numpy(), np.einsum("ijk,k->ij", dense, c))


@pytest.mark.parametrize("threads", [0, 2.5, True, "4", None, 10**6])
def test_set_num_threads_validates(threads):
    """2.5 became 2 and True became 1; 10**6 made every call start as many OS threads."""
    before = ls.get_num_threads()
    with pytest.raises(ValueError, match="integer from 1 to 1024"):
        ls.set_num_threads(threads)
    assert ls.get_num_threads() == before
    ls.set_num_threads(2)
    assert ls.get_num_threads() == 2
    ls.set_num_threads(before)


@pytest.mark.parametrize("threads", [0, -1, 1.5, "2", True, 10**6])
def test_threads_per_call_are_validated(threads):
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    A = ls.Tensor.from_scipy(_matrix(20, 10, 2, 1), "csr")
    with pytest.raises(ValueError, match="threads must be an integer from 1 to 1024"):
        kernel(threads=threads, A=A, x=np.ones(10))


@settings(max_examples=60, deadline=None)
@given(weights=st.lists(st.integers(0, 1000), min_size=1, max_size=300),
       heavy=st.integers(0, 10**6), threads=st.integers(1, 4))
def test_split_partitions_rows_into_even_chunks(weights, heavy, threads):
    """Chunks cover [0, extent) in order without gaps; none holds more than an even share
    plus one coordinate's work; threads draw the heaviest first."""
    work = np.array(weights, dtype=float)
    work[len(work) // 2] += heavy
    plan = thread_calls.split(len(work), threads, work)
    bounds = [lo for lo, _ in plan.chunks] + [plan.chunks[-1][1]]
    assert bounds[0] == 0 and bounds[-1] == len(work)
    assert all(lo < hi for lo, hi in plan.chunks)
    assert all(hi == lo for (_, hi), (lo, _) in zip(plan.chunks, plan.chunks[1:]))
    cost = [float((work[lo:hi] + 1).sum()) for lo, hi in plan.chunks]
    count = min(len(work), threads * thread_calls.CHUNKS_PER_THREAD)
    assert max(cost) <= (work + 1).sum() / count + (work + 1).max() + 1e-9
    assert sorted(plan.order) == list(range(len(plan.chunks)))
    assert [cost[k] for k in plan.order] == sorted(cost, reverse=True)
    assert plan.threads == threads


@pytest.mark.parametrize("threads", [2, 3])
def test_chunks_run_on_the_requested_number_of_threads(threads):
    plan = thread_calls.split(64, threads)
    seen: list[tuple[int, int]] = []

    def run_chunk(k: int) -> int:
        time.sleep(0.001)  # long enough that every worker takes a chunk
        seen.append((k, threading.get_ident()))
        return 0
    thread_calls.run_phases([], plan, [thread_calls.Phase(run_chunk)])
    assert sorted(k for k, _ in seen) == list(range(len(plan.chunks)))
    assert len({ident for _, ident in seen}) == threads


def test_phases_run_in_order_with_one_step_between():
    plan = thread_calls.split(40, 2)
    log: list[tuple[str, int]] = []

    def step(name: str):
        def run_chunk(k: int) -> int:
            time.sleep(0.0005)
            log.append((name, k))
            return 0
        return run_chunk
    thread_calls.run_phases([], plan,
                            [thread_calls.Phase(step("a"), lambda: log.append(("between", -1))),
                             thread_calls.Phase(step("b"))])
    names = [name for name, _ in log]
    chunks = len(plan.chunks)
    assert names == ["a"] * chunks + ["between"] + ["b"] * chunks


def test_a_failing_chunk_stops_later_phases_and_raises():
    plan = thread_calls.split(40, 2)
    ran_second: list[int] = []
    with pytest.raises(runtime.KernelRuntimeError, match="status 1"):
        thread_calls.run_phases([_EmptyHolder()], plan, [
            thread_calls.Phase(lambda k: int(k == 3)),
            thread_calls.Phase(lambda k: ran_second.append(k) or 0)])
    assert ran_second == []


@pytest.mark.parametrize("where", [0, 1])
def test_an_exception_in_any_thread_reaches_the_caller(where):
    """Raised by a chunk in the caller's thread or a worker's, in the first phase or in
    the step between phases: the caller gets it, and no thread waits forever."""
    plan = thread_calls.split(40, 2)

    def boom(k: int) -> int:
        time.sleep(0.0005)
        if k == 5:
            raise ZeroDivisionError("chunk 5")
        return 0

    def after() -> None:
        raise ZeroDivisionError("between")
    phases = [thread_calls.Phase(boom), thread_calls.Phase(lambda k: 0)] if where == 0 else \
        [thread_calls.Phase(lambda k: 0, after), thread_calls.Phase(lambda k: 0)]
    with pytest.raises(ZeroDivisionError):
        thread_calls.run_phases([], plan, phases)


_CHUNK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


@pytest.mark.parametrize("fail_at", [None, 3])
def test_native_chunk_loop_runs_each_chunk_once_and_reports_failure(fail_at):
    """Both threads draw chunks from the native loop; each chunk runs once; a failing
    chunk's status is raised and the chunks not yet drawn are skipped."""
    plan = thread_calls.split(4000, 2)
    ran: list[tuple[int, int]] = []
    threads_seen: set[int] = set()

    @_CHUNK
    def chunk(table, lo, hi):
        time.sleep(0.0005)  # long enough that the helper takes chunks too
        ran.append((lo, hi))
        threads_seen.add(threading.get_ident())
        return int(fail_at is not None and (lo, hi) == plan.chunks[fail_at])

    address = ctypes.cast(chunk, ctypes.c_void_p).value
    holders = [runtime.DescriptorHolder([1], [None], [])]
    if fail_at is None:
        thread_calls.call_parallel(address, holders, plan)
        assert sorted(ran) == list(plan.chunks) and len(threads_seen) == 2
    else:
        with pytest.raises(runtime.KernelRuntimeError, match="status 1"):
            thread_calls.call_parallel(address, holders, plan)
        assert len(ran) < len(plan.chunks) and len(set(ran)) == len(ran)


class _EmptyHolder:
    def release(self) -> None:
        pass


@pytest.mark.parametrize("fmt", ["csr", "dcsr", "coo", "csc", "dcsc"])
def test_entries_per_first_coordinate_matrix(fmt):
    matrix = sp.diags((np.arange(300) != 5).astype(float)) @ _matrix(300, 200, 4, 9)
    matrix.eliminate_zeros()  # row 5 empty
    tensor = ls.Tensor.from_scipy(matrix, fmt)
    coords, _ = tensor.to_coo()
    mode = tensor.tensor_type.levels[0].mode
    expected = np.bincount(coords[mode], minlength=matrix.shape[mode])
    np.testing.assert_array_equal(tensor.entries_per_first_coordinate(), expected)


@pytest.mark.parametrize("fmt", ["csf", "coo"])
def test_entries_per_first_coordinate_tensor(fmt):
    rng = np.random.default_rng(8)
    coords = rng.integers(0, [30, 20, 10], size=(2000, 3)).T
    tensor = ls.Tensor.from_coo(coords, rng.random(2000), (30, 20, 10), format=fmt)
    stored, _ = tensor.to_coo()
    np.testing.assert_array_equal(tensor.entries_per_first_coordinate(),
                                  np.bincount(stored[0], minlength=30))


def test_entries_per_first_coordinate_stops_at_levels_it_cannot_span():
    """Below a level whose children are not in position order (hashed), the count is of
    entries at the last level it could span: one per row here."""
    tensor = ls.Tensor.from_scipy(_matrix(50, 40, 3, 2), ls.Format(["dense", "hashed"]))
    np.testing.assert_array_equal(tensor.entries_per_first_coordinate(), np.ones(50))


@pytest.mark.parametrize("threads", [2, 3])
def test_skewed_mttkrp_split_by_entries_matches_serial(threads):
    """One slice holds a third of the entries: the plan gives it a chunk of its own, and
    the threaded result equals the serial one bit for bit."""
    rng = np.random.default_rng(4)
    first = np.concatenate([np.full(4000, 17), rng.integers(0, 200, 8000)])
    coords = np.vstack([first, rng.integers(0, 60, 12000), rng.integers(0, 50, 12000)])
    B = ls.Tensor.from_coo(coords, rng.random(12000), (200, 60, 50), format="csf")
    C, D = rng.random((60, 8)), rng.random((50, 8))
    kernel = ls.compile("A(i,r) = B(i,k,l) * C(k,r) * D(l,r)", B="csf")
    call = kernel.bind(threads=threads, B=B, C=C, D=D)
    heavy = [(lo, hi) for lo, hi in call.plan.chunks if lo <= 17 < hi]
    assert heavy == [(17, 18)]
    serial = kernel(threads=1, B=B, C=C, D=D).to_numpy()
    np.testing.assert_array_equal(call().to_numpy(), serial)
    dense = B.to_numpy()
    np.testing.assert_allclose(serial, np.einsum("ikl,kr,lr->ir", dense, C, D), rtol=1e-12)


def test_rows_under_a_column_loop_stay_on_one_thread():
    """CSC SpMV walks columns outermost: splitting rows under them would make every thread
    walk every entry, so the kernel runs whole on one thread, and still right."""
    matrix = _matrix(3000, 2500, 12, 3)
    x = np.random.default_rng(1).random(2500)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csc")
    call = kernel.bind(threads=2, A=ls.Tensor.from_scipy(matrix, "csc"), x=x)
    assert kernel.last.parallel_mode is None and call.plan is None
    np.testing.assert_allclose(call().to_numpy(), matrix @ x, rtol=1e-12)


@pytest.mark.parametrize("op", ["+", "*"])
def test_sampled_merges_of_skewed_rows_assembled_by_threads(op, monkeypatch):
    """Rows of very different lengths (the intersection gallops over the long ones),
    sampling a rank-8 product, are counted and filled by threads in chunks of equal
    entries: the same arrays as one thread, and the reference values."""
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 1000)
    rng = np.random.default_rng(11)
    lengths = np.minimum(rng.pareto(0.9, 2000).astype(int) + 1, 1500)
    rows = np.repeat(np.arange(2000), lengths)
    cols = np.concatenate([rng.choice(1500, n, replace=False) for n in lengths])
    a = sp.csr_matrix((rng.random(len(rows)), (rows, cols)), shape=(2000, 1500))
    b = _matrix(2000, 1500, 3, 12)
    u, v = rng.random((2000, 8)), rng.random((1500, 8))
    kernel = ls.compile(f"C(i,j) = (A(i,j) {op} B(i,j)) * U(i,k) * V(j,k)",
                        A="csr", B="csr", U="dense", V="dense", out_format="csr")
    operands = {"A": ls.Tensor.from_scipy(a, "csr"), "B": ls.Tensor.from_scipy(b, "csr"),
                "U": u, "V": v}
    serial, threaded = kernel(threads=1, **operands), kernel(threads=2, **operands)
    assert kernel.last.jit.assembly
    for one, two in zip(_arrays(serial), _arrays(threaded), strict=True):
        np.testing.assert_array_equal(one, two)
    merged = (a + b) if op == "+" else a.multiply(b)
    np.testing.assert_allclose(threaded.to_numpy(), merged.toarray() * (u @ v.T), rtol=1e-12)


def test_small_sparse_outputs_assembled_on_one_thread(monkeypatch):
    """Below ASSEMBLY_MIN_ENTRIES stored sparse entries the phases cost more than they
    save: one thread assembles, even with threads=2 and enough dense values."""
    monkeypatch.setattr(ls.calls.kernel_calls, "ASSEMBLY_MIN_ENTRIES", 64_000)
    rng = np.random.default_rng(8)
    a = _matrix(3000, 2500, 12, 1)
    kernel = ls.compile("C(i,j) = A(i,j) * U(i,k) * V(j,k)", A="csr", out_format="csr")
    operands = {"A": ls.Tensor.from_scipy(a, "csr"), "U": rng.random((3000, 4)),
                "V": rng.random((2500, 4))}
    assert a.nnz < 64_000 and kernel.bind(threads=2, **operands).plan is None
    monkeypatch.setattr(ls.calls.kernel_calls, "ASSEMBLY_MIN_ENTRIES", a.nnz)
    assert kernel.bind(threads=2, **operands).plan is not None


def test_one_binding_with_a_converted_operand_called_from_eight_threads():
    """A binding keeps A's transposed copy and gathers A's values into it per call;
    np.take buffers its ``out`` and marks it read-only until it writes back, so seven of
    eight threads calling the binding at once failed ('WRITEBACKIFCOPY base is
    read-only')."""
    a = _matrix(1500, 1500, 40, 9)
    A = ls.Tensor.from_scipy(a, "csr")
    kernel = ls.compile("C(i,j) = A(i,j) * 2 + A(j,i)", A="csr", out_format="csr")
    call = kernel.bind(A=A)
    assert call.refreshes  # the transposed copy is gathered again on every call
    dense = a.toarray()
    expected = dense * 2 + dense.T
    barrier, outcomes = threading.Barrier(8), []

    def run() -> None:
        barrier.wait()
        try:
            for _ in range(6):
                outcomes.append(np.array_equal(call().to_numpy(), expected))
        except Exception as error:  # noqa: BLE001 - reported below, with the others
            outcomes.append(error)

    workers = [threading.Thread(target=run) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert outcomes == [True] * 48, [o for o in outcomes if o is not True][:3]
