"""Quotients where no operand stores an entry (soak case 1128:335).

An absent exact zero annihilated a division whose other argument was absent too at a
NaN fill: A / (A / B) where neither stores an entry is 0 / (0 / 0) = 0 / NaN = NaN, as
numpy says, but the kernel took it for 0 and absent, so Z = A / (A / B) + C gave C
there. Only a product's declared annihilator outweighs a NaN; a probed one is IEEE's.

The reference is numpy on dense copies (an entry not stored is the fill). Stored values
are finite, nonzero and never the fill; where a product pairs an absent fill-0 entry
with inf or NaN, the reference applies README's one departure from IEEE (it is 0).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import llvsparse as ls
from llvsparse.soak import cases as soakcases
from llvsparse.soak import check as soakcheck

FILLS = (0.0, 1.0, math.nan, math.inf)
FORMATS = ("csr", "coo", "hash", "dense")
OUTPUTS = ("dense", "csr", "coo")
EXPRESSIONS = (
    "Z(i,j) = A(i,j) / (A(i,j) / B(i,j))",
    "Z(i,j) = (A(i,j) / (A(i,j) / B(i,j))) + C(i,j)",
    "Z(i,j) = (A(i,j) * 0) / B(i,j)",
    "Z(i,j) = (A(i,j) / B(i,j)) * C(i,j) + 2",
    "Z(i) = sum_j(A(i,j) / B(i,j))",
    "Z(i) = sum_j(A(i,j) / B(i,j) + C(i,j))",
)
SHAPE = (6, 5)
VECTOR_OUTPUT = {"dense": "dense", "csr": "csf", "coo": "hash"}  # for Z(i)


def _random(seed: int, fill: float, density: float) -> np.ndarray:
    """``fill`` where nothing is stored; finite, nonzero and not ``fill`` elsewhere."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.5, 2.0, SHAPE) * rng.choice([-1.0, 1.0], SHAPE)
    return np.where(rng.random(SHAPE) < density, values, fill)


def _expected(expression: str, arrays: dict[str, np.ndarray], c_stored: np.ndarray
              ) -> np.ndarray:
    a, b, c = arrays["A"], arrays["B"], arrays["C"]
    with np.errstate(all="ignore"):
        return {
            EXPRESSIONS[0]: lambda: a / (a / b),
            EXPRESSIONS[1]: lambda: a / (a / b) + c,
            EXPRESSIONS[2]: lambda: (a * 0) / b,
            # C's absent exact zero annihilates even the NaN of 0 / 0 (README)
            EXPRESSIONS[3]: lambda: np.where(c_stored, (a / b) * c, 0.0) + 2,
            EXPRESSIONS[4]: lambda: (a / b).sum(axis=1),
            EXPRESSIONS[5]: lambda: (a / b + c).sum(axis=1),
        }[expression]()


def _check(kernel, operands: dict, expected: np.ndarray, what: str) -> None:
    for k in range(2):
        actual = kernel(**operands)
        np.testing.assert_allclose(np.asarray(actual.to_numpy(), dtype=float), expected,
                                   rtol=1e-12, atol=0, equal_nan=True,
                                   err_msg=f"{what} call {k + 1}")


@pytest.mark.parametrize("expression", EXPRESSIONS)
@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("out_format", OUTPUTS)
def test_quotients_of_absent_entries_match_numpy(expression, fill, out_format, monkeypatch):
    """A and B share a fill (0 / 0, 1 / 1, NaN / NaN, inf / inf where neither stores),
    C has fill 0; each operand in its own format, called plainly and on two threads."""
    index = EXPRESSIONS.index(expression) + FILLS.index(fill) + OUTPUTS.index(out_format)
    formats = {name: FORMATS[(index + k) % len(FORMATS)] for k, name in enumerate("ABC")}
    arrays = {"A": _random(1, fill, 0.3), "B": _random(2, fill, 0.4),
              "C": _random(3, 0.0, 0.3)}
    operands = {n: ls.Tensor.from_numpy(arrays[n], format=formats[n],
                                        fill=fill if n != "C" else 0.0)
                for n in "ABC" if f"{n}(" in expression}
    c_stored = (arrays["C"] != 0) | (formats["C"] == "dense")  # a dense C stores every 0
    expected = _expected(expression, arrays, c_stored)
    if expression.startswith("Z(i) "):
        out_format = VECTOR_OUTPUT[out_format]
    what = f"{expression} {formats} fill {fill} -> {out_format}"
    kernel = ls.compile(expression, out_format=out_format,
                        **{n: formats[n] for n in operands})
    _check(kernel, operands, expected, what)
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 1)
    monkeypatch.setattr(ls.calls.kernel_calls, "ASSEMBLY_MIN_ENTRIES", 1)
    _check(kernel.bind(threads=2, **operands), {}, expected, f"{what}, threads")


@pytest.mark.parametrize("threads", [False, True])
def test_soak_case_1128_335_int_and_bool_operands(threads, monkeypatch):
    """The soak's case: int32 A and bool B that store nothing, bool C, dense output:
    A / (A / B) is 0 / NaN = NaN everywhere, and so is Z (C was returned)."""
    a = np.zeros(2, np.int32)
    b = np.zeros((2, 2), bool)
    c = np.array([True, False])
    b_format = ls.Format([ls.Level("compressed", 1), ls.Level("compressed", 0)])
    operands = {"A": ls.Tensor.from_numpy(a, format="csf"),
                "B": ls.Tensor.from_numpy(b, format=b_format),
                "C": ls.Tensor.from_numpy(c, format="hash")}
    statement = "Z(i,j) = ((A(i) / (A(i) / B(i,j))) + C(i))"
    kernel = ls.compile(statement, out_format="dense", A="csf", B=b_format, C="hash")
    with np.errstate(all="ignore"):
        expected = a[:, None] / (a[:, None] / b) + c[:, None]
    if threads:
        monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 1)
        monkeypatch.setattr(ls.calls.kernel_calls, "ASSEMBLY_MIN_ENTRIES", 1)
        kernel = kernel.bind(threads=2, **operands)
        operands = {}
    _check(kernel, operands, expected, statement)


def test_soak_case_1128_335_passes_every_call_form():
    """The soak's own check of the case: plain calls, each loop form, each threaded
    assembly, all against its numpy reference."""
    outcome = soakcheck.run_case(soakcases.build_case(1128, 335))
    assert outcome.status == "passed", outcome


@pytest.mark.parametrize("fill", [1.0, math.inf, -2.0])
@pytest.mark.parametrize("out_format", ["dense", "csf", "hash"])
def test_an_absent_zero_over_a_stored_zero_is_nan(fill, out_format):
    """A(i) / X(i) where A stores nothing and X (fill 1, inf or -2) stores a 0 is 0 / 0 =
    NaN, as over a dense X: the absent zero was taken to annihilate the quotient even
    there, so the kernel iterated A's entries alone and gave 0."""
    a = np.array([0.0, 1.0, 0.0, 2.0, 0.0])
    x = np.array([0.0, 2.0, fill, 0.0, 3.0])
    operands = {"A": ls.Tensor.from_numpy(a, format="csf"),
                "X": ls.Tensor.from_numpy(x, format="hash", fill=fill)}
    assert operands["X"].nnz == 4  # its zeros are stored entries
    kernel = ls.compile("Z(i) = A(i) / X(i)", out_format=out_format, A="csf", X="hash")
    with np.errstate(all="ignore"):
        _check(kernel, operands, a / x, f"A / X, X's fill {fill}")


@pytest.mark.parametrize("out_format", ["dense", "csf"])
def test_an_absent_zero_over_a_zero_sum_is_nan(out_format):
    """A(i) / sum_j(B(i,j) + 1): the sum's value where B stores nothing depends on the
    extent, so the absent A is divided by each row's sum, 0 in row 0 (0 / 0 = NaN)."""
    a = np.array([0.0, 1.0, 0.0, 2.0])
    b = np.array([[-2.0, 0.0], [0.0, 0.0], [-2.0, -2.0], [1.0, 1.0]])
    operands = {"A": ls.Tensor.from_numpy(a, format="csf"),
                "B": ls.Tensor.from_numpy(b, format="csr")}
    kernel = ls.compile("Z(i) = A(i) / sum_j(B(i,j) + 1)", out_format=out_format,
                        A="csf", B="csr")
    with np.errstate(all="ignore"):
        _check(kernel, operands, a / (b + 1).sum(axis=1), "A / sum_j(B + 1)")
