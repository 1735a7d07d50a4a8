"""Graph algorithms written in index notation: BFS levels, Bellman-Ford shortest paths,
triangle counting and PageRank.

A graph is a square matrix ``G`` whose entry ``G[i, j]`` is the edge from ``i`` to ``j``
and its weight (scipy.sparse.csgraph's convention; a stored zero is an edge of weight 0).
Each algorithm is one or two kernels, compiled once per process and format (see
``_kernel``), driven by a Python loop. The loop calls each kernel through a binding
(``Kernel.bind``) on operands it updates in place, so an iteration costs the kernel and
a few microseconds: binding a new frontier Tensor each level cost 0.2-0.3 ms, four times
a whole GraphBLAS BFS level on a road network.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from .formats.interpret import CorruptTensorError
from .frontend.tensor import Tensor
from .ir.notation import syntax as nt
from .kernel.api import compile as compile_kernel
from .notation.parse import parse
from .notation.semirings import semiring_assignment
from .tensors.format import named_format

if TYPE_CHECKING:
    from .kernel.api import Kernel

# BFS: the vertices one step from the frontier that are not visited yet. On bool
# operands * is and, and the reduction is or: the boolean semiring, whose reduction
# scatters, so the loops run over the frontier's entries and their out-edges (a push),
# i outer, j inner.
BFS_STEP = "reach(j) = or(i, unvisited(j) * frontier(i) * G(i,j))"
# Bellman-Ford: one relaxation, its sum and product over the min-plus semiring (an edge
# W(i,j) from j to i that is not stored counts as inf), kept no higher than dist(i).
SSSP_STEP = "relaxed(i) = min(dist(i), W(i,j) * dist(j))"
# Triangles: L strictly lower triangular; the loops run i, k, j and intersect the rows
# L(i,:) and L(k,:) at each entry L(i,k): L @ L is never formed.
TRIANGLES = "t = L(i,j) * L(i,k) * L(k,j)"
# PageRank: the rank each vertex receives: G(j,i) is the graph's edge from i to j,
# scale(i) alpha over i's out-weight. G is stored by columns (the graph's own rows), so
# the loops run i outer (rank(i) * scale(i) once per vertex) and scatter into received(j).
PAGERANK_STEP = "received(j) = rank(i) * scale(i) * G(j,i)"


class NegativeCycleError(ValueError):
    """The graph has a cycle of negative weight reachable from the source: shortest
    paths are not defined."""


class ConvergenceError(RuntimeError):
    """PageRank's power iteration did not converge within ``max_iter`` iterations."""


@functools.cache
def _kernel(name: str) -> Kernel:
    """The kernel of one algorithm step, compiled on first use and kept for the process
    (its machine code is specialized per dtype once, in ``Kernel.instance``)."""
    if name == "bfs":
        return compile_kernel(BFS_STEP, G="csr", frontier="sparse", unvisited="dense")
    if name == "sssp":
        return compile_kernel(_sums_over(SSSP_STEP, "min", "+"), W="csr", dist="dense")
    if name == "triangles":
        return compile_kernel(TRIANGLES, L="csr")
    if name == "pagerank":
        return compile_kernel(PAGERANK_STEP, G="csc", rank="dense", scale="dense")
    raise KeyError(name)


def _sums_over(text: str, plus: str, times: str) -> nt.Assignment:
    """``text`` with every sum, and the products under it, over the semiring (``plus``,
    ``times``); what lies outside the sums keeps its meaning."""
    assignment = parse(text)

    def convert(expr: nt.Expr) -> nt.Expr:
        if isinstance(expr, nt.Reduction):
            return semiring_assignment(nt.Assignment(assignment.lhs, expr), plus, times).rhs
        if isinstance(expr, nt.Call):
            return nt.Call(expr.op, tuple(convert(arg) for arg in expr.args))
        return expr

    return nt.Assignment(assignment.lhs, convert(assignment.rhs))


def _graph(graph: object, what: str, weighted: bool = True) -> sp.csr_array:
    """``graph`` as a canonical CSR array (sorted, duplicates summed), refused unless
    square, real, well formed and, where its weights are read, free of NaN. The
    caller's own csr_array is read as it is (not copied, not changed), so scipy's
    remembered canonical flag saves a scan on later calls."""
    if isinstance(graph, Tensor):
        graph = graph.to_scipy()
    if not sp.issparse(graph):
        array = np.asarray(graph)
        if array.ndim != 2:
            raise ValueError(f"{what}: the graph must be a square matrix, not an array of "
                             f"shape {array.shape}")
        graph = array
    matrix = graph if isinstance(graph, sp.csr_array) else sp.csr_array(graph)
    n = matrix.shape[0]
    if matrix.shape[1] != n:
        raise ValueError(f"{what}: the graph must be a square matrix, not {matrix.shape}")
    if matrix.dtype.kind not in "biuf":
        raise TypeError(f"{what}: edge weights must be real numbers, not {matrix.dtype}")
    indptr, indices = matrix.indptr, matrix.indices
    if len(indptr) != n + 1 or indptr[0] != 0 or indptr[-1] > len(indices) \
            or (n and np.diff(indptr).min() < 0):
        raise CorruptTensorError(f"{what}: the graph's indptr is not {n + 1} non-decreasing "
                                 f"offsets from 0 into its {len(indices)} indices")
    used = indices[:indptr[-1]]
    if len(used) and (used.min() < 0 or used.max() >= n):
        raise CorruptTensorError(f"{what}: the graph's indices fall outside [0, {n})")
    if len(indices) != indptr[-1] or not matrix.has_canonical_format:
        matrix = matrix.copy()  # sorted and unique, no spare room: what _compressed packs
        matrix.prune()
        matrix.sum_duplicates()
    if weighted and matrix.dtype.kind == "f" and np.isnan(matrix.data).any():
        raise ValueError(f"{what}: the graph has NaN edge weights")
    return matrix


def _source(source: object, n: int) -> int:
    if isinstance(source, (bool, np.bool_)) or not isinstance(source, (int, np.integer)):
        raise TypeError(f"source must be an integer vertex, not {source!r}")
    if not 0 <= source < n:
        raise ValueError(f"source {source} is not a vertex of a graph with {n} vertices")
    return int(source)


def _index_dtype(n: int, nnz: int) -> type:
    return np.int32 if max(n, nnz) < 2**31 - 1 else np.int64


def _compressed(matrix: sp.csr_array, values: np.ndarray, fmt: str = "csr") -> Tensor:
    """A tensor of ``matrix``'s entries with ``values`` on its index arrays (as int32
    where they fit; kernels only read them): as CSR, or as ``fmt="csc"`` (then the tensor
    is ``matrix`` transposed). ``matrix`` comes from ``_graph`` (checked, sorted,
    unique), so it is packed without ``from_scipy``'s checks and sort, which were 80% of
    a BFS on email-Enron."""
    idx = _index_dtype(matrix.shape[0], matrix.nnz)
    levels = [{}, {"pos": matrix.indptr.astype(idx, copy=False),  # read, never written
                   "crd": matrix.indices.astype(idx, copy=False)}]
    return Tensor(matrix.shape[::-1] if fmt == "csc" else matrix.shape,
                  named_format(fmt, 2), values.dtype, idx, list(matrix.shape), levels,
                  [{}, {}], values)


class _Frontier:
    """A sparse bool vector whose storage is reused level after level: a kernel binding
    on it stays valid while the vertices it holds change (they are written into its
    coordinate buffer in place, sorted and unique, and its position array says how
    many there are)."""

    def __init__(self, n: int) -> None:
        idx = _index_dtype(n, n)
        self.pos = np.zeros(2, idx)
        self.crd = np.zeros(max(n, 1), idx)
        fmt = named_format("sparse", 1)
        self.tensor = Tensor((n,), fmt, np.bool_, idx, [n], [{"pos": self.pos,
                                                              "crd": self.crd}],
                             [{}], np.ones(max(n, 1), np.bool_))

    def hold(self, vertices: np.ndarray) -> None:
        self.crd[:len(vertices)] = vertices
        self.pos[1] = len(vertices)


class _PingPong:
    """Two vectors a kernel reads and writes in turn: step k reads ``buffers[k % 2]`` and
    writes the other, through one binding per buffer (made on first use: a run that
    converges in one step pays for one binding)."""

    def __init__(self, kernel: Kernel, name: str, start: np.ndarray, **fixed: object):
        self.kernel, self.name, self.fixed = kernel, name, fixed
        self.buffers = (start, np.empty_like(start))
        self.steps: list = [None, None]

    def step(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Run step ``k``; the vector it read and the one it wrote."""
        side = k % 2
        if self.steps[side] is None:
            self.steps[side] = self.kernel.bind(check=False, **self.fixed,
                                                **{self.name: self.buffers[side]})
        read, written = self.buffers[side], self.buffers[1 - side]
        self.steps[side](out=written)
        return read, written


def bfs_levels(graph: object, source: int) -> np.ndarray:
    """Hops from ``source`` to every vertex along the graph's edges (``G[i, j]``: an edge
    from i to j, any stored entry), -1 where unreachable."""
    matrix = _graph(graph, "bfs_levels", weighted=False)
    n = matrix.shape[0]
    source = _source(source, n)
    levels = np.full(n, -1, np.int64)
    levels[source] = 0
    unvisited = np.ones(n, np.bool_)
    unvisited[source] = False
    reach = np.zeros(n, np.bool_)
    frontier = _Frontier(n)
    frontier.hold(np.array([source]))
    edges = _compressed(matrix, np.ones(matrix.nnz, np.bool_))
    step = _kernel("bfs").bind(check=False, G=edges, frontier=frontier.tensor,
                               unvisited=unvisited)
    depth = 0
    while True:
        step(out=reach)  # reach = unvisited and (frontier's out-neighbours)
        found = np.flatnonzero(reach)
        if not len(found):
            return levels
        depth += 1
        levels[found] = depth
        unvisited[found] = False
        frontier.hold(found)


def shortest_paths(graph: object, source: int) -> np.ndarray:
    """Distances from ``source`` by Bellman-Ford (negative weights allowed): relaxations
    ``dist(i) = min(dist(i), min_j G[j, i] + dist(j))`` over the min-plus semiring until
    nothing changes; inf where unreachable. A reachable negative cycle raises
    NegativeCycleError."""
    matrix = _graph(graph, "shortest_paths")
    n = matrix.shape[0]
    source = _source(source, n)
    if (matrix.diagonal() < 0).any():
        raise NegativeCycleError("shortest_paths: a vertex has a loop of negative weight")
    incoming = sp.csr_array(matrix.T)  # W(i,j): the edge from j to i
    incoming = _compressed(incoming, incoming.data.astype(np.float64))
    dist = np.full(n, np.inf)
    dist[source] = 0.0
    rounds = _PingPong(_kernel("sssp"), "dist", dist, W=incoming)
    for round_ in range(n):
        current, relaxed = rounds.step(round_)
        if np.array_equal(relaxed, current):
            return relaxed.copy()
    raise NegativeCycleError("shortest_paths: the graph has a negative cycle reachable "
                             f"from vertex {source}")


def lower_triangle(graph: object) -> sp.csr_array:
    """The strictly lower triangle of the undirected graph whose edges are the stored
    entries of ``graph`` and of its transpose (loops dropped), as a bool CSR array with
    sorted rows: what triangle counting reads. A symmetric graph (checked) is not
    added to its transpose."""
    matrix = _graph(graph, "lower_triangle", weighted=False)
    n = matrix.shape[0]
    rows = np.repeat(np.arange(n, dtype=matrix.indices.dtype), np.diff(matrix.indptr))
    cols = matrix.indices
    below, above = cols < rows, cols > rows
    counts = np.bincount(rows[below], minlength=n)
    indptr = np.zeros(n + 1, matrix.indptr.dtype)
    np.cumsum(counts, out=indptr[1:])
    lower = sp.csr_array((np.ones(indptr[-1], np.bool_), cols[below], indptr),
                         shape=(n, n))
    # The upper triangle's entries, transposed: a stable counting sort, so rows stay sorted.
    mirrored = sp.csr_array((np.ones(int(above.sum()), np.bool_),
                             (cols[above], rows[above])), shape=(n, n))
    if np.array_equal(mirrored.indptr, lower.indptr) \
            and np.array_equal(mirrored.indices, lower.indices):
        return lower
    union = sp.csr_array(lower + mirrored)
    union.sum_duplicates()
    return union


def triangle_count(graph: object) -> int:
    """Triangles of the undirected graph whose edges are the stored entries of ``graph``
    and of its transpose (loops ignored): ``sum(L .* (L @ L))`` with L the strictly lower
    triangle, computed by one kernel that intersects rows of L."""
    lower = lower_triangle(graph)
    ones = _compressed(lower, np.ones(lower.nnz, np.int64))
    return int(_kernel("triangles")(check=False, L=ones).to_numpy())


def pagerank(graph: object, alpha: float = 0.85, max_iter: int = 100,
             tol: float = 1.0e-6) -> np.ndarray:
    """PageRank as networkx computes it: edge weights split each vertex's rank among its
    out-edges, a dangling vertex's rank is spread over all vertices, teleport
    probability ``1 - alpha``, stopping when the ranks move by less than ``n * tol``
    (L1); ConvergenceError after ``max_iter`` iterations."""
    matrix = _graph(graph, "pagerank")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"pagerank: alpha must lie in [0, 1], not {alpha}")
    if (matrix.data < 0).any():
        raise ValueError("pagerank: edge weights must not be negative")
    n = matrix.shape[0]
    if n == 0:
        return np.zeros(0)
    nonempty = np.diff(matrix.indptr) > 0
    out_weight = np.zeros(n)  # each row's sum: reduceat over the rows that have entries
    out_weight[nonempty] = np.add.reduceat(matrix.data.astype(np.float64, copy=False),
                                           matrix.indptr[:-1][nonempty]) if matrix.nnz else 0
    dangling = np.flatnonzero(out_weight == 0)
    scale = np.divide(alpha, out_weight, out=np.zeros(n), where=out_weight != 0)
    rank, received = np.full(n, 1.0 / n), np.empty(n)
    # One binding, rank copied back each iteration: a binding (0.17 ms on email-Enron)
    # costs more than the copies of a typical run.
    step = _kernel("pagerank").bind(check=False, G=_compressed(matrix, matrix.data, "csc"),
                                    rank=rank, scale=scale)
    for _ in range(max_iter):
        step(out=received)
        received += alpha * rank[dangling].sum() / n + (1.0 - alpha) / n
        if np.abs(received - rank).sum() < n * tol:
            return received
        np.copyto(rank, received)
    raise ConvergenceError(f"pagerank: no convergence to tol={tol} in {max_iter} "
                           "iterations")
