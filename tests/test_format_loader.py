"""Tests for the level-format loader and registry: shipped files, located errors, plugins."""

from __future__ import annotations

import ast
import pickle
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

try:  # installed package
    from llvsparse.formats import loader, registry
except ImportError:  # source checkout, run from the repository root
    from formats import loader, registry

FormatFileError = loader.FormatFileError

# A small valid level; error tests edit one line of it and expect that exact line number.
BASE = textwrap.dedent("""\
    name: probe
    doc: A test level.
    params: {W: index}
    arrays:
      pos: {type: pos, length: parent_size + 1, init: 0}
      crd: {type: crd, length: size}
    properties:
      full: false
      ordered: [true, configurable]
      unique: true
      branchless: false
      compact: true
    capabilities:
      iterate: position
      pos_bounds: return pos[p_parent], pos[p_parent + 1]
      pos_access: return crd[p], True
      append:
        append_coord: crd[p] = i
    """)

SHIPPED = ("compressed", "dense", "hashed", "hashmap", "offset", "range", "singleton")


def _edit(old: str, new: str, text: str = BASE) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def _write(tmp_path: Path, text: str, name: str = "probe.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _expect_error(tmp_path: Path, text: str, line: int, *fragments: str) -> FormatFileError:
    """Load `text` from a file and check the error names that file, `line` and the problem."""
    path = _write(tmp_path, text)
    with pytest.raises(FormatFileError) as info:
        loader.load_level_file(path)
    err = info.value
    assert err.path == str(path)
    assert err.line == line, str(err)
    assert str(err).startswith(f"{path}:{line}: "), str(err)
    for fragment in fragments:
        assert fragment in err.problem, str(err)
    return err


# ----------------------------------------------------------------------------- shipped files

@pytest.fixture
def shipped() -> dict[str, loader.LevelDef]:
    folder = Path(loader.__file__).parent
    return {p.stem: loader.load_level_file(p) for p in sorted(folder.glob("*.yaml"))}


def test_exactly_the_seven_shipped_formats_load(shipped):
    assert sorted(shipped) == list(SHIPPED)
    for stem, level in shipped.items():
        assert level.name == stem
        assert list(level.properties) == list(loader.PROPERTY_NAMES)
        assert level.doc


@pytest.mark.parametrize(("name", "iterate", "locate", "insert", "append"), [
    ("dense", "coordinate", True, True, False),
    ("compressed", "position", False, False, True),
    ("singleton", "position", False, False, True),
    ("range", "coordinate", False, False, False),
    ("offset", "position", False, False, False),
    ("hashed", "position", True, True, False),
])
def test_shipped_capabilities(shipped, name, iterate, locate, insert, append):
    level = shipped[name]
    assert level.iterate == iterate
    assert (level.can_locate, level.can_insert, level.can_append) == (locate, insert, append)
    prefix = "coord" if iterate == "coordinate" else "pos"
    assert level.has(f"{prefix}_bounds") and level.has(f"{prefix}_access")
    for fn in level.functions.values():
        # A bounded insert says whether it inserted (hashed: False once W buckets are full).
        bounded = fn.name in loader.OPTIONAL_RETURN and name == "hashed"
        assert fn.returns == (1 if bounded else loader.RETURN_ARITY[fn.name])


@pytest.mark.parametrize(("name", "expected"), [
    ("dense", {"full": (True, False), "ordered": (True, True), "compact": (True, False)}),
    ("compressed", {"full": (False, True), "unique": (True, True), "branchless": (False, False)}),
    ("singleton", {"branchless": (True, False), "compact": (True, False)}),
    ("range", {"full": (False, False), "compact": (False, False)}),
    ("offset", {"branchless": (True, False), "compact": (False, False)}),
    ("hashed", {"ordered": (False, False), "unique": (True, True), "compact": (False, False)}),
])
def test_shipped_properties(shipped, name, expected):
    props = shipped[name].properties
    for prop, (default, configurable) in expected.items():
        assert props[prop] == loader.PropertyDef(default, configurable)


def test_shipped_arrays_and_params(shipped):
    assert shipped["dense"].arrays == {} and shipped["dense"].params == {}
    pos = shipped["compressed"].arrays["pos"]
    assert (pos.kind, pos.length_source, pos.init, pos.shared) == ("pos", "parent_size + 1", 0, False)
    assert isinstance(pos.length, ast.BinOp)
    assert shipped["hashed"].params == {"W": "index"}
    assert shipped["hashed"].arrays["crd"].init == -1
    for name in ("range", "offset"):
        offset = shipped[name].arrays["offset"]
        assert offset.shared and offset.length is None and offset.length_source is None


def test_block_body_line_points_after_the_indicator(shipped):
    locate = shipped["hashed"].functions["locate"]
    lines = Path(shipped["hashed"].path).read_text().splitlines()
    assert lines[locate.line - 2].strip() == "locate: |"
    assert lines[locate.line - 1].strip() == "base = p_parent * W"
    last = locate.body[-1]
    assert isinstance(last, ast.Return)
    assert lines[locate.line + last.lineno - 2].strip() == "return q, crd[q] == i"


def test_has_rejects_unknown_function_names(shipped):
    with pytest.raises(ValueError, match="unknown level function"):
        shipped["dense"].has("insert")


def test_base_probe_is_valid():
    level = loader.load_level_text(BASE)
    assert level.path == "<string>"
    assert level.can_append and not level.can_insert
    assert level.functions["append_coord"].returns == 0
    hash(level)


# ----------------------------------------------------------------------------- YAML-level errors

def test_yaml_syntax_error(tmp_path):
    _expect_error(tmp_path, _edit("  unique: true\n", "  unique: true: false\n"), 10,
                  "YAML syntax error")


def test_unclosed_flow_list_is_reported_where_the_parser_stops(tmp_path):
    _expect_error(tmp_path, _edit("  ordered: [true, configurable]", "  ordered: [true, configurable"),
                  10, "YAML syntax error")


def test_empty_file(tmp_path):
    _expect_error(tmp_path, "# nothing\n", 1, "empty")


def test_top_level_must_be_a_mapping(tmp_path):
    _expect_error(tmp_path, "- a\n- b\n", 1, "must be a mapping")


def test_missing_top_level_key(tmp_path):
    _expect_error(tmp_path, _edit("doc: A test level.\n", ""), 1, "missing", "'doc'")


def test_unknown_top_level_key(tmp_path):
    _expect_error(tmp_path, BASE + "version: 2\n", 19, "unknown key 'version'")


def test_duplicate_top_level_key(tmp_path):
    _expect_error(tmp_path, _edit("doc: A test level.\n", "doc: A test level.\nname: other\n"),
                  3, "duplicate key 'name'", "line 1")


def test_duplicate_array(tmp_path):
    text = _edit("  crd: {type: crd, length: size}\n",
                 "  crd: {type: crd, length: size}\n  crd: {type: crd}\n")
    _expect_error(tmp_path, text, 7, "duplicate key 'crd'")


def test_unknown_capability_key(tmp_path):
    text = _edit("  pos_access: return crd[p], True\n",
                 "  pos_access: return crd[p], True\n  slice: return 0, 1\n")
    _expect_error(tmp_path, text, 17, "unknown key 'slice'", "capabilities")


def test_unknown_key_inside_append(tmp_path):
    _expect_error(tmp_path, BASE + "    append_all: pass\n", 19, "unknown key 'append_all'")


def test_unknown_array_field(tmp_path):
    _expect_error(tmp_path, _edit("length: size}", "length: size, dtype: int32}"), 6,
                  "unknown key 'dtype'")


def test_array_needs_type(tmp_path):
    _expect_error(tmp_path, _edit("{type: crd, length: size}", "{length: size}"), 6,
                  "missing required key 'type'")


def test_bad_array_type(tmp_path):
    _expect_error(tmp_path, _edit("{type: crd, length: size}", "{type: val, length: size}"), 6,
                  "pos, crd", "'val'")


@pytest.mark.parametrize(("line_text", "fragment"), [
    ("  unique: maybe\n", "'maybe'"),
    ("  unique: 1\n", "got '1'"),
    ("  unique: [true, fixed]\n", "'configurable'"),
    ("  unique: [yes_please, configurable]\n", "must be a boolean"),
    ("  unique: [true, configurable, extra]\n", "a list"),
])
def test_bad_property_value(tmp_path, line_text, fragment):
    _expect_error(tmp_path, _edit("  unique: true\n", line_text), 10, "'unique'", fragment)


def test_missing_property(tmp_path):
    _expect_error(tmp_path, _edit("  compact: true\n", ""), 7, "missing", "'compact'")


def test_unknown_property(tmp_path):
    _expect_error(tmp_path, _edit("  compact: true\n", "  compact: true\n  sorted: true\n"),
                  13, "unknown key 'sorted'")


def test_param_type_must_be_index(tmp_path):
    _expect_error(tmp_path, _edit("{W: index}", "{W: float}"), 3, "'index'")


def test_reserved_param_name(tmp_path):
    _expect_error(tmp_path, _edit("{W: index}", "{N: index}"), 3, "reserved")


def test_bad_iterate(tmp_path):
    _expect_error(tmp_path, _edit("iterate: position", "iterate: random"), 14,
                  "coordinate, position")


def test_level_name_must_be_identifier(tmp_path):
    _expect_error(tmp_path, _edit("name: probe", "name: my-level"), 1, "identifier")


# ----------------------------------------------------------------------------- consistency

def test_insert_without_locate(tmp_path):
    text = _edit("  append:\n    append_coord: crd[p] = i\n",
                 "  insert:\n    size: return parent_size * W\n    insert_coord: crd[p] = i\n")
    _expect_error(tmp_path, text, 17, "insert needs locate")


def test_insert_needs_size(tmp_path):
    text = _edit("  append:\n    append_coord: crd[p] = i\n",
                 "  locate: return i, True\n  insert:\n    insert_coord: crd[p] = i\n")
    _expect_error(tmp_path, text, 18, "missing required key 'size'")


def test_insert_and_append_exclude_each_other(tmp_path):
    text = _edit("  append:\n", "  locate: return i, True\n  insert:\n    size: return 1\n"
                 "    insert_coord: pass\n  append:\n")
    _expect_error(tmp_path, text, 21, "both insert and append")


def test_coordinate_iteration_needs_coord_functions(tmp_path):
    _expect_error(tmp_path, _edit("iterate: position", "iterate: coordinate"), 14,
                  "needs coord_bounds")


def test_position_iteration_needs_pos_access(tmp_path):
    _expect_error(tmp_path, _edit("  pos_access: return crd[p], True\n", ""), 14,
                  "needs pos_access")


# ----------------------------------------------------------------------------- bodies

ACCESS = "  pos_access: return crd[p], True\n"


@pytest.mark.parametrize(("body", "fragments"), [
    ("return __import__('os'), True", ("call to '__import__'",)),
    ("return crd.size, True", ("attribute access", "crd.size")),
    ("return crd[p] * 1.5, True", ("float constant 1.5",)),
    ("return crd[p] * 99999999999999999999, True", ("does not fit an int32 index",)),
    ("return crd[p] / 2, True", ("operator '/'",)),
    ("return crd[p] // 0, True", ("division by zero",)),
    ("return crd[p] % 0, True", ("division by zero",)),
    ("return crd[p] ** 2, True", ("operator '**'",)),
    ("'return (lambda: 0)(), True'", ("lambda",)),  # quoted: ': ' is YAML syntax
    ("return len(crd), True", ("call to 'len'",)),
    ("return crd[p], 'yes'", ("str constant",)),
    ("return crd[p], crd[p] in W", ("comparison 'in'",)),
    ("return crd[p:p + 1], True", ("slice",)),
    ("return crd[p], [p]", ("list",)),
    ("return min(crd[p]), True", ("min() takes at least 2",)),
    ("return max(a=p, b=0), True", ("positional",)),
    ("return x[p], True", ("'x' is not a declared array",)),
    ("return W[p], True", ("'W' is not an array",)),
    ("return crd, True", ("must be subscripted",)),
])
def test_forbidden_construct_on_one_line(tmp_path, body, fragments):
    _expect_error(tmp_path, _edit(ACCESS, f"  pos_access: {body}\n"), 16, *fragments)


def _block(name: str, *lines: str) -> str:
    """A capability written as a literal block scalar, indented for the capabilities map."""
    return f"  {name}: |\n" + "".join(f"    {line}\n" for line in lines)


@pytest.mark.parametrize(("lines", "line", "fragments"), [
    (("q = p", "import os", "return crd[q], True"), 18, ("import",)),
    (("q = p", "r = q + 1", "return crd[q].bit_length(), r > 0"), 19, ("attribute access",)),
    (("__import__('os')", "return crd[p], True"), 17, ("call to '__import__'",)),
    (("q = p", "q.x = 1", "return crd[q], True"), 18, ("attribute access",)),
    (("q = 0", "q *= 2", "return crd[q], True"), 18, ("'*='",)),
    (("a = b = p", "return crd[a], True"), 17, ("chained assignment",)),
    (("a, b = p, p", "return crd[a], True"), 17, ("tuple",)),
    (("while p > 0:", "    break", "return crd[p], True"), 18, ("break",)),
    (("for q in [1, 2]:", "    pass", "return crd[p], True"), 17, ("range(a, b)",)),
    (("for q in range(3):", "    q = 1", "return crd[p], True"), 18, ("loop variable 'q'",)),
    (("q = 1", "for q in range(3):", "    pass", "else:", "    pass", "return crd[p], True"),
     18, ("for ... else",)),
    (("p = p + 1", "return crd[p], True"), 17, ("input of pos_access",)),
    (("crd = 0", "return 0, True"), 17, ("cannot rebind array",)),
    (("min = 0", "return crd[p], True"), 17, ("reserved",)),
    (("x = (1 if p else", "return 0, True"), 17, ("syntax error",)),
    (("return crd[p], True", "q = 1"), 18, ("unreachable",)),
])
def test_forbidden_construct_in_block(tmp_path, lines, line, fragments):
    _expect_error(tmp_path, _edit(ACCESS, _block("pos_access", *lines)), line, *fragments)


def test_folded_body_is_rejected(tmp_path):
    _expect_error(tmp_path, _edit(ACCESS, "  pos_access: >\n    return crd[p], True\n"), 16,
                  "literal block")


def test_body_must_be_a_string(tmp_path):
    _expect_error(tmp_path, _edit(ACCESS, "  pos_access: 7\n"), 16, "must be a string")


@pytest.mark.parametrize(("body", "fragments"), [
    ("return crd[p], j == 0", ("unknown name 'j'",)),
    ("return crd[p], p_begin", ("'p_begin' is not available in pos_access",)),
    ("return crd[p], size > 0", ("'size' is not available",)),
])
def test_unknown_name_in_body(tmp_path, body, fragments):
    _expect_error(tmp_path, _edit(ACCESS, f"  pos_access: {body}\n"), 16, *fragments)


def test_local_used_before_assignment(tmp_path):
    body = _block("pos_access", "if p > 0:", "    q = p", "return crd[q], True")
    _expect_error(tmp_path, _edit(ACCESS, body), 19, "'q' may be used before it is assigned")


def test_local_assigned_on_both_branches_is_fine():
    body = _block("pos_access", "if p > 0:", "    q = p", "else:", "    q = 0",
                  "return crd[q], True")
    loader.load_level_text(_edit(ACCESS, body))


def test_loop_variable_is_not_defined_after_the_loop(tmp_path):
    body = _block("pos_access", "for q in range(p):", "    pass", "return crd[q], True")
    _expect_error(tmp_path, _edit(ACCESS, body), 19, "'q' may be used before")


def test_store_into_array_in_pos_access(tmp_path):
    body = _block("pos_access", "crd[p] = 0", "return crd[p], True")
    _expect_error(tmp_path, _edit(ACCESS, body), 17, "pos_access cannot store into arrays")


def test_augmented_store_is_allowed_in_assembly():
    text = BASE + "    append_edges: pos[p_parent + 1] += p_end - p_begin\n"
    level = loader.load_level_text(text)
    assert level.has("append_edges") and level.functions["append_edges"].line == 19


def test_store_in_size_is_rejected(tmp_path):
    text = _edit("  append:\n    append_coord: crd[p] = i\n",
                 "  locate: return i, True\n  insert:\n"
                 + "".join(f"    {s}\n" for s in ("size: |", "  crd[0] = 1", "  return 1",
                                                   "insert_coord: pass")))
    _expect_error(tmp_path, text, 20, "size cannot store into arrays")


@pytest.mark.parametrize(("old", "new", "line", "fragment"), [
    ("return pos[p_parent], pos[p_parent + 1]", "return pos[p_parent]", 15, "2 value(s)"),
    ("return pos[p_parent], pos[p_parent + 1]", "return 0, 1, 2", 15, "got 3"),
    ("return crd[p], True", "pass", 16, "must end every path"),
    ("crd[p] = i", "return i", 18, "returns nothing"),
])
def test_wrong_return_arity(tmp_path, old, new, line, fragment):
    _expect_error(tmp_path, _edit(old, new), line, fragment)


def test_every_path_must_return(tmp_path):
    body = _block("pos_access", "if p > 0:", "    return crd[p], True", "q = 1")
    _expect_error(tmp_path, _edit(ACCESS, body), 19, "must end every path")


def test_if_else_returning_on_both_paths_is_fine():
    body = _block("pos_access", "if p > 0:", "    return crd[p], True", "else:",
                  "    return 0, False")
    level = loader.load_level_text(_edit(ACCESS, body))
    assert level.functions["pos_access"].returns == 2


def test_size_returns_one_value(tmp_path):
    text = _edit("  append:\n    append_coord: crd[p] = i\n",
                 "  locate: return i, True\n  insert:\n    size: return parent_size, W\n"
                 "    insert_coord: pass\n")
    _expect_error(tmp_path, text, 19, "size must return 1 value(s)")


def test_whitelisted_language_is_accepted():
    body = _block(
        "pos_access",
        "lo = min(p, W, N)",
        "hi = max(lo, abs(-p_parent)) // 2 % 3",
        "n = 0",
        "while n < W and not (lo >= hi or lo == 0):",
        "    n += 1",
        "    lo -= 1",
        "for q in range(lo, hi):",
        "    n = n + q * 2",
        "for r in range(3):",
        "    pass",
        "ok = 0 <= n < N_child if i_parent != i_grandparent else False",
        "return crd[p + n - n], ok",
    )
    level = loader.load_level_text(_edit(ACCESS, body))
    assert len(level.functions["pos_access"].body) == 8


# ----------------------------------------------------------------------------- length expressions

@pytest.mark.parametrize(("length", "fragment"), [
    ("parent_size * 1.0", "float constant"),
    ("crd[0]", "cannot read arrays"),
    ("p + 1", "'p' is not available"),
    ("q + 1", "unknown name 'q'"),
    ("parent_size +", "syntax error"),
    ("len(crd)", "call to 'len'"),
])
def test_bad_length_expression(tmp_path, length, fragment):
    _expect_error(tmp_path, _edit("length: size}", f"length: '{length}'}}"), 6, fragment)


def test_length_may_use_params_and_plain_integers():
    level = loader.load_level_text(_edit("length: size}", "length: 4}",
                                         _edit("parent_size + 1", "parent_size * W + 1")))
    assert level.arrays["crd"].length_source == "4"
    assert level.arrays["pos"].length_source == "parent_size * W + 1"


# ----------------------------------------------------------------------------- misc loader

def test_load_level_text_labels_errors_with_the_given_path():
    with pytest.raises(FormatFileError) as info:
        loader.load_level_text(BASE + "extra: 1\n", path="plugins/x.yaml")
    assert str(info.value) == "plugins/x.yaml:19: " + info.value.problem


def test_error_survives_pickling():
    err = FormatFileError("a.yaml", 3, "bad")
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.path, copy.line, copy.problem, str(copy)) == ("a.yaml", 3, "bad", "a.yaml:3: bad")


def test_non_utf8_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"name: x\ndoc: \xff\n")
    with pytest.raises(FormatFileError, match=r"bad\.yaml:2: .*UTF-8"):
        loader.load_level_file(path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mangled_files_fail_only_with_format_file_error(data):
    """Any edit of a valid file either loads or raises FormatFileError, never anything else."""
    lines = BASE.splitlines(keepends=True)
    index = data.draw(st.integers(0, len(lines) - 1))
    alphabet = st.sampled_from(list(" :[]{},|>-#'\"\n\tabpW0.1()=+*/_") + ["crd", "N", "return"])
    replacement = "".join(data.draw(st.lists(alphabet, max_size=12)))
    text = "".join(lines[:index]) + replacement + "".join(lines[index + 1:])
    try:
        loader.load_level_text(text)
    except FormatFileError as err:
        assert 1 <= err.line <= text.count("\n") + 2


# ----------------------------------------------------------------------------- registry

@pytest.fixture
def clean_registry(monkeypatch):
    """Isolate user registrations so tests do not leak formats into each other."""
    monkeypatch.setattr(registry, "_user", {})


def test_registry_lists_shipped_formats(clean_registry):
    formats = registry.level_formats()
    assert sorted(formats) == list(SHIPPED)
    assert registry.get_level("dense") is formats["dense"]
    assert registry.level_formats() is not formats  # callers get a copy


def test_register_from_file(tmp_path, clean_registry):
    path = _write(tmp_path, BASE)
    level = registry.register_level_format(path)
    assert level.name == "probe" and level.path == str(path)
    assert registry.get_level("probe") is level
    assert "probe" in registry.level_formats()
    registry.unregister_level_format("probe")
    with pytest.raises(registry.UnknownLevelFormat):
        registry.get_level("probe")


def test_register_same_file_twice_reloads(tmp_path, clean_registry):
    path = _write(tmp_path, BASE)
    registry.register_level_format(path)
    path.write_text(_edit("doc: A test level.", "doc: Edited."), encoding="utf-8")
    assert registry.register_level_format(path).doc == "Edited."


def test_register_clash_with_shipped_format(tmp_path, clean_registry):
    path = _write(tmp_path, _edit("name: probe", "name: dense"), "mydense.yaml")
    with pytest.raises(registry.LevelFormatClash, match="'dense' already exists") as info:
        registry.register_level_format(path)
    assert isinstance(info.value, ValueError)
    assert registry.get_level("dense").path != str(path)
    replaced = registry.register_level_format(path, replace=True)
    assert registry.get_level("dense") is replaced
    registry.unregister_level_format("dense")
    assert registry.get_level("dense").iterate == "coordinate"  # the shipped one is back


def test_register_clash_between_plugins(tmp_path, clean_registry):
    registry.register_level_format(_write(tmp_path, BASE, "a.yaml"))
    with pytest.raises(registry.LevelFormatClash, match="replace=True"):
        registry.register_level_format(_write(tmp_path, BASE, "b.yaml"))


def test_register_invalid_file_registers_nothing(tmp_path, clean_registry):
    path = _write(tmp_path, BASE + "oops: 1\n")
    with pytest.raises(FormatFileError):
        registry.register_level_format(path)
    assert "probe" not in registry.level_formats()


def test_unknown_level_name(clean_registry):
    with pytest.raises(registry.UnknownLevelFormat) as info:
        registry.get_level("compresed")
    assert isinstance(info.value, KeyError)
    message = str(info.value)
    assert "compresed" in message
    for name in SHIPPED:
        assert name in message


def test_param_with_a_packed_value():
    level = loader.load_level_text(_edit(
        "{W: index}", "{W: {type: index, packed: 'min(N, 2 * max_children)'}}"))
    assert level.params == {"W": "index"}
    expression, source = level.packed_params["W"]
    assert source == "min(N, 2 * max_children)" and isinstance(expression, ast.Call)


@pytest.mark.parametrize(("edit", "fragment"), [
    ("{W: {type: index, packed: 'size + 1'}}", "'size'"),
    ("{W: {type: index, packed: 'crd[0]'}}", "crd"),
    ("{W: {type: index, guess: 4}}", "unknown key 'guess'"),
    ("{W: {packed: 4}}", "'type'"),
    ("{W: {type: float, packed: 4}}", "'index'"),
])
def test_bad_packed_param(tmp_path, edit, fragment):
    _expect_error(tmp_path, _edit("{W: index}", edit), 3, fragment)


def test_shipped_hashed_chooses_buckets_from_the_data(shipped):
    assert set(shipped["hashed"].packed_params) == {"W"}


def test_array_fill_must_fit_an_index(tmp_path):
    """2**40 as a fill became 0 in int32 arrays."""
    _expect_error(tmp_path, _edit("init: 0}", "init: 1099511627776}"), 5,
                  "init of array 'pos' is 1099511627776")


# ----------------------------------------------------------------------------- insert result

_INSERTING = "  locate: return i, True\n  insert:\n    size: return parent_size * W\n"


def test_insert_coord_may_say_whether_it_inserted(tmp_path):
    text = _edit("  append:\n    append_coord: crd[p] = i\n",
                 _INSERTING + "    insert_coord: |\n        crd[p] = i\n        return True\n")
    path = tmp_path / "probe.yaml"
    path.write_text(text)
    assert loader.load_level_file(path).functions["insert_coord"].returns == 1


def test_insert_coord_must_return_on_every_path_once_it_returns(tmp_path):
    text = _edit("  append:\n    append_coord: crd[p] = i\n",
                 _INSERTING + "    insert_coord: |\n        if i > 0:\n            return True\n"
                 "        crd[p] = i\n")
    _expect_error(tmp_path, text, 23, "end every path")


def test_insert_coord_returns_one_value(tmp_path):
    text = _edit("  append:\n    append_coord: crd[p] = i\n",
                 _INSERTING + "    insert_coord: return True, True\n")
    _expect_error(tmp_path, text, 20, "`return a` (one value)")
