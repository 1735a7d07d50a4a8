"""Sums the user placed keep IEEE results (0 * inf is NaN for an empty sum) but cost
that only where a value is not finite (issue 32 item 2, llvsparse/calls/finite_sums.py).

MTTKRP ``A(i,j) = B(i,k,l) * D(l,j) * C(k,j)`` with B in CSF kept ``sum_l(B * D)`` under
C, so its loops visited every (i, k) that B does not store to add ``0 * C(k,j)``: time
grew 13x for 4x dimensions at a fixed number of entries. With finite operands the
factors move into the sum and the loops walk B's entries only; the exact plan runs when
a value (or a fill) is not finite, checked on every call.
"""

from __future__ import annotations

import numpy as np

import llvsparse as ls

MTTKRP = "A(i,j) = B(i,k,l) * D(l,j) * C(k,j)"


def _mttkrp_operands(seed: int, n: int = 30, entries: int = 60, rank: int = 4):
    rng = np.random.default_rng(seed)
    coords = rng.integers(0, n, (3, entries))
    b = ls.Tensor.from_coo(coords, rng.random(entries), (n, n, n), format="csf")
    return b, rng.random((n, rank)), rng.random((n, rank))


def _reference(b: ls.Tensor, c: np.ndarray, d: np.ndarray) -> np.ndarray:
    """numpy with the sums where the notation places them: sum_l(B * D) over B's
    stored entries (an entry B does not store annihilates even NaN, README) is a
    computed value, 0 where B stores nothing under (i, k), that C multiplies."""
    coords, values = b.to_coo()
    inner = np.zeros((b.shape[0], b.shape[1], d.shape[1]))
    with np.errstate(invalid="ignore"):
        np.add.at(inner, (coords[0], coords[1]), values[:, None] * d[coords[2]])
        if b.fill_value != 0:  # then an entry not stored is a plain value
            inner = np.einsum("ikl,lj->ikj", b.to_numpy(), d)
        return np.einsum("ikj,kj->ij", inner, c)


def test_finite_operands_take_the_bounded_plan() -> None:
    kernel = ls.compile(MTTKRP, B="csf", C="dense", D="dense")
    b, c, d = _mttkrp_operands(0)
    np.testing.assert_allclose(kernel(B=b, C=c, D=d).to_numpy(), _reference(b, c, d),
                               rtol=1e-12)
    bounded = kernel._finite_sums()
    assert "t() * C" not in bounded.concrete  # C moved into the sum over l
    assert "coordinates of U" not in bounded.loops  # no universe of i or k


def test_a_non_finite_value_takes_the_exact_plan() -> None:
    kernel = ls.compile(MTTKRP, B="csf", C="dense", D="dense")
    b, c, d = _mttkrp_operands(1)
    c[3, 1], d[7, 2] = np.inf, np.nan
    result = kernel(B=b, C=c, D=d).to_numpy()
    expected = _reference(b, c, d)
    np.testing.assert_allclose(result, expected, rtol=1e-12)
    assert np.isnan(expected[:, 1]).any()  # 0 * inf where B stores nothing under k = 3


def test_a_value_changed_in_place_is_seen_on_the_next_call() -> None:
    """A reused binding of the bounded plan checks its operands again before each call."""
    kernel = ls.compile(MTTKRP, B="csf", C="dense", D="dense")
    b, c, d = _mttkrp_operands(2)
    kernel(B=b, C=c, D=d)
    c[0, 0] = -np.inf
    np.testing.assert_allclose(kernel(B=b, C=c, D=d).to_numpy(), _reference(b, c, d),
                               rtol=1e-12)
    c[0, 0] = 1.0
    np.testing.assert_allclose(kernel(B=b, C=c, D=d).to_numpy(), _reference(b, c, d),
                               rtol=1e-12)


def test_a_non_finite_fill_takes_the_exact_plan() -> None:
    rng = np.random.default_rng(3)
    dense = np.where(rng.random((6, 5, 4)) < 0.3, rng.random((6, 5, 4)), np.inf)
    b = ls.Tensor.from_numpy(dense, "csf", fill=np.inf)
    c, d = rng.random((5, 3)), rng.random((4, 3))
    result = ls.evaluate(MTTKRP, B=b, C=c, D=d).to_numpy()
    np.testing.assert_allclose(result, _reference(b, c, d), rtol=1e-12)


def test_integer_operands_are_always_finite() -> None:
    rng = np.random.default_rng(4)
    coords = rng.integers(0, 8, (3, 20))
    b = ls.Tensor.from_coo(coords, rng.integers(1, 5, 20), (8, 8, 8), format="csf")
    c, d = rng.integers(-3, 4, (8, 2)), rng.integers(-3, 4, (8, 2))
    result = ls.evaluate(MTTKRP, B=b, C=c, D=d).to_numpy()
    np.testing.assert_array_equal(result, np.einsum("ikl,lj,kj->ij", b.to_numpy(), d, c))
