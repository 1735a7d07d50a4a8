"""The level language's one normalised form: what a checked body means, written as a few
node kinds that both of its interpreters walk, the host's numpy one (interpret.py) and
the compiler's LLVM one (backends/llvm/bodies.py).

Python's ``ast`` says the same thing many ways (``x += 1``, ``a < b < c``, ``min(a, b, c)``,
the names ``True`` and ``False``); each is reduced here once, so the two interpreters
cannot give one construct two meanings. Both evaluate lazily what Python does: ``and``,
``or`` and a conditional expression read only the operands that decide them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache

# ----------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Const:
    """An integer or a condition."""

    value: int | bool


@dataclass(frozen=True)
class Var:
    """A local, an environment name (``p``, ``i``, ``N``) or a level parameter."""

    name: str


@dataclass(frozen=True)
class Load:
    """``array[index]``: an entry of one of the level's arrays."""

    array: str
    index: Expr


@dataclass(frozen=True)
class Arith:
    """Integer arithmetic; ``op`` is one of ``+ - * // %`` (Python's flooring division,
    whose zero divisor is an error on the host and 0 in a kernel)."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Compare:
    """One comparison (chains become an ``and`` of comparisons)."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Negate:
    operand: Expr


@dataclass(frozen=True)
class Not:
    operand: Expr


@dataclass(frozen=True)
class Logic:
    """``and`` / ``or`` over ``values``, each read only while the result is open."""

    op: str
    values: tuple[Expr, ...]


@dataclass(frozen=True)
class Choose:
    """``then if test else other``: only the branch taken is evaluated."""

    test: Expr
    then: Expr
    other: Expr


@dataclass(frozen=True)
class Extreme:
    """``min`` or ``max`` of two or more values."""

    op: str
    values: tuple[Expr, ...]


@dataclass(frozen=True)
class Absolute:
    operand: Expr


Expr = Const | Var | Load | Arith | Compare | Negate | Not | Logic | Choose | Extreme | Absolute

# ----------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class SetLocal:
    name: str
    value: Expr


@dataclass(frozen=True)
class Store:
    """``array[index] = value`` (an augmented store reads the entry in ``value``)."""

    array: str
    index: Expr
    value: Expr


@dataclass(frozen=True)
class When:
    """An ``if`` statement."""

    test: Expr
    then: tuple[Stmt, ...]
    other: tuple[Stmt, ...]


@dataclass(frozen=True)
class Repeat:
    """A ``while`` loop."""

    test: Expr
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class CountUp:
    """``for var in range(start, stop)``."""

    var: str
    start: Expr
    stop: Expr
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class Return:
    values: tuple[Expr, ...]


Stmt = SetLocal | Store | When | Repeat | CountUp | Return

ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
           ast.GtE: ">="}


class BodyFormError(TypeError):
    """A construct the checker let through that has no normalised form (a checker bug)."""


def expression(node: ast.expr) -> Expr:
    """The normalised form of a checked expression."""
    if isinstance(node, ast.Constant):
        return Const(node.value)
    if isinstance(node, ast.Name):
        return Const(node.id == "True") if node.id in ("True", "False") else Var(node.id)
    if isinstance(node, ast.Subscript):
        return Load(_array_name(node.value), expression(node.slice))
    if isinstance(node, ast.BinOp) and type(node.op) in ARITH:
        return Arith(ARITH[type(node.op)], expression(node.left), expression(node.right))
    if isinstance(node, ast.UnaryOp):
        operand = expression(node.operand)
        return Negate(operand) if isinstance(node.op, ast.USub) else Not(operand)
    if isinstance(node, ast.BoolOp):
        return Logic("and" if isinstance(node.op, ast.And) else "or",
                     tuple(map(expression, node.values)))
    if isinstance(node, ast.Compare):
        operands = [expression(node.left), *map(expression, node.comparators)]
        parts = tuple(Compare(COMPARE[type(op)], left, right)
                      for op, left, right in zip(node.ops, operands, operands[1:]))
        return parts[0] if len(parts) == 1 else Logic("and", parts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        values = tuple(map(expression, node.args))
        return Absolute(values[0]) if node.func.id == "abs" else Extreme(node.func.id, values)
    if isinstance(node, ast.IfExp):
        return Choose(expression(node.test), expression(node.body), expression(node.orelse))
    raise BodyFormError(f"no normalised form for {ast.unparse(node)!r}")


def statements(body: tuple[ast.stmt, ...] | list[ast.stmt]) -> tuple[Stmt, ...]:
    """The normalised form of a checked body (``pass`` leaves nothing)."""
    return tuple(s for stmt in body if (s := _statement(stmt)) is not None)


@cache
def normalised(body: tuple[ast.stmt, ...]) -> tuple[Stmt, ...]:
    """``statements``, once per body (level bodies are tuples kept by their definitions)."""
    return statements(body)


def _statement(node: ast.stmt) -> Stmt | None:
    if isinstance(node, ast.Pass):
        return None
    if isinstance(node, ast.Return):
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        return Return(tuple(map(expression, values)))
    if isinstance(node, ast.Assign):
        return _assign(node.targets[0], expression(node.value))
    if isinstance(node, ast.AugAssign):
        current = expression(ast.copy_location(_as_load(node.target), node.target))
        return _assign(node.target, Arith(ARITH[type(node.op)], current,
                                          expression(node.value)))
    if isinstance(node, ast.If):
        return When(expression(node.test), statements(node.body), statements(node.orelse))
    if isinstance(node, ast.While):
        return Repeat(expression(node.test), statements(node.body))
    if isinstance(node, ast.For):
        bounds = [expression(a) for a in node.iter.args]
        start, stop = (Const(0), bounds[0]) if len(bounds) == 1 else bounds
        return CountUp(node.target.id, start, stop, statements(node.body))
    raise BodyFormError(f"no normalised form for {ast.unparse(node)!r}")


def _assign(target: ast.expr, value: Expr) -> Stmt:
    if isinstance(target, ast.Subscript):
        return Store(_array_name(target.value), expression(target.slice), value)
    if isinstance(target, ast.Name):
        return SetLocal(target.id, value)
    raise BodyFormError(f"no normalised form for assigning to {ast.unparse(target)!r}")


def _as_load(target: ast.expr) -> ast.expr:
    """An augmented assignment's target read as a value."""
    if isinstance(target, ast.Name):
        return ast.Name(target.id, ast.Load())
    return ast.Subscript(target.value, target.slice, ast.Load())


def _array_name(node: ast.expr) -> str:
    if not isinstance(node, ast.Name):
        raise BodyFormError(f"no normalised form for the array {ast.unparse(node)!r}")
    return node.id


def reads_arrays(expr: Expr) -> bool:
    """Whether evaluating ``expr`` may read an array (so it must not run speculatively)."""
    if isinstance(expr, Load):
        return True
    if isinstance(expr, (Arith, Compare)):
        return reads_arrays(expr.left) or reads_arrays(expr.right)
    if isinstance(expr, (Negate, Not, Absolute)):
        return reads_arrays(expr.operand)
    if isinstance(expr, (Logic, Extreme)):
        return any(map(reads_arrays, expr.values))
    if isinstance(expr, Choose):
        return reads_arrays(expr.test) or reads_arrays(expr.then) or reads_arrays(expr.other)
    return False
