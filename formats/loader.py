"""Load and strictly validate one level-format YAML file (reference: formats/README.md).

Level formats are plugins: their code bodies are compiled straight into native kernels, so the
loader trusts nothing. Every key, value and body construct is checked against a whitelist, and
every error names the file and the line it comes from, because plugin authors have no other way
to find out what the compiler did not like.
"""

from __future__ import annotations

import ast
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .body_check import BodyChecker
from .typecheck import TypeChecker
from .vocabulary import (
    APPEND,
    ARRAY_KINDS,
    ENVIRONMENTS,
    FUNCTION_NAMES,
    INDEX_CONSTANT_LIMIT,
    INSERT,
    ITERATE_KINDS,
    ITERATION,
    LENGTH_NAMES,
    OPTIONAL_RETURN,
    PACKED_NAMES,
    PROPERTY_NAMES,
    RESERVED,
    RETURN_ARITY,
    STORE_FUNCTIONS,
    SUBSECTION,
    TAG,
    TOP_KEYS,
    FormatFileError,
)
from .yaml_reader import Entries, Reader, compose, describe_node

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
    def can_subsection(self) -> bool:
        """The positions of a parent's coordinates within a range [i_lo, i_hi), found
        without walking the parent's segment (valid where the level is ordered)."""
        return "subsection" in self.functions

    @property
    def can_insert(self) -> bool:
        """Assembly by random inserts at located positions."""
        return "insert_coord" in self.functions

    @property
    def can_append(self) -> bool:
        """Assembly by appending coordinates in order."""
        return "append_coord" in self.functions



# ----------------------------------------------------------------------------- sections

def _declared_name(reader: Reader, key: yaml.Node, what: str, taken: dict) -> str:
    """A param or array name: an identifier that cannot collide with what bodies see."""
    name = reader.identifier(key, f"{what} name")
    if name in RESERVED:
        reader.fail(key, f"{what} name '{name}' is reserved (environment names, min, max, "
                         "abs and range cannot be redeclared)")
    if name in taken:
        reader.fail(key, f"{what} name '{name}' is already used by a parameter")
    return name


def _parse_params(reader: Reader, node: yaml.Node
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


def _parse_packed(reader: Reader, node: yaml.Node, param: str) -> tuple[ast.expr, str]:
    """The value of ``param`` when a tensor is packed from data, over N and
    max_children (the most children one parent position has in that data)."""
    where = f"the packed value of parameter '{param}'"
    source = reader.scalar(node, ("str", "int"), where)
    line = _first_line(node)
    tree = _parse_python(reader, source, "eval", line, where)
    checker = BodyChecker(reader, line, where, frozenset(PACKED_NAMES), frozenset(),
                           array_reads=False)
    _guard_depth(reader, line, where, lambda: checker.check_expression(tree.body))
    _guard_depth(reader, line, where, lambda: TypeChecker(where, checker.fail).expression(
        tree.body))
    return tree.body, source


def _first_line(node: yaml.ScalarNode) -> int:
    """File line of a scalar's first text line: block scalars (| >) start after the indicator."""
    return node.start_mark.line + (2 if node.style in ("|", ">") else 1)


def _parse_length(reader: Reader, node: yaml.Node, array: str, params: dict[str, str],
                  array_names: frozenset[str]) -> tuple[ast.expr, str]:
    """Parse and check an array length expression over parent_size, size, N and params."""
    where = f"the length of array '{array}'"
    source = reader.scalar(node, ("str", "int"), where)
    line = _first_line(node)
    tree = _parse_python(reader, source, "eval", line, where)
    checker = BodyChecker(reader, line, where, frozenset(LENGTH_NAMES) | frozenset(params),
                           array_names, array_reads=False)
    _guard_depth(reader, line, where, lambda: checker.check_expression(tree.body))
    _guard_depth(reader, line, where, lambda: TypeChecker(where, checker.fail).expression(
        tree.body))
    return tree.body, source


def _parse_array(reader: Reader, name: str, key: yaml.Node, node: yaml.Node,
                 params: dict[str, str], array_names: frozenset[str]) -> ArrayDef:
    what = f"array '{name}'"
    fields = reader.mapping(node, what)
    reader.check_keys(fields, key, what, ("type",), ("length", "init", "shared"))
    kind = reader.choice(fields["type"][1], f"the type of {what}", ARRAY_KINDS)
    length, source = None, None
    if "length" in fields:
        length, source = _parse_length(reader, fields["length"][1], name, params, array_names)
    init = reader.integer(fields["init"][1], f"init of {what}") if "init" in fields else None
    if init is not None and abs(init) > INDEX_CONSTANT_LIMIT:
        reader.fail(fields["init"][1], f"init of {what} is {init}, which does not fit an "
                                       f"int32 index (at most {INDEX_CONSTANT_LIMIT})")
    shared = "shared" in fields and reader.boolean(fields["shared"][1], f"shared of {what}")
    return ArrayDef(name, kind, length, source, init, shared)


def _parse_arrays(reader: Reader, node: yaml.Node, params: dict[str, str]) -> dict[str, ArrayDef]:
    entries = reader.mapping(node, "arrays")
    for key, _ in entries.values():
        _declared_name(reader, key, "array", params)
    names = frozenset(entries)
    return {name: _parse_array(reader, name, key, value, params, names)
            for name, (key, value) in entries.items()}


def _parse_property(reader: Reader, name: str, node: yaml.Node) -> PropertyDef:
    """`true`/`false` (fixed) or `[default, configurable]`."""
    if isinstance(node, yaml.SequenceNode) and len(node.value) == 2:
        default = reader.boolean(node.value[0], f"the default of property '{name}'")
        flag = node.value[1]
        if not (isinstance(flag, yaml.ScalarNode) and flag.tag == TAG + "str"
                and flag.value == "configurable"):
            reader.fail(flag, f"property '{name}': the second list item must be 'configurable'")
        return PropertyDef(default, True)
    if isinstance(node, yaml.ScalarNode) and node.tag == TAG + "bool":
        return PropertyDef(reader.boolean(node, f"property '{name}'"), False)
    shown = f"'{node.value}'" if isinstance(node, yaml.ScalarNode) else describe_node(node)
    reader.fail(node, f"property '{name}' must be true, false or [true|false, configurable], "
                      f"got {shown}")


def _parse_properties(reader: Reader, key: yaml.Node,
                      node: yaml.Node) -> dict[str, PropertyDef]:
    entries = reader.mapping(node, "properties")
    reader.check_keys(entries, key, "properties", PROPERTY_NAMES)
    return {name: _parse_property(reader, name, entries[name][1]) for name in PROPERTY_NAMES}


def _parse_python(reader: Reader, source: str, mode: str, first_line: int,
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


def _guard_depth(reader: Reader, line: int, where: str, check: Callable[[], None]) -> None:
    """Run a recursive check, turning absurd nesting into a located error."""
    try:
        check()
    except RecursionError:
        reader.fail(line, f"{where} is nested too deeply")


def _parse_function(reader: Reader, name: str, node: yaml.Node, params: dict[str, str],
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
    checker = BodyChecker(reader, first_line, name,
                           frozenset(ENVIRONMENTS[name]) | frozenset(params), frozenset(arrays),
                           may_store=name in STORE_FUNCTIONS, arity=arity)
    _guard_depth(reader, first_line, f"the body of {name}",
                 lambda: checker.check_function(module.body))
    _guard_depth(reader, first_line, f"the body of {name}",
                 lambda: TypeChecker(name, checker.fail).function(name, module.body))
    return LevelFunction(name, tuple(module.body), source, first_line, arity)


def _collect_bodies(reader: Reader, entries: Entries) -> Entries:
    """Flatten plain capabilities and the insert/append groups into one map of bodies."""
    bodies = {name: entries[name] for name in ITERATION + SUBSECTION if name in entries}
    groups = (("insert", INSERT, ("size", "insert_coord")),
              ("append", APPEND, ("append_coord",)))
    for group, names, required in groups:
        if group in entries:
            key, value = entries[group]
            sub = reader.mapping(value, group)
            optional = tuple(n for n in names if n not in required)
            reader.check_keys(sub, key, group, required, optional)
            bodies.update(sub)
    return bodies


def _check_consistency(reader: Reader, entries: Entries, iterate: str) -> None:
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
    if "subsection" in entries and iterate != "position":
        reader.fail(entries["subsection"][0], "subsection returns positions: it needs "
                                              "iterate: position")


def _parse_capabilities(reader: Reader, key: yaml.Node, node: yaml.Node,
                        params: dict[str, str],
                        arrays: dict[str, ArrayDef]) -> tuple[str, dict[str, LevelFunction]]:
    entries = reader.mapping(node, "capabilities")
    reader.check_keys(entries, key, "capabilities", ("iterate",),
                      ITERATION + SUBSECTION + ("insert", "append"))
    iterate = reader.choice(entries["iterate"][1], "iterate", ITERATE_KINDS)
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
    reader = Reader(path)
    root = compose(text, path)
    top = reader.mapping(root, "the level format file")
    reader.check_keys(top, root, "the level format file", TOP_KEYS)
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
            caps = [cap for cap in ("locate", "subsection", "insert", "append")
                    if getattr(level, f"can_{cap}")]
            print(f"{name}: ok: level '{level.name}', iterate {level.iterate}, "
                  f"capabilities: {', '.join(caps) or 'iteration only'}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
