"""Passes before the loop IR (ir/notation/aliases.py, diagonals.py): each says by its
return value whether it applies, and the API builds what they chose."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from llvsparse.backends.llvm.codegen import emit_kernel
from llvsparse.ir.notation.aliases import separate_repeated_uses
from llvsparse.ir.notation.diagonals import DiagonalUse, separate_diagonals
from llvsparse.ir.plan.lowering import Lowered, Refused, Request, lower_converting, lower_kernel

import llvsparse as ls

TRANSPOSED = "y(i) = A(i,j) * x(j) + B(j,i) * x(j)"


def _types(**formats: tuple[str, int]):
    return {n: ls.named_format(f, order).tensor_type("float64", "int32")
            for n, (f, order) in formats.items()}


def _coo_types(types, orders):
    retyped = dict(types)
    for name, modes in orders.items():
        retyped[name] = ls.named_format("coo", len(modes), modes).tensor_type("float64",
                                                                              "int32")
    return retyped


def test_a_conflict_of_storage_orders_is_refused_by_value() -> None:
    types = _types(y=("dense", 1), A=("csr", 2), B=("csr", 2), x=("dense", 1))
    request = Request(ls.parse(TRANSPOSED), list(types), "float64", False, emit=emit_kernel)
    refused = lower_kernel(request, types)
    assert isinstance(refused, Refused)
    assert "storage orders of the operands conflict" in str(refused.error)


def test_conversion_picks_the_first_candidate_that_lowers() -> None:
    types = _types(y=("dense", 1), A=("csr", 2), B=("csr", 2), x=("dense", 1))
    request = Request(ls.parse(TRANSPOSED), list(types), "float64", False, emit=emit_kernel)
    lowered = lower_converting(request, types, (), lambda n, modes: False,
                               lambda orders: _coo_types(types, orders))
    assert isinstance(lowered, Lowered)
    assert lowered.conversions == {"B": (1, 0)}
    assert lowered.types["B"] == _coo_types(types, {"B": (1, 0)})["B"]
    # and the kernel the API builds from that choice computes the product
    a = sp.random(6, 6, density=0.4, format="csr", random_state=1)
    b = sp.random(6, 6, density=0.4, format="csr", random_state=2)
    x = np.linspace(-1, 1, 6)
    kernel = ls.compile(TRANSPOSED, A="csr", B="csr")
    np.testing.assert_allclose(kernel(A=a, B=b, x=x).to_numpy(), a @ x + b.T @ x)


def test_no_candidate_lowers_leaves_the_first_refusal() -> None:
    types = _types(y=("dense", 1), A=("csr", 2), B=("csr", 2), x=("dense", 1))
    request = Request(ls.parse(TRANSPOSED), list(types), "float64", False, emit=emit_kernel)
    tried: list[dict] = []

    def unusable(orders):
        tried.append(orders)
        return types  # as stored again: every candidate is refused too

    result = lower_converting(request, types, (), lambda n, modes: False, unusable)
    assert isinstance(result, Refused) and tried
    assert "storage orders of the operands conflict" in str(result.error)


def test_repeated_uses_become_operands_of_their_own() -> None:
    renamed, aliases = separate_repeated_uses(ls.parse("y(i) = A(i,j) * A(j,i) * x(j)"))
    assert str(renamed) == "y(i) = sum_j(A(i,j) * A__1(j,i) * x(j))"
    assert aliases == {"A__1": "A"}
    same, none = separate_repeated_uses(ls.parse("y(i) = A(i,j) * x(j)"))
    assert none == {} and str(same) == "y(i) = sum_j(A(i,j) * x(j))"


def test_a_diagonal_use_reads_a_pattern_only_where_a_level_cannot_locate() -> None:
    trace = ls.parse("s = A(i,i)")
    formats = {"s": ls.named_format("dense", 0), "A": ls.named_format("csr", 2)}
    rewritten, patterns = separate_diagonals(trace, formats)
    ((name, use),) = patterns.items()
    assert use == DiagonalUse("i", "A", (0, 1))
    assert f"{name}(i," in str(rewritten) and "A(i,i)" not in str(rewritten)
    dense = {"s": ls.named_format("dense", 0), "A": ls.named_format("dense", 2)}
    assert separate_diagonals(trace, dense) == (trace, {})
