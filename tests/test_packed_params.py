"""Level parameters chosen from the data when a tensor is packed (``packed`` in a level's
YAML): hashed buckets follow the fullest row instead of the column count."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls

# The fixed-width hashed level (W buckets per row); "hash" names the hashmap level.
HASHED = ls.Format([ls.Level("dense", 0), ls.Level("hashed", 1)])


def _wide(rows: int = 300, cols: int = 100_000, seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    count = rng.integers(0, 7, rows)
    row = np.repeat(np.arange(rows), count)
    col = rng.integers(0, cols, len(row))
    values = rng.integers(-4, 5, len(row)).astype(float)
    matrix = sp.coo_matrix((values, (row, col)), shape=(rows, cols)).tocsr()
    matrix.sum_duplicates()
    return matrix


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_hash_of_a_wide_matrix_is_sized_by_its_fullest_row(seed):
    """W was the column count: 300 x 100k buckets here, 2e10 for 200k x 100k."""
    matrix = _wide(seed=seed)
    tensor = ls.Tensor.from_scipy(matrix, HASHED)
    fullest = int(np.diff(matrix.indptr).max())
    assert tensor.params[1]["W"] == max(1, 2 * fullest)
    assert len(tensor.values) == matrix.shape[0] * tensor.params[1]["W"]
    assert tensor.format == HASHED
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, matrix.shape[1]).astype(float)
    z = rng.integers(-3, 4, matrix.shape[0]).astype(float)
    np.testing.assert_array_equal(
        ls.evaluate("y(i) = A(i,j) * x(j)", A=tensor, x=x).to_numpy(), matrix @ x)
    np.testing.assert_array_equal(
        ls.evaluate("y(j) = A(i,j) * z(i)", A=tensor, z=z).to_numpy(), matrix.T @ z)
    csr = ls.Tensor.from_scipy(matrix, "csr")
    np.testing.assert_array_equal(
        ls.evaluate("C(i,j) = A(i,j) * B(i,j)", out_format="csr", A=tensor, B=csr)
        .to_scipy().toarray(), matrix.multiply(matrix).toarray())
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A=HASHED)
    kernel(A=tensor, x=x)
    assert kernel.last.conversions == {}  # taken as "hash", not converted again


def test_buckets_never_exceed_the_extent_nor_drop_below_one():
    full = ls.Tensor.from_numpy(np.arange(1.0, 17.0).reshape(4, 4), format=HASHED)
    assert full.params[1]["W"] == 4
    empty = ls.Tensor.from_numpy(np.zeros((3, 5)), format=HASHED)
    assert empty.params[1]["W"] == 1
    np.testing.assert_array_equal(empty.to_numpy(), np.zeros((3, 5)))


def test_a_width_the_format_sets_is_kept():
    fmt = ls.Format([ls.Level("dense", 0), ls.Level("hashed", 1, params={"W": 64})])
    tensor = ls.Tensor.from_scipy(_wide(), fmt)
    assert tensor.params[1]["W"] == 64 and tensor.format == fmt


def test_fibers_of_a_three_tensor():
    """The fullest (i, j) fiber sizes the hashed k level."""
    rng = np.random.default_rng(4)
    dense = rng.integers(-3, 4, (5, 4, 50)) * (rng.random((5, 4, 50)) < 0.1)
    dense = dense.astype(float)
    tensor = ls.Tensor.from_numpy(dense, format=["dense", "dense", "hashed"])
    fullest = int((dense != 0).sum(axis=2).max())
    assert tensor.params[2]["W"] == min(50, 2 * fullest)
    c = rng.integers(-3, 4, 50).astype(float)
    np.testing.assert_array_equal(
        ls.evaluate("A(i,j) = B(i,j,k) * c(k)", B=tensor, c=c).to_numpy(), dense @ c)


def test_kernel_outputs_keep_one_bucket_per_coordinate():
    """An output's entries are unknown until it is assembled: W stays the extent."""
    matrix = _wide(cols=50)
    out = ls.evaluate("C(i,j) = A(i,j) * 2", out_format=HASHED,
                      A=ls.Tensor.from_scipy(matrix, "csr"))
    assert out.params[1]["W"] == 50
    np.testing.assert_array_equal(out.to_numpy(), matrix.toarray() * 2)


@pytest.mark.parametrize("target", ["csr", "coo", "dcsr", "csf"])
def test_unordered_buckets_never_feed_an_ordered_output(target):
    """With W < N a row's keys sit in bucket order: a copy into CSR appended them so
    (crd 6, 1, 2 in one row), which only W = N had hidden. Such a loop is refused and the
    conversion sorts on the host; merges with another operand convert the hash first."""
    rng = np.random.default_rng(7)
    dense = (rng.integers(-3, 4, (6, 40)) * (rng.random((6, 40)) < 0.2)).astype(float)
    hashed = ls.Tensor.from_numpy(dense, format=HASHED)
    assert hashed.params[1]["W"] < 40
    csr = ls.Tensor.from_numpy(dense, format="csr")
    added = ls.evaluate("C(i,j) = A(i,j) + B(i,j)", out_format=target, A=csr, B=hashed)
    for result, expected in ((hashed.asformat(target), dense), (added, 2 * dense)):
        fresh = ls.Tensor(result.shape, result.format, result.dtype, result.index_dtype,
                          result.level_extents, [dict(a) for a in result.level_arrays],
                          result.params, result.values)
        fresh.validate()  # ordered, unique, in range: not only right when summed
        np.testing.assert_array_equal(result.to_numpy(), expected)
