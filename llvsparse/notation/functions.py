"""User-defined scalar functions: ``ls.function("f", body="a * b + 1", ...)``.

The body is a Python expression checked by the same whitelist as the YAML level bodies
(formats/body_check.py; never ``eval``), over the arguments and numbers, with ``+ - * /``,
comparisons, ``and``/``or``/``not``, ``x if c else y`` and calls of the builtin
functions. It becomes a template over builtin operators, which code generation emits
and which computes the function in Python for the compiler's reasoning about fill
values. Declared properties are checked against the body on sample values.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Sequence

from llvsparse.formats.body_check import BodyChecker
from llvsparse.formats.vocabulary import FormatFileError
from llvsparse.formats.yaml_reader import Reader
from llvsparse.ir.notation.operators import (
    ADD,
    AND,
    COMPARISONS,
    DIV,
    MUL,
    NEG,
    NOT,
    OR,
    SUB,
    WHERE,
    Node,
    Operator,
    Param,
    Template,
    evaluate_template,
    lookup,
    register,
)
from llvsparse.ir.notation.subscripts import is_valid_name
from llvsparse.ir.notation.syntax import REDUCTION_PREFIX, NotationError
from llvsparse.notation.expr_api import apply

_BINARY = {ast.Add: ADD, ast.Sub: SUB, ast.Mult: MUL, ast.Div: DIV}
_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!=", ast.Gt: ">",
            ast.GtE: ">="}
_SAMPLES = (0.0, 1.0, -2.5, 3.0, 0.5)


class _ValueChecker(BodyChecker):
    """The level-body whitelist, for values: float constants, true division and calls
    of any defined function are allowed; arrays, ``//`` and ``%`` are not."""

    def expr_Constant(self, node: ast.Constant, defined: frozenset[str]) -> None:
        if not isinstance(node.value, int | float) or (
                isinstance(node.value, float) and not math.isfinite(node.value)):
            self.fail(node, f"constant {node.value!r} is not allowed in {self.where} "
                            "(only finite numbers)")

    def expr_BinOp(self, node: ast.BinOp, defined: frozenset[str]) -> None:
        if type(node.op) not in _BINARY:
            self.fail(node, f"{ast.unparse(node)!r}: only + - * / are allowed in "
                            f"{self.where} (pow(a, b) for powers)")
        self.expr(node.left, defined)
        self.expr(node.right, defined)

    def expr_Call(self, node: ast.Call, defined: frozenset[str]) -> None:
        func = node.func
        if not isinstance(func, ast.Name) or node.keywords:
            self.fail(node, f"{ast.unparse(node)!r}: call functions by name with "
                            "positional arguments")
        op = lookup(func.id)
        if op is None:
            self.fail(node, f"unknown function '{func.id}' in {self.where}")
        extreme = func.id in ("min", "max") and len(node.args) >= 2
        if len(node.args) != op.arity and not extreme:
            self.fail(node, f"{func.id}() takes {op.arity} argument(s), got {len(node.args)}")
        for arg in node.args:
            self.expr(arg, defined)


def _translate(node: ast.expr, args: Sequence[str]) -> Template:
    """A checked body as a template over builtin (and earlier user) operators."""
    def go(n: ast.expr) -> Template:
        return _translate(n, args)

    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.Name):
        return Param(list(args).index(node.id))
    if isinstance(node, ast.BinOp):
        return Node(_BINARY[type(node.op)], (go(node.left), go(node.right)))
    if isinstance(node, ast.UnaryOp):
        return Node(NEG if isinstance(node.op, ast.USub) else NOT, (go(node.operand),))
    if isinstance(node, ast.BoolOp):
        return _chain(AND if isinstance(node.op, ast.And) else OR, [go(v) for v in node.values])
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        tests = [Node(COMPARISONS[_COMPARE[type(op)]], (go(a), go(b)))
                 for op, a, b in zip(node.ops, sides, sides[1:])]
        return _chain(AND, tests)
    if isinstance(node, ast.IfExp):
        return Node(WHERE, (go(node.test), go(node.body), go(node.orelse)))
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    op = lookup(node.func.id)
    assert op is not None
    parts = [go(a) for a in node.args]
    return Node(op, tuple(parts)) if len(parts) == op.arity else _chain(op, parts)  # min(a, b, c)


def _chain(op: Operator, parts: list[Template]) -> Template:
    result = parts[0]
    for part in parts[1:]:
        result = Node(op, (result, part))
    return result


def _uses_float_result(template: Template) -> bool:
    if isinstance(template, Node):
        return template.op.float_result or any(_uses_float_result(a) for a in template.args)
    return False


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=0)


def _check_declared(name: str, f: Callable[..., float], arity: int, identity: float | None,
                    annihilator: float | None, commutative: bool, associative: bool,
                    idempotent: bool) -> None:
    """Refuse a declared property the body contradicts on sample values: the compiler
    trusts declarations (a reduction starts from the identity)."""
    declared = (identity is not None or annihilator is not None or commutative
                or associative or idempotent)
    if declared and arity != 2:
        raise NotationError(f"function {name}: identity, annihilator, commutative, "
                            "associative and idempotent describe two-argument functions")

    def refuse(prop: str, call: str, got: float, want: float) -> None:
        raise NotationError(f"function {name}: declared {prop} does not hold: {call} is "
                            f"{got}, not {want}")

    for x in _SAMPLES:
        if identity is not None:
            for got, call in ((f(identity, x), f"{name}({identity}, {x})"),
                              (f(x, identity), f"{name}({x}, {identity})")):
                if not _same(got, x):
                    refuse(f"identity {identity}", call, got, x)
        if annihilator is not None:
            for got, call in ((f(annihilator, x), f"{name}({annihilator}, {x})"),
                              (f(x, annihilator), f"{name}({x}, {annihilator})")):
                if not _same(got, annihilator):
                    refuse(f"annihilator {annihilator}", call, got, annihilator)
        if idempotent and not _same(f(x, x), x):
            refuse("idempotence", f"{name}({x}, {x})", f(x, x), x)
        for y in _SAMPLES:
            if commutative and not _same(f(x, y), f(y, x)):
                refuse("commutativity", f"{name}({x}, {y})", f(x, y), f(y, x))
            for z in _SAMPLES if associative else ():
                left, right = f(f(x, y), z), f(x, f(y, z))
                if not _same(left, right):
                    refuse("associativity", f"{name}({name}({x}, {y}), {z})", left, right)


class UserFunction:
    """A defined function: call it on index expressions (``f(A[i, j], B[i, j])``) or
    write ``f(...)`` in notation; ``operator`` is its row of the operator table."""

    def __init__(self, operator: Operator):
        self.operator = operator

    def __call__(self, *args: object):
        return apply(self.operator, *args)

    def __repr__(self) -> str:
        return f"ls.function({self.operator.name!r})"


def function(name: str, body: str, *, args: Sequence[str] = ("a", "b"),
             identity: float | None = None, annihilator: float | None = None,
             commutative: bool = False, associative: bool = False,
             idempotent: bool = False) -> UserFunction:
    """Define the scalar function ``name(args) = body`` for notation and the operator
    API. Declare ``identity``, ``commutative`` and ``associative`` to reduce with it;
    how it iterates sparse operands follows from its body's values on absent (0)
    entries, never from its name."""
    if not isinstance(name, str) or not is_valid_name(name) or name.startswith(
            REDUCTION_PREFIX):
        raise NotationError(f"function name {name!r} is not an identifier (or starts with "
                            f"'{REDUCTION_PREFIX}')")
    args = tuple(args)
    if not 1 <= len(args) <= 3 or len(set(args)) != len(args) or not all(
            isinstance(a, str) and is_valid_name(a) for a in args):
        raise NotationError(f"function {name}: args must be 1 to 3 distinct identifiers, "
                            f"not {args!r}")
    if not isinstance(body, str):
        raise TypeError(f"function {name}: body must be a string, not {type(body).__name__}")
    where = f"function {name}"
    try:
        tree = ast.parse(body.strip(), mode="eval")
    except SyntaxError as error:
        raise NotationError(f"{where}: body is not an expression: {error.msg}") from None
    try:
        _ValueChecker(Reader(where), 1, where, frozenset(args), frozenset()).check_expression(
            tree.body)
    except FormatFileError as error:
        raise NotationError(f"{where}: {error.problem}") from None
    template = _translate(tree.body, args)

    def evaluate(*values: float) -> float:
        return evaluate_template(template, values)

    _check_declared(name, evaluate, len(args), identity, annihilator, commutative,
                    associative, idempotent)
    op = Operator(name, name, len(args), "user", evaluate, identity, annihilator, commutative,
                  associative, idempotent, _uses_float_result(template), template)
    try:
        return UserFunction(register(op))
    except ValueError as error:
        raise NotationError(str(error)) from None
