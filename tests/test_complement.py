"""The complement in the iteration algebra (issue 23 item 5, paper 004 section 3):
``A(i,j) * !B(i,j)`` keeps the entries of A where B stores nothing, for any formats,
and the empty-sum rule a soak test found inconsistent between formats.

References are numpy on dense copies and the stored patterns (an explicit zero a tensor
stores is stored: a dense B stores every entry).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from llvsparse.ir.notation import syntax as nt

import llvsparse as ls
from llvsparse.soak import cases as soakcases
from llvsparse.soak import check as soakcheck

FORMATS = ("csr", "coo", "dcsr", "hash", "dense")


def _random(seed: int, shape=(6, 8), density: float = 0.4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return np.where(rng.random(shape) < density, values, 0.0)


def _stored(tensor: ls.Tensor) -> np.ndarray:
    coords, _ = tensor.to_coo()
    mask = np.zeros(tensor.shape, dtype=bool)
    mask[tuple(coords)] = True
    return mask


@pytest.mark.parametrize("fa", FORMATS)
@pytest.mark.parametrize("fb", FORMATS)
@pytest.mark.parametrize("out", ("dense", "csr"))
def test_a_mask_keeps_the_entries_where_the_other_stores_nothing(fa, fb, out):
    a, b = _random(1), _random(2, density=0.5)
    A, B = ls.Tensor.from_numpy(a, fa), ls.Tensor.from_numpy(b, fb)
    expected = np.where(_stored(B), 0.0, a)
    kernel = ls.compile("Z(i,j) = A(i,j) * !B(i,j)", out_format=out, A=fa, B=fb)
    for call in range(3):
        np.testing.assert_array_equal(kernel(A=A, B=B).to_numpy(), expected,
                                      err_msg=f"{fa} * !{fb} -> {out}, call {call}")


@pytest.mark.parametrize("fmt", ("csr", "dcsr", "coo", "hash"))
def test_a_complement_alone_is_one_where_nothing_is_stored(fmt):
    b = _random(3)
    B = ls.Tensor.from_numpy(b, fmt)
    kernel = ls.compile("Z(i,j) = 2 * !B(i,j) + B(i,j)", B=fmt)
    for _ in range(3):
        np.testing.assert_array_equal(kernel(B=B).to_numpy(),
                                      np.where(_stored(B), b, 2.0))


def test_masked_spmv_over_a_vector_mask():
    """y(i) = !m(i) * sum_j(A(i,j) * x(j)): rows the mask stores are left out."""
    a, x = _random(4), np.random.default_rng(5).uniform(0.5, 2.0, 8)
    m = np.array([1.0, 0, 0, 1, 0, 1])
    A, M = ls.Tensor.from_numpy(a, "csr"), ls.Tensor.from_numpy(m, "sparse")
    kernel = ls.compile("y(i) = !m(i) * sum_j(A(i,j) * x(j))", A="csr", m="sparse")
    for _ in range(3):
        np.testing.assert_allclose(kernel(A=A, m=M, x=x).to_numpy(),
                                   np.where(m != 0, 0.0, a @ x), rtol=1e-12)


def test_the_operator_api_and_notation_agree():
    a, b = _random(6), _random(7)
    A, B = ls.Tensor.from_numpy(a, "csr"), ls.Tensor.from_numpy(b, "dcsr")
    i, j = ls.index_vars("i j")
    expected = np.where(b != 0, 0.0, a)
    for written in (lambda: A[i, j] * ~B[i, j], lambda: A[i, j] * ls.complement(B[i, j])):
        Z = ls.Tensor.from_numpy(np.zeros(a.shape))
        Z[i, j] = written()
        np.testing.assert_array_equal(Z.to_numpy(), expected)
    assert str(ls.parse("Z(i,j) = A(i,j) * !B(i,j)")) == "Z(i,j) = A(i,j) * !B(i,j)"
    with pytest.raises(TypeError, match="one tensor access"):
        ls.complement(A[i, j] + B[i, j])


def test_the_dump_shows_the_region():
    kernel = ls.compile("Z(i,j) = A(i,j) * !B(i,j)", A="csr", B="csr")
    kernel(A=ls.Tensor.from_numpy(_random(8), "csr"),
           B=ls.Tensor.from_numpy(_random(9), "csr"))
    assert "region A ∩ ¬B" in kernel.lattices


def test_a_complement_of_a_sum_is_refused_in_notation():
    with pytest.raises(nt.NotationSyntaxError, match="a tensor to complement"):
        ls.parse("y(i) = !sum_j(A(i,j))")


# -- the empty sum --------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ("csr", "dcsr", "coo", "hash", "dense"))
@pytest.mark.parametrize("out", ("dense", "sparse"))
def test_an_empty_sum_is_its_identity_computed_in_every_format(fmt, out):
    """s(i) * sum_j(A(i,j) * x(j)) with s = inf and a row of A empty: the sum over no
    stored entry is 0, computed, and inf * 0 is NaN whether the format stores the row's
    coordinate (CSR) or not (DCSR, which skipped the row and gave 0). The soak's
    reference (soakcases._evaluate) says the same. (CSC is README's exception: its
    sum cannot nest under the dense s's loop, so s multiplies each term.)"""
    dense = np.array([[1.0, 2.0, 0.0], [0.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    s, x = np.array([math.inf, math.inf, 2.0]), np.array([1.0, 1.0, 1.0])
    kernel = ls.compile("y(i) = s(i) * sum_j(A(i,j) * x(j))", out_format=out, A=fmt)
    with np.errstate(invalid="ignore"):
        expected = s * (dense @ x)
    for _ in range(3):
        np.testing.assert_array_equal(
            kernel(s=s, A=ls.Tensor.from_numpy(dense, fmt), x=x).to_numpy(), expected)
    tree = soakcases.Node("*", [
        soakcases.Node("access", tensor="s", indices="i"),
        soakcases.Node("sum", [soakcases.Node("*", [
            soakcases.Node("access", tensor="A", indices="ij"),
            soakcases.Node("access", tensor="x", indices="j")])], text="j")])
    operands = {"s": soakcases.Operand("s", "i", "dense", "dense", "float64", "int32", s),
                "A": soakcases.Operand("A", "ij", fmt, fmt, "float64", "int32", dense),
                "x": soakcases.Operand("x", "j", "dense", "dense", "float64", "int32", x)}
    out_format = "dense" if out == "dense" else "coo"
    case = soakcases.Case(0, 0, "valid", {"i": 3, "j": 3}, operands, tree, "i",
                          f"y(i) = {tree}", out_format, threads=False)
    masks = {"s": np.ones(3, bool), "A": dense != 0, "x": np.ones(3, bool)}
    np.testing.assert_array_equal(soakcases.reference(case, masks), expected)
    assert soakcheck.run_case(case).status == "passed"


def test_a_factor_meets_the_empty_sum_when_the_sum_cannot_nest_under_it():
    """Soak case 11:11413: B(i,j) * sum_k(A(i,k)) with A stored k before i (DCSC) and a
    -inf in B's row where A's row is empty: the sum is 0 and -inf * 0 is NaN. The sum's
    loops cannot nest under B's, and B was moved into each term (s = -1, not NaN); the
    sparse factor B stays outside now and A is converted. A kernel that may not convert
    keeps the old schedule (README)."""
    a = np.array([[0.0, 0, 0, 0], [0, -1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [-1, 0, 0, 0]])
    b = np.array([[-1.0, -math.inf, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0], [1, 0, 0]])
    text = "s = sum_i(sum_j(B(i,j) * sum_k(A(i,k))))"
    with np.errstate(invalid="ignore"):
        expected = (b * a.sum(axis=1)[:, None]).sum()
    for fmt in ("dcsc", "csc"):
        got = ls.evaluate(text, A=ls.Tensor.from_numpy(a, fmt), B=ls.Tensor.from_numpy(b, "dia"))
        np.testing.assert_array_equal(got.to_numpy(), expected)
    kernel = ls.Kernel(text, {"A": "dcsc", "B": "dia"}, convert=False)
    assert np.isfinite(kernel(A=ls.Tensor.from_numpy(a, "dcsc"),
                              B=ls.Tensor.from_numpy(b, "dia")).to_numpy())
