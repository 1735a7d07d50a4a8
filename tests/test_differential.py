"""Differential tests: every kernel is compared against numpy on dense copies.

For each expression x input formats x output format, either the result equals numpy's
or -- only for outputs assembled by appending (csr, dcsr, coo, csf, csc) -- the compiler
refuses the combination with ``ls.ScheduleError``, never because the output would be
scattered (that goes through a workspace). Dense and hash outputs must always work.
Each kernel is called three times as ``kernel(...)`` and three times through a binding
of its own, every result checked: a binding's calls alternate its loop forms (probe.py),
so the form a kernel switches to runs too.
"""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from llvsparse.ir.schedule.scheduler import ScatteredOutputError

import llvsparse as ls

pytestmark = pytest.mark.slow  # see tests/conftest.py

MATRIX_IN = ["dense", "csr", "csc", "coo", "dcsr", "dia", "ell", "ell-rows", "hash"]
VECTOR_IN = ["dense", "coo", "hash"]
TENSOR3_IN = ["dense", "coo", "csf", "hash"]
MATRIX_OUT = ["dense", "csr", "dcsr", "coo", "hash"]
VECTOR_OUT = ["dense", "coo", "csf", "hash"]
TENSOR3_OUT = ["dense", "coo", "csf", "hash"]
MUST_SUCCEED = {"dense", "hash"}
INTERPRETED_EVERY = 3  # a third of the cases also run under target="interpret"

# Every (A, B) pair goes into a dense output; a reduced set into the sparse outputs.
ALL_PAIRS = list(itertools.product(MATRIX_IN, MATRIX_IN))
SOME_PAIRS = sorted({(a, "csr") for a in MATRIX_IN} | {("csr", b) for b in MATRIX_IN}
                    | {(a, a) for a in MATRIX_IN} | {("coo", "dense"), ("dense", "coo")})
PAIR_CASES = [(a, b, "dense") for a, b in ALL_PAIRS] + [
    (a, b, o) for a, b in SOME_PAIRS for o in MATRIX_OUT if o != "dense"]


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------
def rand(shape, density=0.35, seed=0, dtype=np.float64, empty_row=True):
    """Small integer-valued random array (exact in every dtype) with an empty row."""
    rng = np.random.default_rng(seed)
    arr = rng.integers(1, 10, size=shape) * (rng.random(shape) < density)
    if empty_row and len(shape) >= 1 and shape[0] > 2:
        arr[1] = 0
    return arr.astype(dtype)


def nonzero_dense(shape, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.integers(1, 10, size=shape).astype(dtype)


def make(arr, fmt, index_dtype=None):
    if fmt is None:
        return arr
    return ls.Tensor.from_numpy(arr, format=fmt, index_dtype=index_dtype)


def scalar_tensor(value, dtype="float64"):
    """An order-0 tensor built without from_numpy (see test_from_numpy_scalar)."""
    return ls.Tensor((), ls.Format([]), dtype, "int32", [], [], [],
                     np.array([value], dtype=dtype))


def assert_same(got, expected):
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected)
    elif expected.dtype == np.float32 or got.dtype == np.float32:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def check_structure(result):
    """Compressed levels: monotone pos, crd sorted (strictly if unique) per segment;
    COO: lexicographically sorted unique coordinates; hash: crd in range or -1."""
    fmt = result.format
    levels = fmt.levels
    for k, level in enumerate(levels):
        arrays = result.level_arrays[k]
        if level.kind == "compressed":
            pos, crd = arrays["pos"], arrays["crd"]
            assert pos[0] == 0
            assert np.all(np.diff(pos) >= 0), f"level {k} pos not monotone: {pos}"
            assert pos[-1] <= len(crd)
            unique = level.properties.get("unique", True)
            for s in range(len(pos) - 1):
                seg = crd[pos[s]:pos[s + 1]]
                diffs = np.diff(seg.astype(np.int64))
                assert np.all(diffs > 0) if unique else np.all(diffs >= 0), \
                    f"level {k} segment {s} not sorted: {seg}"
            if len(crd[:pos[-1]]):
                assert crd[:pos[-1]].min() >= 0
                assert crd[:pos[-1]].max() < result.level_extents[k]
        elif level.kind == "hashed":
            crd = arrays["crd"]
            assert np.all((crd == -1) | ((crd >= 0) & (crd < result.level_extents[k])))
    if fmt.name == "coo" and result.order >= 2:
        n = int(result.level_arrays[0]["pos"][-1])
        keys = np.array([result.level_arrays[k]["crd"][:n].astype(np.int64)
                         for k in range(len(levels))])
        if n > 1:
            order = np.lexsort(keys[::-1])
            np.testing.assert_array_equal(order, np.arange(n))
            assert np.all(np.any(keys[:, 1:] != keys[:, :-1], axis=0)), "duplicate coords"


CALLS = 3  # per way of calling: a binding's calls alternate its loop forms (probe.py)


def every_call(kernel: ls.Kernel, operands: dict) -> list[ls.Tensor]:
    """``kernel`` called CALLS times as ``kernel(...)`` (after the first, through the
    binding it keeps) and CALLS times through a binding of its own, so every loop form
    runs, not only the first."""
    results = [kernel(**operands) for _ in range(CALLS)]
    bound = kernel.bind(**operands)
    return results + [bound() for _ in range(CALLS)]


def run(expr, out_format, expected, **operands):
    """Compile (the compiled code is cached), call in every way; compare each result with
    ``expected``. Returns the first result or None if refused."""
    formats = {n: v.format if isinstance(v, ls.Tensor) else "dense"
               for n, v in operands.items()}
    try:
        results = every_call(ls.Kernel(expr, formats, out_format), operands)
    except ls.ScheduleError as error:
        if out_format in MUST_SUCCEED or isinstance(error, ScatteredOutputError):
            raise
        return None
    expected = np.asarray(expected)
    for call, result in enumerate(results):
        assert result.shape == expected.shape
        result.validate()
        got = result.to_numpy()
        assert_same(got, expected)
        if call:  # every form gives the same bits (README)
            np.testing.assert_array_equal(got, results[0].to_numpy(), err_msg=f"call {call}")
        if out_format not in ("dense",) and result.order >= 1:
            check_structure(result)
        if result.order == 2 and expected.dtype != bool:
            diff = result.to_scipy("csr") - sp.csr_matrix(expected)
            assert abs(diff).sum() <= 1e-9 * max(1.0, float(np.abs(expected).sum()))
    if zlib.crc32(repr((expr, sorted(formats.items()), out_format)).encode()) \
            % INTERPRETED_EVERY == 0:  # the loop IR alone, walked in Python (issue 31)
        walked = ls.Kernel(expr, formats, out_format, target="interpret")(**operands)
        np.testing.assert_allclose(walked.to_numpy(), results[0].to_numpy(), rtol=1e-12,
                                   err_msg="target='interpret'")
    return results[0]


# ---------------------------------------------------------------------------------------
# expressions x formats
# ---------------------------------------------------------------------------------------
A57 = rand((5, 7), seed=1)
B57 = rand((5, 7), seed=2)
C57 = rand((5, 7), seed=3)
D57 = rand((5, 7), seed=4)
B74 = rand((7, 4), seed=5)
X7 = rand((7,), density=0.7, seed=6, empty_row=False)
V5 = rand((5,), density=0.6, seed=7, empty_row=False)
T3 = rand((3, 4, 5), density=0.3, seed=8)


@pytest.mark.parametrize("fo", VECTOR_OUT)
@pytest.mark.parametrize("fx", VECTOR_IN)
@pytest.mark.parametrize("fa", MATRIX_IN)
def test_spmv(fa, fx, fo):
    run("y(i) = A(i,j) * x(j)", fo, A57 @ X7, A=make(A57, fa), x=make(X7, fx))


def test_spmv_numpy_operand():
    run("y(i) = A(i,j) * x(j)", "dense", A57 @ X7, A=make(A57, "csc"), x=X7)


@pytest.mark.parametrize("fo", MATRIX_OUT)
@pytest.mark.parametrize("fb", ["dense", "csr"])
@pytest.mark.parametrize("fa", MATRIX_IN)
def test_spmm(fa, fb, fo):
    run("C(i,j) = A(i,k) * B(k,j)", fo, A57 @ B74, A=make(A57, fa), B=make(B74, fb))


@pytest.mark.parametrize("fa,fb,fo", PAIR_CASES)
def test_spadd(fa, fb, fo):
    run("C(i,j) = A(i,j) + B(i,j)", fo, A57 + B57, A=make(A57, fa), B=make(B57, fb))


@pytest.mark.parametrize("fa,fb,fo", PAIR_CASES)
def test_hadamard(fa, fb, fo):
    run("C(i,j) = A(i,j) * B(i,j)", fo, A57 * B57, A=make(A57, fa), B=make(B57, fb))


TRIPLES = [("csr", "csr", "csr"), ("csr", "coo", "dense"), ("dcsr", "csr", "coo"),
           ("dia", "ell", "csr"), ("hash", "dense", "csr"), ("csc", "csc", "csc"),
           ("coo", "coo", "coo"), ("dense", "dense", "dense"), ("ell", "hash", "dia")]


@pytest.mark.parametrize("fo", MATRIX_OUT)
@pytest.mark.parametrize("fa,fb,fc", TRIPLES)
def test_add3(fa, fb, fc, fo):
    run("D(i,j) = A(i,j) + B(i,j) + C(i,j)", fo, A57 + B57 + C57,
        A=make(A57, fa), B=make(B57, fb), C=make(C57, fc))


@pytest.mark.parametrize("fo", MATRIX_OUT)
@pytest.mark.parametrize("fb,fc,fd", TRIPLES)
def test_sum_times(fb, fc, fd, fo):
    run("A(i,j) = (B(i,j) + C(i,j)) * D(i,j)", fo, (B57 + C57) * D57,
        B=make(B57, fb), C=make(C57, fc), D=make(D57, fd))


@pytest.mark.parametrize("fo", ["dense", "coo", "hash"])
@pytest.mark.parametrize("fb", ["dense", "coo"])
@pytest.mark.parametrize("fa", MATRIX_IN)
def test_residual(fa, fb, fo):
    run("r(i) = b(i) - A(i,j) * x(j)", fo, V5 - A57 @ X7,
        b=make(V5, fb), A=make(A57, fa), x=make(X7, "dense"))


@pytest.mark.parametrize("fo", MATRIX_OUT)
@pytest.mark.parametrize("fa", MATRIX_IN)
def test_scale_constant(fa, fo):
    run("C(i,j) = 2.5 * A(i,j)", fo, 2.5 * A57, A=make(A57, fa))


@pytest.mark.parametrize("fo", MATRIX_OUT)
@pytest.mark.parametrize("fa", MATRIX_IN)
def test_scale_order0(fa, fo):
    run("C(i,j) = c * A(i,j)", fo, 3.0 * A57, c=scalar_tensor(3.0), A=make(A57, fa))


def test_from_numpy_scalar():
    """An order-0 tensor from a 0-d array (and a plain Python scalar operand)."""
    c = ls.Tensor.from_numpy(np.float64(3.0))
    assert c.order == 0
    assert float(c.to_numpy()) == 3.0
    run("C(i,j) = c * A(i,j)", "csr", 3.0 * A57, c=c, A=make(A57, "csr"))
    run("C(i,j) = c * A(i,j)", "csr", 3.0 * A57, c=np.float64(3.0), A=make(A57, "csr"))


def test_scalar_from_coo():
    c = ls.Tensor.from_coo(np.zeros((0, 1), dtype=np.int64), np.array([3.0]), ())
    assert float(c.to_numpy()) == 3.0


@pytest.mark.parametrize("fo", MATRIX_OUT)
@pytest.mark.parametrize("fs", MATRIX_IN)
def test_sddmm(fs, fo):
    a = nonzero_dense((5, 3), seed=11)
    b = nonzero_dense((7, 3), seed=12)
    expected = A57 * (a @ b.T)
    run("C(i,j) = S(i,j) * A(i,k) * B(j,k)", fo, expected, S=make(A57, fs), A=a, B=b)


@pytest.mark.parametrize("fo", MATRIX_OUT)
@pytest.mark.parametrize("fc", ["dense", "coo"])
@pytest.mark.parametrize("fb", TENSOR3_IN)
def test_ttv(fb, fc, fo):
    c = rand((5,), density=0.7, seed=13, empty_row=False)
    run("A(i,j) = B(i,j,k) * c(k)", fo, np.einsum("ijk,k->ij", T3, c),
        B=make(T3, fb), c=make(c, fc))


@pytest.mark.parametrize("fo", TENSOR3_OUT)
@pytest.mark.parametrize("fb", TENSOR3_IN)
def test_ttm(fb, fo):
    c = nonzero_dense((2, 5), seed=14)
    run("A(i,j,l) = B(i,j,k) * C(l,k)", fo, np.einsum("ijk,lk->ijl", T3, c),
        B=make(T3, fb), C=c)


@pytest.mark.parametrize("fo", MATRIX_OUT)
@pytest.mark.parametrize("fb", TENSOR3_IN)
def test_mttkrp(fb, fo):
    c = nonzero_dense((4, 2), seed=15)
    d = nonzero_dense((5, 2), seed=16)
    run("A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", fo, np.einsum("ikl,kj,lj->ij", T3, c, d),
        B=make(T3, fb), C=c, D=d)


@pytest.mark.parametrize("fb,fc", [(b, c) for b in MATRIX_IN for c in ("dense", "csr")]
                         + [(b, b) for b in MATRIX_IN])
def test_inner_product(fb, fc):
    result = run("a = B(i,j) * C(i,j)", "dense", np.sum(A57 * B57),
                 B=make(A57, fb), C=make(B57, fc))
    assert result.order == 0


@pytest.mark.parametrize("fo", ["csc", "dense", "hash", "csr", "dcsr", "coo"])
@pytest.mark.parametrize("fa", MATRIX_IN)
def test_transpose(fa, fo):
    run("B(j,i) = A(i,j)", fo, A57.T, A=make(A57, fa))


@pytest.mark.parametrize("fo", MATRIX_OUT)
@pytest.mark.parametrize("fa", MATRIX_IN)
def test_division(fa, fo):
    d = nonzero_dense((7,), seed=17)
    run("C(i,j) = A(i,j) / d(j)", fo, A57 / d, A=make(A57, fa), d=d)


def test_einsum_matches():
    a = make(A57, "csr")
    for _ in range(CALLS):
        np.testing.assert_allclose(ls.einsum("ij,j->i", a, X7).to_numpy(), A57 @ X7)
        np.testing.assert_allclose(ls.einsum("ij,jk->ik", a, B74, out_format="csr").to_numpy(),
                                   A57 @ B74)


# ---------------------------------------------------------------------------------------
# edge cases
# ---------------------------------------------------------------------------------------
EDGE_SHAPES = {
    "0x0": np.zeros((0, 0)),
    "0x5": np.zeros((0, 5)),
    "5x0": np.zeros((5, 0)),
    "all_zero": np.zeros((4, 3)),
    "1x1": np.array([[7.0]]),
    "1x1_zero": np.array([[0.0]]),
    "single": np.pad(np.array([[3.0]]), ((2, 1), (1, 2))),
    "empty_rows": np.array([[0, 0, 0], [1, 0, 2], [0, 0, 0], [0, 0, 0], [0, 5, 0.0]]),
    "last_col": np.array([[0, 0, 4], [0, 0, 0], [0, 0, 6.0]]),
}
EDGE_FORMATS = MATRIX_IN


@pytest.mark.parametrize("fa", EDGE_FORMATS)
@pytest.mark.parametrize("name", list(EDGE_SHAPES))
def test_edge_roundtrip_and_spmv(name, fa):
    a = EDGE_SHAPES[name]
    t = make(a, fa)
    t.validate()
    np.testing.assert_array_equal(t.to_numpy(), a)
    x = np.arange(1, a.shape[1] + 1, dtype=float)
    run("y(i) = A(i,j) * x(j)", "dense", a @ x, A=t, x=x)


@pytest.mark.parametrize("fo", ["dense", "csr", "coo", "hash"])
@pytest.mark.parametrize("fa", EDGE_FORMATS)
@pytest.mark.parametrize("name", list(EDGE_SHAPES))
def test_edge_add_mul(name, fa, fo):
    a = EDGE_SHAPES[name]
    b = np.zeros_like(a)
    if a.size:
        b.flat[-1] = 2.0
        b.flat[0] = 1.0
    run("C(i,j) = A(i,j) + B(i,j)", fo, a + b, A=make(a, fa), B=make(b, "csr"))
    run("C(i,j) = A(i,j) * B(i,j)", fo, a * b, A=make(a, fa), B=make(b, "csr"))


@pytest.mark.parametrize("fmt", ["coo", "csr", "csc", "dcsr", "dia", "ell", "ell-rows", "hash", "dense"])
def test_duplicates_summed(fmt):
    rows = np.array([2, 0, 2, 0, 1, 0])
    cols = np.array([1, 3, 1, 0, 2, 3])
    vals = np.array([1.0, 2, 3, 4, 5, 6])
    expected = np.array([[4.0, 0, 0, 8], [0, 0, 5, 0], [0, 4, 0, 0]])
    t = ls.Tensor.from_coo(np.array([rows, cols]), vals, (3, 4), format=fmt)
    t.validate()
    np.testing.assert_array_equal(t.to_numpy(), expected)
    run("y(i) = A(i,j) * x(j)", "dense", [36.0, 15, 8], A=t, x=np.array([1.0, 2, 3, 4]))
    run("C(i,j) = A(i,j) + B(i,j)", "dense", 2 * expected, A=t, B=make(expected, "csr"))


@settings(max_examples=60, deadline=None)
@given(entries=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4),
                                  st.integers(-3, 3)), max_size=14),
       presort=st.booleans(), fmt=st.sampled_from(["csr", "csc", "coo", "dcsr", "ell"]))
def test_from_coo_sorted_unsorted_and_duplicated(entries, presort, fmt):
    """Entries already in order pass through without sorting; any other order or a
    repeated coordinate is sorted and summed. Both give the dense sum of the entries."""
    if presort:
        entries = sorted(entries)
    rows = np.array([e[0] for e in entries], dtype=np.int64)
    cols = np.array([e[1] for e in entries], dtype=np.int64)
    vals = np.array([float(e[2]) for e in entries])
    expected = np.zeros((4, 5))
    np.add.at(expected, (rows, cols), vals)
    t = ls.Tensor.from_coo(np.array([rows, cols]).reshape(2, -1), vals, (4, 5), format=fmt)
    t.validate()
    np.testing.assert_array_equal(t.to_numpy(), expected)


@pytest.mark.parametrize("fa", MATRIX_IN)
def test_index_dtype_int64(fa):
    t = make(A57, fa, index_dtype="int64")
    assert t.index_dtype == np.int64
    for arrays in t.level_arrays:
        for arr in arrays.values():
            assert arr.dtype == np.int64
    np.testing.assert_array_equal(t.to_numpy(), A57)
    run("y(i) = A(i,j) * x(j)", "dense", A57 @ X7, A=t, x=X7)
    run("C(i,j) = A(i,j) + B(i,j)", "dense", A57 + B57, A=t, B=make(B57, "csr"))
    run("C(i,j) = A(i,j) + B(i,j)", "csr", A57 + B57, A=t,
        B=make(B57, "csr", index_dtype="int64"))
    run("C(i,j) = A(i,j) * B(i,j)", "dense", A57 * B57, A=t,
        B=make(B57, "coo", index_dtype="int32"))


@pytest.mark.parametrize("fa", MATRIX_IN)
def test_index_dtype_int32_explicit(fa):
    t = make(A57, fa, index_dtype="int32")
    assert t.index_dtype == np.int32
    run("y(i) = A(i,j) * x(j)", "dense", A57 @ X7, A=t, x=X7)


VALUE_DTYPES = [np.float64, np.float32, np.int64, np.int32]


@pytest.mark.parametrize("fo", ["dense", "csr"])
@pytest.mark.parametrize("fa", ["csr", "coo", "dense", "dia", "hash"])
@pytest.mark.parametrize("dtype", VALUE_DTYPES)
def test_value_dtypes(dtype, fa, fo):
    a, b, x = A57.astype(dtype), B57.astype(dtype), X7.astype(dtype)
    ta, tb = make(a, fa), make(b, "csr")
    assert ta.dtype == dtype
    for expr, expected, ops in [
        ("C(i,j) = A(i,j) + B(i,j)", a + b, {"A": ta, "B": tb}),
        ("C(i,j) = A(i,j) * B(i,j)", a * b, {"A": ta, "B": tb}),
    ]:
        result = run(expr, fo, expected, **ops)
        if result is not None:
            assert result.dtype == dtype
    y = run("y(i) = A(i,j) * x(j)", "dense", a @ x, A=ta, x=make(x, "dense"))
    assert y.dtype == dtype


BOOL_A = A57 > 0
BOOL_B = B57 > 0


@pytest.mark.parametrize("fo", ["dense", "csr", "coo"])
@pytest.mark.parametrize("fa,fb", [("csr", "csr"), ("coo", "dense"), ("dense", "dense"),
                                   ("dcsr", "csr"), ("hash", "dense"), ("csc", "csc")])
def test_bool(fa, fb, fo):
    ta, tb = make(BOOL_A, fa), make(BOOL_B, fb)
    assert ta.dtype == np.bool_
    r = run("C(i,j) = A(i,j) + B(i,j)", fo, BOOL_A + BOOL_B, A=ta, B=tb)
    if r is not None:
        assert r.dtype == np.bool_
    r = run("C(i,j) = A(i,j) * B(i,j)", fo, BOOL_A * BOOL_B, A=ta, B=tb)
    if r is not None:
        assert r.dtype == np.bool_


# ---------------------------------------------------------------------------------------
# property-based
# ---------------------------------------------------------------------------------------
PROP_FORMATS = ["dense", "csr", "coo", "dcsr", "csc"]


@st.composite
def matrix_case(draw):
    m = draw(st.integers(0, 12))
    n = draw(st.integers(0, 12))
    density = draw(st.floats(0.0, 1.0))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    a = (rng.integers(-9, 10, (m, n)) * (rng.random((m, n)) < density)).astype(float)
    b = (rng.integers(-9, 10, (m, n)) * (rng.random((m, n)) < density)).astype(float)
    x = rng.integers(-9, 10, n).astype(float)
    return a, b, x


@settings(max_examples=25, deadline=None)
@given(case=matrix_case(), fa=st.sampled_from(PROP_FORMATS + ["dia", "ell", "ell-rows"]),
       fb=st.sampled_from(PROP_FORMATS), fo=st.sampled_from(["dense", "csr", "coo"]))
def test_property_spmv_spadd_hadamard(case, fa, fb, fo):
    a, b, x = case
    ta, tb = make(a, fa), make(b, fb)
    run("y(i) = A(i,j) * x(j)", "dense", a @ x, A=ta, x=x)
    run("C(i,j) = A(i,j) + B(i,j)", fo, a + b, A=ta, B=tb)
    run("C(i,j) = A(i,j) * B(i,j)", fo, a * b, A=ta, B=tb)


# ---------------------------------------------------------------------------------------
# sparse-output structure, compared with scipy
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("fa,fb", [("csr", "csr"), ("coo", "csr"), ("dcsr", "dcsr")])
def test_csr_output_matches_scipy(fa, fb):
    operands = {"A": make(A57, fa), "B": make(B57, fb)}
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", out_format="csr", A=fa, B=fb)
    expected = (sp.csr_matrix(A57) + sp.csr_matrix(B57)).tocsr()
    expected.sort_indices()
    for r in every_call(kernel, operands):
        pos, crd = r.level_arrays[1]["pos"], r.level_arrays[1]["crd"]
        np.testing.assert_array_equal(pos, expected.indptr)
        np.testing.assert_array_equal(crd[:pos[-1]], expected.indices)
        np.testing.assert_array_equal(r.values[:pos[-1]], expected.data)
    # CSR x CSR -> CSR (linear combination of rows) goes through a workspace.
    spmm = run("C(i,j) = A(i,k) * B(k,j)", "csr", A57 @ B74,
               A=make(A57, "csr"), B=make(B74, "csr"))
    assert spmm is not None
    np.testing.assert_array_equal(spmm.to_scipy().toarray(),
                                  (sp.csr_matrix(A57) @ sp.csr_matrix(B74)).toarray())


def test_pydata_style_arrays_round_trip():
    """Anything shaped like pydata/sparse's COO (coords, data, shape) packs into any format."""
    from types import SimpleNamespace

    rng = np.random.default_rng(5)
    dense = rng.random((3, 4, 5))
    dense[dense < 0.6] = 0
    coords = np.array(np.nonzero(dense))
    like = SimpleNamespace(coords=coords, data=dense[tuple(coords)], shape=dense.shape)
    for fmt in ("coo", "csf", "dense", "hash"):
        np.testing.assert_array_equal(ls.Tensor.from_pydata(like, format=fmt).to_numpy(),
                                      dense)
