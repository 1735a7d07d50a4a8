"""``llvsparse formats``: the named tensor formats ``-f`` takes, each with the levels it is
made of, then the level formats and their capabilities; or a check of plugin files."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..formats.registry import get_level, level_formats
from ..tensors.format import NAMED_FORMATS, Level, named_format

_INDICES = "ijklmn"


def _check_format_files(paths: Sequence[str]) -> int:
    """Validate plugin files the way the compiler will load them, locate cross-checked
    against iteration on a sample; 1 if any is bad."""
    # loaded by the subcommand that runs: `llvsparse --help` loads no compiler
    from ..formats.loader import FormatFileError
    from ..tensors.level_check import check_level_file

    status = 0
    for path in paths:
        try:
            level = check_level_file(path)
        except FormatFileError as error:
            print(error, file=sys.stderr)
            status = 1
        except OSError as error:
            print(f"{path}: {error.strerror or error}", file=sys.stderr)
            status = 1
        else:
            print(f"{path}: ok ({level.name})")
    return status


def describe_level(level: Level) -> str:
    """``compressed(i, unique=False)``: the level format, the index it stores (or
    ``storage-only``), blocking, and the properties set apart from the level's defaults."""
    parts = ["storage-only" if level.mode is None else _INDICES[level.mode]]
    if level.block:
        parts.append(f"within blocks of {level.block}" if level.inner
                     else f"blocks of {level.block}")
    defaults = get_level(level.kind).properties
    parts += [f"{prop}={value}" for prop, value in level.properties.items()
              if defaults[prop].default != value]
    parts += [f"{param}={value}" for param, value in level.params.items()]
    return f"{level.kind}({', '.join(parts)})"


def named_format_lines() -> list[str]:
    """One line per named format: its levels for a matrix A(i,j), and whether the name
    also serves tensors of other orders."""
    lines = []
    for name in sorted(NAMED_FORMATS):
        fmt = named_format(name, 2)
        try:
            named_format(name, 3)
            note = "  (any order)"
        except ValueError:
            note = ""
        if name == "bcsr":
            name, note = "bcsrRxC", "  (R x C dense blocks, e.g. bcsr4x1; bcsr = bcsr2x2)"
        levels = " ".join(describe_level(level) for level in fmt.levels)
        lines.append(f"  {name:<14} {levels}{note}")
    return lines


def formats(args: argparse.Namespace) -> int:
    """List the named formats -f takes and their levels, then the level formats with
    capabilities and properties; or check plugin files."""
    if getattr(args, "check", None):
        return _check_format_files(args.check)
    print("Named formats (-f NAME:FORMAT, --out-format), as levels of a matrix A(i,j), "
          "outermost first:")
    print("\n".join(named_format_lines()))
    print("\nLevel formats (formats/*.yaml; combine them with ls.Format in Python):")
    for name, level in sorted(level_formats().items()):
        caps = [level.iterate + " iteration"]
        caps += [c for c, ok in (("locate", level.can_locate), ("insert", level.can_insert),
                                 ("append", level.can_append)) if ok]
        props = ", ".join(f"{p}={'configurable' if d.configurable else d.default}"
                          for p, d in level.properties.items())
        print(f"{name:<12} {'; '.join(caps)}\n{'':<12} {props}")
    return 0
