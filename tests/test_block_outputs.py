"""Outputs with full levels below appended ones (issue 32): ``[compressed, compressed,
dense]`` stores TTM's and MTTKRP's results as sparse fibres with a dense rank, each
appended fibre owning a block of the dense level's positions. Checked against numpy,
and bounded by counts: 4x dimensions at fixed stored entries leave the work as it was.
"""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls

FIBRES = ls.Format(["compressed", "compressed", "dense"])
ROWS = ls.Format(["compressed", "dense"])
TTM = "A(i,j,r) = B(i,j,k) * U(k,r)"
MTTKRP = "A(i,j) = B(i,k,l) * D(l,j) * C(k,j)"


def _tensor3(n: int, entries: int, seed: int, fmt: str = "csf") -> ls.Tensor:
    rng = np.random.default_rng(seed)
    return ls.Tensor.from_coo(rng.integers(0, n, (3, entries)), rng.random(entries),
                              (n, n, n), format=fmt)


def _fibres(tensor: ls.Tensor) -> set[tuple[int, ...]]:
    """The distinct coordinates of ``tensor``'s first two modes that it stores."""
    coords, _ = tensor.to_coo()
    return {tuple(c[:2]) for c in coords.T.tolist()}


@pytest.mark.parametrize("fmt", ["csf", "coo"])
def test_ttm_into_sparse_fibres_with_a_dense_rank(fmt: str) -> None:
    b = _tensor3(9, 40, 1, fmt)
    u = np.random.default_rng(2).random((9, 5))
    result = ls.evaluate(TTM, out_format=FIBRES, B=b, U=u)
    result.validate()
    np.testing.assert_allclose(result.to_numpy(), np.einsum("ijk,kr->ijr", b.to_numpy(), u),
                               rtol=1e-12)
    # One block of 5 per (i, j) that B stores, and nothing else.
    coords, _ = result.to_coo()
    assert {tuple(c[:2]) for c in coords.T.tolist()} == _fibres(b)
    assert len(result.values) == 5 * len(_fibres(b))


def test_a_dense_level_above_the_appended_one_too() -> None:
    fmt = ls.Format(["dense", "compressed", "dense"])
    b = _tensor3(7, 30, 3)
    u = np.random.default_rng(4).random((7, 3))
    result = ls.evaluate(TTM, out_format=fmt, B=b, U=u)
    result.validate()
    np.testing.assert_allclose(result.to_numpy(), np.einsum("ijk,kr->ijr", b.to_numpy(), u),
                               rtol=1e-12)


def test_mttkrp_into_sparse_rows_with_a_dense_rank() -> None:
    b = _tensor3(8, 30, 5)
    rng = np.random.default_rng(6)
    c, d = rng.random((8, 4)), rng.random((8, 4))
    result = ls.evaluate(MTTKRP, out_format=ROWS, B=b, C=c, D=d)
    result.validate()
    np.testing.assert_allclose(result.to_numpy(),
                               np.einsum("ikl,lj,kj->ij", b.to_numpy(), d, c), rtol=1e-12)
    rows = {i for i, _ in _fibres(b)}
    assert len(result.values) == 4 * len(rows)


def test_spmm_into_sparse_rows_with_a_dense_rank() -> None:
    """The rows A stores, each a block of B's columns; an empty row stores nothing."""
    rng = np.random.default_rng(7)
    a = np.where(rng.random((10, 6)) < 0.2, rng.random((10, 6)), 0.0)
    a[3] = 0.0
    b = rng.random((6, 4))
    result = ls.evaluate("C(i,j) = A(i,k) * B(k,j)", out_format=ROWS,
                         A=ls.Tensor.from_numpy(a, format="csr"), B=b)
    result.validate()
    np.testing.assert_allclose(result.to_numpy(), a @ b, rtol=1e-12)
    assert len(result.values) == 4 * int(np.count_nonzero(a.any(axis=1)))


def test_a_dense_level_between_appended_ones_is_refused() -> None:
    kernel = ls.compile(TTM, B="csf", U="dense",
                        out_format=ls.Format(["compressed", "dense", "compressed"]))
    with pytest.raises(ls.ScheduleError, match="below an appended level"):
        print(kernel.loops)


@pytest.mark.parametrize("expr,out", [(TTM, FIBRES), (MTTKRP, ROWS)])
def test_block_outputs_are_bounded_by_stored_entries(expr: str, out: ls.Format) -> None:
    """At 400 entries, n = 4096 and 16384: the count of loop heads stays put."""
    names = {"U": "dense"} if expr == TTM else {"C": "dense", "D": "dense"}
    kernel = ls.compile(expr, B="csf", out_format=out, counting=True, **names)
    counts = []
    for n in (4096, 16384):
        b = _tensor3(n, 400, 8)
        rng = np.random.default_rng(9)
        factors = {name: rng.random((n, 4)) for name in names}
        result = kernel(B=b, **factors)
        coords, values = b.to_coo()
        got = result.to_coo()
        # The entries of the result, per stored fibre, against a reference over them.
        expected: dict = {}
        for (i, m, last), v in zip(coords.T.tolist(), values.tolist()):
            if expr == TTM:  # B(i,j,k): m = j, last = k
                key, row = (i, m), v * factors["U"][last]
            else:  # B(i,k,l): m = k, last = l
                key, row = (i,), v * factors["D"][last] * factors["C"][m]
            expected[key] = expected.get(key, 0.0) + row
        assert len(result.values) == 4 * len(expected)
        for key, row in expected.items():
            at = np.all(got[0][:len(key)].T == key, axis=1)
            np.testing.assert_allclose(got[1][at], row, rtol=1e-12)
        counts.append(kernel.loop_count)
    assert counts[1] <= 1.5 * counts[0], counts
