"""Helpers the ``llvsparse`` subcommands share: one error type with an exit code, option
parsing, compiling with usage errors, and the lookup of the matrices bundled with the
package."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..ir.notation.syntax import Assignment
    from ..kernel.api import Kernel

class CliError(Exception):
    """A failure reported as one message on stderr; ``code`` 2 means the request was bad."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def pairs(specs: Sequence[str] | None, option: str) -> dict[str, str]:
    """Parse repeated ``NAME:VALUE`` options (only the first colon splits, so paths keep
    theirs); a name given twice is an error rather than a silent override."""
    found: dict[str, str] = {}
    for spec in specs or ():
        name, sep, value = spec.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise CliError(f"{option} expects NAME:VALUE, not {spec!r}")
        if name in found:
            raise CliError(f"{option} given twice for {name}")
        found[name] = value
    return found


def parse_notation(text: str) -> Assignment:
    """Parse notation; syntax errors keep the library's caret message (exit code 2)."""
    # loaded by the subcommand that runs: `llvsparse --help` loads no compiler
    from ..ir.notation.syntax import NotationError
    from ..notation.parse import parse

    try:
        return parse(text)
    except NotationError as error:
        raise CliError(str(error)) from None


def build_kernel(assignment: Assignment, formats: dict[str, object],
                 out_format: str | None, gpu_schedule: str | None = None,
                 schedule: str | None = None, target: str = "cpu") -> Kernel:
    """Build a Kernel; unknown or mismatched formats (or GPU schedule), and a schedule
    that does not fit, become usage errors."""
    # loaded by the subcommand that runs: `llvsparse --help` loads no compiler
    from ..ir.errors import ScheduleError
    from ..kernel.api import compile as compile_api

    try:
        return compile_api(assignment, out_format=out_format, gpu_schedule=gpu_schedule,
                           schedule=schedule, target=target, **formats)
    except (ValueError, ScheduleError) as error:  # FormatError, tensors not in it
        raise CliError(str(error)) from None


def lowering_errors() -> tuple[type[Exception], ...]:
    """Errors that mean "this expression cannot be compiled for these formats"."""
    # loaded by the subcommand that runs: `llvsparse --help` loads no compiler
    from ..calls.binding import ShapeError
    from ..ir.errors import ScheduleError
    from ..tensors.format import FormatError

    return (ScheduleError, ShapeError, FormatError)


def format_name(fmt: object) -> str:
    return getattr(fmt, "name", None) or repr(fmt)


def bundled_names() -> list[str]:
    """The data files that ship inside the package (llvsparse/data)."""
    folder = resources.files("llvsparse") / "data"
    return sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".mtx.gz"))


@contextlib.contextmanager
def bundled_path(name: str) -> Iterator[Path]:
    """The path of a data file bundled with the package (a temporary copy if the package
    is zipped)."""
    with resources.as_file(resources.files("llvsparse") / "data" / name) as path:
        yield path


@contextlib.contextmanager
def input_path(source: str) -> Iterator[Path]:
    """``source`` as a path: relative to the working directory when it exists there, else a
    file bundled with the package of that name (so ``A:olm1000.mtx.gz`` works anywhere); a
    name found in neither place is a bad request (exit code 2)."""
    path = Path(source)
    if path.exists():
        yield path
        return
    if path.name == source and source in bundled_names():
        with bundled_path(source) as found:
            yield found
        return
    raise CliError(f"{source}: no such file (nor a file bundled with llvsparse: "
                   f"{', '.join(bundled_names())})")
