"""Sparse workspaces at scale. One holding many pairs sorts them by radix
(backends/llvm/workspace_radix.py): products of the outer-product SpGEMM (one workspace for the
whole kernel, sorted once) match scipy whether the sort takes an even or odd number of
moves, skips passes whose digit is the same in every key, or has too few pairs for it
(the quicksort). A hash workspace drains and clears through its list of occupied slots,
so a row that grew its table leaves later rows correct (and not scanning the table)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.backends.llvm.workspace_radix import RADIX_FROM

import llvsparse as ls

SPGEMM = "C(i,j) = A(i,k) * B(k,j)"


def _products(a: sp.csc_matrix, b: sp.csr_matrix) -> int:
    return int((np.diff(a.tocsc().indptr) * np.diff(b.tocsr().indptr)).sum())


def _pattern(rows: int, cols: int, density: float, seed: int, dtype=np.float64,
             top_rows: int | None = None) -> sp.csr_matrix:
    m = sp.random(rows, cols, density=density, format="csr", random_state=seed,
                  data_rvs=lambda n: np.random.default_rng(seed).integers(-9, 10, n))
    m = m.astype(dtype)
    if top_rows is not None:  # entries in the first rows only: the top digits never vary
        m = sp.csr_matrix(m.multiply(np.arange(rows)[:, None] < top_rows))
    return m


CASES = [  # rows (= inner = columns), density, rows of A kept, dtype
    (5000, 0.0012, None, np.float64),  # 25-bit keys: three passes (an odd number of moves)
    (400, 0.05, None, np.float64),  # 18 bits: two passes
    (5000, 0.02, 40, np.float64),  # keys below 40 * 5000: the top pass is skipped
    (5000, 0.0012, None, np.int64),
    (60, 0.05, None, np.float64),  # few pairs: the quicksort
]


@pytest.mark.parametrize("policy", ["sort", "hash"])
@pytest.mark.parametrize(("n", "density", "top", "dtype"), CASES)
def test_outer_product_sorted_by_radix_matches_scipy(policy, n, density, top, dtype):
    a = _pattern(n, n, density, 1, dtype, top)
    b = _pattern(n, n, density, 2, dtype)
    many = _products(a, b) >= RADIX_FROM
    assert many == (n > 60)  # the case takes the path it is named for
    kernel = ls.compile(SPGEMM, A="csc", B="csr", C="csr", workspace=policy)
    got = sp.csr_matrix(kernel(A=a.tocsc(), B=b, threads=1).to_scipy())
    expected = sp.csr_matrix(a @ b)
    expected.sort_indices()
    # Entries the products cancel stay stored (as zeros) in C: compare the pattern of
    # what scipy keeps, and every value.
    assert (got != expected).nnz == 0
    rows = np.repeat(np.arange(n), np.diff(got.indptr))
    keys = rows.astype(np.int64) * n + got.indices
    assert np.all(np.diff(keys) > 0)  # each row's columns strictly increasing, in order


@pytest.mark.parametrize("policy", ["sort", "hash"])
def test_three_index_workspace_decodes_its_coordinates(policy):
    """A workspace over three indices: its sorted coordinates split back into (k, j, i),
    the leading pair recomputed only where a run of the last index ends."""
    rng = np.random.default_rng(3)
    x = rng.integers(1, 9, (30, 31, 32)) * (rng.random((30, 31, 32)) < 0.3)
    assert np.count_nonzero(x) >= RADIX_FROM
    kernel = ls.compile("Y(k,j,i) = X(i,j,k)", X="csf", Y="csf", workspace=policy)
    np.testing.assert_array_equal(kernel(X=x.astype(float)).to_numpy(), x.transpose(2, 1, 0))


def test_hash_workspace_after_a_heavy_row_matches_scipy():
    """Gustavson's rows through a hash workspace: row 0 (3,000 columns) grows the table
    through several rehashes; every later row drains and clears only its own slots."""
    a = _pattern(3000, 3000, 0.002, 4).tolil()
    a[0, :] = 1.0
    a = sp.csr_matrix(a)
    b = _pattern(3000, 3000, 0.002, 5)
    b = sp.csr_matrix(b + sp.eye(3000))
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C="csr", workspace="hash")
    assert "clear w = 0.0 through its list of occupied slots" in kernel.loops
    got = sp.csr_matrix(kernel(A=a, B=b, threads=1).to_scipy())
    expected = sp.csr_matrix(a @ b)
    expected.sort_indices()
    assert (got != expected).nnz == 0
    assert all(np.all(np.diff(got.indices[got.indptr[r]:got.indptr[r + 1]]) > 0)
               for r in range(3000))


@pytest.mark.parametrize(("n", "bits", "skewed"), [
    (100_000, 27, False),  # split by the top digit, buckets sorted in two passes
    (100_000, 27, True),  # most keys in one bucket: it is split again
    (300_000, 34, False), (70_000, 40, True),
    (40_000, 12, False),  # one digit: no split
    (5_000, 20, False),  # too few to split: passes over the whole array
])
def test_radix_sort_is_numpys_stable_argsort(n, bits, skewed):
    """The emitted sort on its own, against numpy's stable sort: keys in order, each
    value moved with its key, equal keys in their original order."""
    import ctypes

    import llvmlite.binding as llvm
    from llvmlite import ir
    from llvsparse.backends.llvm.workspace_radix import radix_function

    module = ir.Module()
    module.triple = llvm.get_process_triple()
    fn = radix_function(module, ir.DoubleType())
    fn.linkage = "external"
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    engine = llvm.create_mcjit_compiler(
        parsed, llvm.Target.from_default_triple().create_target_machine(opt=2))
    engine.finalize_object()
    p = ctypes.c_void_p
    sort = ctypes.CFUNCTYPE(None, p, p, p, p, ctypes.c_int64, ctypes.c_int64)(
        engine.get_function_address(fn.name))
    rng = np.random.default_rng(bits)
    keys = rng.integers(0, 2**bits, n)
    if skewed:
        keys[: n * 9 // 10] = rng.integers(0, 2**(bits - 10), n * 9 // 10)
    keys[::7] = keys[0]  # runs of equal keys
    values = rng.random(n)
    order = np.argsort(keys, kind="stable")
    got_keys, got_values = keys.copy(), values.copy()
    spare_keys, spare_values = np.empty_like(keys), np.empty_like(values)
    sort(got_keys.ctypes.data, got_values.ctypes.data, spare_keys.ctypes.data,
         spare_values.ctypes.data, n, bits)
    np.testing.assert_array_equal(got_keys, keys[order])
    np.testing.assert_array_equal(got_values, values[order])
