"""What the backend cannot emit is refused by value before it is asked (ir/loops/legality.py):
lowering asks the loop IR, and the emitter is never called for such nests."""

from __future__ import annotations

import pytest
from llvsparse.backends.llvm.codegen import emit_kernel
from llvsparse.ir.concrete.from_notation import to_concrete
from llvsparse.ir.loops.legality import loop_refusal, output_refusal
from llvsparse.ir.opt import loop_ir
from llvsparse.ir.plan.lowering import Lowered, Refused, Request, lower_kernel
from llvsparse.ir.schedule.scheduler import schedule

import llvsparse as ls

SPADD = "C(i,j) = A(i,j) + B(i,j)"


def _types(**formats: tuple[str, int]):
    return {n: ls.named_format(f, order).tensor_type("float64", "int32")
            for n, (f, order) in formats.items()}


def _never_emits(program, abi):
    pytest.fail("the emitter was asked for nests the loop IR already refuses")


def test_an_unordered_level_merged_with_another_is_refused_by_the_loop_ir() -> None:
    types = _types(C=("csr", 2), A=("hash", 2), B=("csr", 2))
    program = loop_ir(schedule(to_concrete(ls.parse(SPADD), types), types), types, "C")
    reason = loop_refusal(program, types["C"], ("i", "j"))
    assert reason == "A: level 1 is unordered and cannot be co-iterated with another operand"
    request = Request(ls.parse(SPADD), list(types), "float64", False, emit=_never_emits)
    refused = lower_kernel(request, types)
    assert isinstance(refused, Refused) and str(refused.error) == reason


def test_an_unordered_level_alone_is_refused_where_the_output_appends_in_order() -> None:
    statement = "C(i,j) = 2 * A(i,j)"
    for out, refused in (("csr", True), ("dense", False)):
        types = _types(C=(out, 2), A=("hash", 2))
        program = loop_ir(schedule(to_concrete(ls.parse(statement), types), types), types,
                          "C")
        reason = loop_refusal(program, types["C"], ("i", "j"))
        assert (reason == "A: level 1 is unordered, but the output appends index j in "
                "order") if refused else reason is None


def test_an_output_format_that_cannot_be_assembled_is_refused_before_emission() -> None:
    types = _types(C=("coo", 2), A=("csr", 2), B=("csr", 2))
    unique_rows = ls.Format(["compressed", "singleton"])
    types["C"] = unique_rows.tensor_type("float64", "int32")
    assert "holds one child per position of level 0" in output_refusal(types["C"])
    request = Request(ls.parse(SPADD), list(types), "float64", False, emit=_never_emits)
    refused = lower_kernel(request, types)
    assert isinstance(refused, Refused)
    assert "holds one child per position of level 0" in str(refused.error)


def test_what_the_loop_ir_allows_is_emitted() -> None:
    types = _types(C=("csr", 2), A=("csr", 2), B=("csr", 2))
    program = loop_ir(schedule(to_concrete(ls.parse(SPADD), types), types), types, "C")
    assert loop_refusal(program, types["C"], ("i", "j")) is None
    assert output_refusal(types["C"]) is None
    request = Request(ls.parse(SPADD), list(types), "float64", False, emit=emit_kernel)
    assert isinstance(lower_kernel(request, types), Lowered)
