"""The dense workspace drains each run one of three ways, chosen from its entry count
and span (backends/llvm/workspace_dense.py): a sorted list (short runs, and runs spread
too wide), or a bitmap whose flagged words are found 64 at a time. Each way is driven
here by rows built for it, at the edges of the vectors it loads (first and last
coordinate, narrow and wide spans, widths around multiples of 64 and 4,096), and
checked against scipy: the same entries, columns sorted in each row.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.backends.llvm.workspace_dense import BITMAP_CHUNKS_PER_ENTRY, SORT_ROWS_UP_TO

import llvsparse as ls

SPGEMM = "C(i,j) = A(i,k) * B(k,j)"


def _product(A: sp.csr_matrix, B: sp.csr_matrix, dtype: type = np.float64) -> None:
    """C = A @ B through the dense workspace into CSR, checked against scipy."""
    kernel = ls.compile(SPGEMM, A="csr", B="csr", out_format="csr", workspace="dense")
    A, B = A.astype(dtype), B.astype(dtype)
    out = kernel(A=ls.Tensor.from_scipy(A, format="csr"), B=ls.Tensor.from_scipy(B, format="csr"))
    level = out.level_arrays[1]
    pos, crd = np.asarray(level["pos"]), np.asarray(level["crd"])
    for r in range(A.shape[0]):  # strictly increasing columns in every row
        assert np.all(np.diff(crd[pos[r]:pos[r + 1]]) > 0), f"row {r} unsorted"
    got = sp.csr_matrix((np.asarray(out.values), crd, pos), shape=(A.shape[0], B.shape[1]))
    expected = (A @ B).tocsr()
    expected.sort_indices()
    np.testing.assert_array_equal(got.indptr, expected.indptr)
    np.testing.assert_array_equal(got.indices, expected.indices)
    np.testing.assert_allclose(got.data, expected.data, rtol=1e-12)


def _rows(columns: list[list[int]], width: int, rng: np.random.Generator) -> sp.csr_matrix:
    """A with one row per list of columns (A @ I then holds exactly those rows)."""
    data, indices, indptr = [], [], [0]
    for cols in columns:
        cols = sorted(set(cols))
        indices += cols
        data += list(rng.uniform(0.5, 2.0, len(cols)) * rng.choice([-1, 1], len(cols)))
        indptr.append(len(indices))
    return sp.csr_matrix((data, indices, indptr), shape=(len(columns), width))


@pytest.mark.parametrize("width", [40, 4095, 4096, 4097, 12_289])
def test_each_way_at_the_edges_of_its_vectors(width: int) -> None:
    rng = np.random.default_rng(width)
    last = width - 1
    n = SORT_ROWS_UP_TO + 1
    narrow_span = n * 16  # a run this narrow fills its bitmap words densely
    rows = [
        [0, last],  # short: sorted
        list(range(SORT_ROWS_UP_TO)),  # short, the longest sorted run
        list(range(n)),  # narrow from the first coordinate
        list(range(max(0, width - n), width)),  # narrow up to the last coordinate
        sorted(rng.choice(min(width, narrow_span), n, replace=False).tolist()),
    ]
    if width > narrow_span + 1:  # spread over many words: the span's ends included
        inner = rng.choice(np.arange(1, last), n - 2, replace=False).tolist()
        rows += [[0, last, *inner], [64 * 63, last, *rng.choice(last, n, replace=False)]]
    A = _rows(rows, width, rng)
    identity = sp.identity(width, format="csr")
    _product(A, identity)
    # Overlapping products sum into entries; the same rows through a random B.
    # A Generator samples the positions directly (an integer seed made scipy's legacy
    # sampler permute all width**2 of them: 20 s at 12,289).
    B = sp.random(width, width, density=min(1.0, 3 / width), format="csr",
                  random_state=np.random.default_rng(1))
    _product(A, B + identity)


def test_runs_spread_too_wide_for_the_bitmap_are_sorted() -> None:
    """More than BITMAP_CHUNKS_PER_ENTRY chunks of 4,096 columns per entry: the sort."""
    rng = np.random.default_rng(3)
    width = 4096 * BITMAP_CHUNKS_PER_ENTRY * (SORT_ROWS_UP_TO + 1) * 2
    n = SORT_ROWS_UP_TO + 1
    rows = [np.linspace(0, width - 1, n).astype(int).tolist(),
            rng.choice(width, n + 5, replace=False).tolist()]
    _product(_rows(rows, width, rng), sp.identity(width, format="csr"))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_random_products_of_every_density(dtype: type) -> None:
    """Rows of all lengths and spreads in one kernel call: the way changes per row and
    each leaves the store empty for the next."""
    rng = np.random.default_rng(11)
    for width, density in ((300, 0.2), (5000, 0.004), (20_000, 0.0015)):
        A = sp.random(400, width, density=density, format="csr", random_state=rng)
        B = sp.random(width, width, density=density, format="csr", random_state=rng)
        if np.issubdtype(dtype, np.integer):
            A.data, B.data = np.ceil(A.data * 5), np.ceil(B.data * 5)
        _product(A, B, dtype)
        _product(A, A.T.tocsr() if width == A.shape[0] else B, dtype)
