"""Threaded kernels: the outermost loop split over rows gives the serial result bit for
bit (no reduction is reordered), for every kernel whose output rows do not race."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
import llvsparse.api


def _matrix(rows: int, cols: int, per_row: int, seed: int):
    rng = np.random.default_rng(seed)
    nnz = rows * per_row
    return sp.csr_matrix((rng.random(nnz), (rng.integers(0, rows, nnz),
                                            rng.integers(0, cols, nnz))), shape=(rows, cols))


CASES = [
    ("y(i) = A(i,j) * x(j)", {"A": "csr"}, lambda A, rng: {"x": rng.random(A.shape[1])}),
    ("C(i,j) = A(i,k) * B(k,j)", {"A": "csr"},
     lambda A, rng: {"B": rng.random((A.shape[1], 8))}),
    ("C(i,j) = A(i,j) * B(i,k) * D(j,k)", {"A": "csr"},
     lambda A, rng: {"B": rng.random((A.shape[0], 4)), "D": rng.random((A.shape[1], 4))}),
    ("C(i,j) = A(i,j) * B(i,j)", {"A": "csr"},
     lambda A, rng: {"B": rng.random(A.shape)}),
    ("y(i) = A(i,j) * x(j)", {"A": "dia"}, lambda A, rng: {"x": rng.random(A.shape[1])}),
    ("y(i) = A(i,j) * x(j)", {"A": "coo"}, lambda A, rng: {"x": rng.random(A.shape[1])}),
    ("C(i,j) = A(i,k) * B(k,j)", {"A": "dcsr"},
     lambda A, rng: {"B": rng.random((A.shape[1], 8))}),
]


@pytest.fixture(autouse=True)
def _threads_for_small_inputs(monkeypatch):
    """Exercise the threaded path on test-sized inputs."""
    monkeypatch.setattr(ls.api, "PARALLEL_MIN_WORK", 1000)


@pytest.mark.parametrize(("expr", "formats", "make"), CASES)
def test_threads_match_serial_bit_for_bit(expr, formats, make):
    rng = np.random.default_rng(3)
    matrix = _matrix(3000, 2500, 12, 7)
    if formats["A"] == "dia":
        offsets = (-9, -4, -2, 0, 1, 3, 5, 8)
        matrix = sp.diags([rng.random(3000 - abs(k)) for k in offsets], offsets,
                          shape=(3000, 3000)).tocsr()
    assert matrix.nnz >= ls.api.PARALLEL_MIN_WORK
    operands = {"A": ls.Tensor.from_scipy(matrix, format=formats["A"]), **make(matrix, rng)}
    kernel = ls.compile(expr, **{n: f for n, f in formats.items()})
    serial = kernel(threads=1, **operands).to_numpy()
    threaded = kernel(threads=2, **operands).to_numpy()
    np.testing.assert_array_equal(serial, threaded)
    dense = {n: (v.to_numpy() if isinstance(v, ls.Tensor) else v) for n, v in operands.items()}
    subscripts = {"y(i) = A(i,j) * x(j)": "ij,j->i", "C(i,j) = A(i,k) * B(k,j)": "ik,kj->ij",
                  "C(i,j) = A(i,j) * B(i,k) * D(j,k)": "ij,ik,jk->ij",
                  "C(i,j) = A(i,j) * B(i,j)": "ij,ij->ij"}[expr]
    names = [n for n in ("A", "B", "D", "x") if n in dense]
    np.testing.assert_allclose(threaded, np.einsum(subscripts, *[dense[n] for n in names]))
    assert kernel.last.parallel_mode == (None if formats["A"] == "dia" else 0)


SPARSE_OUTPUT_CASES = [
    # expression, operand formats, output format, assembled by threads? (only kernels
    # with dense loops inside the output's indices: their count pass is much cheaper)
    ("C(i,j) = A(i,j) * U(i,k) * V(j,k)", {"A": "csr"}, "csr", True),
    ("C(i,j) = (A(i,j) + B(i,j)) * U(i,k) * V(j,k)", {"A": "csr", "B": "csr"}, "csr", True),
    ("C(i,j) = A(i,j) * B(i,j) * U(i,k) * V(j,k)", {"A": "csr", "B": "csr"}, "csr", True),
    ("C(i,j) = A(i,j) + B(i,j)", {"A": "csr", "B": "csr"}, "csr", False),
    ("C(i,j) = A(i,j) * B(i,j)", {"A": "csr", "B": "csr"}, "csr", False),
    ("C(i,j) = A(i,j) - B(i,j)", {"A": "csr", "B": "csr"}, "dcsr", False),
    ("C(i,j) = A(i,j) + B(i,j)", {"A": "csr", "B": "csr"}, "coo", False),
]


def _arrays(tensor: ls.Tensor) -> list[np.ndarray]:
    return [a for level in tensor.level_arrays for a in level.values()] + [tensor.values]


@pytest.mark.parametrize(("expr", "formats", "out", "split"), SPARSE_OUTPUT_CASES)
def test_sparse_outputs_assembled_by_threads_match_serial(expr, formats, out, split):
    rng = np.random.default_rng(5)
    a, b = _matrix(3000, 2500, 12, 1), _matrix(3000, 2500, 12, 2)
    a = sp.diags((np.arange(3000) // 400 != 2).astype(float)) @ a  # rows 800-1199 empty
    a.eliminate_zeros()
    operands = {"A": ls.Tensor.from_scipy(a, "csr"), "B": ls.Tensor.from_scipy(b, "csr"),
                "U": rng.random((3000, 4)), "V": rng.random((2500, 4))}
    operands = {n: v for n, v in operands.items() if f"{n}(" in expr}
    kernel = ls.compile(expr, out_format=out, **formats)
    serial, threaded = kernel(threads=1, **operands), kernel(threads=2, **operands)
    assert bool(kernel.last.jit.assembly) == split
    for one, two in zip(_arrays(serial), _arrays(threaded), strict=True):
        np.testing.assert_array_equal(one, two)
    A, B = a.toarray(), b.toarray()
    UV = operands["U"] @ operands["V"].T if "U" in operands else None
    reference = {"C(i,j) = A(i,j) * U(i,k) * V(j,k)": lambda: A * UV,
                 "C(i,j) = (A(i,j) + B(i,j)) * U(i,k) * V(j,k)": lambda: (A + B) * UV,
                 "C(i,j) = A(i,j) * B(i,j) * U(i,k) * V(j,k)": lambda: A * B * UV,
                 "C(i,j) = A(i,j) + B(i,j)": lambda: A + B,
                 "C(i,j) = A(i,j) * B(i,j)": lambda: A * B,
                 "C(i,j) = A(i,j) - B(i,j)": lambda: A - B}[expr]()
    np.testing.assert_allclose(threaded.to_numpy(), reference, rtol=1e-12)


def test_ttv_into_csr_with_threads_matches_serial():
    rng = np.random.default_rng(6)
    coords = rng.integers(0, [400, 300, 200], size=(20000, 3)).T
    dense = np.zeros((400, 300, 200))
    np.add.at(dense, tuple(coords), rng.random(coords.shape[1]))
    c = rng.random(200)
    B = ls.Tensor.from_numpy(dense, "csf")
    kernel = ls.compile("A(i,j) = B(i,j,k) * c(k)", out_format="csr", B="csf")
    serial, threaded = kernel(threads=1, B=B, c=c), kernel(threads=2, B=B, c=c)
    assert not kernel.last.jit.assembly  # counting would walk every fiber again
    for one, two in zip(_arrays(serial), _arrays(threaded), strict=True):
        np.testing.assert_array_equal(one, two)
    np.testing.assert_allclose(threaded.to_numpy(), np.einsum("ijk,k->ij", dense, c))


def test_set_num_threads_validates():
    before = ls.get_num_threads()
    with pytest.raises(ValueError):
        ls.set_num_threads(0)
    ls.set_num_threads(2)
    assert ls.get_num_threads() == 2
    ls.set_num_threads(before)
