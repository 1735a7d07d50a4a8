"""inf and NaN in dense operands and literals follow IEEE and numpy (issue 20).

Only an entry a sparse operand does not store is an exact zero that annihilates (README);
a stored value, a dense operand's value and a literal are computed with, never folded, and
a factor outside ``sum_j(...)`` multiplies the finished sum.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llvsparse as ls

SPECIAL = np.array([np.nan, np.inf, -np.inf, 1.0, 0.0, -2.0])


def dense(arr: np.ndarray) -> ls.Tensor:
    return ls.Tensor.from_numpy(np.asarray(arr, dtype=np.float64), format="dense")


def check(got: ls.Tensor, expected: np.ndarray) -> None:
    np.testing.assert_allclose(got.to_numpy(), expected, rtol=1e-12, atol=0,
                               equal_nan=True)


# Right-hand sides over dense vectors v, w and literals, with numpy's reading of each.
LITERAL_CASES = [
    ("0 * v(i)", lambda v, w: 0 * v),
    ("v(i) * 0", lambda v, w: v * 0),
    ("0 / v(i)", lambda v, w: 0 / v),
    ("v(i) / 0", lambda v, w: v / 0),
    ("v(i) - v(i)", lambda v, w: v - v),
    ("v(i) * 0 + w(i)", lambda v, w: v * 0 + w),
    ("w(i) + 0 * v(i)", lambda v, w: w + 0 * v),
    ("w(i) - v(i) * 0", lambda v, w: w - v * 0),
    ("(v(i) + 0) * 0", lambda v, w: (v + 0) * 0),
    ("0 * v(i) * w(i)", lambda v, w: 0 * v * w),
    ("v(i) * w(i) * 0 + 1", lambda v, w: v * w * 0 + 1),
    ("-(0 * v(i))", lambda v, w: -(0 * v)),
]


@pytest.mark.parametrize("out_format", ["dense", "coo", "hash"])
@pytest.mark.parametrize("rhs,reference", LITERAL_CASES, ids=[c[0] for c in LITERAL_CASES])
def test_literals_over_dense_values_follow_ieee(rhs, reference, out_format):
    v = SPECIAL
    w = np.array([1.0, np.nan, 2.0, np.inf, -1.0, 3.0])
    uses_w = "w(i)" in rhs
    names = {"v": v, "w": w} if uses_w else {"v": v}
    kernel = ls.compile(f"y(i) = {rhs}", y=out_format, **dict.fromkeys(names, "dense"))
    with np.errstate(all="ignore"):
        expected = reference(v, w)
    check(kernel(**{n: dense(a) for n, a in names.items()}), expected)


@pytest.mark.parametrize("out_format", ["dense", "csr", "hash"])
@pytest.mark.parametrize("fmt", ["csr", "coo", "hash"])
def test_literal_zero_times_stored_sparse_values_is_computed(fmt, out_format):
    """A stored NaN or inf times a literal 0 is NaN; an entry not stored stays absent."""
    values = np.array([[np.nan, 0.0, np.inf], [0.0, 2.0, 0.0]])
    A = ls.Tensor.from_scipy(sp.csr_matrix(values), format=fmt)
    result = ls.evaluate("C(i,j) = A(i,j) * 0", out_format=out_format, A=A)
    with np.errstate(all="ignore"):
        check(result, 0 * values)


@pytest.mark.parametrize("a_format", ["dense", "csr", "coo", "dcsr", "ell", "hash"])
@pytest.mark.parametrize("s_format", ["dense", "coo"])
def test_factor_outside_an_explicit_sum_multiplies_the_finished_sum(a_format, s_format):
    """sum_j(A(i,j) * x(j)) * s(i) with A = [[0, 1]], s = [inf] is inf (0 + 1 = 1 times
    inf), never NaN from inf * 0 in the term of A(0,0), stored or not."""
    A = np.array([[0.0, 1.0], [2.0, 3.0], [0.0, 0.0]])
    x = np.array([1.0, 1.0])
    s = np.array([np.inf, -np.inf, 5.0])
    kernel = ls.compile("y(i) = sum_j(A(i,j) * x(j)) * s(i)", A=a_format, x="dense",
                        s=s_format)
    At = ls.Tensor.from_numpy(A, format=a_format)
    with np.errstate(all="ignore"):
        expected = (A @ x) * s
    check(kernel(A=At, x=dense(x), s=ls.Tensor.from_numpy(s, format=s_format)), expected)


@pytest.mark.parametrize("text", ["y(i) = A(i,j) * x(j) * s(i)",
                                  "y(i) = s(i) * sum_j(A(i,j) * x(j))",
                                  "y(i) = -sum_j(A(i,j) * x(j)) * s(i)"])
def test_sum_placed_before_a_later_factor_is_finished_first(text):
    """The implicit sum goes over the smallest subexpression using j (A(i,j) * x(j)), so
    s(i) multiplies its result, as with the sum written out."""
    A = np.array([[0.0, 1.0], [1.0, 0.0]])
    x = np.array([1.0, 1.0])
    s = np.array([np.inf, np.nan])
    sign = -1 if "-sum" in text else 1
    result = ls.evaluate(text, A=dense(A), x=dense(x), s=dense(s))
    with np.errstate(all="ignore"):
        check(result, sign * (A @ x) * s)


@pytest.mark.parametrize("a_format", ["dense", "csr"])
@pytest.mark.parametrize("out_format", ["dense", "csr"])
def test_masked_product_multiplies_the_finished_sum(a_format, out_format):
    """C(i,j) = D(i,j) * sum_k(A(i,k) * B(k,j)) with inf in D and a zero row sum."""
    A = np.array([[0.0, 1.0], [1.0, 1.0]])
    B = np.array([[1.0, 0.0], [2.0, 1.0]])
    D = np.array([[np.inf, 2.0], [np.nan, -np.inf]])
    result = ls.evaluate("C(i,j) = D(i,j) * sum_k(A(i,k) * B(k,j))", out_format=out_format,
                         A=ls.Tensor.from_numpy(A, format=a_format), B=dense(B),
                         D=ls.Tensor.from_numpy(D, format="csr"))
    with np.errstate(all="ignore"):
        check(result, D * (A @ B))


LEAVES = st.sampled_from(["v(i)", "w(i)", "0", "2"])
TREES = st.recursive(LEAVES, lambda children: st.tuples(
    children, st.sampled_from(["+", "-", "*", "/"]), children), max_leaves=5)
OPERATIONS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}


def _text(tree) -> str:
    if isinstance(tree, str):
        return tree
    left, op, right = tree
    return f"({_text(left)} {op} {_text(right)})"


def _numpy(tree, arrays: dict[str, np.ndarray]) -> np.ndarray:
    if isinstance(tree, tuple):
        left, op, right = tree
        return OPERATIONS[op](_numpy(left, arrays), _numpy(right, arrays))
    if tree[0] in arrays:
        return arrays[tree[0]]
    return np.full(len(SPECIAL), float(tree))


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(tree=TREES.filter(lambda t: "v(i)" in _text(t)))
def test_random_dense_expressions_with_inf_and_nan_match_numpy(tree):
    """Over dense operands every value is computed, in the order written, as numpy does."""
    arrays = {"v": SPECIAL, "w": np.array([1.0, np.nan, 0.0, -np.inf, 0.0, 3.0])}
    text = _text(tree)
    used = {n: a for n, a in arrays.items() if f"{n}(i)" in text}
    result = ls.evaluate(f"y(i) = {text}", **{n: dense(a) for n, a in used.items()})
    with np.errstate(all="ignore"):
        expected = _numpy(tree, arrays)
    check(result, expected)


@pytest.mark.parametrize("fmt", ["coo", "csf", "hash"])
def test_an_absent_product_annihilates_a_quotient_of_absent_entries(fmt):
    """(A*B) * (A/B) + 3 where A and B store nothing is 3: the product of absent entries
    is absent and annihilates, even the 0/0 beside it. Constants were folded before the
    absent operands were, which gave 0 * NaN + 3 = NaN there."""
    a = np.array([0.0, 2.0, 0.0, 4.0, -1.0])
    b = np.array([0.0, 3.0, 5.0, 0.0, 2.0])
    A, B = (ls.Tensor.from_numpy(v, format=fmt) for v in (a, b))
    kernel = ls.compile("Z(i) = (A(i) * B(i)) * (A(i) / B(i)) + 3", A=fmt, B=fmt)
    both = (a != 0) & (b != 0)
    with np.errstate(all="ignore"):
        expected = np.where(both, a * b * (a / b), 0.0) + 3
    for _ in range(3):
        np.testing.assert_array_equal(kernel(A=A, B=B).to_numpy(), expected)


@pytest.mark.parametrize("fmt", ["ell", "ell-rows"])
def test_ell_padding_never_duplicates_a_stored_entry(fmt: str) -> None:
    """ELL padded rows with (column 0, value 0): where a row stored column 0 too, the
    padding was a duplicate, and A(0,0) * -inf summed as 1 * -inf + 0 * -inf = NaN."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        dense = rng.random((7, 5)) * (rng.random((7, 5)) < 0.4)
        A = ls.Tensor.from_numpy(dense, format=fmt)
        coords, _ = A.to_coo()
        assert len(set(map(tuple, coords.T.tolist()))) == coords.shape[1]  # no duplicates
        np.testing.assert_array_equal(A.to_numpy(), dense)
        stored = np.zeros(dense.shape, dtype=bool)
        stored[tuple(coords)] = True
        b = rng.choice([-np.inf, np.inf, 1.0, 2.0], size=5)
        with np.errstate(invalid="ignore"):
            expected = np.where(stored, dense * b[None, :], 0.0)
        kernel = ls.compile("C(i,j) = A(i,j) * B(j)", A=fmt, B="dense")
        for _ in range(3):
            np.testing.assert_array_equal(kernel(A=A, B=b).to_numpy(), expected)
