"""``unroll(i, n)``: the loop over ``i`` carries the count in the loop IR (``[unroll n]``)
and the backend hands it to LLVM's unroller on that loop's back edge. Results are
checked against numpy on random and edge inputs (remainders of every length, empty
rows); an unroll with no loop to apply to is refused by name."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls

SPMV = "y(i) = A(i,j) * x(j)"


@pytest.mark.parametrize("factor", [2, 3, 4, 8])
def test_an_unrolled_row_loop_matches_numpy(factor) -> None:
    rng = np.random.default_rng(factor)
    dense = (rng.random((60, 50)) < 0.15) * rng.standard_normal((60, 50))
    dense[3] = 0  # an empty row
    dense[7, :] = rng.standard_normal(50)  # a full row: every remainder length below
    for length in range(1, 9):
        dense[10 + length, :] = 0
        dense[10 + length, :length] = 1.0 + length
    matrix = sp.csr_matrix(dense)
    x = rng.standard_normal(50)
    kernel = ls.compile(SPMV, A="csr", schedule=f"unroll(j, {factor})")
    np.testing.assert_allclose(kernel(A=ls.Tensor.from_scipy(matrix), x=x).to_numpy(),
                               matrix @ x, rtol=1e-12, atol=1e-12)
    assert f"for j in positions of A.1:  [unroll {factor}]" in kernel.loops
    assert f'!{{ !"llvm.loop.unroll.count", i32 {factor} }}' in kernel.llvm_ir


def test_a_split_inner_index_unrolls_its_loop() -> None:
    rng = np.random.default_rng(0)
    matrix = sp.random(40, 30, density=0.2, format="csr", random_state=1)
    dense = rng.standard_normal((30, 13))  # 13 columns: a remainder after 8
    kernel = ls.compile("C(i,k) = A(i,j) * B(j,k)", A="csr",
                        schedule="split(k, k0, k1, 8); unroll(k1, 8)")
    np.testing.assert_allclose(kernel(A=matrix, B=dense).to_numpy(), matrix @ dense,
                               rtol=1e-12, atol=1e-12)
    assert "for k in coordinates of B.1:  [unroll 8]" in kernel.loops
    assert "unroll(k1, 8)" in kernel.schedule


def test_an_unroll_with_no_loop_over_its_index_is_refused() -> None:
    matrix = sp.random(8, 8, density=0.3, random_state=2).toarray()
    kernel = ls.compile(SPMV, A="bcsr2x2", schedule="unroll(j, 4)")
    with pytest.raises(ls.ScheduleError, match="no loop of this kernel runs over j"):
        kernel(A=ls.Tensor.from_numpy(matrix, format="bcsr2x2"), x=np.ones(8))
