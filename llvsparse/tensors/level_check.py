"""Cross-check a level format's iteration against its ``locate`` and ``subsection`` on
a packed sample.

Kernels that locate into a level and kernels that iterate it must see the same entries:
a level whose ``locate`` disagreed with its iteration passed loading, and kernels then
disagreed with ``to_numpy()``. Here a small matrix is packed through the level (under a
dense row level), iterated with the interpreter, and ``locate`` must find exactly the
iterated coordinates at the iterated positions and report every other coordinate as
not found; ``subsection`` must give, for every window of every row, the positions of
the iterated coordinates inside it. Levels without these functions, or that no kernel
can assemble, are not checked. ``ls.register_level_format`` is the registry's, given
this check (the registry, beneath the tensors, cannot pack one).
"""

from __future__ import annotations

import os

import numpy as np

from ..abi.runtime import KernelRuntimeError
from ..formats import registry
from ..formats.interpret import CorruptTensorError, run_function
from ..formats.loader import FormatFileError, LevelDef, load_level_file
from ..formats.registry import get_level, registered_for_check
from ..ir.errors import ScheduleError
from .format import Format, Level
from .made_as import tensor_class
from .walk import _env, walk_levels

# Rows with nothing, one entry, a full row and scattered entries (coordinate 0 and the
# last included), so that probe sequences wrap and empty parents are asked too.
SAMPLE = np.array([[0, 0, 0, 0, 0, 0, 0],
                   [0, 0, 3, 0, 0, 0, 0],
                   [1, 2, 3, 4, 5, 6, 7],
                   [8, 0, 0, 9, 0, 0, 5],
                   [0, 0, 0, 0, 0, 0, 2]], dtype=float)


def register_level_format(path: str | os.PathLike[str], replace: bool = False) -> LevelDef:
    """Load, validate and register a plugin level format file; returns its definition.

    Re-registering the same file reloads it (handy while editing a plugin); any other name
    clash raises LevelFormatClash unless replace=True.
    """
    return registry.register_level_format(path, replace, check=cross_check)


def check_level_file(path: str | os.PathLike[str]) -> LevelDef:
    """Load a level file and cross-check it (``llvsparse formats --check``), leaving
    the registry as it was; FormatFileError names the file, the line and the problem."""
    level = load_level_file(path)
    with registered_for_check(level):
        cross_check(level)
    return level


def cross_check(level: LevelDef) -> None:
    """Raise FormatFileError (at ``locate``'s or ``subsection``'s line) where it and
    iteration disagree on the packed sample. ``level`` must be registered under its
    name."""
    for function, disagreement in (("locate", locate_disagreement),
                                   ("subsection", subsection_disagreement)):
        try:
            problem = disagreement(level.name)
        except (CorruptTensorError, KernelRuntimeError) as error:
            problem = f"iterating it fails ({error})"
        if problem is not None:
            what = f"{function} disagrees with iteration on" if problem.startswith("row ") \
                else f"cannot check {function} against iteration on"
            raise FormatFileError(level.path, level.functions[function].line,
                                  f"{what} a sample packed through the level: {problem}")


def _packed(name: str, function: str):
    """The sample packed under a dense row level into level ``name`` and walked
    (coordinates, positions), or None where ``name`` has no ``function`` or no kernel
    can assemble it."""
    if function not in get_level(name).functions:
        return None
    try:
        tensor = tensor_class().from_numpy(SAMPLE,
                                           format=Format([Level("dense", 0), Level(name, 1)]))
    except ScheduleError:  # no kernel can assemble it (as DIA's levels): nothing to pack
        return None
    return tensor, walk_levels(tensor, check=False)


def subsection_disagreement(name: str) -> str | None:
    """Where ``subsection`` of level ``name`` misses the positions iteration gives the
    coordinates of a window [lo, hi) of a row of the sample (every window), or None."""
    packed = _packed(name, "subsection")
    if packed is None:
        return None
    tensor, walk = packed
    function = tensor.tensor_type.levels[1].definition.functions["subsection"]
    nrows, ncols = SAMPLE.shape
    for row in range(nrows):
        mine = walk.coords[0] == row
        cols, positions = walk.coords[1][mine], walk.positions[mine]
        env = _env(tensor, 1, np.array([row]), [np.array([row])])
        for lo in range(ncols + 1):
            for hi in range(lo, ncols + 1):
                first, end = run_function(function, {**env, "i_lo": lo, "i_hi": hi},
                                          tensor.level_arrays[1], f"level {name!r} subsection",
                                          1)
                inside = sorted(int(p) for c, p in zip(cols, positions) if lo <= c < hi)
                got = list(range(int(np.ravel(first)[0]), int(np.ravel(end)[0])))
                if got != inside:
                    return (f"row {row}: the window [{lo}, {hi}) holds positions {inside} "
                            f"but subsection gives {got}")
    return None


def locate_disagreement(name: str) -> str | None:
    """What locate gets wrong on the sample packed into level ``name``, or None."""
    packed = _packed(name, "locate")
    if packed is None:
        return None
    tensor, walk = packed
    rows, cols, positions = walk.coords[0], walk.coords[1], walk.positions
    nrows, ncols = SAMPLE.shape
    if len(cols) and (cols.min() < 0 or cols.max() >= ncols):
        bad = int(cols.min()) if cols.min() < 0 else int(cols.max())
        return f"iterating it gives coordinate {bad}, outside [0, {ncols})"
    every_row = np.repeat(np.arange(nrows), ncols)
    every_col = np.tile(np.arange(ncols), nrows)
    env = dict(_env(tensor, 1, every_row, [every_row]), i=every_col)
    found_at, found = run_function(tensor.tensor_type.levels[1].definition.functions["locate"],
                                   env, tensor.level_arrays[1], f"level {name!r} locate",
                                   len(every_col))
    found_at, found = np.asarray(found_at, np.int64), np.asarray(found, bool)
    stored = np.full(nrows * ncols, -1, np.int64)
    stored[rows * ncols + cols] = positions
    for k in range(nrows * ncols):
        row, col = divmod(k, ncols)
        if stored[k] < 0 and found[k]:
            return f"row {row}: locate finds coordinate {col}, which iteration never visits"
        if stored[k] >= 0 and not found[k]:
            return f"row {row}: coordinate {col} is iterated but locate does not find it"
        if stored[k] >= 0 and found_at[k] != stored[k]:
            return (f"row {row}: coordinate {col} is iterated at position {stored[k]} but "
                    f"locate finds it at {found_at[k]}")
    return None

