"""Level formats by name: the YAML files shipped in this package plus run-time plugins.

The compiler looks levels up by name only, so a plugin registered here is indistinguishable
from a shipped format. Shipped files load lazily (first lookup) and once; plugins override
them only when asked to (replace=True), so a typo'd plugin name cannot silently shadow CSR.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources

from .loader import LevelDef, load_level_file, load_level_text

__all__ = [
    "LevelFormatClash",
    "UnknownLevelFormat",
    "get_level",
    "is_shipped",
    "level_formats",
    "register_level_format",
    "unregister_level_format",
]


class UnknownLevelFormat(KeyError):
    """No level format has this name; the message lists the ones that exist."""

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(name)
        self.name = name
        self.known = sorted(known)

    def __reduce__(self) -> tuple[type, tuple[str, list[str]]]:
        """Keep both attributes across pickling."""
        return (type(self), (self.name, self.known))

    def __str__(self) -> str:
        """Plain text (KeyError would repr-quote it) so the list of names stays readable."""
        return f"unknown level format {self.name!r}; known formats: {', '.join(self.known)}"


class LevelFormatClash(ValueError):
    """A plugin's name is already taken and replace=True was not given."""


_LOCK = threading.RLock()
_shipped: dict[str, LevelDef] | None = None
_user: dict[str, LevelDef] = {}
# Bumped whenever a definition is added, reloaded or removed: memos keyed by level format
# names (a Format's tensor types, conversion kernels) include it, so a reloaded plugin is
# never served code compiled from its old definition.
_generation = [0]
_changed_at: dict[str, int] = {}  # level format name -> generation of its last change


def generation() -> int:
    """How many times the registered definitions have changed."""
    return _generation[0]


def changed_since(names, since: int) -> str | None:
    """The first of ``names`` whose definition changed after generation ``since``."""
    if since == _generation[0]:
        return None
    with _LOCK:
        return next((n for n in names if _changed_at.get(n, 0) > since), None)


def _load_shipped() -> dict[str, LevelDef]:
    """Load every *.yaml next to this module, once."""
    global _shipped
    with _LOCK:
        if _shipped is None:
            found: dict[str, LevelDef] = {}
            entries = sorted(resources.files(__package__).iterdir(), key=lambda e: e.name)
            for entry in entries:
                if entry.name.endswith(".yaml") and entry.is_file():
                    level = load_level_text(entry.read_text(encoding="utf-8"), str(entry))
                    if level.name in found:
                        raise LevelFormatClash(f"{entry}: level format {level.name!r} is also "
                                               f"defined in {found[level.name].path}")
                    found[level.name] = level
            _shipped = found
        return _shipped


def level_formats() -> dict[str, LevelDef]:
    """All known level formats by name (a copy; plugins override shipped ones)."""
    with _LOCK:
        return {**_load_shipped(), **_user}


def get_level(name: str) -> LevelDef:
    """The level format called `name`, or UnknownLevelFormat listing the known names."""
    with _LOCK:
        level = _user.get(name) or _load_shipped().get(name)
        if level is None:
            raise UnknownLevelFormat(name, list(level_formats()))
        return level


def is_shipped(name: str) -> bool:
    """Whether ``name`` is one of the YAML files shipped here, not replaced by a plugin:
    only their assembly code is known to keep the properties the levels claim."""
    with _LOCK:
        return name not in _user and name in _load_shipped()


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def register_level_format(path: str | os.PathLike[str], replace: bool = False,
                          check: Callable[[LevelDef], None] | None = None) -> LevelDef:
    """Load, validate and register a plugin level format file; returns its definition.

    Re-registering the same file reloads it (handy while editing a plugin); any other name
    clash raises LevelFormatClash unless replace=True. ``check`` is called with the
    definition while it is registered for it, and may refuse it by raising (the package's
    ``ls.register_level_format`` passes its cross-check of locate against iteration on a
    packed sample, llvsparse/tensors/level_check.py: packing needs the layers above).
    """
    level = load_level_file(path)
    with _LOCK:
        existing = _user.get(level.name) or _load_shipped().get(level.name)
        if existing is not None and not replace and not _same_file(existing.path, level.path):
            raise LevelFormatClash(
                f"{level.path}: level format {level.name!r} already exists (from "
                f"{existing.path}); rename it or pass replace=True")
    if check is not None:
        with registered_for_check(level):
            check(level)
    with _LOCK:
        _set(level.name, level)
    return level


def _set(name: str, level: LevelDef | None) -> None:
    """Make ``level`` the user definition of ``name`` (None: forget it)."""
    if level is None:
        _user.pop(name, None)
    else:
        _user[name] = level
    _generation[0] += 1
    _changed_at[name] = _generation[0]


@contextmanager
def registered_for_check(level: LevelDef) -> Iterator[None]:
    """``level`` registered under its name while checks pack tensors through it; the
    registry as it was afterwards."""
    with _LOCK:
        previous = _user.get(level.name)
        _set(level.name, level)
    try:  # not under the lock: packing compiles kernels, which look levels up
        yield
    finally:
        with _LOCK:
            _set(level.name, previous)


def unregister_level_format(name: str) -> None:
    """Forget a registered plugin; a shipped format it replaced becomes visible again."""
    with _LOCK:
        if name not in _user:
            raise UnknownLevelFormat(name, list(_user))
        del _user[name]
        _generation[0] += 1
        _changed_at[name] = _generation[0]
