"""What a new user hits first (issue 21): inputs from numpy, scipy.sparse and
pydata/sparse, the notation's refusals of Python syntax it does not have, the SpGEMM
refusal, and ``ls.write``'s argument order."""


import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls

S = sp.random(30, 20, density=0.2, format="csr", random_state=2)
X = np.random.default_rng(0).random(20)

SCIPY_FORMATS = ["csr", "csc", "coo", "bsr", "dia", "lil", "dok"]


@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.csr_array])
@pytest.mark.parametrize("fmt", SCIPY_FORMATS)
def test_scipy_inputs_everywhere(kind, fmt):
    """evaluate and einsum raised 'cannot use a csr_matrix as a tensor'."""
    matrix = kind(S).asformat(fmt)
    expected = S @ X
    np.testing.assert_allclose(ls.evaluate("y(i) = A(i,j) * x(j)", A=matrix, x=X).to_numpy(),
                               expected)
    np.testing.assert_allclose(ls.einsum("ij,j->i", matrix, X).to_numpy(), expected)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    np.testing.assert_allclose(kernel(A=matrix, x=X).to_numpy(), expected)
    np.testing.assert_allclose(kernel.bind(A=matrix, x=X)().to_numpy(), expected)
    np.testing.assert_allclose(ls.asarray(matrix).to_scipy().toarray(), S.toarray())


def test_a_scipy_operand_keeps_its_own_format_in_evaluate():
    y = ls.evaluate("C(i,j) = A(i,j) + B(i,j)", out_format="csr", A=S.tocsc(), B=S)
    np.testing.assert_allclose(y.to_numpy(), 2 * S.toarray())
    assert ls.asarray(S.tocsc()).format == ls.named_format("csc", 2)


def test_scipy_sparse_vector():
    vector = sp.coo_array(np.array([0.0, 1.5, 0.0, 2.0]))
    dense = vector.toarray()
    assert ls.evaluate("a = v(i) * w(i)", v=vector, w=dense).to_numpy() == dense @ dense


def test_pydata_sparse_inputs(pydata_sparse):
    """pydata/sparse arrays are recognised by the package's base class, imported only by
    the caller (the pydata_sparse fixture: the package or a stand-in)."""
    sparse = pydata_sparse
    dense = S.toarray()
    array = sparse.COO(dense)
    np.testing.assert_allclose(ls.evaluate("y(i) = A(i,j) * x(j)", A=array, x=X).to_numpy(),
                               dense @ X)
    np.testing.assert_allclose(ls.asarray(sparse.DOK(dense)).to_numpy(), dense)
    np.testing.assert_allclose(ls.einsum("ij,j->i", array, X).to_numpy(), dense @ X)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    np.testing.assert_allclose(kernel(A=array, x=X).to_numpy(), dense @ X)


def test_operator_api_with_numpy_and_scipy_operands():
    """``out[i] = A[i, j] * x[j]`` with x a numpy array raised numpy's IndexError; the
    error now says to wrap it, and ls.asarray does."""
    i, j = ls.index_vars("i j")
    A = ls.asarray(S)
    out = ls.Tensor.from_numpy(np.zeros(30))
    with pytest.raises(TypeError, match=r"ls.asarray\(x\)\[j\]"):
        out[i] = A[i, j] * X[j]
    with pytest.raises(TypeError, match="ls.asarray"):
        S[i, j]
    out[i] = A[i, j] * ls.asarray(X)[j]
    np.testing.assert_allclose(out.to_numpy(), S @ X)
    assert ls.asarray(A) is A
    assert ls.asarray(A, format="csc").format == ls.named_format("csc", 2)


@pytest.mark.parametrize("text, column, message", [
    ("y(i) = f(x(i))", 7, "unknown function 'f'"),
    ("y(i) = 2 * f(-x(i))", 11, "unknown function 'f'"),
    ("y(i) = g(i, x(i))", 7, "unknown function 'g'"),
    ("y(i) = x(i) ** 2", 12, "write pow(x, y)"),
    ("y(i) = x(i) % 2", 12, "the operator % is not supported"),
    ("y(i) = x(i) < 2 < 3", 16, "chained comparisons are not supported"),
    ("y(i) = abs(x(i), x(i))", 7, "abs takes 1 argument, got 2"),
    ("y(i) = sum(x(i), 2)", 7, "sum(j, ...) reduces over an index variable"),
    # Not calls: the existing messages stand.
    ("y(i) = A(i,j * x(j)", 13, "expected ',' or ')'"),
])
def test_python_syntax_the_notation_lacks_is_named(text, column, message):
    with pytest.raises(ls.NotationSyntaxError) as info:
        ls.parse(text)
    assert message in str(info.value)
    assert info.value.column == column


def test_spgemm_into_csr_compiles_and_matches_every_output_format():
    """CSR x CSR into CSR was refused (the output would be scattered, a workspace was
    missing); it runs through a workspace now, and agrees with the formats that take
    entries in any order."""
    A = ls.asarray(S @ S.T)
    expected = (S @ S.T @ S @ S.T).toarray()
    for fmt in ("csr", "dense", "coo-unordered", "hash"):
        C = ls.evaluate("C(i,j) = A(i,k) * B(k,j)", out_format=fmt, A=A, B=A)
        np.testing.assert_allclose(C.asformat("csr").to_numpy(), expected)


@pytest.mark.parametrize("suffix", [".mtx", ".npy", ".tns"])
def test_write_takes_the_path_first_or_second(tmp_path, suffix):
    """ls.write(path, A) failed: the order was (tensor, path), numpy's reversed."""
    A = ls.asarray(S)
    ls.write(tmp_path / f"a{suffix}", A)
    ls.write(A, str(tmp_path / f"b{suffix}"))
    ls.write(str(tmp_path / f"c{suffix}"), S)  # a scipy matrix directly
    for name in "abc":
        back = ls.read(tmp_path / f"{name}{suffix}", shape=S.shape)
        np.testing.assert_allclose(back.to_numpy(), S.toarray())
    with pytest.raises(TypeError, match="file path"):
        ls.write(A, A)


def test_short_reprs_say_what_a_user_needs():
    """repr(kernel.last) printed about 10 KB of IR and descriptors; Kernel had the
    default repr."""
    A = ls.asarray(S @ S.T)
    kernel = ls.compile("y(i) = A(i,j) * A(j,i)", A="csr")
    assert "A='csr'" in repr(kernel) and "y(i) = " in repr(kernel)
    kernel(A=A)
    text = repr(kernel)
    assert "float64" in text and "threads=1" in text and "converts A__1 to coo(1, 0)" in text
    last = repr(kernel.last)
    assert len(last) < 600 and "compressed:1" in last and "converts A__1" in last
    assert "define" not in last  # no IR
    tensor = repr(A)
    assert tensor == (f"<Tensor: shape={A.shape}, dtype=float64, "
                      f"nnz={(S @ S.T).nnz}, format=csr, fill_value=0.0>")
    bound = repr(kernel.bind(A=A))
    assert bound.startswith("<BoundCall forall(i, ") and len(bound) < 400
