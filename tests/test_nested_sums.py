"""Sums placed inside explicit sums (issue 37): a sum's temporary and the temporaries
of the loops inside it are distinct, whatever case of a merge fills them.

``Y = B(j) + sum_k(A(l,i,k) + 1)`` sums l and i around A alone (an index is summed at
the innermost term that holds all its uses), so the result is sum(B) + sum(A) + K. With
A's storage starting at k, the merge over k has a case where A stores nothing; that case
named its inner sum's temporary as the outer one and cleared it (6 for 7 on a 1x1x1 A).
"""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls

NAMED = ("csf", "coo", "dense", "hash")
LEVELS = (("compressed",) * 3, ("dense", "compressed", "compressed"))
FORMATS = [*NAMED, *(ls.Format(list(levels), modes=modes) for levels in LEVELS
                     for modes in [(0, 1, 2), (2, 0, 1), (1, 0, 2)])]


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_a_sum_inside_an_explicit_sum(fmt) -> None:
    rng = np.random.default_rng(7)
    b = ls.Tensor.from_numpy(np.array([5.0, -2.0]))
    for shape in [(1, 1, 1), (2, 3, 4), (3, 1, 2)]:
        a = (rng.random(shape) < 0.4) * rng.random(shape)
        tensor = ls.Tensor.from_numpy(a, fmt)
        for text, expected in [
            ("Y = B(j) + sum_k(A(l,i,k) + 1)", b.to_numpy().sum() + a.sum() + shape[2]),
            ("Y = sum_j(B(j)) + sum_k(sum_l(sum_i(A(l,i,k))) + 1)",
             b.to_numpy().sum() + a.sum() + shape[2]),
            ("Y = sum_k(2 * sum_l(sum_i(A(l,i,k))) + 1) + B(j)",
             2 * a.sum() + shape[2] + b.to_numpy().sum()),
        ]:
            result = ls.evaluate(text, A=tensor, B=b).to_numpy()
            np.testing.assert_allclose(result, expected, rtol=1e-12,
                                       err_msg=f"{text} with A {fmt} {shape}")


def test_a_diagonal_beside_a_reordered_tensor() -> None:
    """``3 + (B(j,k) + A(j,i,l))`` with B in DIA and A stored in mode order (1, 0, 2)
    raised an InternalCompilerError (two temporaries named t1)."""
    rng = np.random.default_rng(3)
    for n, m, p in [(3, 2, 4), (1, 1, 1), (4, 2, 1)]:
        b = np.diag(rng.random(n)) + (np.diag(rng.random(n - 1), 1) if n > 1 else 0)
        a = (rng.random((n, m, p)) < 0.5) * rng.random((n, m, p))
        tensors = {"B": ls.Tensor.from_numpy(b, "dia"),
                   "A": ls.Tensor.from_numpy(a, ls.Format(["compressed"] * 3,
                                                          modes=(1, 0, 2)))}
        result = ls.evaluate("Y = 3 + (B(j,k) + A(j,i,l))", **tensors).to_numpy()
        np.testing.assert_allclose(result, 3 + b.sum() + a.sum(), rtol=1e-12)
