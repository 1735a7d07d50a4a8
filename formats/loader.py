"""Load and strictly validate one level-format YAML file (reference: formats/README.md).

Level formats are plugins: their code bodies are compiled straight into native kernels, so the
loader trusts nothing. Every key, value and body construct is checked against a whitelist, and
every error names the file and the line it comes from, because plugin authors have no other way
to find out what the compiler did not like.
"""

from __future__ import annotations

import ast
import keyword
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import yaml
from yaml.constructor import SafeConstructor

from .typecheck import TypeChecker

__all__ = [
    "ENVIRONMENTS",
    "FUNCTION_NAMES",
    "OPTIONAL_RETURN",
    "PROPERTY_NAMES",
    "RETURN_ARITY",
    "ArrayDef",
    "FormatFileError",
    "LevelDef",
    "LevelFunction",
    "PropertyDef",
    "load_level_file",
    "load_level_text",
]

# ----------------------------------------------------------------------------- vocabulary

_ITERATION = ("coord_bounds", "coord_access", "pos_bounds", "pos_access", "locate")
_INSERT = ("size", "insert_init", "insert_coord", "insert_finalize")
# Integer constants in bodies and array fills must fit every index type a tensor may
# use: 2**40 as a fill became 0 in int32 arrays, and 10**23 overflowed the interpreter.
INDEX_CONSTANT_LIMIT = 2**31 - 1
_APPEND = ("append_init", "append_coord", "append_edges", "append_finalize")

FUNCTION_NAMES: tuple[str, ...] = _ITERATION + _INSERT + _APPEND
PROPERTY_NAMES: tuple[str, ...] = ("full", "ordered", "unique", "branchless", "compact")

_BOUNDS_ENV = ("p_parent", "i_parent", "i_grandparent")
_ACCESS_ENV = ("p_parent", "i", "i_parent", "i_grandparent")
_PHASE_ENV = ("parent_size", "size")
_OWN_ENV: dict[str, tuple[str, ...]] = {
    "coord_bounds": _BOUNDS_ENV,
    "pos_bounds": _BOUNDS_ENV,
    "coord_access": _ACCESS_ENV,
    "locate": _ACCESS_ENV,
    "pos_access": ("p", "p_parent", "i_parent", "i_grandparent"),
    "size": ("parent_size",),
    "insert_init": _PHASE_ENV,
    "insert_finalize": _PHASE_ENV,
    "append_init": _PHASE_ENV,
    "append_finalize": _PHASE_ENV,
    "insert_coord": ("p", "i", "p_parent"),
    "append_coord": ("p", "i", "p_parent"),
    "append_edges": ("p_parent", "p_begin", "p_end"),
}
# Names the compiler binds when it inlines a body: per function, plus the extents everywhere.
ENVIRONMENTS: dict[str, tuple[str, ...]] = {
    fn: (*names, "N", "N_child") for fn, names in _OWN_ENV.items()
}
# Number of values each function returns (0: it must not return).
RETURN_ARITY: dict[str, int] = {fn: 0 for fn in FUNCTION_NAMES} | {
    **{fn: 2 for fn in _ITERATION},
    "size": 1,
}
# Functions that may instead return one value on every path: insert_coord's says whether
# the coordinate went in (False: its parent's segment is full, and the call fails).
OPTIONAL_RETURN = frozenset({"insert_coord"})

_STORE_FUNCTIONS = frozenset(_INSERT[1:] + _APPEND)  # assembly code may write arrays, size not
_LENGTH_NAMES = ("parent_size", "size", "N")
PACKED_NAMES = ("N", "max_children")  # what a parameter's packed value may read
_CALLABLE_ARITY = {"min": (2, None), "max": (2, None), "abs": (1, 1)}
_ALL_ENV_NAMES = frozenset(n for names in ENVIRONMENTS.values() for n in names)
_RESERVED = _ALL_ENV_NAMES | set(_CALLABLE_ARITY) | {"range"}

_TOP_KEYS = ("name", "doc", "params", "arrays", "properties", "capabilities")
_ARRAY_KINDS = ("pos", "crd")
_ITERATE_KINDS = ("coordinate", "position")

_TAG = "tag:yaml.org,2002:"
_YAML_KINDS = {"str": "a string", "int": "an integer", "bool": "a boolean", "null": "null",
               "float": "a float", "map": "a mapping", "seq": "a list"}


# ----------------------------------------------------------------------------- public types

class FormatFileError(ValueError):
    """A level-format file is invalid; str() is '<path>:<line>: <problem>' like a compiler."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem

    def __reduce__(self) -> tuple[type, tuple[str, int, str]]:
        """Keep the three attributes across pickling (e.g. to worker processes)."""
        return (type(self), (self.path, self.line, self.problem))


@dataclass(frozen=True)
class ArrayDef:
    """One array of a level; `length` is the parsed expression over parent_size/size/N/params."""

    name: str
    kind: str  # 'pos' or 'crd'
    length: ast.expr | None
    length_source: str | None
    init: int | None
    shared: bool


@dataclass(frozen=True)
class PropertyDef:
    """A level property: its default value and whether a tensor format may override it."""

    default: bool
    configurable: bool


@dataclass(frozen=True)
class LevelFunction:
    """A validated body. Node line numbers are body-relative: file line = line + lineno - 1."""

    name: str
    body: tuple[ast.stmt, ...]
    source: str
    line: int
    returns: int


@dataclass(frozen=True)
class LevelDef:
    """Everything one YAML file says about a level format, already validated."""

    name: str
    doc: str
    path: str
    params: dict[str, str]
    arrays: dict[str, ArrayDef]
    properties: dict[str, PropertyDef]
    iterate: str
    functions: dict[str, LevelFunction]
    # Parameter -> (expression, source): its value when a tensor is packed from data and
    # its format leaves the parameter open (hashed: buckets from the fullest row).
    packed_params: dict[str, tuple[ast.expr, str]] = field(default_factory=dict)

    def __hash__(self) -> int:
        """Hash by identity of origin so levels can key caches despite their dict fields."""
        return hash((self.name, self.path))

    def has(self, fn: str) -> bool:
        """Whether the level defines level function `fn` (a typo raises instead of lying)."""
        if fn not in FUNCTION_NAMES:
            raise ValueError(f"unknown level function {fn!r}; expected one of {FUNCTION_NAMES}")
        return fn in self.functions

    def always_found(self, fn: str) -> bool:
        """Whether `fn` (a function returning a position and a found flag) finds every
        coordinate it is asked for: each of its returns says a literal True. Code
        generators may then visit several positions at once without a test per position."""
        function = self.functions.get(fn)
        if function is None:
            return False
        returns = [node for stmt in function.body for node in ast.walk(stmt)
                   if isinstance(node, ast.Return)]
        return bool(returns) and all(
            isinstance(node.value, ast.Tuple) and isinstance(node.value.elts[-1], ast.Constant)
            and node.value.elts[-1].value is True for node in returns)

    @property
    def sized_by_extent(self) -> bool:
        """Whether inserting sizes the level at its extent per parent position (``return
        parent_size * N``), so that a dense-like tensor's values are as many as the
        product of its extents and can be allocated from the shape alone."""
        function = self.functions.get("size")
        if function is None or len(function.body) != 1:
            return False
        node = function.body[0]
        product = node.value if isinstance(node, ast.Return) else None
        return (isinstance(product, ast.BinOp) and isinstance(product.op, ast.Mult)
                and {getattr(product.left, "id", None), getattr(product.right, "id", None)}
                == {"parent_size", "N"})

    @property
    def can_locate(self) -> bool:
        """Random access to a coordinate under a parent."""
        return "locate" in self.functions

    @property
    def can_insert(self) -> bool:
        """Assembly by random inserts at located positions."""
        return "insert_coord" in self.functions

    @property
    def can_append(self) -> bool:
        """Assembly by appending coordinates in order."""
        return "append_coord" in self.functions


# ----------------------------------------------------------------------------- YAML access

Entries = dict[str, tuple[yaml.Node, yaml.Node]]


def _describe_node(node: yaml.Node) -> str:
    """Name a YAML node's type the way a plugin author thinks of it."""
    short = node.tag.removeprefix(_TAG)
    return _YAML_KINDS.get(short, f"a value tagged {node.tag}")


class _Reader:
    """Typed access to composed YAML nodes; every failure carries the file path and line."""

    _constructor = SafeConstructor()

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: yaml.Node | int, problem: str) -> NoReturn:
        """Raise FormatFileError at a node's line or at an explicit 1-based line."""
        line = where if isinstance(where, int) else where.start_mark.line + 1
        raise FormatFileError(self.path, line, problem)

    def mapping(self, node: yaml.Node, what: str) -> Entries:
        """Return a mapping's entries by key, rejecting non-string and duplicate keys."""
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, f"{what} must be a mapping, got {_describe_node(node)}")
        entries: Entries = {}
        for key, value in node.value:
            name = self.string(key, f"a key in {what}")
            if name in entries:
                first = entries[name][0].start_mark.line + 1
                self.fail(key, f"duplicate key '{name}' in {what} (first on line {first})")
            entries[name] = (key, value)
        return entries

    def check_keys(self, entries: Entries, where: yaml.Node, what: str,
                   required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
        """Reject unknown keys (at their line) and missing ones (at `where`)."""
        allowed = required + optional
        for name, (key, _) in entries.items():
            if name not in allowed:
                self.fail(key, f"unknown key '{name}' in {what}; allowed: {', '.join(allowed)}")
        for name in required:
            if name not in entries:
                self.fail(where, f"missing required key '{name}' in {what}")

    def scalar(self, node: yaml.Node, kinds: tuple[str, ...], what: str) -> str:
        """Return the raw text of a scalar whose resolved tag is one of `kinds`."""
        if not isinstance(node, yaml.ScalarNode) or node.tag not in {_TAG + k for k in kinds}:
            expected = " or ".join(_YAML_KINDS[k] for k in kinds)
            self.fail(node, f"{what} must be {expected}, got {_describe_node(node)}")
        return node.value

    def string(self, node: yaml.Node, what: str) -> str:
        return self.scalar(node, ("str",), what)

    def boolean(self, node: yaml.Node, what: str) -> bool:
        return SafeConstructor.bool_values[self.scalar(node, ("bool",), what).lower()]

    def integer(self, node: yaml.Node, what: str) -> int:
        self.scalar(node, ("int",), what)
        return self._constructor.construct_yaml_int(node)

    def choice(self, node: yaml.Node, what: str, options: tuple[str, ...]) -> str:
        value = self.string(node, what)
        if value not in options:
            self.fail(node, f"{what} must be one of {', '.join(options)}, got '{value}'")
        return value

    def identifier(self, node: yaml.Node, what: str) -> str:
        value = self.string(node, what)
        if not value.isidentifier() or keyword.iskeyword(value):
            self.fail(node, f"{what} '{value}' is not a valid identifier")
        return value


def _compose(text: str, path: str) -> yaml.Node:
    """Parse YAML into nodes (which keep line numbers); syntax errors become FormatFileError."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        detail = "; ".join(part for part in (exc.context, exc.problem) if part)
        raise FormatFileError(path, mark.line + 1 if mark else 1,
                              f"YAML syntax error: {detail}") from None
    except yaml.YAMLError as exc:  # ReaderError: a forbidden character, located by offset
        line = text.count("\n", 0, getattr(exc, "position", 0)) + 1
        raise FormatFileError(path, line, f"YAML error: {exc}") from None
    except RecursionError:
        raise FormatFileError(path, 1, "YAML nesting is too deep") from None
    if node is None:
        raise FormatFileError(path, 1, "the file is empty")
    return node


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


class _BodyChecker:
    """Walks one parsed body and rejects anything outside the whitelisted language.

    Locals must be definitely assigned before use (an `if` without `else`, or a loop that may
    run zero times, assigns nothing for the code after it), so lowering never meets an
    undefined value.
    """

    def __init__(self, reader: _Reader, first_line: int, where: str, inputs: frozenset[str],
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
        if name in _RESERVED:
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
        if name in _CALLABLE_ARITY or name == "range":
            self.fail(node, f"'{name}' can only be called")
        if name in self.inputs or name in defined:
            return
        if name in self.assigned:
            self.fail(node, f"local '{name}' may be used before it is assigned")
        if name in _ALL_ENV_NAMES:
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
        if func.id not in _CALLABLE_ARITY:
            hint = " outside a for header" if func.id == "range" else ""
            self.fail(node, f"call to '{func.id}'{hint} is not allowed in {self.where} "
                            "(only min, max and abs can be called)")
        if node.keywords:
            self.fail(node, f"{func.id}() takes positional arguments only")
        low, high = _CALLABLE_ARITY[func.id]
        if len(node.args) < low or (high is not None and len(node.args) > high):
            count = f"{low}" if low == high else f"at least {low}"
            self.fail(node, f"{func.id}() takes {count} argument(s), got {len(node.args)}")
        for arg in node.args:
            self.expr(arg, defined)


# ----------------------------------------------------------------------------- sections

def _declared_name(reader: _Reader, key: yaml.Node, what: str, taken: dict) -> str:
    """A param or array name: an identifier that cannot collide with what bodies see."""
    name = reader.identifier(key, f"{what} name")
    if name in _RESERVED:
        reader.fail(key, f"{what} name '{name}' is reserved (environment names, min, max, "
                         "abs and range cannot be redeclared)")
    if name in taken:
        reader.fail(key, f"{what} name '{name}' is already used by a parameter")
    return name


def _parse_params(reader: _Reader, node: yaml.Node
                  ) -> tuple[dict[str, str], dict[str, tuple[ast.expr, str]]]:
    """Parameter types, and the expressions that choose a parameter from packed data."""
    params: dict[str, str] = {}
    packed: dict[str, tuple[ast.expr, str]] = {}
    for name, (key, value) in reader.mapping(node, "params").items():
        _declared_name(reader, key, "parameter", {})
        type_node = value
        if isinstance(value, yaml.MappingNode):
            fields = reader.mapping(value, f"parameter '{name}'")
            reader.check_keys(fields, key, f"parameter '{name}'", ("type",), ("packed",))
            type_node = fields["type"][1]
            if "packed" in fields:
                packed[name] = _parse_packed(reader, fields["packed"][1], name)
        ptype = reader.string(type_node, f"the type of parameter '{name}'")
        if ptype != "index":
            reader.fail(type_node, f"parameter '{name}' has type '{ptype}'; the only type "
                                   "is 'index'")
        params[name] = ptype
    return params, packed


def _parse_packed(reader: _Reader, node: yaml.Node, param: str) -> tuple[ast.expr, str]:
    """The value of ``param`` when a tensor is packed from data, over N and
    max_children (the most children one parent position has in that data)."""
    where = f"the packed value of parameter '{param}'"
    source = reader.scalar(node, ("str", "int"), where)
    line = _first_line(node)
    tree = _parse_python(reader, source, "eval", line, where)
    checker = _BodyChecker(reader, line, where, frozenset(PACKED_NAMES), frozenset(),
                           array_reads=False)
    _guard_depth(reader, line, where, lambda: checker.check_expression(tree.body))
    _guard_depth(reader, line, where, lambda: TypeChecker(where, checker.fail).expression(
        tree.body))
    return tree.body, source


def _first_line(node: yaml.ScalarNode) -> int:
    """File line of a scalar's first text line: block scalars (| >) start after the indicator."""
    return node.start_mark.line + (2 if node.style in ("|", ">") else 1)


def _parse_length(reader: _Reader, node: yaml.Node, array: str, params: dict[str, str],
                  array_names: frozenset[str]) -> tuple[ast.expr, str]:
    """Parse and check an array length expression over parent_size, size, N and params."""
    where = f"the length of array '{array}'"
    source = reader.scalar(node, ("str", "int"), where)
    line = _first_line(node)
    tree = _parse_python(reader, source, "eval", line, where)
    checker = _BodyChecker(reader, line, where, frozenset(_LENGTH_NAMES) | frozenset(params),
                           array_names, array_reads=False)
    _guard_depth(reader, line, where, lambda: checker.check_expression(tree.body))
    _guard_depth(reader, line, where, lambda: TypeChecker(where, checker.fail).expression(
        tree.body))
    return tree.body, source


def _parse_array(reader: _Reader, name: str, key: yaml.Node, node: yaml.Node,
                 params: dict[str, str], array_names: frozenset[str]) -> ArrayDef:
    what = f"array '{name}'"
    fields = reader.mapping(node, what)
    reader.check_keys(fields, key, what, ("type",), ("length", "init", "shared"))
    kind = reader.choice(fields["type"][1], f"the type of {what}", _ARRAY_KINDS)
    length, source = None, None
    if "length" in fields:
        length, source = _parse_length(reader, fields["length"][1], name, params, array_names)
    init = reader.integer(fields["init"][1], f"init of {what}") if "init" in fields else None
    if init is not None and abs(init) > INDEX_CONSTANT_LIMIT:
        reader.fail(fields["init"][1], f"init of {what} is {init}, which does not fit an "
                                       f"int32 index (at most {INDEX_CONSTANT_LIMIT})")
    shared = "shared" in fields and reader.boolean(fields["shared"][1], f"shared of {what}")
    return ArrayDef(name, kind, length, source, init, shared)


def _parse_arrays(reader: _Reader, node: yaml.Node, params: dict[str, str]) -> dict[str, ArrayDef]:
    entries = reader.mapping(node, "arrays")
    for key, _ in entries.values():
        _declared_name(reader, key, "array", params)
    names = frozenset(entries)
    return {name: _parse_array(reader, name, key, value, params, names)
            for name, (key, value) in entries.items()}


def _parse_property(reader: _Reader, name: str, node: yaml.Node) -> PropertyDef:
    """`true`/`false` (fixed) or `[default, configurable]`."""
    if isinstance(node, yaml.SequenceNode) and len(node.value) == 2:
        default = reader.boolean(node.value[0], f"the default of property '{name}'")
        flag = node.value[1]
        if not (isinstance(flag, yaml.ScalarNode) and flag.tag == _TAG + "str"
                and flag.value == "configurable"):
            reader.fail(flag, f"property '{name}': the second list item must be 'configurable'")
        return PropertyDef(default, True)
    if isinstance(node, yaml.ScalarNode) and node.tag == _TAG + "bool":
        return PropertyDef(reader.boolean(node, f"property '{name}'"), False)
    shown = f"'{node.value}'" if isinstance(node, yaml.ScalarNode) else _describe_node(node)
    reader.fail(node, f"property '{name}' must be true, false or [true|false, configurable], "
                      f"got {shown}")


def _parse_properties(reader: _Reader, key: yaml.Node,
                      node: yaml.Node) -> dict[str, PropertyDef]:
    entries = reader.mapping(node, "properties")
    reader.check_keys(entries, key, "properties", PROPERTY_NAMES)
    return {name: _parse_property(reader, name, entries[name][1]) for name in PROPERTY_NAMES}


def _parse_python(reader: _Reader, source: str, mode: str, first_line: int,
                  where: str) -> ast.AST:
    """ast.parse (never eval) with syntax errors, and warnings, mapped to file lines."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", SyntaxWarning)
            return ast.parse(source, filename=reader.path, mode=mode)
    except SyntaxError as exc:
        reader.fail(first_line + (exc.lineno or 1) - 1, f"syntax error in {where}: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:
        reader.fail(first_line, f"cannot parse {where}: {exc}")


def _guard_depth(reader: _Reader, line: int, where: str, check: Callable[[], None]) -> None:
    """Run a recursive check, turning absurd nesting into a located error."""
    try:
        check()
    except RecursionError:
        reader.fail(line, f"{where} is nested too deeply")


def _parse_function(reader: _Reader, name: str, node: yaml.Node, params: dict[str, str],
                    arrays: dict[str, ArrayDef]) -> LevelFunction:
    """Parse one body and check it against the whitelist for function `name`."""
    source = reader.string(node, f"the body of {name}")
    if node.style == ">":
        reader.fail(node, f"write the body of {name} as a literal block (|), not folded (>)")
    first_line = _first_line(node)
    module = _parse_python(reader, source, "exec", first_line, name)
    if not module.body:
        reader.fail(node, f"the body of {name} is empty (write `pass`)")
    arity = RETURN_ARITY[name]
    if name in OPTIONAL_RETURN and any(isinstance(node, ast.Return) for node in ast.walk(module)):
        arity = 1
    checker = _BodyChecker(reader, first_line, name,
                           frozenset(ENVIRONMENTS[name]) | frozenset(params), frozenset(arrays),
                           may_store=name in _STORE_FUNCTIONS, arity=arity)
    _guard_depth(reader, first_line, f"the body of {name}",
                 lambda: checker.check_function(module.body))
    _guard_depth(reader, first_line, f"the body of {name}",
                 lambda: TypeChecker(name, checker.fail).function(name, module.body))
    return LevelFunction(name, tuple(module.body), source, first_line, arity)


def _collect_bodies(reader: _Reader, entries: Entries) -> Entries:
    """Flatten plain capabilities and the insert/append groups into one map of bodies."""
    bodies = {name: entries[name] for name in _ITERATION if name in entries}
    groups = (("insert", _INSERT, ("size", "insert_coord")),
              ("append", _APPEND, ("append_coord",)))
    for group, names, required in groups:
        if group in entries:
            key, value = entries[group]
            sub = reader.mapping(value, group)
            optional = tuple(n for n in names if n not in required)
            reader.check_keys(sub, key, group, required, optional)
            bodies.update(sub)
    return bodies


def _check_consistency(reader: _Reader, entries: Entries, iterate: str) -> None:
    """Capabilities that only make sense together."""
    needed = ("coord_bounds", "coord_access") if iterate == "coordinate" else (
        "pos_bounds", "pos_access")
    for name in needed:
        if name not in entries:
            reader.fail(entries["iterate"][1], f"iterate: {iterate} needs {name}")
    if "insert" in entries and "append" in entries:
        reader.fail(entries["append"][0], "a level cannot have both insert and append")
    if "insert" in entries and "locate" not in entries:
        reader.fail(entries["insert"][0], "insert needs locate (inserts go to located positions)")


def _parse_capabilities(reader: _Reader, key: yaml.Node, node: yaml.Node,
                        params: dict[str, str],
                        arrays: dict[str, ArrayDef]) -> tuple[str, dict[str, LevelFunction]]:
    entries = reader.mapping(node, "capabilities")
    reader.check_keys(entries, key, "capabilities", ("iterate",),
                      _ITERATION + ("insert", "append"))
    iterate = reader.choice(entries["iterate"][1], "iterate", _ITERATE_KINDS)
    bodies = _collect_bodies(reader, entries)
    _check_consistency(reader, entries, iterate)
    ordered = sorted(bodies.items(), key=lambda item: item[1][1].start_mark.index)
    functions = {name: _parse_function(reader, name, value, params, arrays)
                 for name, (_, value) in ordered}
    return iterate, {name: functions[name] for name in FUNCTION_NAMES if name in functions}


# ----------------------------------------------------------------------------- entry points

def load_level_text(text: str, path: str = "<string>") -> LevelDef:
    """Validate level-format YAML text; `path` only labels errors and LevelDef.path."""
    path = str(path)
    reader = _Reader(path)
    root = _compose(text, path)
    top = reader.mapping(root, "the level format file")
    reader.check_keys(top, root, "the level format file", _TOP_KEYS)
    name = reader.identifier(top["name"][1], "the level name")
    doc = reader.string(top["doc"][1], "doc").strip()
    params, packed = _parse_params(reader, top["params"][1])
    arrays = _parse_arrays(reader, top["arrays"][1], params)
    properties = _parse_properties(reader, *top["properties"])
    iterate, functions = _parse_capabilities(reader, *top["capabilities"], params, arrays)
    return LevelDef(name, doc, path, params, arrays, properties, iterate, functions, packed)


def load_level_file(path: str | os.PathLike[str]) -> LevelDef:
    """Read and validate one level-format file (OSError if it cannot be read)."""
    shown = os.fspath(path)
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FormatFileError(shown, line, "the file is not valid UTF-8") from None
    return load_level_text(text, shown)


def main(argv: list[str] | None = None) -> int:
    """`python -m llvsparse.formats.loader FILE...`: check plugin files before shipping them."""
    status = 0
    for name in sys.argv[1:] if argv is None else argv:
        try:
            level = load_level_file(name)
        except (FormatFileError, OSError) as exc:
            print(exc, file=sys.stderr)
            status = 1
        else:
            caps = [cap for cap in ("locate", "insert", "append")
                    if getattr(level, f"can_{cap}")]
            print(f"{name}: ok: level '{level.name}', iterate {level.iterate}, "
                  f"capabilities: {', '.join(caps) or 'iteration only'}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
