"""BCSR: blocked levels whose coordinates combine into tensor indices (digest 003 §3.2)."""

from __future__ import annotations

import numpy as np
import pytest
from llvsparse.ir.concrete import affine
from llvsparse.ir.concrete.from_notation import to_concrete
from llvsparse.ir.schedule.scheduler import schedule

import llvsparse as ls

B = np.array([[5, 1, 0, 0, 0, 0], [7, 3, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0],
              [8, 0, 0, 4, 9, 0]], dtype=float)


def test_golden_arrays_2x2():
    A = ls.Tensor.from_numpy(B, format="bcsr")
    pos, crd = A.level_arrays[1]["pos"], A.level_arrays[1]["crd"]
    assert pos.tolist() == [0, 1, 4]
    assert crd.tolist() == [0, 0, 1, 2]
    assert A.values.tolist() == [5, 1, 7, 3, 0, 0, 8, 0, 0, 0, 0, 4, 0, 0, 9, 0]
    np.testing.assert_array_equal(A.to_numpy(), B)


@pytest.mark.parametrize("block", ["bcsr2x2", "bcsr1x3", "bcsr4x2", "bcsr2x6"])
def test_spmv_golden(block):
    A = ls.Tensor.from_numpy(B, format=block)
    y = ls.evaluate("y(i) = A(i,j) * x(j)", A=A, x=np.arange(1, 7.0))
    assert y.to_numpy().tolist() == [7, 13, 0, 69]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("other", ["dense", "hash", "csr"])
def test_kernels_against_numpy(seed, other):
    rng = np.random.default_rng(seed)
    M = rng.random((8, 12))
    M[rng.random(M.shape) > 0.3] = 0
    N = rng.random((8, 12))
    N[rng.random(N.shape) > 0.5] = 0
    A = ls.Tensor.from_numpy(M, format="bcsr2x3")
    C = ls.Tensor.from_numpy(N, format=other)
    D = rng.random((12, 5))
    np.testing.assert_allclose(ls.evaluate("Y(i,k) = A(i,j) * D(j,k)", A=A, D=D).to_numpy(),
                               M @ D)
    for out in ("dense", "hash"):
        np.testing.assert_allclose(
            ls.evaluate("Y(i,j) = A(i,j) * C(i,j)", out_format=out, A=A, C=C).to_numpy(),
            M * N)
        np.testing.assert_allclose(
            ls.evaluate("Y(i,j) = A(i,j) + C(i,j)", out_format=out, A=A, C=C).to_numpy(),
            M + N)
    r = ls.evaluate("r(i) = b(i) - A(i,j) * x(j)", A=A, b=np.ones(8), x=np.ones(12))
    np.testing.assert_allclose(r.to_numpy(), 1 - M.sum(axis=1))


def test_blocked_output_and_bad_shape_are_rejected():
    A = ls.Tensor.from_numpy(B, format="bcsr")
    with pytest.raises(ls.ScheduleError):
        ls.evaluate("Y(i,j) = A(i,j)", out_format="bcsr", A=ls.Tensor.from_numpy(B, "csr"))
    with pytest.raises(ValueError, match="multiple of the block"):
        ls.Tensor.from_numpy(B, format="bcsr3x3")
    with pytest.raises(ls.CorruptTensorError):
        A.level_arrays[1]["crd"] = np.array([0, 0, 1, 7], dtype=np.int32)
        A.validate()



X, Z = np.arange(1, 7.0), np.arange(1, 5.0)


@pytest.mark.parametrize("statement, reference", [
    ("Z(i,j) = A(i,j) + 2", lambda m: m + 2),
    ("Z(i,j) = 3 - A(i,j) * 2", lambda m: 3 - m * 2),
    ("y(i) = sum_j(A(i,j) + 2)", lambda m: (m + 2).sum(axis=1)),
    ("y(i) = sum_j(A(i,j) - x(j))", lambda m: (m - X).sum(axis=1)),
    ("y(i) = A(i,j) * x(j) + z(i)", lambda m: m @ X + Z),
])
def test_blocked_operand_added_to_the_rest_is_converted_first(statement, reference):
    """The loops over blocked levels visit stored blocks only, so a term beside the
    blocked operand would be missed outside them (sum_j(A + 2) added 2 once per row, and
    A + 2 raised KeyError): the scheduler refuses it and the kernel converts A."""
    kernel = ls.compile(statement, A="bcsr2x2")
    operands = {"x": X, "z": Z}
    result = kernel(A=ls.Tensor.from_numpy(B, format="bcsr2x2"),
                    **{n: v for n, v in operands.items() if f"{n}(" in statement})
    np.testing.assert_array_equal(result.to_numpy(), reference(B))
    assert "A" in kernel.last.conversions


def test_blocked_operand_must_multiply_the_rest():
    types = {"A": ls.named_format("bcsr2x2", 2).tensor_type("float64", "int32"),
             "Z": ls.named_format("dense", 2).tensor_type("float64", "int32")}
    assignment = to_concrete(ls.parse("Z(i,j) = A(i,j) + 2"), types)
    with pytest.raises(ls.ScheduleError, match="must multiply the rest"):
        schedule(assignment, types)


def _blocked_sample() -> np.ndarray:
    M = np.zeros((6, 6))
    M[0, 3], M[0, 4], M[1, 1], M[2, 2], M[4, 1], M[5, 5] = 2, 4, 2, 1, 2, 7
    return M


@pytest.mark.parametrize("statement, reference", [("Z = B(j,j)", np.trace),
                                                   ("y(j) = B(j,j)", np.diag)])
def test_diagonal_of_a_blocked_operand(statement, reference):
    """B(j,j) once made j the sum of both modes' block parts (the trace came out 14, not
    3), then was refused; it now reads the hidden diagonal pattern (diagonals.py)."""
    M = _blocked_sample()
    kernel = ls.compile(statement, B="bcsr2x2")
    result = kernel(B=ls.Tensor.from_numpy(M, format="bcsr2x2"))
    np.testing.assert_array_equal(result.to_numpy(), reference(M))
    assert list(kernel.patterns.values()) == ["j"]


def test_blocked_operand_into_an_appended_output_is_converted():
    """Levels that only append indexed the output's variables without the blocked ones
    (IndexError); now the operand is converted, as for other conflicts."""
    A = np.random.default_rng(1).random((6, 6))
    M = _blocked_sample()
    kernel = ls.compile("C(k,i) = A(i,j) * B(j,k)", A="dense", B="bcsr2x2",
                        out_format="coo-unordered")
    result = kernel(A=A, B=ls.Tensor.from_numpy(M, format="bcsr2x2"))
    np.testing.assert_allclose(result.to_numpy(), (A @ M).T, rtol=1e-14)
    assert kernel.last.conversions == {"B": ls.named_format("coo", 2)}


def test_blocked_indices_are_derived_by_the_affine_plan():
    """BCSR's block coordinates are an instance of paper 000's index inversion
    (ir/concrete/affine.py): the blocked levels are walked and ``i = 2*ib + ii``, ``j = 2*jb + ji``
    derived from them, as ``h = x - r`` is from a walked image, with no guard (the
    blocks tile their modes)."""
    types = {"A": ls.named_format("bcsr2x2", 2).tensor_type("float64", "int32"),
             "x": ls.named_format("dense", 1).tensor_type("float64", "int32"),
             "y": ls.named_format("dense", 1).tensor_type("float64", "int32")}
    statement = ls.parse("y(i) = A(i,j) * x(j)")
    plan = affine.plan(statement, types)
    access = statement.accesses()[1]  # A (the output first)
    names = plan.levels[id(access)]
    assert sorted(names) == [0, 1, 2, 3]
    assert plan.derivations == [
        affine.Derivation("i", ((names[0], 2), (names[2], 1)), 0, None),
        affine.Derivation("j", ((names[1], 2), (names[3], 1)), 0, None)]
    concrete = to_concrete(statement, types)
    assert dict(concrete.derived) == {d.index: d.parts for d in plan.derivations}
    assert concrete.guards == ()


@pytest.mark.parametrize("target", ["cpu", "interpret"])
@pytest.mark.parametrize("block", ["bcsr2x2", "bcsr1x3"])
def test_blocked_operand_times_an_affine_subscript(target, block):
    """One mechanism for both: x is located at j + 1 with j derived from A's blocks
    (``let t = 2*jb + ji + 1``), not converted."""
    rng = np.random.default_rng(31)
    M = rng.standard_normal((6, 12)) * (rng.random((6, 12)) < 0.4)
    x, w = rng.standard_normal(13), rng.standard_normal(6)
    kernel = ls.compile("y(i) = A(i,j) * x(j+1) * w(i-1)", A=block, target=target)
    result = kernel(A=ls.Tensor.from_numpy(M, format=block), x=x, w=w)
    np.testing.assert_allclose(result.to_numpy(), (M @ x[1:]) * np.append(0.0, w[:-1]),
                               atol=1e-12)
    assert kernel.last.conversions == {}
