"""Comparisons and min/max where an operand's fill is not 0 (issue 37): an entry an
operand does not store reads as its fill, whatever that is, and min/max propagate NaN
as numpy's ``np.minimum``/``np.maximum`` do, so an infinite fill decides nothing against
a stored NaN.

The reference is numpy on dense copies (an entry not stored is the fill); values are
drawn from the fills themselves, so ties between a stored value and another operand's
fill are common.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import llvsparse as ls

FILLS = (0.0, -1.0, 2.0, math.inf, -math.inf, math.nan)
VALUES = (0.0, 1.0, -1.0, 2.0, math.inf, -math.inf, math.nan)
FORMATS = ("dense", "csr", "coo", "dcsr", "hash")
OPERATORS = {"!=": np.not_equal, "==": np.equal, "<": np.less, "<=": np.less_equal,
             ">": np.greater, "min": np.minimum, "max": np.maximum}


def _operand(rng: np.random.Generator, fmt: str, fill: float) -> ls.Tensor:
    array = rng.choice(VALUES, (3, 4))
    array[rng.random((3, 4)) < 0.4] = fill
    return ls.Tensor.from_numpy(array, fmt, fill=None if fmt == "dense" else fill)


def _expr(op: str) -> str:
    if op in ("min", "max"):
        return f"C(i,j) = {op}(A(i,j), B(i,j))"
    return f"C(i,j) = A(i,j) {op} B(i,j)"


def _check(op: str, a: ls.Tensor, b: ls.Tensor, out_format: str) -> None:
    result = ls.evaluate(_expr(op), out_format=out_format, A=a, B=b).to_numpy()
    with np.errstate(invalid="ignore"):
        expected = OPERATORS[op](a.to_numpy(), b.to_numpy())
    assert np.array_equal(result, expected, equal_nan=True), (
        f"{_expr(op)} with A {a.format} fill {a.fill_value}, B {b.format} fill "
        f"{b.fill_value}, into {out_format}:\n{a.to_numpy()}\n{b.to_numpy()}\n"
        f"got\n{result}\nnumpy\n{expected}")


def test_an_absent_entry_compares_as_its_fill() -> None:
    """A stores nothing (fill -1), B stores -1 where A would: B != A is False there."""
    a = ls.Tensor.from_numpy(np.array([[-1.0, -1.0]]), "csr", fill=-1.0)
    b = ls.Tensor.from_numpy(np.array([[0.0, -1.0]]), "dense")
    for op in ("!=", "==", "<=", ">"):
        _check(op, b, a, "dense")


@pytest.mark.parametrize("op", ["min", "max"])
def test_an_infinite_fill_does_not_swallow_nan(op: str) -> None:
    """min(-inf, NaN) is NaN in numpy: -inf is no annihilator of min over floats."""
    edge = -math.inf if op == "min" else math.inf
    b = ls.Tensor.from_numpy(np.array([[edge, 1.0]]), "csr", fill=edge)
    for fmt in FORMATS:
        stored_nan = ls.Tensor.from_numpy(np.array([[math.nan, 2.0]]), fmt)
        _check(op, b, stored_nan, "dense")
        if fmt != "dense":
            nan_fill = ls.Tensor.from_numpy(np.array([[math.nan, math.nan]]), fmt,
                                            fill=math.nan)
            _check(op, b, nan_fill, "dense")
            _check(op, nan_fill, b, "csr")


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(OPERATORS))
def test_random_fills_and_formats(op: str) -> None:
    rng = np.random.default_rng(sorted(OPERATORS).index(op))
    pairs = list(itertools.product(FILLS, FILLS))
    for k in rng.permutation(len(pairs))[:12]:
        fill_a, fill_b = pairs[k]
        fmt_a, fmt_b = rng.choice(FORMATS, 2)
        a, b = _operand(rng, fmt_a, fill_a), _operand(rng, fmt_b, fill_b)
        _check(op, a, b, str(rng.choice(["dense", "csr"])))
