"""The bucket workspace (backends/llvm/workspace_bucket.py): the producer's loops count each row's
entries, place them in the row's bucket, and each row is reduced in a small dense
accumulator. Outer-product SpGEMM (CSC x CSR -> CSR, ``forall k, i, j``) and others
through it match scipy/numpy on random and edge-case inputs; its fixed arrays are
checked against memory before a call."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
import llvsparse.calls.workspaces
import llvsparse.kernel.api

SPGEMM = "C(i,j) = A(i,k) * B(k,j)"


def _random(rows: int, cols: int, density: float, seed: int, dtype=np.float64) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    m = sp.random(rows, cols, density=density, format="csr", random_state=seed,
                  data_rvs=lambda n: rng.integers(-9, 10, n))
    return sp.csr_matrix(m.astype(dtype))


def _check(got: ls.Tensor, expected: sp.spmatrix) -> None:
    """The result's pattern holds scipy's (products that cancel stay as stored zeros),
    each row strictly increasing, and every value equal."""
    got.validate()
    c = sp.csr_matrix(got.to_scipy())
    assert c.shape == expected.shape
    assert c.has_sorted_indices
    assert all(np.all(np.diff(c.indices[c.indptr[r]:c.indptr[r + 1]]) > 0)
               for r in range(c.shape[0]))
    np.testing.assert_array_equal(c.toarray(), np.asarray(expected.todense()))


def _outer(a: sp.spmatrix, b: sp.spmatrix, **options) -> ls.Tensor:
    kernel = ls.compile(SPGEMM, A="csc", B="csr", C="csr", workspace="bucket")
    return kernel(A=sp.csc_matrix(a), B=sp.csr_matrix(b), **options)


@pytest.mark.parametrize(("m", "k", "n", "density"), [
    (300, 200, 250, 0.05),  # rectangular
    (2000, 2000, 2000, 0.004),  # many rows of one entry (written without the accumulator)
    (50, 50, 50, 0.5),  # dense-ish rows: many products per entry
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_outer_product_matches_scipy(m, k, n, density, dtype):
    a, b = _random(m, k, density, 1, dtype), _random(k, n, density, 2, dtype)
    for _ in range(2):  # a second call starts from zeroed counts
        _check(_outer(a, b, threads=1), a @ b)


def test_outer_product_is_the_loop_order_and_policy_asked_for():
    kernel = ls.compile(SPGEMM, A="csc", B="csr", C="csr", workspace="bucket")
    a, b = _random(30, 20, 0.2, 3), _random(20, 40, 0.2, 4)
    _check(kernel(A=a.tocsc(), B=b), a @ b)
    assert "forall(k, forall(i, forall(j, w(i,j) += A(k,i) * B(k,j))))" in kernel.concrete
    assert kernel.loops.splitlines()[0].startswith(
        "allocate w: float64 (sparse workspace over i, j: the producer counts the entries "
        "of each row")


EDGES = {
    "empty A": (sp.csr_matrix((40, 30)), _random(30, 20, 0.2, 5)),
    "empty B": (_random(40, 30, 0.2, 6), sp.csr_matrix((30, 20))),
    "no shared k": (sp.csr_matrix(np.eye(40, 30) * 2), sp.csr_matrix(
        np.vstack([np.zeros((30, 20))]))),
    "empty rows and columns": (
        sp.csr_matrix(_random(40, 30, 0.3, 7).multiply(np.arange(40)[:, None] % 3 == 0)),
        sp.csr_matrix(_random(30, 20, 0.3, 8).multiply(np.arange(20)[None, :] % 4 == 1))),
    "one dense row of A": (sp.csr_matrix(sp.vstack([np.ones((1, 300)),
                                                    _random(99, 300, 0.01, 9)])),
                           _random(300, 500, 0.02, 10)),
    "one dense column of A": (sp.csr_matrix(sp.hstack([np.ones((200, 1)),
                                                       _random(200, 99, 0.01, 11)])),
                              _random(100, 150, 0.05, 12)),
    "one by one": (sp.csr_matrix(np.array([[3.0]])), sp.csr_matrix(np.array([[-2.0]]))),
    "zero rows": (sp.csr_matrix((0, 5)), _random(5, 7, 0.5, 13)),
    "zero columns": (_random(6, 5, 0.5, 14), sp.csr_matrix((5, 0))),
}


@pytest.mark.parametrize("name", list(EDGES))
def test_outer_product_edge_cases(name):
    a, b = EDGES[name]
    _check(_outer(a, b), a @ b)


def test_duplicates_of_a_coordinate_list_are_summed():
    """A and B built from coordinate lists that repeat entries (summed on construction),
    in column-major and row-major doubly compressed formats, into a DCSR result whose
    first level is appended too."""
    rng = np.random.default_rng(15)
    rows, cols = rng.integers(0, 30, 400), rng.integers(0, 25, 400)
    rows[200:], cols[200:] = rows[:200], cols[:200]  # every entry twice
    vals = rng.integers(1, 5, 400).astype(float)
    a = ls.Tensor.from_coo(np.array([rows, cols]), vals, (30, 25), format="dcsc")
    b_ref = _random(25, 35, 0.1, 16)
    b = ls.Tensor.from_scipy(b_ref, format="dcsr")
    kernel = ls.compile(SPGEMM, A="dcsc", B="dcsr", C="dcsr", workspace="bucket")
    expected = sp.csr_matrix(sp.coo_matrix((vals, (rows, cols)), shape=(30, 25))) @ b_ref
    got = kernel(A=a, B=b)
    got.validate()
    np.testing.assert_array_equal(got.to_numpy(), expected.toarray())


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_index_types(index_dtype):
    """The buckets keep the last index in the output's index type."""
    a, b = _random(120, 90, 0.05, 17), _random(90, 110, 0.05, 18)
    kernel = ls.kernel.api.Kernel(SPGEMM, {"A": "csc", "B": "csr"}, "csr",
                           out_index_dtype=index_dtype, workspace="bucket")
    got = kernel(A=ls.Tensor.from_scipy(a, format="csc", index_dtype=index_dtype),
                 B=ls.Tensor.from_scipy(b, format="csr", index_dtype=index_dtype))
    assert got.to_scipy().indices.dtype == np.dtype(index_dtype)
    _check(got, a @ b)


def test_three_index_workspace_and_transpose():
    """Rows of more than one index (a CSF transpose: rows are (k, j)), and a transposing
    copy of a matrix (no duplicates to reduce)."""
    rng = np.random.default_rng(19)
    x = rng.integers(1, 9, (12, 13, 14)) * (rng.random((12, 13, 14)) < 0.3)
    kernel = ls.compile("Y(k,j,i) = X(i,j,k)", X="csf", Y="csf", workspace="bucket")
    np.testing.assert_array_equal(kernel(X=x.astype(float)).to_numpy(), x.transpose(2, 1, 0))
    a = _random(60, 45, 0.1, 20)
    copy = ls.compile("C(j,i) = A(i,j)", A="csr", C="csr", workspace="bucket")
    _check(copy(A=a), a.T)


def test_fixed_arrays_too_large_for_memory(monkeypatch):
    """The count per row and the accumulator over the last index are checked before the
    call: a MemoryError with the workspace's name and sizes."""
    monkeypatch.setattr(ls.calls.workspaces, "physical_memory", lambda: 2000)
    a, b = _random(100, 40, 0.1, 23), _random(40, 60, 0.1, 24)
    kernel = ls.compile(SPGEMM, A="csc", B="csr", C="csr", workspace="bucket")
    with pytest.raises(MemoryError, match=r"bucket workspace w\(i,j\) needs 2\.2 KiB "
                                          r"\(100 rows x 8 bytes \+ 60 columns x 24 bytes\)"):
        kernel(A=a.tocsc(), B=b)


def test_threads_match_one_thread(monkeypatch):
    """Rows split over threads, each with its own buckets: the same entries as one."""
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 1000)
    monkeypatch.setattr(ls.calls.kernel_calls, "ASSEMBLY_MIN_ENTRIES", 1000)
    a, b = _random(800, 600, 0.01, 25), _random(600, 700, 0.01, 26)
    one = _outer(a, b, threads=1).to_scipy()
    four = _outer(a, b, threads=4).to_scipy()
    _check(_outer(a, b, threads=4), a @ b)
    np.testing.assert_array_equal(one.indptr, four.indptr)
    np.testing.assert_array_equal(one.indices, four.indices)
    np.testing.assert_array_equal(one.data, four.data)


BUCKETS_TOO_LARGE = """
import resource, numpy as np, scipy.sparse as sp, llvsparse as ls
n, m = 5000, 20000  # one column of A times one row of B: 10**8 products (1.2 GB of buckets)
a = sp.csc_matrix((np.ones(n), (np.arange(n), np.zeros(n, int))), shape=(n, 1))
b = sp.csr_matrix((np.ones(m), (np.zeros(m, int), np.arange(m))), shape=(1, m))
kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csc", B="csr", C="csr", workspace="bucket")
small = sp.csc_matrix(a[:5])
kernel(A=small, B=b, threads=1)
size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (size + 400 * 2**20, resource.RLIM_INFINITY))
try:
    kernel(A=a, B=b, threads=1)
except ls.KernelRuntimeError as error:
    print("refused:", error)
resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
print("after:", np.array_equal(kernel(A=small, B=b, threads=1).to_numpy(), (small @ b).toarray()))
"""


def test_buckets_that_cannot_be_allocated_fail_the_call_cleanly():
    """The buckets, sized once the products are counted, fail to allocate under an
    address-space limit: the call fails with 'out of memory' (its arrays freed, no
    crash), and the kernel runs correctly afterwards."""
    done = subprocess.run([sys.executable, "-c", BUCKETS_TOO_LARGE], check=False,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "refused: kernel failed with status 1 (out of memory)" in done.stdout
    assert "after: True" in done.stdout
