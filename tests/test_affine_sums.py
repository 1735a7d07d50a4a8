"""Affine subscripts in sums (paper 000's disjunctive form, digest T8): an operand at an
affine subscript added beside plain ones (``A(i,j) = B(i) + C(i+j)``) is lowered term by
term, each term a statement of its own (B's entries broadcast along j; C's stored
entries walked, ``i = x - j``), into any output that takes the terms one at a time,
directly or through a workspace. Checked against numpy, natively and under the loop-IR
interpreter; loop counts bounded by the stored entries."""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls

TARGETS = ["cpu", "interpret"]
T8 = "A(i,j) = B(i) + C(i+j)"


def _vector(length: int, entries: dict[int, float], fmt: str):
    values = np.zeros(length)
    for at, value in entries.items():
        values[at] = value
    return ls.Tensor.from_numpy(values, format=fmt)


def _sparse_vector(rng: np.random.Generator, length: int, density: float) -> np.ndarray:
    return rng.standard_normal(length) * (rng.random(length) < density)


def _shifted(values: np.ndarray, rows: int, width: int, offset: int = 0) -> np.ndarray:
    """``out[i, j] = values[i + j + offset]``, the fill 0 outside ``values``."""
    out = np.zeros((rows, width))
    for i in range(rows):
        for j in range(width):
            if 0 <= i + j + offset < len(values):
                out[i, j] = values[i + j + offset]
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("b_format, c_format", [
    ("sparse", "sparse"), ("dense", "sparse"), ("sparse", "dense"), ("dense", "dense")])
@pytest.mark.parametrize("out_format", ["dense", "csr", "dcsr", "coo", "hash"])
def test_golden_t8_disjunctive_merge(target: str, b_format: str, c_format: str,
                                     out_format: str) -> None:
    """Digest T8: B = {0:1, 2:2} (length 4), C = {2:10} (length 5), j in [0, 2)."""
    kernel = ls.compile(T8, B=b_format, C=c_format, out_format=out_format,
                        extents={"j": 2}, target=target)
    result = kernel(B=_vector(4, {0: 1, 2: 2}, b_format), C=_vector(5, {2: 10}, c_format))
    np.testing.assert_array_equal(result.to_numpy(), [[1, 1], [0, 10], [12, 2], [0, 0]])
    if out_format != "dense" and b_format == c_format == "sparse":
        # the rows B's coordinates and C's offsets reach, {0, 1, 2} (a dense operand
        # stores every coordinate)
        coords = {tuple(int(c) for c in at) for at in zip(*result.coords)}
        assert coords == {(0, 0), (0, 1), (1, 1), (2, 0), (2, 1)}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_affine_terms_against_numpy(target: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 11
    b, c, d = (_sparse_vector(rng, size, 0.4) for size in (n, n + 1, n))
    for b_format in ("sparse", "dense"):
        for c_format in ("sparse", "dense"):
            operands = {"B": ls.Tensor.from_numpy(b, format=b_format),
                        "C": ls.Tensor.from_numpy(c, format=c_format),
                        "D": ls.Tensor.from_numpy(d, format="sparse")}
            # C longer than i + j reaches (j in [0, 3)): its tail and B's shift by 1
            # past the end read the fill
            kernel = ls.compile("A(i,j) = B(i+1) - C(i+j) * D(i)", B=b_format, C=c_format,
                                D="sparse", out_format="dcsr", extents={"j": 3},
                                target=target)
            expected = np.append(b[1:], 0.0)[:, None] - _shifted(c, n, 3) * d[:, None]
            np.testing.assert_allclose(kernel(**operands).to_numpy(), expected, atol=1e-12)
            kernel = ls.compile("y(i) = B(i) + 2 * C(i-1) + D(i)", B=b_format, C=c_format,
                                D="sparse", target=target)
            expected = b + 2 * np.append(0.0, c[:n - 1]) + d
            np.testing.assert_allclose(kernel(**operands).to_numpy(), expected, atol=1e-12)


def test_an_empty_term_and_empty_operands() -> None:
    kernel = ls.compile(T8, B="sparse", C="sparse", out_format="dcsr", extents={"j": 2})
    empty = kernel(B=_vector(4, {}, "sparse"), C=_vector(5, {}, "sparse"))
    assert empty.nnz == 0 and not empty.to_numpy().any()
    only_c = kernel(B=_vector(4, {}, "sparse"), C=_vector(5, {0: 3, 4: 5}, "sparse"))
    np.testing.assert_array_equal(only_c.to_numpy(), [[3, 0], [0, 0], [0, 0], [0, 5]])


@pytest.mark.parametrize("out_format", ["dense", "dcsr", "coo"])
def test_t8_loop_count_is_bounded_by_the_stored_entries(out_format: str) -> None:
    """The same entries in vectors of length n and 4n: the loops walk B's entries and
    C's, each over j's 3 values, not the extent of i (a dense output's initial fill and
    a compressed row level are paid by the output's format, not counted here)."""
    rng = np.random.default_rng(7)
    counts = []
    for n in (200, 800):
        b, c = np.zeros(n), np.zeros(n + 2)
        b[rng.choice(n, 10, replace=False)] = rng.standard_normal(10)
        c[rng.choice(n + 2, 10, replace=False)] = rng.standard_normal(10)
        kernel = ls.compile(T8, B="sparse", C="sparse", out_format=out_format,
                            extents={"j": 3}, counting=True)
        result = kernel(B=ls.Tensor.from_numpy(b, format="sparse"),
                        C=ls.Tensor.from_numpy(c, format="sparse"))
        np.testing.assert_allclose(result.to_numpy(), b[:, None] + _shifted(c, n, 3))
        counts.append(kernel.loop_count)
    assert counts[1] <= counts[0] * 1.1  # 4x the extent, the same entries
    assert counts[0] <= 20 * (10 + 10) * 3  # a few loop heads per entry and j


def test_a_sum_over_an_affine_operand_added_to_the_rest_stays_refused() -> None:
    """``sum_r(x(i+r) + w(r))`` is one term (the sum holds the +): its loops would visit
    only the in-range taps, so the scheduler refuses it by name."""
    with pytest.raises(ls.ScheduleError, match="affine subscripts outside a product"):
        ls.compile("y(i) = x(i+r) + w(r)", x="sparse").instance()
