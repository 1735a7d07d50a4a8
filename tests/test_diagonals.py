"""Diagonal uses, ``A(i,i)``, on every format: levels that cannot look the repeated index
up read a hidden diagonal pattern instead (diagonals.py); results must equal numpy's."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llvsparse as ls

FORMATS = ["dense", "csr", "csc", "coo", "dcsr", "dcsc", "hash", "dia", "ell", "bcsr2x2"]
N = 6

# Statement, and its numpy reference on a dense A (N x N), B (N x 3) and x (N).
STATEMENTS = {
    "y(i) = A(i,i)": lambda A, B, x: np.diag(A),
    "a = A(i,i)": lambda A, B, x: np.trace(A),
    "C(i,j) = A(i,i) * B(i,j)": lambda A, B, x: np.diag(A)[:, None] * B,
    "y(i) = A(i,i) + A(i,j) * x(j)": lambda A, B, x: np.diag(A) + A @ x,
    "y(i) = A(i,j) * x(j) - A(i,i) * x(i)": lambda A, B, x: A @ x - np.diag(A) * x,
    "a = A(i,i) * A(i,i)": lambda A, B, x: np.sum(np.diag(A) ** 2),
    "y(i) = A(i,i) * A(j,j) * x(j)": lambda A, B, x: np.diag(A) * (np.diag(A) @ x),
}


@pytest.mark.slow
@settings(max_examples=70, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(statement=st.sampled_from(sorted(STATEMENTS)), fmt=st.sampled_from(FORMATS),
       density=st.sampled_from([0.0, 0.3, 1.0]), seed=st.integers(0, 3))
def test_diagonal_use_matches_numpy(statement, fmt, density, seed):
    rng = np.random.default_rng(seed)
    dense = (rng.integers(-4, 5, (N, N)) * (rng.random((N, N)) < density)).astype(float)
    B = rng.integers(-3, 4, (N, 3)).astype(float)
    x = rng.integers(-3, 4, N).astype(float)
    A = ls.Tensor.from_numpy(dense, format=fmt)
    kernel = ls.compile(statement, A=fmt)
    operands = {"A": A, "B": B, "x": x}
    used = {n: t for n, t in operands.items() if f"{n}(" in statement}
    for _ in range(2):  # the second call reuses the binding and its pattern
        result = np.asarray(kernel(**used).to_numpy())
        np.testing.assert_array_equal(result, STATEMENTS[statement](dense, B, x),
                                      err_msg=f"{statement} with A in {fmt}")


@pytest.mark.parametrize("fmt", ["csr", "coo", "dia"])
def test_only_the_stored_diagonal_counts(fmt):
    """The pattern's implicit zeros annihilate: inf and NaN off the diagonal of a sparse
    A do not reach its trace (a dense A reads A(i,i) directly, also without them)."""
    dense = np.array([[1.0, np.inf, 0], [np.nan, 2.0, 0], [0, 0, 0]])
    A = ls.Tensor.from_numpy(dense, format=fmt)
    kernel = ls.compile("a = A(i,i)", A=fmt)
    assert kernel(A=A).to_numpy() == 3.0
    assert list(kernel.patterns.values()) == ["i"]


def test_a_dense_or_hashed_operand_looks_the_diagonal_up():
    for fmt in ("dense", "hash"):
        assert ls.compile("y(i) = A(i,i)", A=fmt).patterns == {}


def test_integer_and_bool_diagonals_keep_their_dtype():
    ints = np.array([[3, 1], [0, -2]], dtype=np.int32)
    result = ls.compile("y(i) = A(i,i)", A="csr")(A=ls.Tensor.from_numpy(ints, format="csr"))
    assert result.dtype == np.int32 and result.to_numpy().tolist() == [3, -2]
    flags = np.array([[True, True], [False, False]])
    result = ls.compile("y(i) = A(i,i)", A="csr")(A=ls.Tensor.from_numpy(flags, format="csr"))
    assert result.dtype == np.bool_ and result.to_numpy().tolist() == [True, False]


def test_order_3_diagonals():
    rng = np.random.default_rng(4)
    dense = (rng.random((4, 4, 5)) < 0.4) * rng.standard_normal((4, 4, 5))
    x = rng.standard_normal(5)
    for fmt in ("csf", "coo"):
        T = ls.Tensor.from_numpy(dense, format=fmt)
        got = ls.compile("y(i) = T(i,i,k) * x(k)", T=fmt)(T=T, x=x).to_numpy()
        np.testing.assert_allclose(got, np.einsum("iik,k->i", dense, x), rtol=1e-13)
    cube = (rng.random((4, 4, 4)) < 0.5) * rng.standard_normal((4, 4, 4))
    T = ls.Tensor.from_numpy(cube, format="csf")
    got = ls.compile("a = T(i,i,i)", T="csf")(T=T).to_numpy()
    np.testing.assert_allclose(got, np.einsum("iii->", cube), rtol=1e-13)


def test_a_non_square_diagonal_is_a_shape_error():
    A = ls.Tensor.from_numpy(np.ones((3, 4)), format="csr")
    with pytest.raises(ls.ShapeError, match="index i"):
        ls.compile("y(i) = A(i,i)", A="csr")(A=A)


def test_exported_header_describes_the_pattern(tmp_path):
    _, header = ls.compile("y(i) = A(i,i)", A="csr").export(tmp_path / "k.o")
    assert "diagonal__1 (the diagonal pattern over index i" in header.read_text()


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "dcsr"])
def test_a_diagonal_the_operand_does_not_store_annihilates_a_nan_factor(fmt):
    """A(j,j) reads sum_d A(j,d) * E(j,d); that sum joins the product's loops, as a
    storage-only level's does, so where A stores no (j, j) the product is 0 even
    against 0/0 = NaN (README's rule for entries not stored). Once the sum was
    computed as a finished value first, which gave NaN there."""
    dense = np.array([[0, 1, 0, 0], [2, 0, 0, 3], [0, 0, 0, 4], [5, 0, 6, 7]], np.int32)
    A = ls.Tensor.from_numpy(dense, format=fmt)
    kernel = ls.compile("Z(i,j) = (A(i,j) / A(j,i)) * A(j,j)", A=fmt)
    stored_diagonal = np.diag(dense) != 0
    with np.errstate(all="ignore"):
        expected = np.where(stored_diagonal[None, :],
                            dense / dense.T * np.diag(dense)[None, :], 0.0)
    for _ in range(3):
        np.testing.assert_array_equal(kernel(A=A).to_numpy(), expected)


@pytest.mark.parametrize("fmt", ["csr", "coo", "dcsr", "csc"])
@pytest.mark.parametrize("fill", [2.0, np.nan, np.inf])
def test_a_diagonal_use_reads_the_fill_where_nothing_is_stored(fmt, fill):
    """A(i,i) of a tensor with fill 2 read the unstored diagonal entries as 0 (the
    hidden pattern held only the stored diagonal coordinates; soak 3100:12)."""
    dense = np.array([[fill, 1.0, 5.0], [fill, 3.0, fill], [4.0, fill, fill]])
    tensor = ls.Tensor.from_numpy(dense, fmt, fill=fill)
    for text, expected in [("y(i) = A(i,i)", np.diag(dense)),
                           ("C(i,j) = A(i,j) * A(j,j)", dense * np.diag(dense)[None, :]),
                           ("s = A(i,i)", np.trace(dense))]:
        got = ls.evaluate(text, A=tensor).to_numpy()
        np.testing.assert_allclose(got, expected, equal_nan=True, err_msg=f"{text} {fmt}")
