"""Typed access to a level-format file's YAML nodes, which keep their line numbers, so
that every complaint names the line it is about."""

from __future__ import annotations

import keyword
from typing import NoReturn

import yaml
from yaml.constructor import SafeConstructor

from .vocabulary import TAG, YAML_KINDS, FormatFileError

# ----------------------------------------------------------------------------- YAML access

Entries = dict[str, tuple[yaml.Node, yaml.Node]]


def describe_node(node: yaml.Node) -> str:
    """Name a YAML node's type the way a plugin author thinks of it."""
    short = node.tag.removeprefix(TAG)
    return YAML_KINDS.get(short, f"a value tagged {node.tag}")


class Reader:
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
            self.fail(node, f"{what} must be a mapping, got {describe_node(node)}")
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
        if not isinstance(node, yaml.ScalarNode) or node.tag not in {TAG + k for k in kinds}:
            expected = " or ".join(YAML_KINDS[k] for k in kinds)
            self.fail(node, f"{what} must be {expected}, got {describe_node(node)}")
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


def compose(text: str, path: str) -> yaml.Node:
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

