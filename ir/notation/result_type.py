"""The value dtypes of an expression: its result's, typed node by node as numpy types
it, and the one its kernel computes in."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator

import numpy as np

from . import syntax as nt
from .operators import NE, Operator

# A node's dtype, or a Python number standing for a literal's weak type (NEP 50: a
# float32 tensor times 2.0 stays float32).
Typed = np.dtype | int | float


def result_dtype(assignment: nt.Assignment, dtypes: dict[str, str]) -> str:
    """The output's dtype, numpy's for the expression: comparisons and logic give bool,
    ``/``, exp, log, sqrt and pow a float for integer operands, ``where`` its branches'
    dtype; bool subtraction and negation are refused, as numpy refuses them."""
    return str(_dtype_of(_typed(assignment.rhs, dtypes)))


def _dtype_of(typed: Typed) -> np.dtype:
    """``typed`` as a dtype: a Python number (an expression of literals only) is int64 or
    float64 by its kind, as numpy types Python numbers, whatever its value (a literal
    too large for int64 is refused as one, not typed uint64 or object)."""
    return np.result_type(type(typed)(0) if isinstance(typed, int | float) else typed)


def compute_dtype(assignment: nt.Assignment, dtypes: dict[str, str]) -> str:
    """The dtype the kernel computes in: every operand and literal promoted together (a
    float where an operator gives one for integers), and at least the result's (a
    comparison of float64 operands is computed in float64, and stored as bool). Integer
    literals outside its range are refused, as numpy refuses them."""
    inputs = [np.dtype(dtypes[t]) for t in assignment.tensors() if t != assignment.lhs.tensor]
    literals = [lit.value for lit in _literals(assignment.rhs)]
    if inputs:
        result = np.result_type(*inputs, *literals)
    else:  # literals alone: int64 or float64, as numpy types Python numbers
        result = np.result_type(*map(_dtype_of, literals)) if literals else np.dtype("float64")
    if result.kind in "biu" and any(isinstance(e, nt.Call | nt.Reduction) and e.op.float_result
                                    for e in nt.subexpressions(assignment.rhs)):
        result = np.dtype("float64")
    result = np.promote_types(result, result_dtype(assignment, dtypes))
    if result.kind == "c":
        raise TypeError(f"kernels on {result} values are not supported (complex values "
                        "are stored and converted, and computed by numpy's functions on "
                        "stored entries, but the compiler has no complex arithmetic)")
    if result == np.dtype("float16"):
        result = np.dtype("float32")  # as numpy computes float16: rounded per result
    if result.kind in "iu":
        limits = np.iinfo(result)
        for value in literals:
            if not isinstance(value, bool) and isinstance(value, int) \
                    and not limits.min <= value <= limits.max:
                raise OverflowError(f"the literal {value} does not fit the result dtype "
                                    f"{result} (numpy refuses it too); write it as a float "
                                    "or give an operand a wider dtype")
    return str(result)


def as_computed(assignment: nt.Assignment, dtypes: dict[str, str]) -> nt.Assignment:
    """``assignment`` as its kernel computes it: a bool node whose operator can leave 0
    and 1 (bool ``+`` is or, but 1 + 1 is 2 in a wider compute dtype) is read as its
    truth (``!= 0``) where a parent uses its value; the assignment itself where none
    is (nearly always)."""
    types = _types(assignment.rhs, dtypes)
    wrapped = {id(e) for e in nt.subexpressions(assignment.rhs)
               if e is not assignment.rhs and isinstance(e, nt.Call | nt.Reduction)
               and types[id(e)] == np.dtype(bool) and not _keeps_truth(e.op)}
    if not wrapped or compute_dtype(assignment, dtypes) == "bool":
        return assignment

    def walk(expr: nt.Expr) -> nt.Expr:
        kids = tuple(walk(c) for c in nt.children(expr))
        new = nt.with_children(expr, kids) if kids else expr
        return nt.Call(NE, (new, nt.Literal(0))) if id(expr) in wrapped else new

    return nt.Assignment(assignment.lhs, walk(assignment.rhs))


@functools.cache
def _keeps_truth(op: Operator) -> bool:
    """Whether ``op`` gives 0 or 1 for any arguments 0 or 1 (its value on bools is the
    same in any dtype)."""
    return op.bool_result or all(
        op.evaluate(*map(float, args)) in (0.0, 1.0)
        for args in itertools.product((0, 1), repeat=op.arity))


def _typed(expr: nt.Expr, dtypes: dict[str, str]) -> Typed:
    """numpy's dtype of ``expr``; a Python number (weak) for an expression of literals."""
    return _types(expr, dtypes)[id(expr)]


def _types(expr: nt.Expr, dtypes: dict[str, str]) -> dict[int, Typed]:
    """Each node's dtype by ``id``, children first (no recursion: a product of 256
    factors nests 256 deep)."""
    types: dict[int, Typed] = {}
    for node in reversed(list(nt.subexpressions(expr))):
        if isinstance(node, nt.Access):
            types[id(node)] = np.dtype(dtypes[node.tensor])
        elif isinstance(node, nt.Literal):
            types[id(node)] = node.value
        elif isinstance(node, nt.Reduction):
            body = types[id(node.body)]  # a hidden sum (a diagonal use's) only selects
            types[id(node)] = body if node.hidden else _reduction_type(node.op, body)
        else:
            assert isinstance(node, nt.Call)
            types[id(node)] = _call_type(node.op, [
                types[id(a)] for k, a in enumerate(node.args) if k not in node.op.truth_args])
    return types


def _reduction_type(op: Operator, body: Typed) -> Typed:
    """A reduction of bools by an operator that can leave 0 and 1 (a sum) counts them,
    in int64 as numpy's sum does; one that keeps truth values (max, and) stays bool."""
    if op.bool_result:
        return np.dtype(bool)
    if isinstance(body, np.dtype) and body.kind == "b" and not _keeps_truth(op):
        return np.dtype("int64")
    return body


def _call_type(op: Operator, args: list[Typed]) -> Typed:
    if op.bool_result:
        return np.dtype(bool)
    result = np.result_type(*args)
    if result.kind in "biu" and op.float_result:
        result = np.dtype("float64")
    if result.kind == "b" and op.kind in ("sub", "neg"):
        raise TypeError("subtraction and negation of bool tensors are refused, as numpy "
                        "refuses them (give an operand an integer dtype, or use xor and "
                        "not)")
    if not any(isinstance(a, np.dtype) for a in args):
        return 0.0 if result.kind == "f" else 0  # literals only: still weak, of a kind
    return result


def _literals(expr: nt.Expr) -> Iterator[nt.Literal]:
    if isinstance(expr, nt.Literal):
        yield expr
    for child in nt.children(expr):
        yield from _literals(child)
