"""Types of level-function bodies: every expression is an index (integer) or a condition.

Code generation makes indices i64 and conditions i1, and uses each where the function's
caller expects it: ``return crd[p], p + 1`` (an index where ``found`` must be a
condition) loaded fine and then failed code generation with a raw llvmlite error
("branch condition must have 'i1' type"). Here each expression's type is inferred and a
mismatch is reported at its line, as the loader's other errors are. Runs after the
loader's whitelist check, so only whitelisted constructs appear.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import NoReturn

INDEX, CONDITION = "an index", "a condition"

# What each value-returning function must return, in order.
_BOUNDS = (INDEX, INDEX)
_ACCESS = (INDEX, CONDITION)
RESULT_TYPES: dict[str, tuple[str, ...]] = {
    "coord_bounds": _BOUNDS, "pos_bounds": _BOUNDS, "coord_access": _ACCESS,
    "pos_access": _ACCESS, "locate": _ACCESS, "size": (INDEX,),
}
_RESULT_NAMES = {_BOUNDS: ("begin", "end"), _ACCESS: ("the position", "found"),
                 (INDEX,): ("the size",)}

Fail = Callable[[ast.AST, str], NoReturn]


class TypeChecker:
    """Infers the types of one body's expressions; inputs and params are indices."""

    def __init__(self, where: str, fail: Fail) -> None:
        self.where = where
        self.fail = fail
        self.locals: dict[str, str] = {}

    def function(self, name: str, body: list[ast.stmt]) -> None:
        """Check a whole body of function ``name``, its returns included."""
        self.results = RESULT_TYPES.get(name, ())
        self.stmts(body)

    def expression(self, node: ast.expr) -> None:
        """An array length or packed parameter value: an index."""
        self.expect(node, INDEX, "the value")

    # -- statements --------------------------------------------------------------------
    def stmts(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            getattr(self, f"stmt_{type(stmt).__name__}")(stmt)

    def stmt_Pass(self, node: ast.Pass) -> None:
        return None

    def stmt_Assign(self, node: ast.Assign) -> None:
        target = node.targets[0]
        if isinstance(target, ast.Subscript):
            self.expect(target.slice, INDEX, "an array index")
            self.expect(node.value, INDEX, f"a value stored into {target.value.id}")
            return
        kind = self.type(node.value)
        held = self.locals.setdefault(target.id, kind)
        if held != kind:
            self.fail(node, f"local '{target.id}' holds {held} but is assigned {kind} "
                            f"in {self.where}")

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        target = node.target
        if isinstance(target, ast.Subscript):
            self.expect(target.slice, INDEX, "an array index")
        elif self.locals.get(target.id, INDEX) != INDEX:
            self.fail(node, f"local '{target.id}' holds a condition; += and -= need an "
                            f"index in {self.where}")
        self.expect(node.value, INDEX, "the operand of += or -=")

    def stmt_If(self, node: ast.If) -> None:
        self.expect(node.test, CONDITION, "the test of if")
        self.stmts(node.body)
        self.stmts(node.orelse)

    def stmt_While(self, node: ast.While) -> None:
        self.expect(node.test, CONDITION, "the test of while")
        self.stmts(node.body)

    def stmt_For(self, node: ast.For) -> None:
        for arg in node.iter.args:
            self.expect(arg, INDEX, "a bound of range")
        self.locals.setdefault(node.target.id, INDEX)
        if self.locals[node.target.id] != INDEX:
            self.fail(node, f"loop variable '{node.target.id}' is a condition elsewhere in "
                            f"{self.where}")
        self.stmts(node.body)

    def stmt_Return(self, node: ast.Return) -> None:
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        names = _RESULT_NAMES.get(self.results, ())
        for value, wanted, name in zip(values, self.results, names):
            self.expect(value, wanted, f"{name} (returned by {self.where})")

    # -- expressions -------------------------------------------------------------------
    def expect(self, node: ast.expr, wanted: str, what: str) -> None:
        kind = self.type(node)
        if kind != wanted:
            hint = " (compare it, e.g. `x != 0`)" if wanted == CONDITION else ""
            self.fail(node, f"{what} must be {wanted}, but `{ast.unparse(node)}` is {kind}"
                            f"{hint} in {self.where}")

    def type(self, node: ast.expr) -> str:
        return getattr(self, f"type_{type(node).__name__}")(node)

    def type_Constant(self, node: ast.Constant) -> str:
        return CONDITION if isinstance(node.value, bool) else INDEX

    def type_Name(self, node: ast.Name) -> str:
        if node.id in ("True", "False"):
            return CONDITION
        return self.locals.get(node.id, INDEX)

    def type_BinOp(self, node: ast.BinOp) -> str:
        self.expect(node.left, INDEX, "an operand of arithmetic")
        self.expect(node.right, INDEX, "an operand of arithmetic")
        return INDEX

    def type_UnaryOp(self, node: ast.UnaryOp) -> str:
        if isinstance(node.op, ast.Not):
            self.expect(node.operand, CONDITION, "the operand of not")
            return CONDITION
        self.expect(node.operand, INDEX, "the operand of unary -")
        return INDEX

    def type_BoolOp(self, node: ast.BoolOp) -> str:
        for value in node.values:
            self.expect(value, CONDITION, "an operand of and/or")
        return CONDITION

    def type_Compare(self, node: ast.Compare) -> str:
        for operand in (node.left, *node.comparators):
            self.expect(operand, INDEX, "an operand of a comparison")
        return CONDITION

    def type_IfExp(self, node: ast.IfExp) -> str:
        self.expect(node.test, CONDITION, "the test of a conditional expression")
        kind = self.type(node.body)
        self.expect(node.orelse, kind, "both branches of a conditional expression")
        return kind

    def type_Subscript(self, node: ast.Subscript) -> str:
        self.expect(node.slice, INDEX, "an array index")
        return INDEX

    def type_Call(self, node: ast.Call) -> str:
        for arg in node.args:
            self.expect(arg, INDEX, f"an argument of {node.func.id}()")
        return INDEX
