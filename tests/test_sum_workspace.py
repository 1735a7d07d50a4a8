"""Sum workspaces (ir/schedule/precompute_sums.py): MTTKRP's factors that use the summed loop
reduced into a dense row per fibre, the rest multiplying the row. Checked against numpy
on random and edge-case tensors, by loop counts at n and 4n, and by what concrete
notation and the loop IR print."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.ir.errors import ScheduleError

import llvsparse as ls

BENCH = "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)"  # no sum placed: one plan
ISSUE = "A(i,j) = B(i,k,l) * D(l,j) * C(k,j)"  # sum_l placed: exact and finite plans
FORM = "where(forall(j, A(i,j) += w(j) * C(k,j)), forall(l, forall(j, w(j) += B(i,k,l) * D(l,j))))"


def _tensor(n: int, entries: int, seed: int, fmt: str, fibre: int = 1) -> ls.Tensor:
    """``entries`` random entries, in runs of ``fibre`` entries sharing (i, k)."""
    rng = np.random.default_rng(seed)
    heads = rng.integers(0, n, (2, entries // fibre))
    coords = np.vstack([np.repeat(heads, fibre, axis=1),
                        rng.integers(0, n, heads.shape[1] * fibre)])
    return ls.Tensor.from_coo(coords, rng.uniform(-1, 1, coords.shape[1]), (n, n, n),
                              format=fmt)


def _reference(b: ls.Tensor, c: np.ndarray, d: np.ndarray) -> np.ndarray:
    coords, values = b.to_coo()
    out = np.zeros((b.shape[0], c.shape[1]))
    np.add.at(out, coords[0], values[:, None] * c[coords[1]] * d[coords[2]])
    return out


@pytest.mark.parametrize("fmt", ["csf", "coo"])
@pytest.mark.parametrize("n, entries, fibre", [(40, 600, 1), (40, 600, 6), (7, 0, 1),
                                               (5, 1, 1), (30, 900, 30)])
def test_mttkrp_through_a_row_matches_numpy(fmt, n, entries, fibre) -> None:
    kernel = ls.compile(BENCH, B=fmt, C="dense", D="dense", precompute=True)
    assert FORM in kernel.concrete
    rng = np.random.default_rng(n + entries)
    b = _tensor(n, entries, 1, fmt, fibre)
    c, d = rng.uniform(-1, 1, (n, 5)), rng.uniform(-1, 1, (n, 5))
    np.testing.assert_allclose(kernel(B=b, C=c, D=d), _reference(b, c, d),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kernel(B=b, C=c, D=d, threads=2), _reference(b, c, d),
                               rtol=1e-12, atol=1e-12)  # a row per thread


def test_the_loops_reduce_into_the_row_then_clear_it() -> None:
    loops = ls.compile(BENCH, B="csf", C="dense", D="dense", precompute=True).loops
    assert "allocate w: float64" in loops and "if w.0 found" not in loops
    assert "w(j) += B(i,k,l) * D(l,j)" in loops
    assert "A(i,j) += w(j) * C(k,j)" in loops and "clear w(j) = 0.0" in loops


def test_the_rule_leaves_it_out_and_false_never_takes_it() -> None:
    for precompute in (None, False):
        kernel = ls.compile(BENCH, B="csf", C="dense", D="dense", precompute=precompute)
        assert "w(j)" not in kernel.concrete


def test_a_non_finite_factor_runs_the_exact_plan() -> None:
    """The issue's statement places sum_l: an inf in C keeps numpy's NaN where B stores
    nothing at (i, k); finite factors take the row."""
    n = 12
    kernel = ls.compile(ISSUE, B="csf", C="dense", D="dense", precompute=True)
    b = _tensor(n, 60, 2, "csf", 3)
    rng = np.random.default_rng(4)
    c, d = rng.uniform(-1, 1, (n, 4)), rng.uniform(-1, 1, (n, 4))
    np.testing.assert_allclose(kernel(B=b, C=c, D=d), _reference(b, c, d), rtol=1e-12,
                               atol=1e-12)
    assert FORM in kernel.last_call.inst.concrete
    for bad in (np.inf, np.nan):
        c2 = c.copy()
        c2[n // 2, 1] = bad
        dense = b.todense()
        with np.errstate(invalid="ignore"):  # 0 * inf: numpy's NaN, as expected
            expected = (np.einsum("ikl,lj->ikj", dense, d) * c2[None]).sum(axis=1)
        got = kernel(B=b, C=c2, D=d)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        assert np.isnan(got[:, 1]).any()
        assert "w(j)" not in kernel.last_call.inst.concrete


def test_loop_heads_follow_the_entries() -> None:
    """400 entries in fibres of 4, rank 8: the same count at n and 4n."""
    kernel = ls.compile(BENCH, B="csf", C="dense", D="dense", precompute=True,
                        counting=True)
    counts = []
    for n in (2048, 8192):
        b = _tensor(n, 400, 5, "csf", 4)
        rng = np.random.default_rng(6)
        c, d = rng.random((n, 8)), rng.random((n, 8))
        np.testing.assert_allclose(kernel(B=b, C=c, D=d), _reference(b, c, d), rtol=1e-12,
                                   atol=1e-12)
        counts.append(kernel.loop_count)
    assert counts[1] <= 1.05 * counts[0], counts


def test_a_schedule_asks_for_it() -> None:
    text = "precompute(B(i,k,l) * D(l,j), j, j, w)"
    kernel = ls.compile(BENCH, B="csf", C="dense", D="dense", schedule=text)
    assert FORM in kernel.concrete
    b = _tensor(20, 300, 7, "csf", 5)
    rng = np.random.default_rng(8)
    c, d = rng.random((20, 3)), rng.random((20, 3))
    np.testing.assert_allclose(kernel(B=b, C=c, D=d), _reference(b, c, d), rtol=1e-12,
                                   atol=1e-12)
    with pytest.raises(ValueError, match="precompute=False but the schedule"):
        ls.compile(BENCH, B="csf", C="dense", D="dense", schedule=text, precompute=False)


@pytest.mark.parametrize("text, formats, message", [
    ("precompute(B(i,k,l) * C(k,j), j, j, w)", {"C": "dense"}, "sum over l the product of B, D"),
    ("precompute(B(i,k,l) * D(l,j), j, j, w)", {"C": "csr"}, r"\(C\(k,j\)\) is not dense"),
])
def test_a_schedule_that_does_not_split_says_why(text, formats, message) -> None:
    kernel = ls.compile(BENCH, B="csf", D="dense", schedule=text, **formats)
    c = np.ones((6, 2))
    with pytest.raises(ScheduleError, match=message):
        kernel(B=_tensor(6, 20, 9, "csf"), C=c if formats["C"] == "dense"
               else ls.Tensor.from_scipy(sp.csr_matrix(c), "csr"), D=np.ones((6, 2)))


def test_paper_001s_schedule_with_a_split_and_threads() -> None:
    text = ("split(i, i1, i2, 4); reorder(i1, i2, k, l, j); "
            "precompute(B(i,k,l) * D(l,j), j, j, w); parallelize(i1, cpu_thread, no_races)")
    kernel = ls.compile(BENCH, B="csf", C="dense", D="dense", schedule=text)
    assert FORM in kernel.concrete and "i1 = split_outer(i, 4)" in kernel.concrete
    b = _tensor(25, 400, 10, "csf", 3)
    rng = np.random.default_rng(11)
    c, d = rng.uniform(-1, 1, (25, 6)), rng.uniform(-1, 1, (25, 6))
    for threads in (1, 2):
        np.testing.assert_allclose(kernel(B=b, C=c, D=d, threads=threads),
                                   _reference(b, c, d), rtol=1e-12, atol=1e-12)
