"""The whitelisted body language of level functions (and of user functions): a body is
parsed by Python's ast and every construct checked, since it is compiled straight into
native kernels."""

from __future__ import annotations

import ast
from typing import NoReturn

from .vocabulary import ALL_ENV_NAMES, CALLABLE_ARITY, INDEX_CONSTANT_LIMIT, RESERVED
from .yaml_reader import Reader

# ----------------------------------------------------------------------------- body checker

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
_OTHER_BINOPS = {ast.Div: "/", ast.Pow: "**", ast.MatMult: "@", ast.LShift: "<<",
                 ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&"}
_COMPARES = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_OTHER_COMPARES = {ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
_UNARY = (ast.USub, ast.Not)
_OTHER_UNARY = {ast.UAdd: "unary +", ast.Invert: "operator '~'"}
_AUG_OPS = {ast.Add: "+=", ast.Sub: "-="}
_CONSTRUCTS = {
    "Attribute": "attribute access", "Lambda": "lambda", "Import": "import",
    "ImportFrom": "import", "FunctionDef": "function definition",
    "AsyncFunctionDef": "function definition", "ClassDef": "class definition",
    "Expr": "expression statement", "Delete": "del", "Global": "global",
    "Nonlocal": "nonlocal", "With": "with", "AsyncWith": "with", "Try": "try",
    "TryStar": "try", "Raise": "raise", "Assert": "assert", "Break": "break",
    "Continue": "continue", "AnnAssign": "annotated assignment",
    "NamedExpr": "assignment expression (:=)", "ListComp": "list comprehension",
    "SetComp": "set comprehension", "DictComp": "dict comprehension",
    "GeneratorExp": "generator expression", "List": "list", "Tuple": "tuple", "Dict": "dict",
    "Set": "set", "JoinedStr": "f-string", "Starred": "starred expression", "Slice": "slice",
    "Await": "await", "Yield": "yield", "YieldFrom": "yield", "Match": "match",
    "AsyncFor": "async for",
}


def _construct(node: ast.AST) -> str:
    """Human name of a construct, with its source for expressions, for error messages."""
    label = _CONSTRUCTS.get(type(node).__name__, type(node).__name__)
    if isinstance(node, ast.expr):
        snippet = ast.unparse(node)
        label += f" `{snippet if len(snippet) <= 40 else snippet[:37] + '...'}`"
    return label


def _assigned_names(stmts: list[ast.stmt]) -> frozenset[str]:
    """Every local a body assigns anywhere, to tell 'used too early' from 'unknown'."""
    names = set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.For)):
                targets = [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


Defined = frozenset[str]


class BodyChecker:
    """Walks one parsed body and rejects anything outside the whitelisted language.

    Locals must be definitely assigned before use (an `if` without `else`, or a loop that may
    run zero times, assigns nothing for the code after it), so lowering never meets an
    undefined value.
    """

    def __init__(self, reader: Reader, first_line: int, where: str, inputs: frozenset[str],
                 arrays: frozenset[str], *, may_store: bool = False, arity: int = 0,
                 array_reads: bool = True) -> None:
        self.reader = reader
        self.first_line = first_line
        self.where = where
        self.inputs = inputs
        self.arrays = arrays
        self.may_store = may_store
        self.arity = arity
        self.array_reads = array_reads
        self.loop_vars: set[str] = set()
        self.assigned: frozenset[str] = frozenset()

    def fail(self, node: ast.AST, problem: str) -> NoReturn:
        self.reader.fail(self.first_line + getattr(node, "lineno", 1) - 1, problem)

    def forbid(self, node: ast.AST) -> NoReturn:
        self.fail(node, f"{_construct(node)} is not allowed in {self.where}")

    # --- entry points

    def check_function(self, stmts: list[ast.stmt]) -> None:
        """Check a whole body, including that value-returning bodies return on every path."""
        self.assigned = _assigned_names(stmts)
        _, returns = self.block(stmts, frozenset())
        if self.arity and not returns:
            values = "return a, b" if self.arity == 2 else "return a value"
            self.fail(stmts[-1], f"{self.where} must end every path with `{values}`")

    def check_expression(self, node: ast.expr) -> None:
        self.expr(node, frozenset())

    # --- statements

    def block(self, stmts: list[ast.stmt], defined: Defined) -> tuple[Defined, bool]:
        """Check statements in order; returns the locals defined after and whether it returns."""
        returns = False
        for stmt in stmts:
            if returns:
                self.fail(stmt, f"unreachable statement after return in {self.where}")
            defined, returns = self.stmt(stmt, defined)
        return defined, returns

    def stmt(self, node: ast.stmt, defined: Defined) -> tuple[Defined, bool]:
        handler = getattr(self, f"stmt_{type(node).__name__}", None)
        if handler is None:
            if isinstance(node, ast.Expr):  # report a forbidden call inside it first
                self.expr(node.value, defined)
            self.forbid(node)
        return handler(node, defined)

    def stmt_Pass(self, node: ast.Pass, defined: Defined) -> tuple[Defined, bool]:
        return defined, False

    def stmt_Assign(self, node: ast.Assign, defined: Defined) -> tuple[Defined, bool]:
        if len(node.targets) != 1:
            self.fail(node, f"chained assignment is not allowed in {self.where}")
        self.expr(node.value, defined)
        return self.target(node.targets[0], defined, augmented=False), False

    def stmt_AugAssign(self, node: ast.AugAssign, defined: Defined) -> tuple[Defined, bool]:
        if type(node.op) not in _AUG_OPS:
            op = _BINOPS.get(type(node.op)) or _OTHER_BINOPS.get(type(node.op), "?")
            self.fail(node, f"augmented assignment '{op}=' is not allowed (only += and -=)")
        self.expr(node.value, defined)
        return self.target(node.target, defined, augmented=True), False

    def stmt_If(self, node: ast.If, defined: Defined) -> tuple[Defined, bool]:
        self.expr(node.test, defined)
        then_defined, then_returns = self.block(node.body, defined)
        else_defined, else_returns = self.block(node.orelse, defined)
        if then_returns and else_returns:
            return defined, True
        if then_returns:
            return else_defined, False
        if else_returns:
            return then_defined, False
        return then_defined & else_defined, False

    def stmt_While(self, node: ast.While, defined: Defined) -> tuple[Defined, bool]:
        if node.orelse:
            self.fail(node, f"while ... else is not allowed in {self.where}")
        self.expr(node.test, defined)
        self.block(node.body, defined)
        return defined, False

    def stmt_For(self, node: ast.For, defined: Defined) -> tuple[Defined, bool]:
        if node.orelse:
            self.fail(node, f"for ... else is not allowed in {self.where}")
        call = node.iter
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "range" and 1 <= len(call.args) <= 2 and not call.keywords):
            self.fail(node, "a for loop must be `for NAME in range(a, b)` (or range(b))")
        for arg in call.args:
            self.expr(arg, defined)
        if not isinstance(node.target, ast.Name):
            self.fail(node, f"the loop variable must be a plain name, not {_construct(node.target)}")
        var = node.target.id
        self.check_local_name(node.target)
        self.loop_vars.add(var)
        self.block(node.body, defined | {var})
        self.loop_vars.discard(var)
        return defined, False

    def stmt_Return(self, node: ast.Return, defined: Defined) -> tuple[Defined, bool]:
        if self.arity == 0:
            self.fail(node, f"{self.where} returns nothing; return is not allowed in it")
        value = node.value
        count = 0 if value is None else len(value.elts) if isinstance(value, ast.Tuple) else 1
        if count != self.arity:
            form = "`return a, b`" if self.arity == 2 else "`return a` (one value)"
            self.fail(node, f"{self.where} must return {self.arity} value(s) with {form}, "
                            f"got {count}")
        for part in value.elts if isinstance(value, ast.Tuple) else [value]:
            self.expr(part, defined)
        return defined, True

    # --- assignment targets

    def target(self, node: ast.expr, defined: Defined, *, augmented: bool) -> Defined:
        """Check an assignment target; returns the locals defined after the assignment."""
        if isinstance(node, ast.Subscript):
            if not self.may_store:
                self.fail(node, f"{self.where} cannot store into arrays (only insert_init, "
                                "insert_coord, insert_finalize and append_* can)")
            self.subscript(node, defined)
            return defined
        if not isinstance(node, ast.Name):
            self.fail(node, f"{_construct(node)} cannot be assigned to in {self.where}")
        self.check_local_name(node)
        if augmented and node.id not in defined:
            self.fail(node, f"local '{node.id}' is updated before it is assigned")
        return defined | {node.id}

    def check_local_name(self, node: ast.Name) -> None:
        """Locals may not shadow inputs, params, arrays, reserved names or a running loop."""
        name = node.id
        if name in self.inputs:
            self.fail(node, f"cannot assign to '{name}': it is an input of {self.where}")
        if name in self.arrays:
            self.fail(node, f"cannot rebind array '{name}' (store into {name}[...] instead)")
        if name in RESERVED:
            self.fail(node, f"'{name}' is a reserved name and cannot be a local")
        if name in self.loop_vars:
            self.fail(node, f"cannot assign to loop variable '{name}' inside its loop")

    # --- expressions

    def expr(self, node: ast.expr, defined: Defined) -> None:
        handler = getattr(self, f"expr_{type(node).__name__}", None)
        if handler is None:
            self.forbid(node)
        handler(node, defined)

    def expr_Name(self, node: ast.Name, defined: Defined) -> None:
        name = node.id
        if name in self.arrays:
            if not self.array_reads:
                self.fail(node, f"{self.where} cannot read arrays")
            self.fail(node, f"array '{name}' must be subscripted ({name}[...])")
        if name in CALLABLE_ARITY or name == "range":
            self.fail(node, f"'{name}' can only be called")
        if name in self.inputs or name in defined:
            return
        if name in self.assigned:
            self.fail(node, f"local '{name}' may be used before it is assigned")
        if name in ALL_ENV_NAMES:
            self.fail(node, f"'{name}' is not available in {self.where} "
                            f"(available: {', '.join(sorted(self.inputs))})")
        self.fail(node, f"unknown name '{name}' in {self.where}")

    def expr_Constant(self, node: ast.Constant, defined: Defined) -> None:
        if not isinstance(node.value, int):  # bool is an int
            kind = "float" if isinstance(node.value, float) else type(node.value).__name__
            self.fail(node, f"{kind} constant {node.value!r} is not allowed in {self.where} "
                            "(only integers and True/False)")
        if abs(node.value) > INDEX_CONSTANT_LIMIT:
            self.fail(node, f"constant {node.value} does not fit an int32 index "
                            f"(at most {INDEX_CONSTANT_LIMIT} in magnitude)")

    def expr_BinOp(self, node: ast.BinOp, defined: Defined) -> None:
        if type(node.op) not in _BINOPS:
            symbol = _OTHER_BINOPS.get(type(node.op), type(node.op).__name__)
            self.fail(node, f"operator '{symbol}' is not allowed in {self.where} "
                            "(use + - * // %)")
        if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and isinstance(node.right, ast.Constant) \
                and node.right.value == 0:
            self.fail(node, f"division by zero in {self.where}")
        self.expr(node.left, defined)
        self.expr(node.right, defined)

    def expr_UnaryOp(self, node: ast.UnaryOp, defined: Defined) -> None:
        if not isinstance(node.op, _UNARY):
            self.fail(node, f"{_OTHER_UNARY[type(node.op)]} is not allowed in {self.where}")
        self.expr(node.operand, defined)

    def expr_BoolOp(self, node: ast.BoolOp, defined: Defined) -> None:
        for value in node.values:
            self.expr(value, defined)

    def expr_Compare(self, node: ast.Compare, defined: Defined) -> None:
        for op in node.ops:
            if not isinstance(op, _COMPARES):
                self.fail(node, f"comparison '{_OTHER_COMPARES[type(op)]}' is not allowed in "
                                f"{self.where}")
        for operand in (node.left, *node.comparators):
            self.expr(operand, defined)

    def expr_IfExp(self, node: ast.IfExp, defined: Defined) -> None:
        for part in (node.test, node.body, node.orelse):
            self.expr(part, defined)

    def expr_Subscript(self, node: ast.Subscript, defined: Defined) -> None:
        self.subscript(node, defined)

    def subscript(self, node: ast.Subscript, defined: Defined) -> None:
        """`array[index]` with a declared array and one index expression."""
        base = node.value
        if not isinstance(base, ast.Name):
            self.fail(node, f"only declared arrays can be subscripted, not {_construct(base)}")
        if base.id not in self.arrays:
            what = "is not an array" if base.id in self.inputs else "is not a declared array"
            self.fail(node, f"'{base.id}' {what} and cannot be subscripted")
        if not self.array_reads:
            self.fail(node, f"{self.where} cannot read arrays")
        if isinstance(node.slice, (ast.Slice, ast.Tuple)):
            self.fail(node, f"{_construct(node.slice)} index is not allowed: use {base.id}[i]")
        self.expr(node.slice, defined)

    def expr_Call(self, node: ast.Call, defined: Defined) -> None:
        func = node.func
        if not isinstance(func, ast.Name):
            self.forbid(func)
        if func.id not in CALLABLE_ARITY:
            hint = " outside a for header" if func.id == "range" else ""
            self.fail(node, f"call to '{func.id}'{hint} is not allowed in {self.where} "
                            "(only min, max and abs can be called)")
        if node.keywords:
            self.fail(node, f"{func.id}() takes positional arguments only")
        low, high = CALLABLE_ARITY[func.id]
        if len(node.args) < low or (high is not None and len(node.args) > high):
            count = f"{low}" if low == high else f"at least {low}"
            self.fail(node, f"{func.id}() takes {count} argument(s), got {len(node.args)}")
        for arg in node.args:
            self.expr(arg, defined)

