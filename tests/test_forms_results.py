"""Kernels in each fast form the passes choose (ir/opt/passes.py), in the kernel's first
form and in its other form (the program ``passes.other_form`` rewrites), against numpy
on random operands and edge cases: empty rows, an empty operand, one long row among
short ones, two operands with the same pattern (the lockstep test's equal ranges)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls


def _operands(seed: int) -> list[tuple[sp.csr_matrix, sp.csr_matrix]]:
    rng = np.random.default_rng(seed)

    def rand(rows: int, cols: int, density: float) -> sp.csr_matrix:
        m = sp.random(rows, cols, density=density, format="csr", random_state=rng,
                      data_rvs=lambda n: rng.integers(1, 9, n).astype(float))
        m = m.tolil()
        m[rows // 2, :] = 0  # an empty row
        return m.tocsr()

    a, b = rand(40, 40, 0.15), rand(40, 40, 0.15)
    skewed = a.tolil()
    skewed[3, :] = rng.integers(1, 9, 40)  # one full row against short ones
    empty = sp.csr_matrix((40, 40))
    return [(a, b), (skewed.tocsr(), b), (a, a.copy()), (empty, b), (a, empty)]


# (the form as --emit loops prints it, statement, formats, output format, reference)
FORMS = [
    ("other form: pairs of acc over A.1", "y(i) = A(i,j) * x(j)", {"A": "csr"}, None,
     lambda a, b, x: a @ x),
    (("gallop when skewed 8x, lockstep when equal, advance per case, reserve appends; other "
     "form: gallop always"),
     "C(i,j) = A(i,j) * B(i,j)", {"A": "csr", "B": "csr"}, "csr",
     lambda a, b, x: a.multiply(b).toarray()),
    ("running sums of acc, unroll 8", "y(i) = A(i,j) * x(j)", {"A": "coo"}, None, lambda a, b, x: a @ x),
    ("advance per case; other form: select cases", "C(i,j) = A(i,j) + B(i,j)", {"A": "csr", "B": "csr"},
     "dense", lambda a, b, x: (a + b).toarray()),
    ("clear rows", "C(i,k) = A(i,j) * D(j,k)", {"A": "csr", "D": "dense"}, "dense",
     lambda a, b, x: a @ b.toarray()),
    ("other form: prefetch B.1 rows 4 ahead", "C(i,k) = A(i,j) * B(j,k)", {"A": "csr", "B": "csr"},
     "csr", lambda a, b, x: (a @ b).toarray()),
]


@pytest.mark.parametrize("shown, statement, formats, out, reference", FORMS,
                         ids=[f[0] for f in FORMS])
def test_each_form_in_both_forms_matches_numpy(shown, statement, formats, out, reference,
                                               monkeypatch) -> None:
    kernel = ls.compile(statement, out_format=out, **formats)
    assert f"[{shown}]" in kernel.loops  # the kernel has the form it is tested in
    forms = ("first", "other") if "other form" in shown else ("first",)
    x = np.random.default_rng(5).random(40)
    for seed in (1, 2):
        for a, b in _operands(seed):
            arrays = {"A": a, "B": b, "D": b.toarray(), "x": x}
            operands = {n: ls.Tensor.from_scipy(arrays[n], f) if f != "dense" else arrays[n]
                        for n, f in {**formats, "x": "dense"}.items() if n in statement}
            for form in forms:  # a binding reads FORCED when it is made
                monkeypatch.setitem(ls.calls.probe.FORCED, "form", form)
                call = kernel.bind(**operands)
                assert call.way.form == form
                got = call().to_numpy()
                np.testing.assert_allclose(got, reference(a, b, x), rtol=1e-13, atol=0)
