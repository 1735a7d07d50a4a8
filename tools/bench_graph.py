"""Graph algorithms of ``llvsparse.graphs`` against python-graphblas (SuiteSparse:GraphBLAS)
on real graphs of shared/data, one thread each.

    python -m llvsparse.tools.bench_graph [--rounds 5] [--graphs a,b] [--json out.json]

Each implementation starts from the same scipy CSR matrix and returns a numpy answer, so
both pay their own conversion (llvsparse: canonical copy and packing; GraphBLAS:
``from_scipy_sparse``). Before timing, both answers are checked against each other and
against scipy.sparse.csgraph or numpy. Timing: ``bench_edges._interleaved``, the two
implementations taking turns every round, each sample a mean over enough calls to last
2 ms, the median of ``--rounds`` samples reported. Undirected algorithms (triangles) read
the graph symmetrised; BFS, SSSP and PageRank read it as stored (``G[i, j]``: i to j),
SSSP with weights drawn once from U[1, 10) (the files are patterns).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from .bench_edges import _interleaved
from .bench_inputs import load_real_matrix, manifest
from .bench_timing import pin_threads

GRAPHS = ("luxembourg_osm", "delaunay_n16", "email-Enron", "soc-Slashdot0902")
ALGORITHMS = ("bfs", "sssp", "triangles", "pagerank")


def _weighted(matrix: sp.csr_matrix, seed: int = 5) -> sp.csr_array:
    weighted = sp.csr_array(matrix, copy=True)
    weighted.data = np.random.default_rng(seed).uniform(1.0, 10.0, weighted.nnz)
    return weighted


def _graphblas(gb: Any) -> dict[str, Callable[..., np.ndarray]]:
    """Each algorithm in python-graphblas, as its documentation writes them."""
    from graphblas import binary, monoid, semiring, unary

    def bfs(matrix: sp.csr_array, source: int) -> np.ndarray:
        n = matrix.shape[0]
        graph = gb.Matrix.from_csr(matrix.indptr, matrix.indices, True, nrows=n, ncols=n)
        levels = gb.Vector(gb.dtypes.INT64, n)
        frontier = gb.Vector(bool, n)
        frontier[source] << True
        depth = 0
        while frontier.nvals:
            levels(frontier.S) << depth
            frontier(~levels.S, replace=True) << frontier.vxm(graph, semiring.any_pair)
            depth += 1
        return levels.to_dense(fill_value=-1)

    def sssp(matrix: sp.csr_array, source: int) -> np.ndarray:
        n = matrix.shape[0]
        graph = gb.io.from_scipy_sparse(matrix)
        loops = gb.Matrix.from_coo(np.arange(n), np.arange(n), 0.0, nrows=n, ncols=n)
        graph = graph.ewise_add(loops, binary.min).new()  # keeps dist(i) in the minimum
        dist = gb.Vector(float, n)
        dist[source] << 0.0
        for _ in range(n):
            relaxed = dist.vxm(graph, semiring.min_plus).new()
            if relaxed.isequal(dist):
                return relaxed.to_dense(fill_value=np.inf)
            dist = relaxed
        raise RuntimeError("negative cycle")

    def triangles(matrix: sp.csr_array) -> int:
        from llvsparse.graphs import lower_triangle  # the same preparation as llvsparse's

        lower = gb.io.from_scipy_sparse(lower_triangle(matrix))
        counts = gb.Matrix(gb.dtypes.INT64, *lower.shape)
        counts(lower.S) << lower.mxm(lower, semiring.plus_pair[gb.dtypes.INT64])
        return int(counts.reduce_scalar(monoid.plus).new().value or 0)

    def pagerank(matrix: sp.csr_array, alpha: float = 0.85, tol: float = 1e-6,
                 max_iter: int = 100) -> np.ndarray:
        n = matrix.shape[0]
        out = np.asarray(matrix.sum(axis=1)).reshape(-1)
        dangling = np.flatnonzero(out == 0)
        scale = np.divide(alpha, out, out=np.zeros(n), where=out != 0)
        shares = gb.io.from_scipy_sparse(sp.csr_array(
            (matrix.data * np.repeat(scale, np.diff(matrix.indptr)), matrix.indices,
             matrix.indptr), shape=matrix.shape)).T  # a transposing descriptor: no copy
        rank = gb.Vector.from_dense(np.full(n, 1.0 / n))
        for _ in range(max_iter):
            spread = (alpha * (rank[dangling].new().reduce(monoid.plus).new().value or 0.0)
                      if len(dangling) else 0.0) / n + (1 - alpha) / n
            new = gb.Vector.from_scalar(spread, n)
            new(binary.plus) << shares.mxv(rank, semiring.plus_times)
            error = new.ewise_add(rank, binary.minus).new().apply(unary.abs).new()
            if error.reduce(monoid.plus).new().value < n * tol:
                return new.to_dense(fill_value=0.0)
            rank = new
        raise RuntimeError("no convergence")

    return {"bfs": bfs, "sssp": sssp, "triangles": triangles, "pagerank": pagerank}


def _lower(matrix: sp.csr_array) -> sp.csr_array:
    """The strictly lower triangle of the symmetrised pattern, int64 ones."""
    edges = sp.csr_array(matrix, dtype=bool)
    lower = sp.tril(edges + edges.T, k=-1, format="csr")
    return sp.csr_array((np.ones(lower.nnz, np.int64), lower.indices, lower.indptr),
                        shape=lower.shape)


def _reference(name: str, matrix: sp.csr_array, weighted: sp.csr_array) -> Any:
    if name == "bfs":
        hops = csgraph.shortest_path(sp.csr_matrix(matrix), unweighted=True, indices=0)
        return np.where(np.isinf(hops), -1, hops).astype(np.int64)
    if name == "sssp":
        return csgraph.shortest_path(sp.csr_matrix(weighted), indices=0)
    if name == "triangles":
        lower = _lower(matrix)
        return int((lower @ lower).multiply(lower).sum())
    return None  # PageRank: the two implementations are compared with each other


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return bool(np.allclose(a, b, rtol=1e-9, atol=1e-12))


def run(graph_names: list[str], algorithms: list[str], rounds: int) -> list[dict]:
    """Verify and time every algorithm on every named graph of shared/data."""
    return run_on({name: sp.csr_array(load_real_matrix(name).matrix) for name in graph_names},
                  algorithms, rounds)


def run_on(matrices: dict[str, sp.csr_array], algorithms: list[str], rounds: int
           ) -> list[dict]:
    """Verify and time every algorithm on every graph; one row each."""
    try:
        import graphblas as gb
    except ImportError:
        raise ImportError("bench_graph compares with python-graphblas, which is not "
                          "installed (pip install python-graphblas)") from None

    from llvsparse import graphs

    gb.ss.config["nthreads"] = 1
    peers = _graphblas(gb)
    mine: dict[str, Callable[..., Any]] = {
        "bfs": lambda m: graphs.bfs_levels(m, 0),
        "sssp": lambda m: graphs.shortest_paths(m, 0),
        "triangles": graphs.triangle_count, "pagerank": graphs.pagerank}
    theirs: dict[str, Callable[..., Any]] = {
        "bfs": lambda m: peers["bfs"](m, 0), "sssp": lambda m: peers["sssp"](m, 0),
        "triangles": peers["triangles"], "pagerank": peers["pagerank"]}
    rows = []
    for graph_name, matrix in matrices.items():
        weighted = _weighted(matrix)
        for algorithm in algorithms:
            operand = weighted if algorithm == "sssp" else matrix
            ours, peer = mine[algorithm](operand), theirs[algorithm](operand)
            expected = _reference(algorithm, matrix, weighted)
            checked = _same(ours, peer) and (expected is None or _same(ours, expected))
            row = {"graph": graph_name, "algorithm": algorithm, "n": matrix.shape[0],
                   "nnz": int(matrix.nnz), "verified": checked}
            if checked:
                times = _interleaved({
                    "llvsparse": functools.partial(mine[algorithm], operand),
                    "graphblas": functools.partial(theirs[algorithm], operand)}, rounds)
                row.update(llvsparse_ms=times["llvsparse"] * 1e3,
                           graphblas_ms=times["graphblas"] * 1e3,
                           ratio=times["llvsparse"] / times["graphblas"])
            rows.append(row)
            print(_line(row), file=sys.stderr, flush=True)
    return rows


def _line(row: dict) -> str:
    if not row["verified"]:
        return f"| {row['graph']} | {row['algorithm']} | WRONG ANSWER | | |"
    return (f"| {row['graph']} | {row['algorithm']} | {row['llvsparse_ms']:.2f} ms | "
            f"{row['graphblas_ms']:.2f} ms | {row['ratio']:.2f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--graphs", default=",".join(GRAPHS))
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    known = {m["name"] for m in manifest()["matrices"]}
    names = [g for g in args.graphs.split(",") if g]
    missing = [g for g in names if g not in known]
    if missing:
        parser.error(f"not in shared/data's manifest: {', '.join(missing)}")
    pin_threads()
    rows = run(names, [a for a in args.algorithms.split(",") if a], args.rounds)
    print("| graph | algorithm | llvsparse | GraphBLAS | ratio |\n|---|---|---:|---:|---:|")
    for row in rows:
        print(_line(row))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0 if all(row["verified"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
