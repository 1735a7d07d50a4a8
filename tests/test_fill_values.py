"""Fill values (issue 23 item 1, paper 004): every tensor has one, a result's is its
expression on the operands' fills, and kernels use it where an operand stores nothing.

The reference is numpy on dense copies (entries not stored are the fill). A product
where an operand with fill 0 stores nothing is 0 even against inf or NaN (README), so
the products below pair fill-0 operands only with finite values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.ir.types import fill_key, type_key

import llvsparse as ls
from llvsparse.tensors.format import Format, FormatError

FILLS = (0.0, 1.0, math.inf, -math.inf, math.nan)
FORMATS = ("csr", "coo", "dcsr", "hash", "dense")
SHAPE = (5, 7)


def _random(seed: int, fill: float, shape=SHAPE, density: float = 0.4) -> np.ndarray:
    """A dense array that is ``fill`` where nothing is stored, finite and never 0 or the
    fill elsewhere."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return np.where(rng.random(shape) < density, values, fill)


def _packed(array: np.ndarray, fmt: str, fill: float) -> ls.Tensor:
    return ls.Tensor.from_numpy(array, fmt, fill=fill)


def _same(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=0, equal_nan=True,
                               err_msg=what)


def _run_three_times(kernel: ls.Kernel, expected: np.ndarray, what: str, **tensors):
    result = None
    for call in range(3):
        result = kernel(**tensors)
        _same(result.to_numpy(), expected, f"{what}, call {call}")
    return result


# -- tensors ------------------------------------------------------------------------------
@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_from_numpy_stores_what_is_not_the_fill_and_to_numpy_gives_it_back(fill, fmt):
    dense = _random(1, fill)
    tensor = _packed(dense, fmt, fill)
    assert tensor.fill_value == fill or (math.isnan(fill) and math.isnan(tensor.fill_value))
    _same(tensor.to_numpy(), dense, f"{fmt} fill {fill}")
    if fmt != "dense":
        stored = np.count_nonzero(~np.isnan(dense) if math.isnan(fill) else dense != fill)
        assert tensor.nnz == stored


@pytest.mark.parametrize("fill", FILLS)
def test_from_coo_and_from_scipy_take_the_value_of_entries_not_given(fill):
    coords = np.array([[0, 2], [1, 3]])
    expected = np.full((3, 4), fill)
    expected[0, 1], expected[2, 3] = 5.0, -1.0
    from_coo = ls.Tensor.from_coo(coords, [5.0, -1.0], (3, 4), "csr", fill=fill)
    _same(from_coo.to_numpy(), expected, "from_coo")
    matrix = sp.csr_matrix(([5.0, -1.0], (coords[0], coords[1])), shape=(3, 4))
    _same(ls.Tensor.from_scipy(matrix, "dcsr", fill=fill).to_numpy(), expected, "from_scipy")
    _same(ls.asarray(expected, format="coo", fill=fill).to_numpy(), expected, "asarray")


def test_a_format_carries_its_fill_value():
    fmt = Format(["dense", "compressed"], fill=math.inf)
    tensor = ls.Tensor.from_numpy(np.array([[np.inf, 1.0], [2.0, np.inf]]), fmt)
    assert tensor.nnz == 2 and tensor.fill_value == math.inf and "fill_value=inf" in repr(tensor)
    assert fmt != Format(["dense", "compressed"]) and "fill=inf" in repr(fmt)
    assert Format(["dense"], fill=math.nan) == Format(["dense"], fill=math.nan)
    with pytest.raises(FormatError, match="fill value"):
        Format(["dense"], fill="1")


def test_the_fill_value_cannot_be_set_silently():
    tensor = _packed(_random(2, 0.0), "csr", 0.0)
    for name in ("fill", "fill_value"):
        with pytest.raises(AttributeError, match="read-only"):
            setattr(tensor, name, math.inf)
    assert tensor.fill_value == 0.0


def test_to_scipy_refuses_a_fill_other_than_zero():
    tensor = _packed(_random(3, 1.0), "csr", 1.0)
    with pytest.raises(ValueError, match="fill value 0"):
        tensor.to_scipy()


def test_a_fill_the_dtype_cannot_hold_is_refused():
    with pytest.raises(ValueError, match="cannot have fill value nan"):
        ls.Tensor.from_numpy(np.array([1, 2], dtype=np.int64), "sparse", fill=math.nan)


def test_asformat_keeps_the_fill_value():
    dense = _random(4, -math.inf)
    tensor = _packed(dense, "coo", -math.inf)
    for fmt in ("csr", "dcsr", "csc", "hash"):
        converted = tensor.asformat(fmt)
        assert converted.fill_value == -math.inf
        _same(converted.to_numpy(), dense, fmt)


@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("shape", [(0, 4), (3, 0), (3, 4)])
def test_empty_and_all_fill_tensors(fill, shape):
    dense = np.full(shape, fill)
    for fmt in ("csr", "coo", "dcsr", "hash"):
        tensor = _packed(dense, fmt, fill)
        assert tensor.nnz == 0
        _same(tensor.to_numpy(), dense, fmt)
        kernel = ls.compile("Z(i,j) = A(i,j) + B(i,j)", out_format=fmt, A=fmt, B=fmt)
        _run_three_times(kernel, dense + dense, f"{fmt} {shape}", A=tensor, B=tensor)


# -- kernels ------------------------------------------------------------------------------
def _pairs():
    """Each fill against itself and against the next one, in every format."""
    for fmt in FORMATS:
        for k, fa in enumerate(FILLS):
            yield fmt, fa, fa
            yield fmt, fa, FILLS[(k + 1) % len(FILLS)]


@pytest.mark.parametrize(("fmt", "fa", "fb"), list(_pairs()))
def test_sums_and_differences_of_any_fills_match_numpy(fmt, fa, fb):
    a, b = _random(10, fa), _random(11, fb)
    A, B = _packed(a, fmt, fa), _packed(b, fmt, fb)
    with np.errstate(invalid="ignore"):
        for text, expected, out in (("Z(i,j) = A(i,j) + B(i,j)", a + b, fmt),
                                    ("Z(i,j) = A(i,j) - 2 * B(i,j)", a - 2 * b, "dense"),
                                    ("Z(i,j) = (A(i,j) + 1) / 2", (a + 1) / 2, fmt)):
            used = {n: t for n, t in (("A", A), ("B", B)) if f"{n}(" in text}
            kernel = ls.compile(text, out_format=out, **dict.fromkeys(used, fmt))
            _run_three_times(kernel, expected, f"{text} -> {out}", **used)


PRODUCT_FILLS = [(fa, fb) for fa in FILLS for fb in FILLS
                 if not (fa == 0 and not math.isfinite(fb))
                 and not (fb == 0 and not math.isfinite(fa))]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("fa", "fb"), PRODUCT_FILLS)
def test_products_with_any_fills_match_numpy(fmt, fa, fb):
    a, b = _random(20, fa), _random(21, fb)
    A, B = _packed(a, fmt, fa), _packed(b, fmt, fb)
    kernel = ls.compile("Z(i,j) = A(i,j) * B(i,j)", out_format=fmt, A=fmt, B=fmt)
    with np.errstate(invalid="ignore"):
        _run_three_times(kernel, a * b, f"{fmt} {fa} * {fb}", A=A, B=B)


@pytest.mark.parametrize("fmt", ("csr", "coo", "dcsr", "hash"))
def test_a_product_with_a_fill_one_operand_is_no_intersection(fmt):
    """A * B with A's fill 1: where A stores nothing, B's entries come through."""
    a, b = _random(30, 1.0, density=0.2), _random(31, 0.0, density=0.6)
    kernel = ls.compile("Z(i,j) = A(i,j) * B(i,j)", out_format=fmt, A=fmt, B=fmt)
    result = _run_three_times(kernel, a * b, fmt, A=_packed(a, fmt, 1.0),
                              B=_packed(b, fmt, 0.0))
    assert result.fill_value == 0.0
    assert result.nnz == np.count_nonzero(b)  # B's pattern, not the overlap


@pytest.mark.parametrize("fmt", ("csr", "coo", "dcsr", "hash"))
def test_adding_a_literal_keeps_the_pattern_and_sets_the_fill(fmt):
    a = _random(40, 0.0)
    A = _packed(a, fmt, 0.0)
    kernel = ls.compile("Z(i,j) = A(i,j) + 1", out_format=fmt, A=fmt)
    result = _run_three_times(kernel, a + 1, fmt, A=A)
    assert result.fill_value == 1.0 and result.nnz == A.nnz


def test_a_dense_output_holds_the_result_fill_where_nothing_is_computed():
    a = _random(50, math.inf)
    kernel = ls.compile("Z(i,j) = A(i,j) * 2", A="dcsr")
    result = _run_three_times(kernel, a * 2, "dense out", A=_packed(a, "dcsr", math.inf))
    out = np.zeros(SHAPE)
    kernel(A=_packed(a, "dcsr", math.inf), out=out)
    _same(out, a * 2, "out=")
    assert result.fill_value == math.inf


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill", (0.0, 1.0, -math.inf))
def test_spmv_over_an_operand_with_a_fill(fmt, fill):
    """y(i) = A(i,j) * x(j): a fill other than 0 makes every j count."""
    a, x = _random(60, fill), np.random.default_rng(61).uniform(0.5, 2.0, SHAPE[1])
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A=fmt)
    _run_three_times(kernel, a @ x, f"{fmt} fill {fill}", A=_packed(a, fmt, fill), x=x)


def test_a_sum_over_a_term_with_a_fill_other_than_its_identity():
    a = _random(70, 2.0)
    for fmt in ("csr", "dcsr", "coo", "hash"):
        kernel = ls.compile("y(i) = sum_j(A(i,j))", A=fmt)
        _run_three_times(kernel, a.sum(axis=1), fmt, A=_packed(a, fmt, 2.0))


def test_one_kernel_specializes_on_each_operands_fill():
    """The same kernel object, called with fills 0 then 1 then 0: the fill is part of
    the instance's key, in memory and on disk."""
    kernel = ls.compile("Z(i,j) = A(i,j) * B(i,j)", out_format="csr", A="csr", B="csr")
    b = _random(81, 0.0)
    for fill in (0.0, 1.0, 0.0):
        a = _random(80, fill)
        _run_three_times(kernel, a * b, f"fill {fill}", A=_packed(a, "csr", fill),
                         B=_packed(b, "csr", 0.0))
    zero = Format(["dense", "compressed"]).tensor_type("float64", "int32")
    one = Format(["dense", "compressed"], fill=1).tensor_type("float64", "int32")
    assert type_key(zero) != type_key(one)
    assert kernel.disk_key({"Z": zero, "A": zero, "B": zero}) != \
        kernel.disk_key({"Z": zero, "A": one, "B": zero})


def test_an_output_format_with_another_fill_is_refused():
    A = _packed(_random(90, 0.0), "csr", 0.0)
    kernel = ls.compile("Z(i,j) = A(i,j) + 1", out_format=Format(["dense", "compressed"],
                                                                  fill=5), A="csr")
    with pytest.raises(ValueError, match="declares fill value 5"):
        kernel(A=A)


@pytest.mark.parametrize("levels", (["dense", "compressed"], ["dense", "dense"]))
def test_an_output_format_declaring_fill_0_is_honoured_or_refused(levels):
    """Format(fill=0) was read as no fill declared: A + 1 came back with fill 1 in a
    format that said 0. A declared 0 now holds as any other declared fill: refused where
    the expression's fill is another, kept where it agrees."""
    a = _random(91, 0.0)
    A = _packed(a, "csr", 0.0)
    declared = Format(levels, fill=0)
    with pytest.raises(ValueError, match="declares fill value 0.0, but the expression's is 1"):
        ls.evaluate("Z(i,j) = A(i,j) + 1", out_format=declared, A=A)
    with pytest.raises(ValueError, match="declares fill value 0.0"):
        ls.compile("Z(i,j) = A(i,j) + 1", out_format=declared, A="csr")(A=A)
    undeclared = ls.evaluate("Z(i,j) = A(i,j) + 1", out_format=Format(levels), A=A)
    assert undeclared.fill_value == 1.0
    _same(undeclared.to_numpy(), a + 1, "fill left out")
    kept = ls.evaluate("Z(i,j) = A(i,j) * 2", out_format=declared, A=A)
    assert kept.fill_value == 0.0
    _same(kept.to_numpy(), a * 2, "fill 0 declared and computed")


def test_a_pickled_kernel_brings_each_instance_back_under_its_fills():
    """A kernel pickled after a call on fill-1 operands: its instance comes back under
    the fill-1 key, so a call on fill-0 operands compiles its own (it once came back
    as the fill-0 instance and gave fill-1 answers)."""
    import pickle

    from llvsparse.caching.memory import KERNELS

    kernel = ls.compile("Z(i,j) = A(i,j) * B(i,j)", out_format="csr", A="csr", B="csr")
    a1, a0, b = _random(100, 1.0), _random(101, 0.0), _random(102, 0.0)
    B = _packed(b, "csr", 0.0)
    _same(kernel(A=_packed(a1, "csr", 1.0), B=B).to_numpy(), a1 * b, "fill 1")
    data = pickle.dumps(kernel)
    KERNELS.clear()
    restored = pickle.loads(data)
    _run_three_times(restored, a0 * b, "fill 0 after unpickling", A=_packed(a0, "csr", 0.0),
                     B=B)
    _run_three_times(restored, a1 * b, "fill 1 after unpickling", A=_packed(a1, "csr", 1.0),
                     B=B)


@pytest.mark.parametrize("fmt", ("csr", "dcsr", "hash"))
def test_a_nan_fill_beside_an_absent_zero_is_no_intersection(fmt):
    """A(i,j) * B(i,j) with A's fill NaN and B's 0: where B stores nothing the product is
    0 (an absent exact zero annihilates NaN), but where only A is absent it is NaN * b.
    The NaN forced by A's absence is not the result's fill (0), so A may be absent: the
    lattice was an intersection and those entries came out 0."""
    a, b = _random(31, math.nan), _random(32, 0.0)
    expected = np.where(b != 0, a * b, 0.0)
    got = ls.evaluate("C(i,j) = A(i,j) * B(i,j)", out_format=fmt,
                      A=_packed(a, fmt, math.nan), B=_packed(b, fmt, 0.0))
    _same(got.to_numpy(), expected, fmt)
    assert got.fill_value == 0.0
    spgemm = ls.evaluate("C(i,j) = A(i,k) * B(k,j)", A=_packed(a, fmt, math.nan),
                         B=_packed(_random(33, 0.0, (7, 4)), fmt, 0.0))
    b2 = _random(33, 0.0, (7, 4))
    with np.errstate(invalid="ignore"):
        terms = np.where(b2[None] != 0, a[:, :, None] * b2[None], 0.0)
    _same(spgemm.to_numpy(), terms.sum(axis=1), f"{fmt} spgemm")


def test_declared_properties_and_fills_decide_the_region_together():
    """min with fill inf is a union (min(inf, y) = y); min with fill -inf is one too
    (min(-inf, NaN) is NaN: no annihilator, issue 37); a user function declaring annihilator inf intersects over
    fill-inf operands and its result keeps fill inf; where(c, a, b) over fill-1 operands."""
    a, b = _random(41, math.inf), _random(42, math.inf)
    got = ls.evaluate("C(i,j) = min(A(i,j), B(i,j))", out_format="csr",
                      A=_packed(a, "csr", math.inf), B=_packed(b, "csr", math.inf))
    _same(got.to_numpy(), np.minimum(a, b), "min inf")
    assert got.fill_value == math.inf
    a, b = _random(43, -math.inf), _random(44, -math.inf)
    got = ls.evaluate("C(i,j) = min(A(i,j), B(i,j))", out_format="csr",
                      A=_packed(a, "csr", -math.inf), B=_packed(b, "csr", -math.inf))
    _same(got.to_numpy(), np.minimum(a, b), "min -inf")
    assert got.nnz == np.count_nonzero((a != -math.inf) | (b != -math.inf))
    ls.function("bigger_fill_inf", body="a if a > b else b", annihilator=math.inf,
                commutative=True)  # max(inf, NaN) is NaN here: only declared annihilates
    a, b = _random(45, math.inf), _random(46, math.inf)
    got = ls.evaluate("C(i,j) = bigger_fill_inf(A(i,j), B(i,j))", out_format="csr",
                      A=_packed(a, "csr", math.inf), B=_packed(b, "csr", math.inf))
    _same(got.to_numpy(), np.maximum(a, b), "declared annihilator")
    assert got.fill_value == math.inf
    assert got.nnz == np.count_nonzero((a != math.inf) & (b != math.inf))
    a, b = _random(48, 1.0), _random(49, 1.0)
    c = _random(47, 1.0)
    got = ls.evaluate("C(i,j) = where(P(i,j) > 1, A(i,j), B(i,j))", out_format="csr",
                      P=_packed(c, "csr", 1.0), A=_packed(a, "csr", 1.0),
                      B=_packed(b, "csr", 1.0))
    _same(got.to_numpy(), np.where(c > 1, a, b), "where")


def test_plus_a_literal_iterates_only_the_stored_entries():
    """A(i,j) + 1 has fill 1 and A's pattern: its loops visit A's entries, not every j of
    every row (the universe the literal brings is where the result is its fill; A + 1
    on a 10^6 x 10^6 matrix of 10^6 entries took O(n^2))."""
    S = sp.random(40, 30, density=0.1, format="csr", random_state=3)
    kernel = ls.compile("C(i,j) = A(i,j) + 1", A="csr", C="csr")
    result = kernel(A=S)
    assert result.fill_value == 1 and result.nnz == S.nnz
    np.testing.assert_array_equal(result.to_numpy(), S.toarray() + 1)
    assert "U" not in kernel.lattices.split("j:")[1]
    assert "merge" not in kernel.loops
    huge = sp.csr_matrix(([2.0, 3.0], ([5, 999_999], [7, 3])), shape=(10**6, 10**6))
    plus = ls.asarray(huge) + 1
    assert plus.nnz == 2 and plus.fill_value == 1
    np.testing.assert_array_equal(plus.values[:2], [3.0, 4.0])


@pytest.mark.parametrize("a_format", ["coo-unordered", "sparse", "coo", "hash"])
@pytest.mark.parametrize("out_format", ["dense", "csr"])
def test_a_split_statements_first_term_writes_its_fill_where_absent(a_format, out_format):
    """min(3, 3 + A(i)) is 3 where A stores nothing; with B(i,j) dense the whole has no
    fill, and where the statement is split into one nest per term (an unordered A cannot
    be merged with B), the first nest must still write that 3 (it wrote only where A
    stores entries: soak case 1136:263)."""
    rng = np.random.default_rng(263)
    for density in (0.0, 0.5, 1.0):
        a = (rng.integers(-4, 4, 7) * (rng.random(7) < density)).astype(np.int32)
        b = rng.integers(-3, 4, (7, 3)).astype(np.int32)
        kernel = ls.compile("Z(i,j) = min(3, 3 + A(i)) + B(i,j)", out_format, A=a_format,
                            B="dense")
        got = kernel(A=ls.Tensor.from_numpy(a, format=a_format), B=b).to_numpy()
        np.testing.assert_array_equal(got, np.minimum(3, 3 + a)[:, None] + b)


@pytest.mark.parametrize("fill", [5.0, -1.0, math.inf, math.nan])
def test_pydata_arrays_keep_their_fill_value_both_ways(fill):
    """ls.asarray and Tensor.from_pydata read a pydata COO with fill 5 as fill 0 (its sum
    gave 3.0, not 13.0), and to_pydata gave a fill-5 tensor back with fill 0."""
    import sparse  # the test extra installs pydata/sparse

    dense = np.array([[1.0, fill, fill], [fill, fill, 2.0]])
    X = sparse.COO.from_numpy(dense, fill_value=fill)
    for T in (ls.asarray(X), ls.Tensor.from_pydata(X, format="csr")):
        assert fill_key(T.fill_value) == fill_key(fill)
        _same(T.to_numpy(), dense, "to_numpy")
        _same(T.sum(), dense.sum(), "sum")
    _same((ls.asarray(X) * 2).to_numpy(), dense * 2, "an operand")
    _same(ls.evaluate("y(i) = X(i,j)", X=X).to_numpy(), dense.sum(axis=1), "a kernel's")
    back = ls.Tensor.from_numpy(dense, "csr", fill=fill).to_pydata()
    assert fill_key(back.fill_value) == fill_key(fill) and back.nnz == 2
    _same(back.todense(), dense, "to_pydata")
    whole = sparse.COO.from_numpy(np.array([[7, 1], [7, 7]]), fill_value=7)
    T = ls.asarray(whole)
    assert T.dtype == np.int64 and T.fill_value == 7 and T.sum() == 22
    assert T.to_pydata().fill_value == 7 and T.to_pydata().dtype == np.int64
