"""A hash level with a fixed bucket count W never drops entries: an insert into a full
segment is refused by the level's insert_coord, and the call fails (status 3) with an
error that names W, instead of overwriting a bucket (W=2 packed [1, 2, 3, 4] as
[0, 0, 3, 4]; SpGEMM into W=16 kept 87,640 of 149,859 entries)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
from llvsparse import Format, Level


def _hashed_rows(width: int | None) -> Format:
    params = {} if width is None else {"W": width}
    return Format([Level("dense", 0), Level("hashed", 1, params=params)])


def test_packing_more_coordinates_than_buckets_is_refused():
    fmt = Format([Level("hashed", 0, params={"W": 2})])
    with pytest.raises(ls.KernelRuntimeError, match=r"status 3.*hashed, W=2"):
        ls.Tensor.from_numpy(np.array([1.0, 2, 3, 4]), fmt)


@pytest.mark.parametrize("width", [4, 5, 8])
def test_packing_into_enough_buckets_keeps_every_entry(width):
    dense = np.array([1.0, 2, 3, 4])
    tensor = ls.Tensor.from_numpy(dense, Format([Level("hashed", 0, params={"W": width})]))
    np.testing.assert_array_equal(tensor.to_numpy(), dense)


def test_a_kernel_writing_a_full_row_segment_fails():
    matrix = sp.random(6, 6, density=0.5, format="csr", random_state=0)
    kernel = ls.compile("B(i,j) = A(i,j) * 2", _hashed_rows(1), A="csr")
    with pytest.raises(ls.KernelRuntimeError, match=r"level 1 \(hashed, W=1\)"):
        kernel(A=ls.Tensor.from_scipy(matrix, "csr"))
    result = ls.compile("B(i,j) = A(i,j) * 2", _hashed_rows(None), A="csr")(
        A=ls.Tensor.from_scipy(matrix, "csr"))
    np.testing.assert_array_equal(result.to_numpy(), 2 * matrix.toarray())


def test_spgemm_into_a_small_hash_fails_and_into_an_exact_fit_is_whole():
    matrix = sp.random(300, 300, density=0.05, format="csr", random_state=1)
    product = (matrix @ matrix).tocsr()
    operand = ls.Tensor.from_scipy(matrix, "csr")
    with pytest.raises(ls.KernelRuntimeError, match=r"W=16"):
        ls.compile("C(i,j) = A(i,k) * A(k,j)", _hashed_rows(16), A="csr")(A=operand)
    fullest = int(np.diff(product.indptr).max())  # some row fills every bucket
    kernel = ls.compile("C(i,j) = A(i,k) * A(k,j)", _hashed_rows(fullest), A="csr")
    np.testing.assert_allclose(kernel(A=operand).to_numpy(), product.toarray())
