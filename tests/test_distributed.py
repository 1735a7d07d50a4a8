"""llvsparse.distributed (issue 24): kernels over partitioned tensors, run by Dask's
threaded scheduler and by a dask.distributed LocalCluster of two worker processes
(one cluster for this module), each result checked against scipy/numpy."""

from __future__ import annotations

import os
import subprocess
import sys

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
import llvsparse.distributed as ld

RNG = np.random.default_rng(24)
A = sp.random(300, 200, density=0.05, format="csr", random_state=1, dtype=np.float64)
B = sp.random(200, 150, density=0.05, format="csr", random_state=2, dtype=np.float64)
X = RNG.random(200)
Z = RNG.random(300)
M = RNG.random((200, 6))
WORKER_MEMORY = 400 << 20  # bytes per worker process


# One worker runs this module (pytest-xdist's loadgroup): the LocalCluster of the client
# fixture starts once.
pytestmark = pytest.mark.xdist_group("dask_cluster")


def threaded(value):
    return value.compute(scheduler="threads", num_workers=2)


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    # No disk cache in the workers: a kernel they run comes from its pickle or LLVM.
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      memory_limit=WORKER_MEMORY, dashboard_address=None,
                      env={"LLVSPARSE_CACHE": "0"}) as cluster, Client(cluster) as c:
        _check_same_compiler(c)
        yield c


def _check_same_compiler(client) -> None:
    """The workers import llvsparse when they start: where its sources changed since
    this process imported them (commits landing during a test run), they run another
    compiler and rightly compile every kernel again instead of loading its pickled
    object code (a run failed 'assert 3 == 0' on llvm_compiles that way)."""
    from llvsparse.caching.disk import compiler_fingerprint

    theirs = client.run(compiler_fingerprint)
    if set(theirs.values()) != {compiler_fingerprint()}:
        pytest.fail("llvsparse's sources changed since this test process imported them: "
                    "the workers run another compiler; run the tests on a tree no one "
                    "edits meanwhile", pytrace=False)


def _worker_stats() -> dict:
    from llvsparse.backends.cpu import STATS

    return dict(STATS)


# -- threaded scheduler -------------------------------------------------------------------
def test_import_llvsparse_never_imports_dask():
    script = ("import sys, numpy as np, llvsparse as ls\n"
              "y = ls.evaluate('y(i) = A(i,j) * x(j)', A=np.eye(3), x=np.ones(3))\n"
              "assert not [m for m in sys.modules if m.split('.')[0] in "
              "('dask', 'distributed')], 'dask imported'\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("chunks", [(70, 200), (70, 90), (300, 64)])
def test_spmv_over_row_blocks_and_tiles(chunks):
    y = ld.evaluate("y(i) = A(i,j) * x(j)", A=ld.partition(A, chunks), x=X)
    assert isinstance(y, da.Array)
    np.testing.assert_allclose(threaded(y), A @ X)


@pytest.mark.slow
def test_blocks_in_any_format_from_a_dask_array_of_scipy_and_pydata_chunks(pydata_sparse):
    chunked = da.from_array(A, chunks=(100, 200), asarray=False)
    for fmt in ("coo", "dcsr"):
        y = ld.evaluate("y(i) = A(i,j) * x(j)", A=ld.from_dask(chunked, format=fmt), x=X)
        np.testing.assert_allclose(threaded(y), A @ X)
    chunked = da.from_array(A.toarray(), chunks=(64, 100)).map_blocks(
        pydata_sparse.COO, dtype=A.dtype, meta=np.empty((0, 0)))
    y = ld.evaluate("y(i) = A(i,j) * x(j)", A=ld.from_dask(chunked, "csr"),
                    x=da.from_array(X, chunks=50))
    np.testing.assert_allclose(threaded(y), A @ X)


def test_sddmm_spadd_and_elementwise_stay_within_their_tiles():
    P = ld.partition(A, (100, 80))
    U, V = RNG.random((300, 4)), RNG.random((200, 4))
    C = ld.evaluate("C(i,j) = S(i,j) * U(i,k) * V(j,k)", out_format="csr", S=P, U=U, V=V)
    expected = A.multiply(U @ V.T).toarray()
    np.testing.assert_allclose(threaded(C.to_delayed()[(0, 0)]).to_numpy(), expected[:100, :80])
    np.testing.assert_allclose(C.compute(scheduler="threads").to_numpy(), expected)
    twice = ld.partition(2 * A, (150, 200))  # other boundaries: merged to those shared
    S = ld.evaluate("C(i,j) = A(i,j) + B(i,j)", out_format="csr", A=P, B=twice)
    np.testing.assert_allclose(S.compute(scheduler="threads").to_numpy(), 3 * A.toarray())
    H = ld.evaluate("H(i,j) = A(i,j) * B(i,j)", A=P, B=twice)
    np.testing.assert_allclose(threaded(H), 2 * A.multiply(A).toarray())


def test_spgemm_of_row_blocks_by_a_partitioned_b():
    C = ld.evaluate("C(i,j) = A(i,k) * B(k,j)", out_format="csr", A=ld.partition(A, 70),
                    B=ld.partition(B, 64))
    result = C.compute(scheduler="threads")
    assert result.format == ls.named_format("csr", 2)
    np.testing.assert_allclose(result.to_numpy(), (A @ B).toarray())


@pytest.mark.slow
def test_ttv_over_a_partitioned_mode_is_a_reduction():
    T = RNG.random((40, 12, 10)) * (RNG.random((40, 12, 10)) < 0.1)
    v = RNG.random(40)
    P = ld.from_dask(da.from_array(T, chunks=(15, 12, 10)), format="csf")  # numpy chunks
    assert P.grid == (3, 1, 1)
    Y = ld.evaluate("Y(j,k) = T(i,j,k) * v(i)", T=P, v=v)
    np.testing.assert_allclose(threaded(Y), np.einsum("ijk,i->jk", T, v))


def test_a_sum_that_does_not_distribute_is_kept_in_one_block():
    """Adding ``b(i)`` to each partial sum over column blocks would count it once per
    block: the summed index is not split there."""
    b = RNG.random(300)
    y = ld.evaluate("y(i) = A(i,j) * x(j) + b(i)", A=ld.partition(A, (100, 50)), x=X, b=b)
    np.testing.assert_allclose(threaded(y), A @ X + b)
    s = ld.evaluate("s = A(i,j) * x(j) * z(i)", A=ld.partition(A, (100, 50)), x=X, z=Z)
    np.testing.assert_allclose(threaded(s), Z @ (A @ X))


def test_one_matrix_market_file_read_in_byte_ranges(tmp_path):
    path = tmp_path / "a.mtx"
    sym = sp.random(120, 120, density=0.05, format="coo", random_state=5)
    sym = sp.triu(sym + sym.T).tocoo()
    ls.write(str(path), ls.Tensor.from_scipy(sym, "coo"))
    text = path.read_text().replace("general", "symmetric", 1)
    path.write_text(text)
    full = (sym + sp.triu(sym, 1).T).toarray()
    P = ld.from_mtx(path, rows_per_block=25, chunk_bytes=512)
    assert P.grid == (5, 1)
    np.testing.assert_allclose(P.compute(scheduler="threads").to_numpy(), full)
    y = ld.evaluate("y(i) = A(i,j) * x(j)", A=P, x=np.arange(120.0))
    np.testing.assert_allclose(threaded(y), full @ np.arange(120.0))
    path.write_text(text[:-40])  # cut inside the last lines
    with pytest.raises(ValueError, match="declares"):
        ld.from_mtx(path, rows_per_block=25, chunk_bytes=512).compute(scheduler="threads")


def test_row_blocks_saved_and_read_back_from_npz_and_mtx_files(tmp_path):
    paths = ld.save_blocks(ld.partition(A, 128), tmp_path / "npz", scheduler="threads")
    assert [p.name for p in paths] == ["block-0.npz", "block-1.npz", "block-2.npz"]
    y = ld.evaluate("y(i) = A(i,j) * x(j)", A=ld.from_files(tmp_path / "npz"), x=X)
    np.testing.assert_allclose(threaded(y), A @ X)
    (tmp_path / "mtx").mkdir()
    for k, (lo, hi) in enumerate([(0, 100), (100, 300)]):
        ls.write(str(tmp_path / "mtx" / f"part-{k}.mtx"), ls.Tensor.from_scipy(A[lo:hi]))
    P = ld.from_files(tmp_path / "mtx", format="coo")
    assert P.bounds == ((0, 100, 300), (0, 200))
    np.testing.assert_allclose(P.compute(scheduler="threads").to_numpy(), A.toarray())
    ls.write(str(tmp_path / "mtx" / "part-2.mtx"), ls.Tensor.from_scipy(B))
    with pytest.raises(ValueError, match="disagree on the number of columns"):
        ld.from_files(tmp_path / "mtx")


def test_npz_blocks_are_adopted_only_where_canonical_and_laid_out_as_asked(tmp_path):
    """A CSR block file becomes a CSR block on its own arrays; unsorted columns, or
    another format, are packed instead."""
    top = A[:100].copy()
    for r in range(100):  # each row's columns reversed: valid, not canonical
        lo, hi = top.indptr[r], top.indptr[r + 1]
        top.indices[lo:hi], top.data[lo:hi] = top.indices[lo:hi][::-1], top.data[lo:hi][::-1]
    top.has_sorted_indices = False
    sp.save_npz(tmp_path / "block-0.npz", top)
    sp.save_npz(tmp_path / "block-1.npz", A[100:])
    for fmt in ("csr", "csc", "coo"):
        P = ld.from_files(tmp_path, format=fmt)
        np.testing.assert_allclose(
            threaded(ld.evaluate("y(i) = A(i,j) * x(j)", A=P, x=X)), A @ X)
        np.testing.assert_allclose(P.compute(scheduler="threads").to_numpy(), A.toarray())


def test_a_corrupt_block_is_refused_before_its_kernel_runs():
    from llvsparse.distributed.partitioned import Block, Partitioned, same

    good = ls.Tensor.from_scipy(A[:100], "csr")
    crd = good.level_arrays[1]["crd"].copy()
    crd[0] = 10**6  # a column far outside the block
    bad = ls.Tensor(good.shape, good.format, good.dtype, good.index_dtype, good.level_extents,
                    [{}, {"pos": good.level_arrays[1]["pos"], "crd": crd}], good.params,
                    good.values)
    P = Partitioned((100, 200), ((0, 100), (0, 200)), good.format, good.dtype, None,
                    {(0, 0): Block(same, bad)})
    with pytest.raises(ls.CorruptTensorError):
        threaded(ld.evaluate("y(i) = A(i,j) * x(j)", A=P, x=X))


def test_an_unaligned_dense_chunk_is_copied_aligned_once():
    """What dask.distributed hands a task can sit at an odd address; every tile of a
    worker reads the same chunk, so its aligned copy is made once and kept while it lives."""
    from llvsparse.distributed.blockwise import _ALIGNED, _aligned

    raw = bytearray(X.nbytes + 1)
    unaligned = np.frombuffer(memoryview(raw)[1:], dtype=X.dtype)
    unaligned[:] = X
    assert not unaligned.flags.aligned
    first = _aligned(unaligned)
    assert first.flags.aligned and _aligned(unaligned) is first
    np.testing.assert_array_equal(first, X)
    del unaligned
    assert id(first) not in {id(v) for v in _ALIGNED.values()}


def test_a_block_tells_dask_its_size():
    """Dask weighs a task's inputs by ``sizeof`` when it picks a worker; a Tensor
    measured as a plain object (~50 bytes) let a LocalCluster move 75 MB blocks to the
    worker holding x rather than run each task where its block was."""
    from dask.sizeof import sizeof

    block = ls.Tensor.from_scipy(A, "csr")
    arrays = A.data.nbytes + A.indices.nbytes + A.indptr.astype(block.index_dtype).nbytes
    assert arrays <= sizeof(block) <= arrays + 4096


def _walks_of(tensor) -> list[int]:
    """How many times validating ``tensor`` walks its levels, and ``tensor @ X``."""
    import llvsparse.tensors.tensor_validation as lt

    calls, walk = [], lt.walk_levels
    lt.walk_levels = lambda *a, **k: (calls.append(1), walk(*a, **k))[1]
    try:
        tensor.validate()
    finally:
        lt.walk_levels = walk
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    return [len(calls), kernel(A=tensor, x=X, check=False).to_numpy()]


def test_a_pickled_tensor_is_walked_again_only_where_it_was_not_validated():
    """A validated tensor arrives validated (a worker fetching a 6M-entry block walked
    it for 1-2 s, more than the SpMV it was fetched for); one never validated is walked,
    and a corrupt one is still refused."""
    import pickle

    checked = ls.Tensor.from_scipy(A, "csr")
    checked.validate()
    walks, y = _walks_of(pickle.loads(pickle.dumps(checked, protocol=5)))
    assert walks == 0
    np.testing.assert_allclose(y, A @ X)
    good = ls.Tensor.from_scipy(A, "csr")
    raw = ls.Tensor(good.shape, good.format, good.dtype, good.index_dtype, good.level_extents,
                    [{}, {k: v.copy() for k, v in good.level_arrays[1].items()}],
                    good.params, good.values)  # not packed by llvsparse: never trusted
    walks, y = _walks_of(pickle.loads(pickle.dumps(raw, protocol=5)))
    assert walks == 1
    np.testing.assert_allclose(y, A @ X)
    raw.level_arrays[1]["crd"][0] = 10**6
    with pytest.raises(ls.CorruptTensorError):
        pickle.loads(pickle.dumps(raw, protocol=5)).validate()


def test_bad_operands_are_refused_by_name():
    P = ld.partition(A, 100)
    with pytest.raises(ls.ShapeError, match="index j"):
        ld.evaluate("y(i) = A(i,j) * x(j)", A=P, x=np.ones(7))
    with pytest.raises(TypeError, match="partitioned first"):
        ld.evaluate("y(i) = A(i,j) * x(j)", A=A, x=X)
    with pytest.raises(ValueError, match="missing"):
        ld.evaluate("y(i) = A(i,j) * x(j)", A=P)
    with pytest.raises(ValueError, match="repeated index"):
        ld.evaluate("t = A(i,i)", A=ld.partition(sp.eye(10, format="csr"), 5))
    with pytest.raises(ValueError, match="empty chunks"):
        ld.from_dask(da.from_array(A, chunks=((300, 0), (200,)), asarray=False))
    with pytest.raises(ValueError, match="gzipped"):
        ld.from_mtx("a.mtx.gz", 10)


# -- a LocalCluster of two worker processes ------------------------------------------------
@pytest.mark.slow
def test_cluster_spmv_spmm_and_the_transposed_reduction_without_llvm_on_workers(client):
    before = client.run(_worker_stats)
    P = ld.partition(A, (70, 100))
    with dask.config.set(scheduler=client):
        np.testing.assert_allclose(ld.evaluate("y(i) = A(i,j) * x(j)", A=P, x=X).compute(),
                                   A @ X)
        np.testing.assert_allclose(
            ld.evaluate("Y(i,k) = A(i,j) * M(j,k)", A=P, M=M).compute(), A @ M)
        np.testing.assert_allclose(ld.evaluate("y(j) = A(i,j) * z(i)", A=P, z=Z).compute(),
                                   A.T @ Z)
    after = client.run(_worker_stats)
    for worker, stats in after.items():
        # Three kernels, each loaded at most once per worker from the object code it
        # was pickled with (and its other loop form, where this process had compiled
        # it); nothing compiled with LLVM there, however many tasks ran.
        assert stats.get("llvm_compiles", 0) == before[worker].get("llvm_compiles", 0)
        assert stats.get("disk_loads", 0) - before[worker].get("disk_loads", 0) <= 3 * 2
    assert sum(s.get("disk_loads", 0) for s in after.values()) > 0


@pytest.mark.slow
def test_cluster_spgemm_across_row_blocks_and_tiles(client):
    with dask.config.set(scheduler=client):
        for chunks in (70, (70, 64)):  # row blocks (B merged), tiles (a sum over k)
            C = ld.evaluate("C(i,j) = A(i,k) * B(k,j)", out_format="csr",
                            A=ld.partition(A, chunks), B=ld.partition(B, (64, 150)))
            np.testing.assert_allclose(C.compute().to_numpy(), (A @ B).toarray())


@pytest.mark.slow
def test_cluster_a_block_fetched_by_another_worker_is_not_walked_again(client):
    first, second = sorted(client.scheduler_info()["workers"])
    block = client.submit(ls.Tensor.from_scipy, A, "csr", workers=[first], pure=False)
    walks, y = client.submit(_walks_of, block, workers=[second], pure=False).result()
    assert walks == 0
    np.testing.assert_allclose(y, A @ X)


@pytest.mark.slow
def test_cluster_x_scattered_once_to_every_worker_is_a_dense_operand(client):
    """x sent to the workers once (``client.scatter(x, broadcast=True)``) and passed as a
    dask array, with no reference kept here: the graph holds its future until the tasks
    ran (it was dropped, 'lost dependencies', where the chunk's graph was optimized
    alone or the future sat in a tuple of arguments)."""
    P = ld.partition(A, (70, 200))
    y = ld.evaluate("y(i) = A(i,j) * x(j)", A=P, x=da.from_delayed(
        client.scatter(X, broadcast=True, hash=False), X.shape, X.dtype))
    np.testing.assert_allclose(y.compute(scheduler=client), A @ X)
    Y = ld.evaluate("Y(i,k) = A(i,j) * M(j,k)", A=ld.partition(A, (70, 64)), M=da.from_delayed(
        client.scatter(M, broadcast=True, hash=False), M.shape, M.dtype))
    np.testing.assert_allclose(Y.compute(scheduler=client), A @ M)


def _write_blocks(folder, rows: int, cols: int, per_row: int, blocks: int, seed: int) -> None:
    """Row blocks of ``per_row`` entries a row (in columns ``cols // per_row`` apart
    from a random first one), written one at a time (never all in memory at once)."""
    rng = np.random.default_rng(seed)
    step = cols // per_row
    for k in range(blocks):
        first = rng.integers(0, step, rows, dtype=np.int32)
        indices = first[:, None] + np.arange(per_row, dtype=np.int32) * step
        indptr = np.arange(0, rows * per_row + 1, per_row, dtype=np.int32)
        block = sp.csr_matrix((rng.random(rows * per_row), indices.ravel(), indptr),
                              shape=(rows, cols))
        sp.save_npz(os.path.join(folder, f"block-{k}.npz"), block, compressed=False)


@pytest.mark.slow
def test_cluster_out_of_core_spmv_of_a_matrix_larger_than_a_worker(client, tmp_path):
    """480 MB of blocks on disk against workers limited to 400 MB each (a worker past
    95% of its limit is restarted and the computation fails): each task reads its own
    block and frees it."""
    rows, cols, per_row, blocks = 20_000, 50_000, 50, 40  # 1M entries, 12 MB a block
    _write_blocks(tmp_path, rows, cols, per_row, blocks, seed=7)
    on_disk = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert on_disk > WORKER_MEMORY
    x = RNG.random(cols)
    P = ld.from_files(tmp_path)
    assert P.shape == (rows * blocks, cols) and P.grid == (blocks, 1)
    with dask.config.set(scheduler=client):
        y = ld.evaluate("y(i) = A(i,j) * x(j)", A=P, x=x).compute()
    expected = np.concatenate([sp.load_npz(tmp_path / f"block-{k}.npz") @ x
                               for k in range(blocks)])
    np.testing.assert_allclose(y, expected)


def test_blocks_keep_the_fill_value():
    """A fill-inf tensor partitioned: every block reads inf where nothing is stored, an
    elementwise result keeps the fill (C = A + 1), and partial sums over column blocks
    add with it (an entry one block stores and another does not is inf there), as
    numpy on the dense array says."""
    dense = np.where(A.toarray() != 0, A.toarray(), np.inf)
    dense[7] = 1.0  # one row stored in full: a finite sum across the column blocks
    G = ls.Tensor.from_numpy(dense, "csr", fill=np.inf)
    P = ld.partition(G, (100, 80))
    assert P.format.fill == np.inf
    C = ld.evaluate("C(i,j) = A(i,j) + 1", out_format="csr", A=P)
    got = C.compute(scheduler="threads")
    assert got.fill_value == np.inf and got.nnz == G.nnz
    np.testing.assert_array_equal(got.to_numpy(), dense + 1)
    y = ld.evaluate("y(i) = A(i,j)", out_format="coo", A=ld.partition(G, (300, 50)))
    np.testing.assert_array_equal(y.compute(scheduler="threads").to_numpy(), dense.sum(axis=1))
    np.testing.assert_array_equal(threaded(ld.evaluate("y(i) = A(i,j)", A=P)),
                                  dense.sum(axis=1))
