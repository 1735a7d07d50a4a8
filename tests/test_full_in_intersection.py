"""A dense operand inside an intersection that is then unioned (A*x + z, A.*B + D).

Lattice pruning may drop a point that lacks a full iterator only where that point's case
is impossible: {A} in A + B with B dense ("B absent"), but not {z} in A*x + z with x
dense, which stands for "A*x absent" and happens wherever A is. Dropping it once made
these kernels skip every coordinate that only the unioned operand holds."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls


def _sparse(rows: int, cols: int, density: float, seed: int) -> sp.csr_matrix:
    matrix = sp.random(rows, cols, density=density, random_state=seed, format="csr")
    matrix.data = np.random.default_rng(seed).standard_normal(matrix.nnz)
    return matrix


PATTERNS = [(0.3, 0.3), (0.0, 0.4), (0.4, 0.0), (1.0, 0.1), (0.0, 0.0)]


@pytest.mark.parametrize("density_a, density_d", PATTERNS)
@pytest.mark.parametrize("out_format", ["dense", "csr"])
def test_masked_dense_plus_sparse(density_a: float, density_d: float, out_format: str):
    A, D = _sparse(17, 23, density_a, 1), _sparse(17, 23, density_d, 2)
    B = np.random.default_rng(3).standard_normal((17, 23))
    kernel = ls.compile("C(i,j) = A(i,j) * B(i,j) + D(i,j)", A="csr", B="dense", D="csr",
                        out_format=out_format)
    result = kernel(A=ls.Tensor.from_scipy(A, "csr"), B=ls.Tensor.from_numpy(B, "dense"),
                    D=ls.Tensor.from_scipy(D, "csr")).to_numpy()
    np.testing.assert_allclose(result, A.toarray() * B + D.toarray(), rtol=1e-13, atol=0)


@pytest.mark.parametrize("density_a, _", PATTERNS)
@pytest.mark.parametrize("fmt", ["csr", "dcsr"])
def test_spmv_plus_a_dense_vector_summed(density_a: float, _, fmt: str):
    A = _sparse(19, 29, density_a, 4)
    rng = np.random.default_rng(5)
    x, z = rng.standard_normal(29), rng.standard_normal(29)
    kernel = ls.compile("y(i) = A(i,j) * x(j) + z(j)", A=fmt)
    kernel.instance()
    assert "pairs.body" not in kernel.llvm_ir  # two lattice points: not a row-wise sum
    result = kernel(A=ls.Tensor.from_scipy(A, fmt), x=x, z=z).to_numpy()
    np.testing.assert_allclose(result, A @ x + z.sum(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("density_a, density_d", PATTERNS)
def test_two_masked_dense_operands(density_a: float, density_d: float):
    A, D = _sparse(13, 11, density_a, 6), _sparse(13, 11, density_d, 7)
    rng = np.random.default_rng(8)
    B, E = rng.standard_normal((13, 11)), rng.standard_normal((13, 11))
    kernel = ls.compile("C(i,j) = A(i,j) * B(i,j) + D(i,j) * E(i,j)", A="csr", B="dense",
                        D="csr", E="dense")
    result = kernel(A=ls.Tensor.from_scipy(A, "csr"), B=ls.Tensor.from_numpy(B, "dense"),
                    D=ls.Tensor.from_scipy(D, "csr"), E=ls.Tensor.from_numpy(E, "dense"))
    np.testing.assert_allclose(result.to_numpy(), A.toarray() * B + D.toarray() * E,
                               rtol=1e-13, atol=0)


def test_sum_of_two_spmvs_sharing_x():
    A, B = _sparse(30, 40, 0.2, 9), _sparse(30, 40, 0.2, 10)
    x = np.random.default_rng(11).standard_normal(40)
    kernel = ls.compile("y(i) = B(i,j) * x(j) + A(i,j) * x(j)", A="csr", B="csr")
    result = kernel(A=ls.Tensor.from_scipy(A, "csr"), B=ls.Tensor.from_scipy(B, "csr"), x=x)
    np.testing.assert_allclose(result.to_numpy(), (A + B) @ x, rtol=1e-12, atol=1e-12)


def test_dense_operand_in_a_plain_union_still_prunes():
    """A + B with B dense: {A} is impossible and stays pruned (one loop, B iterated)."""
    A = _sparse(9, 12, 0.3, 12)
    B = np.random.default_rng(13).standard_normal((9, 12))
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", A="csr", B="dense")
    j_lattice = [line for line in kernel.lattices.splitlines() if line.startswith("j:")]
    assert j_lattice and ">" in j_lattice[0].split("over")[0]  # {A, B} > {B}
    assert "{A.1}" not in kernel.lattices
    result = kernel(A=ls.Tensor.from_scipy(A, "csr"), B=ls.Tensor.from_numpy(B, "dense"))
    np.testing.assert_allclose(result.to_numpy(), A.toarray() + B, rtol=1e-15, atol=0)
