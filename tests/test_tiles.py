"""Tiles of positions (paper 001's SpMM and SDDMM schedules): ``pos(j, jp, A(i,j));
split(jp, jp0, jp1, n); reorder(..., jp0, k, jp1)`` runs the loop over j ``n`` positions
per step with the loop over k between (a jammed loop: each position's sums keep their
own order). Checked against numpy for every tile size and remainder; the schedule
shows in the concrete notation and the loop IR; tiles that cannot be lowered are
refused by name."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls

SPMM = "C(i,k) = A(i,j) * B(j,k)"
SDDMM = "A(i,j) = B(i,j) * C(i,k) * D(k,j)"


def tile(size: int, access: str = "A(i,j)") -> str:
    return (f"pos(j, jp, {access}); split(jp, jp0, jp1, {size}); reorder(i, jp0, k, jp1)")


def rows_of_every_length(shape: tuple[int, int], seed: int) -> sp.csr_matrix:
    """Random rows, plus one row of each length 0..17 (every remainder of every tile)."""
    rng = np.random.default_rng(seed)
    dense = (rng.random(shape) < 0.1) * rng.standard_normal(shape)
    for length in range(18):
        dense[length] = 0
        dense[length, rng.choice(shape[1], length, replace=False)] = rng.standard_normal(length)
    return sp.csr_matrix(dense)


@pytest.mark.parametrize("size", [2, 3, 4, 8, 16])
def test_a_tiled_spmm_matches_numpy(size) -> None:
    A = rows_of_every_length((40, 30), size)
    B = np.random.default_rng(1).standard_normal((30, 7))
    kernel = ls.compile(SPMM, A="csr", schedule=tile(size))
    np.testing.assert_allclose(kernel(A=A, B=B).to_numpy(), A @ B, rtol=1e-12, atol=1e-12)
    assert f"for j in positions of A.1:  [jam {size}]" in kernel.loops
    assert "forall(jp0 = split_outer(pos(j, A(i,j)), " in kernel.concrete
    assert "forall(k, forall(jp1 = split_inner(pos(j, A(i,j))" in kernel.concrete
    assert f".jam{size}.head" in kernel.llvm_ir


def test_a_tiled_sddmm_matches_numpy() -> None:
    rng = np.random.default_rng(2)
    B = rows_of_every_length((30, 25), 3)
    C, D = rng.standard_normal((30, 6)), rng.standard_normal((6, 25))
    kernel = ls.compile(SDDMM, B="csr", out_format="csr", schedule=tile(16, "B(i,j)"))
    expected = B.multiply(C @ D).toarray()
    np.testing.assert_allclose(kernel(B=B, C=C, D=D).to_numpy(), expected, rtol=1e-12,
                               atol=1e-12)
    assert "[jam 16, reserve appends]" in kernel.loops  # each entry appends at most one


@pytest.mark.parametrize("formats, schedule, reason", [
    ({"A": "csr"}, tile(32), "tiles of 2 to 16 positions"),
    ({"A": "csr"}, "pos(j, jp, A(i,j)); split(jp, jp0, jp1, 4); reorder(i, jp1, k, jp0)",
     "runs jp1 outside jp0"),
    ({"A": "csr", "B": "csr"}, tile(4), "must only locate"),  # B's rows iterate and miss
])
def test_tiles_that_cannot_be_lowered_are_refused(formats, schedule, reason) -> None:
    rng = np.random.default_rng(3)
    operands = {"A": sp.random(20, 15, density=0.2, format="csr", random_state=4),
                "B": sp.random(15, 5, density=0.3, format="csr", random_state=5)
                if formats.get("B") == "csr" else rng.standard_normal((15, 5))}
    with pytest.raises(ls.ScheduleError, match=reason):
        ls.compile(SPMM, **formats, schedule=schedule)(**operands)


@pytest.mark.parametrize("statement, schedule", [
    (SPMM, tile(4)),
    ("y(i) = A(i,j) * x(j)", "unroll(j, 4)"),
    ("y(i) = A(i,j) * x(j)",
     "fuse(i, j, f); pos(f, fp, A(i,j)); split(fp, c, t, 8); parallelize(c, cpu_thread, atomics)"),
])
def test_scheduled_programs_run_the_same_under_the_interpreter(statement, schedule) -> None:
    """The interpreter walks the same loop IR (jam lanes, unroll counts and windows are
    ways to run it, not new results): the contract holds for scheduled programs too."""
    rng = np.random.default_rng(6)
    A = rows_of_every_length((30, 20), 7)
    operands = {"A": A, "B": rng.standard_normal((20, 5)), "x": rng.standard_normal(20)}
    used = {n: v for n, v in operands.items() if f"{n}(" in statement}
    compiled = ls.compile(statement, A="csr", schedule=schedule)(**used).to_numpy()
    interpreted = ls.compile(statement, A="csr", schedule=schedule,
                             target="interpret")(**used).to_numpy()
    np.testing.assert_allclose(interpreted, compiled, rtol=1e-12, atol=1e-12)
