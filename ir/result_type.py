"""The value dtype of an expression's result, following numpy's promotion rules."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from llvsparse import notation as nt


def result_dtype(assignment: nt.Assignment, dtypes: dict[str, str]) -> str:
    """The output's dtype for these operand dtypes, as numpy would give it (a float for
    integer operands of /, exp, log, sqrt and pow); bool
    subtraction and integer literals outside the result's range are refused, as numpy
    refuses them."""
    inputs = [np.dtype(dtypes[t]) for t in assignment.tensors() if t != assignment.lhs.tensor]
    literals = [lit.value for lit in _literals(assignment.rhs)]
    result = np.result_type(*inputs, *literals) if inputs or literals else np.dtype("float64")
    if result.kind in "biu" and any(isinstance(e, nt.Call | nt.Reduction) and e.op.float_result
                                    for e in nt.subexpressions(assignment.rhs)):
        result = np.dtype("float64")
    if result.kind == "b" and _has_op(assignment.rhs, ("sub", "neg")):
        raise TypeError("subtraction and negation of bool tensors are refused, as numpy "
                        "refuses them (their value would depend on how the expression is "
                        "split); give an operand an integer dtype")
    if result.kind == "u":
        result = np.dtype("int64")
    if result.kind == "i":
        limits = np.iinfo(result)
        for value in literals:
            if not isinstance(value, bool) and isinstance(value, int) \
                    and not limits.min <= value <= limits.max:
                raise OverflowError(f"the literal {value} does not fit the result dtype "
                                    f"{result} (numpy refuses it too); write it as a float "
                                    "or give an operand a wider dtype")
    return str(result)


def _literals(expr: nt.Expr) -> Iterator[nt.Literal]:
    if isinstance(expr, nt.Literal):
        yield expr
    for child in nt.children(expr):
        yield from _literals(child)


def _has_op(expr: nt.Expr, kinds: tuple[str, ...]) -> bool:
    return any(isinstance(e, nt.Call) and e.op.kind in kinds for e in nt.subexpressions(expr))
