"""Graph algorithms in notation (llvsparse.graphs) against scipy.sparse.csgraph and numpy:
BFS levels and Bellman-Ford distances against csgraph's shortest_path, triangles against
trace(A^3)/6, PageRank against a dense power iteration with networkx's rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from scipy.sparse import csgraph

import llvsparse as ls
from llvsparse import graphs
from llvsparse.kernel import api

ROOT = Path(__file__).resolve().parents[1]
REAL = Path("/work/shared/data/matrices/ca-GrQc.mtx.gz")
if not REAL.exists():  # a graph that ships with the package: a 30x30 grid
    REAL = ROOT / "llvsparse" / "data" / "gr_30_30.mtx.gz"


def random_graph(n: int, density: float, seed: int, low: float = 0.5,
                 high: float = 2.0) -> sp.csr_array:
    rng = np.random.default_rng(seed)
    matrix = sp.random_array((n, n), density=density, format="csr", rng=rng)
    matrix.data = rng.uniform(low, high, matrix.nnz)
    return matrix


def edge_cases() -> dict[str, sp.csr_array]:
    """Isolated vertices, a source without out-edges, loops, two components."""
    def graph(n: int, edges: list[tuple[int, int, float]]) -> sp.csr_array:
        rows, cols, weights = zip(*edges) if edges else ((), (), ())
        return sp.csr_array((np.array(weights, float), (np.array(rows, int),
                                                        np.array(cols, int))), shape=(n, n))
    return {
        "isolated": graph(6, [(0, 1, 1.0), (1, 2, 2.0)]),
        "source without out-edges": graph(4, [(1, 0, 1.0), (2, 0, 1.0), (2, 3, 1.0)]),
        "loops": graph(4, [(0, 0, 3.0), (0, 1, 1.0), (1, 1, 0.5), (1, 2, 1.0), (3, 3, 1.0)]),
        "two components": graph(7, [(0, 1, 1.0), (1, 2, 1.0), (2, 0, 1.0), (3, 4, 1.0),
                                    (4, 5, 1.0), (5, 6, 1.0), (6, 3, 1.0)]),
        "no edges": graph(5, []),
        "one vertex": graph(1, []),
        "zero weight": graph(3, [(0, 1, 0.0), (1, 2, 0.0), (2, 0, 0.0)]),  # stored zeros
        # are edges (a triangle here), as in csgraph
    }


def reference_levels(matrix, source: int) -> np.ndarray:
    hops = csgraph.shortest_path(sp.csr_matrix(matrix), unweighted=True, indices=source)
    return np.where(np.isinf(hops), -1, hops).astype(np.int64)


def reference_pagerank(matrix, alpha: float = 0.85, tol: float = 1e-6) -> np.ndarray:
    """networkx's pagerank_scipy, on the dense matrix."""
    dense = sp.csr_array(matrix).toarray().astype(np.float64)
    n = len(dense)
    out = dense.sum(axis=1)
    rows = np.divide(dense, out[:, None], out=np.zeros_like(dense), where=out[:, None] != 0)
    rank = np.full(n, 1.0 / n)
    for _ in range(100):
        last = rank
        rank = alpha * (rank @ rows + last[out == 0].sum() / n) + (1 - alpha) / n
        if np.abs(rank - last).sum() < n * tol:
            return rank
    raise AssertionError("the reference did not converge")


def reference_triangles(matrix) -> int:
    matrix = sp.csr_array(matrix)
    edges = sp.csr_array((np.ones(matrix.nnz), matrix.indices, matrix.indptr),
                         shape=matrix.shape)  # every stored entry, zeros too
    undirected = ((edges + edges.T).toarray() != 0).astype(np.int64)
    np.fill_diagonal(undirected, 0)
    return round(np.trace(undirected @ undirected @ undirected) / 6)


# ------------------------------------------------------------------------------------- BFS
@pytest.mark.parametrize("seed", range(4))
def test_bfs_random(seed: int) -> None:
    matrix = random_graph(200, 0.012, seed)
    for source in (0, 17, 199):
        levels = graphs.bfs_levels(matrix, source)
        np.testing.assert_array_equal(levels, reference_levels(matrix, source))
        order = csgraph.breadth_first_order(sp.csr_matrix(matrix), source,
                                            return_predecessors=False)
        assert set(np.flatnonzero(levels >= 0)) == set(order)


@pytest.mark.parametrize("name", list(edge_cases()))
def test_bfs_edge_cases(name: str) -> None:
    matrix = edge_cases()[name]
    for source in range(matrix.shape[0]):
        np.testing.assert_array_equal(graphs.bfs_levels(matrix, source),
                                      reference_levels(matrix, source))


def test_bfs_takes_tensors_and_dense_arrays() -> None:
    matrix = random_graph(50, 0.05, 9)
    expected = reference_levels(matrix, 3)
    np.testing.assert_array_equal(graphs.bfs_levels(ls.Tensor.from_scipy(matrix), 3),
                                  expected)
    np.testing.assert_array_equal(graphs.bfs_levels(matrix.toarray(), 3), expected)


# ------------------------------------------------------------------------------------ SSSP
@pytest.mark.parametrize("seed", range(4))
def test_sssp_random(seed: int) -> None:
    matrix = random_graph(150, 0.02, seed)
    for source in (0, 75):
        np.testing.assert_allclose(graphs.shortest_paths(matrix, source),
                                   csgraph.shortest_path(sp.csr_matrix(matrix),
                                                         indices=source), rtol=1e-12)


@pytest.mark.parametrize("name", list(edge_cases()))
def test_sssp_edge_cases(name: str) -> None:
    matrix = edge_cases()[name]
    for source in range(matrix.shape[0]):
        np.testing.assert_allclose(graphs.shortest_paths(matrix, source),
                                   csgraph.shortest_path(sp.csr_matrix(matrix),
                                                         indices=source))


def test_sssp_negative_weights_without_a_cycle() -> None:
    """Edges only from lower to higher vertices (no cycle), a third of them negative."""
    matrix = sp.triu(random_graph(120, 0.05, 4, low=-1.0, high=2.0), k=1, format="csr")
    expected = csgraph.shortest_path(sp.csr_matrix(matrix), method="BF", indices=0)
    np.testing.assert_allclose(graphs.shortest_paths(matrix, 0), expected, rtol=1e-12)


def test_sssp_negative_cycle_is_refused() -> None:
    matrix = sp.csr_array(np.array([[0, 1.0, 0], [0, 0, -2.0], [0.5, 0, 0]]))
    with pytest.raises(csgraph.NegativeCycleError):
        csgraph.shortest_path(sp.csr_matrix(matrix), method="BF", indices=0)
    with pytest.raises(graphs.NegativeCycleError, match="negative cycle"):
        graphs.shortest_paths(matrix, 0)
    loop = sp.csr_array(np.array([[0, 1.0], [0, -1.0]]))
    with pytest.raises(graphs.NegativeCycleError, match="loop of negative weight"):
        graphs.shortest_paths(loop, 0)


# ------------------------------------------------------------------------------- triangles
@pytest.mark.parametrize("seed", range(3))
def test_triangles_random(seed: int) -> None:
    matrix = random_graph(120, 0.06, seed)  # directed: counted on its undirected edges
    assert graphs.triangle_count(matrix) == reference_triangles(matrix)


@pytest.mark.parametrize("name", list(edge_cases()))
def test_triangles_edge_cases(name: str) -> None:
    matrix = edge_cases()[name]
    assert graphs.triangle_count(matrix) == reference_triangles(matrix)


@pytest.mark.parametrize("symmetric", [False, True])
def test_lower_triangle(symmetric: bool) -> None:
    """Symmetric graphs take the shortcut (no sum with the transpose); both match
    scipy's tril of the symmetrised pattern, rows sorted."""
    matrix = random_graph(90, 0.07, 5)
    matrix.setdiag(1.0)
    if symmetric:
        matrix = sp.csr_array(matrix + matrix.T)
    got = graphs.lower_triangle(matrix)
    pattern = sp.csr_array(matrix, dtype=bool)
    expected = sp.tril(sp.csr_array(pattern + pattern.T), k=-1, format="csr")
    expected.sum_duplicates()
    assert got.has_sorted_indices and got.dtype == np.bool_
    np.testing.assert_array_equal(got.indptr, expected.indptr)
    np.testing.assert_array_equal(got.indices, expected.indices)


def test_triangles_of_a_complete_graph_and_an_empty_one() -> None:
    assert graphs.triangle_count(np.ones((7, 7))) == 35  # 7 choose 3
    assert graphs.triangle_count(sp.csr_array((0, 0))) == 0


# -------------------------------------------------------------------------------- PageRank
@pytest.mark.parametrize("seed", range(3))
def test_pagerank_random(seed: int) -> None:
    matrix = random_graph(150, 0.02, seed)  # weighted, with dangling vertices
    assert (matrix.sum(axis=1) == 0).any()
    np.testing.assert_allclose(graphs.pagerank(matrix), reference_pagerank(matrix),
                               rtol=1e-10)
    np.testing.assert_allclose(graphs.pagerank(matrix, alpha=0.5, tol=1e-9),
                               reference_pagerank(matrix, 0.5, 1e-9), rtol=1e-10)


@pytest.mark.parametrize("name", list(edge_cases()))
def test_pagerank_edge_cases(name: str) -> None:
    matrix = edge_cases()[name]
    if name == "zero weight":  # every vertex dangles: its rank spreads evenly
        np.testing.assert_allclose(graphs.pagerank(matrix), np.full(3, 1 / 3))
        return
    np.testing.assert_allclose(graphs.pagerank(matrix), reference_pagerank(matrix),
                               rtol=1e-10)


def test_pagerank_that_does_not_converge_says_so() -> None:
    with pytest.raises(graphs.ConvergenceError, match="2 iterations"):
        graphs.pagerank(random_graph(100, 0.05, 1), max_iter=2)


def test_integer_and_bool_weights_and_other_formats() -> None:
    """Weights of any real dtype, graphs as COO/CSC Tensors or scipy matrices of any
    kind: the same answers as the float64 CSR graph."""
    matrix = random_graph(120, 0.03, 8)
    integer = sp.csr_array((np.arange(1, matrix.nnz + 1) % 7 + 1, matrix.indices,
                            matrix.indptr), shape=matrix.shape)
    np.testing.assert_allclose(graphs.shortest_paths(integer, 0),
                               csgraph.shortest_path(sp.csr_matrix(integer), indices=0))
    np.testing.assert_allclose(graphs.pagerank(integer), reference_pagerank(integer),
                               rtol=1e-10)
    pattern = sp.csr_array(matrix, dtype=np.bool_)
    np.testing.assert_allclose(graphs.pagerank(pattern), reference_pagerank(pattern),
                               rtol=1e-10)
    for given in (ls.Tensor.from_scipy(matrix, format="coo"),
                  ls.Tensor.from_scipy(matrix, format="csc"), sp.coo_matrix(matrix),
                  sp.lil_matrix(matrix)):
        np.testing.assert_array_equal(graphs.bfs_levels(given, 1),
                                      reference_levels(matrix, 1))
        assert graphs.triangle_count(given) == reference_triangles(matrix)


# ------------------------------------------------------------------------ a real matrix
def test_real_graph() -> None:
    matrix = sp.csr_array(scipy.io.mmread(str(REAL)))
    for source in (0, matrix.shape[0] // 2):
        np.testing.assert_array_equal(graphs.bfs_levels(matrix, source),
                                      reference_levels(matrix, source))
    weights = abs(matrix)  # gr_30_30 stores negative values
    np.testing.assert_allclose(graphs.shortest_paths(weights, 0),
                               csgraph.shortest_path(sp.csr_matrix(weights), indices=0))
    edges = matrix.astype(bool)
    undirected = sp.csr_array((edges + edges.T).astype(np.int64))
    undirected.setdiag(0)
    undirected.eliminate_zeros()
    expected = (undirected @ undirected).multiply(undirected).sum() // 6
    assert graphs.triangle_count(matrix) == expected
    np.testing.assert_allclose(graphs.pagerank(weights), reference_pagerank(weights),
                               rtol=1e-10)


# ------------------------------------------------------------------- compiled once, reused
def test_each_kernel_compiles_once() -> None:
    """A second graph of the same dtypes, run for many iterations, adds nothing to the
    kernel cache nor to any step kernel's specializations."""
    first, second = random_graph(80, 0.05, 1), random_graph(90, 0.04, 2)
    runs = (lambda m: graphs.bfs_levels(m, 0), lambda m: graphs.shortest_paths(m, 0),
            graphs.triangle_count, graphs.pagerank)
    names = ("bfs", "sssp", "triangles", "pagerank")
    for run in runs:
        run(first)
    cached = len(api._CACHE)
    specialized = [len(graphs._kernel(name)._signatures) for name in names]
    for run in runs:
        run(second)
    assert len(api._CACHE) == cached
    assert [len(graphs._kernel(name)._signatures) for name in names] == specialized


# --------------------------------------------------------------------------- bad input
def test_bad_input_is_refused() -> None:
    square = random_graph(10, 0.2, 0)
    with pytest.raises(ValueError, match="square"):
        graphs.bfs_levels(sp.random_array((3, 4), density=0.5), 0)
    with pytest.raises(ValueError, match="square"):
        graphs.pagerank(np.ones(4))
    with pytest.raises(ValueError, match="not a vertex"):
        graphs.bfs_levels(square, 10)
    with pytest.raises(ValueError, match="not a vertex"):
        graphs.shortest_paths(sp.csr_array((0, 0)), 0)
    with pytest.raises(TypeError, match="integer vertex"):
        graphs.shortest_paths(square, 1.0)
    nan = square.copy()
    nan.data[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        graphs.shortest_paths(nan, 0)
    with pytest.raises(ValueError, match="negative"):
        graphs.pagerank(-square)
    with pytest.raises(ValueError, match="alpha"):
        graphs.pagerank(square, alpha=1.5)
    with pytest.raises(TypeError, match="real numbers"):
        graphs.triangle_count(square.astype(np.complex128))


def test_corrupt_graphs_are_refused_and_spare_room_ignored() -> None:
    """scipy's constructor checks neither index range nor order: the graph is checked
    before any kernel reads it, and arrays longer than indptr's end are trimmed."""
    indptr = np.array([0, 1, 2])
    outside = sp.csr_array((np.ones(2), np.array([1, 5]), indptr), shape=(2, 2))
    with pytest.raises(ls.CorruptTensorError, match="outside"):
        graphs.bfs_levels(outside, 0)
    decreasing = sp.csr_array((np.ones(2), np.array([1, 0]), np.array([0, 2, 1])),
                              shape=(2, 2))
    with pytest.raises(ls.CorruptTensorError, match="non-decreasing"):
        graphs.pagerank(decreasing)
    spare = sp.csr_array((np.ones(3), np.array([1, 0, 7]), indptr), shape=(2, 2))
    np.testing.assert_allclose(graphs.pagerank(spare), reference_pagerank(spare[:, :]))
    np.testing.assert_array_equal(graphs.bfs_levels(spare, 0), [0, 1])


# ------------------------------------------------------------------ the benchmark's peers
def test_bench_graph_checks_graphblas_against_llvsparse() -> None:
    """tools/bench_graph verifies every algorithm of both libraries before timing; on a
    generated graph each row must be verified (or, without python-graphblas, the tool
    says what is missing)."""
    import importlib.util

    from llvsparse.tools.bench_graph import ALGORITHMS, run_on

    graph = random_graph(300, 0.02, 11)
    if importlib.util.find_spec("graphblas") is None:
        with pytest.raises(ImportError, match="python-graphblas"):
            run_on({"random": graph}, list(ALGORITHMS), rounds=1)
        return
    rows = run_on({"random": graph}, list(ALGORITHMS), rounds=1)
    assert [row["algorithm"] for row in rows] == list(ALGORITHMS)
    assert all(row["verified"] and "ratio" in row for row in rows)
