"""Walk a tensor's levels on the host, through the level functions of its format.

One walk serves unpacking (every stored entry with its coordinates) and validation (every
read is bounds-checked; coordinates, order, uniqueness and branchlessness are checked
against what each level claims). It only uses the iteration functions, so a new YAML
level is unpacked and validated with no code here.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

import numpy as np

from ..formats.interpret import CorruptTensorError, run_function
from .ordering import lexicographic_order


@dataclass
class Walk:
    """Stored entries: per level the coordinate and position of every entry."""

    coords: list[np.ndarray]
    positions: np.ndarray
    parents: list[np.ndarray]


def _expand(begin: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ranges [begin, end): the owning range of each element and the element values."""
    counts = end - begin
    owner = np.repeat(np.arange(len(begin)), counts)
    if not len(begin):
        return owner, np.zeros(0, np.int64)
    # Back-to-back ranges (a compressed level's positions) and equal ranges (a dense
    # level's coordinates) need no gathers: half the time of validating a 4M-entry CSR.
    if np.array_equal(begin[1:], end[:-1]):
        return owner, np.arange(begin[0], end[-1], dtype=np.int64)
    if np.all(begin == begin[0]) and np.all(end == end[0]):
        return owner, np.tile(np.arange(begin[0], end[0], dtype=np.int64), len(begin))
    starts = np.cumsum(counts) - counts
    values = begin[owner] + (np.arange(counts.sum()) - starts[owner])
    return owner, values


def walk_levels(tensor, check: bool) -> Walk:
    positions = np.zeros(1, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)  # the previous level's positions holding no entry
    coords: list[np.ndarray] = []
    parents: list[np.ndarray] = []
    for k, level in enumerate(tensor.tensor_type.levels):
        if check and len(empty):
            _check_childless(tensor, k, empty)
        owner, pos, coord, empty = _step(tensor, k, positions, coords, check)
        coords = [c[owner] for c in coords] + [coord.astype(np.int64)]
        if check:
            where = f"level {k} ({level.kind})"
            _check_level(level, where, owner, coords, tensor.level_extents[k],
                         len(positions))
            _check_located(tensor, k, positions, owner, coords, pos, where)
        positions, parents = pos.astype(np.int64), parents + [owner]
    if check and len(positions) and positions.max() >= len(tensor.values):
        raise CorruptTensorError(f"values has {len(tensor.values)} entries but the levels "
                                 f"address position {int(positions.max())}")
    return Walk(coords, positions, parents)


def _env(tensor, k: int, positions: np.ndarray, coords: list[np.ndarray]) -> dict:
    """The names a level function of level ``k`` may read, for these parent positions."""
    extents = tensor.level_extents
    return {"N": extents[k], "N_child": extents[k + 1] if k + 1 < len(extents) else 0,
            "p_parent": positions,
            "i_parent": coords[k - 1] if k >= 1 else np.zeros_like(positions),
            "i_grandparent": coords[k - 2] if k >= 2 else np.zeros_like(positions),
            **tensor.params[k]}


def _step(tensor, k: int, positions: np.ndarray, coords: list[np.ndarray], check: bool):
    """Level ``k``'s entries under the parent ``positions``: (owning parent, position,
    coordinate) of each."""
    level = tensor.tensor_type.levels[k]
    definition, arrays = level.definition, tensor.level_arrays[k]
    where = f"level {k} ({level.kind})"
    env, n = _env(tensor, k, positions, coords), len(positions)
    if definition.iterate == "coordinate":
        begin, end = _bounds(definition.functions["coord_bounds"], env, arrays, where, n)
        if check:
            extent = tensor.level_extents[k]
            _check_span(begin, end, where, "coordinate", (extent, f"the extent {extent}"))
        owner, coord = _expand(begin, end)
        access = definition.functions["coord_access"]
        pos, found = _access(access, dict(_per_child(env, owner, access), i=coord),
                             arrays, where, len(coord))
    else:
        begin, end = _bounds(definition.functions["pos_bounds"], env, arrays, where, n)
        if check and level.branchless and np.any(end - begin != 1):
            raise CorruptTensorError(f"{where} is branchless but a parent has "
                                     f"{int((end - begin).max())} children")
        access = definition.functions["pos_access"]
        if check:
            read = [(len(a), f"the end of {name} ({len(a)} entries)")
                    for name, a in arrays.items() if _reads_at_position(access, name)]
            _check_span(begin, end, where, "position", min(read, default=None))
        owner, pos = _expand(begin, end)
        coord, found = _access(access, dict(_per_child(env, owner, access), p=pos),
                               arrays, where, len(pos))
    keep = np.asarray(found, dtype=bool)
    if keep.all():
        return owner, pos, coord, pos[:0]
    if check and level.prop("compact"):  # kernels then take every position as an entry
        bad = int(pos[np.argmin(keep)])
        raise CorruptTensorError(f"{where} claims compact positions but position {bad} holds "
                                 "no entry (found is false)")
    return owner[keep], pos[keep], coord[keep], pos[~keep]


def _check_childless(tensor, k: int, empty: np.ndarray) -> None:
    """Level ``k`` holds no children under the parent positions ``empty`` (empty hash
    buckets): kernels never read there, but a decreasing range there is as corrupt as
    one under an entry, and was accepted."""
    level = tensor.tensor_type.levels[k]
    bounds = level.definition.functions.get("pos_bounds")
    if bounds is None or _reads(bounds, ("i_parent", "i_grandparent")):
        return
    where = f"level {k} ({level.kind})"
    env = dict(_env(tensor, k, empty, [empty] * k))  # coordinates: never read (above)
    begin, end = _bounds(bounds, env, tensor.level_arrays[k], where, len(empty))
    if np.any(end > begin):
        bad = int(np.argmax(end > begin))
        raise CorruptTensorError(f"{where}: parent position {int(empty[bad])} holds no "
                                 f"entry but has children [{begin[bad]}, {end[bad]})")


def _check_located(tensor, k: int, positions: np.ndarray, owner: np.ndarray,
                   coords: list[np.ndarray], pos: np.ndarray, where: str) -> None:
    """A level that kernels may locate into must find each stored coordinate where it is
    stored: a hashed key outside its probe sequence was iterated but never located, so
    SpMV gave another answer than to_numpy."""
    locate = tensor.tensor_type.levels[k].definition.functions.get("locate")
    if locate is None or not len(pos):
        return
    env = dict(_env(tensor, k, positions[owner], coords[:-1]), i=coords[-1])
    found_at, found = run_function(locate, env, tensor.level_arrays[k], f"{where} locate",
                                   len(pos))
    lost = ~np.asarray(found, bool) | (np.asarray(found_at, np.int64) != pos)
    if lost.any():
        bad = int(np.argmax(lost))
        raise CorruptTensorError(f"{where}: coordinate {int(coords[-1][bad])} is stored at "
                                 f"position {int(pos[bad])}, where locate does not find it")


def _check_span(begin: np.ndarray, end: np.ndarray, where: str, what: str,
                limit: tuple[int, str] | None) -> None:
    """Ranges must lie in [0, limit) before they are expanded: a corrupt pos entry of
    2**31 - 1 asked the expansion for 16 GiB (a MemoryError, or the process killed)."""
    if len(begin) and begin.min() < 0:
        raise CorruptTensorError(f"{where}: a range starts at the negative {what} "
                                 f"{int(begin.min())}")
    if limit is not None and len(end) and end.max() > limit[0]:
        raise CorruptTensorError(f"{where}: a range ends at {what} {int(end.max())}, past "
                                 f"{limit[1]}")


def _per_child(env: dict, owner: np.ndarray, fn) -> dict:
    """``env`` for the children: each parent's values repeated per child, for the names
    ``fn`` reads (a level of a million rows need not repeat arrays nobody reads)."""
    return {key: (value[owner] if isinstance(value, np.ndarray) else value)
            for key, value in env.items()
            if not isinstance(value, np.ndarray) or _reads(fn, (key,))}


def entries_per_coordinate(tensor) -> np.ndarray:
    """Stored entries under each coordinate of the first level (the work a thread takes on
    with that coordinate), without walking every entry.

    Below the first level the count descends through compact, position-iterated levels
    by the bounds of a subtree's first and last position only (a compact level's children
    sit in order, without gaps); it stops at a level that is not, or whose bounds read
    parent coordinates, and counts entries there.
    """
    _, pos, coord, _ = _step(tensor, 0, np.zeros(1, dtype=np.int64), [], check=False)
    first, last = pos.astype(np.int64), pos.astype(np.int64) + 1
    for k, level in enumerate(tensor.tensor_type.levels[1:], start=1):
        bounds = level.definition.functions.get("pos_bounds")
        if not level.prop("compact") or bounds is None \
                or _reads(bounds, ("i_parent", "i_grandparent")):
            break
        where = f"level {k} ({level.kind})"
        some = last > first
        if some.all():  # no empty subtree (always so under the first level's entries)
            first, last = _subtree_bounds(tensor, k, bounds, first, last, where)
            continue
        begin, end = _subtree_bounds(tensor, k, bounds, first[some], last[some], where)
        first, last = np.zeros_like(first), np.zeros_like(last)
        first[some], last[some] = begin, end
    return np.bincount(coord.astype(np.int64), weights=last - first,
                       minlength=tensor.level_extents[0])


def _subtree_bounds(tensor, k: int, bounds, first: np.ndarray, last: np.ndarray, where: str):
    """Level ``k``'s positions under parent ranges [first, last) (all nonempty): from the
    first parent's begin to the last parent's end."""
    arrays, n = tensor.level_arrays[k], len(first)
    env = _env(tensor, k, first, [first] * k)  # coordinates: never read (checked above)
    begin, end = _bounds(bounds, env, arrays, where, n)
    if not np.array_equal(last - 1, first):  # single parents (the first level's) need one
        _, end = _bounds(bounds, dict(env, p_parent=last - 1), arrays, where, n)
    return begin, end


# Memoized: level functions are parsed once per definition, and these walks over their
# syntax trees were most of the cost of counting a small CSR matrix's entries per row.
@functools.cache
def _reads(fn, names: tuple[str, ...]) -> bool:
    return any(isinstance(node, ast.Name) and node.id in names
               for stmt in fn.body for node in ast.walk(stmt))


@functools.cache
def _reads_at_position(fn, array: str) -> bool:
    """Whether ``fn`` reads ``array[p]``: then every position must lie inside it."""
    return any(isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
               and node.value.id == array and isinstance(node.slice, ast.Name)
               and node.slice.id == "p" for stmt in fn.body for node in ast.walk(stmt))


def _bounds(fn, env, arrays, where, n):
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    begin, end = run_function(fn, env, arrays, f"{where} {fn.name}", n)
    begin, end = np.asarray(begin, np.int64), np.asarray(end, np.int64)
    if np.any(end < begin):
        bad = int(np.argmax(end < begin))
        raise CorruptTensorError(f"{where}: {fn.name} gives the decreasing range "
                                 f"[{begin[bad]}, {end[bad]}) for parent {bad}")
    return begin, end


def _access(fn, env, arrays, where, n):
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    first, found = run_function(fn, env, arrays, f"{where} {fn.name}", n)
    return np.asarray(first, np.int64), np.asarray(found, bool)


def _check_level(level, where, owner, coords, extent, nparents) -> None:
    coord = coords[-1]
    if len(coord) and (coord.min() < 0 or coord.max() >= extent):
        bad = int(coord.min()) if coord.min() < 0 else int(coord.max())
        raise CorruptTensorError(f"{where}: coordinate {bad} is outside [0, {extent})")
    same_parent = np.ones(max(len(coord) - 1, 0), dtype=bool)
    for ancestor in coords[:-1]:
        same_parent &= ancestor[1:] == ancestor[:-1]
    step = np.diff(coord)
    if level.ordered:
        # Unique among entries whose ancestors' coordinates are the same, not only under
        # one parent position: COO's (0, 0) twice sits under two positions of a
        # non-unique row level, and merges took one of them.
        if level.unique and np.any(same_parent & (step <= 0)):
            raise CorruptTensorError(f"{where} claims ordered, unique coordinates but a "
                                     "segment is not strictly increasing")
        if np.any(same_parent & (step < 0)):
            raise CorruptTensorError(f"{where} claims ordered coordinates but a segment "
                                     "decreases")
    elif level.unique and len(coord):
        order = lexicographic_order([owner, coord])
        dup = (np.diff(owner[order]) == 0) & (np.diff(coord[order]) == 0)
        if np.any(dup):
            raise CorruptTensorError(f"{where} claims unique coordinates but has duplicates")
    if level.full and level.unique:
        counts = np.bincount(owner, minlength=nparents)
        if np.any(counts != extent):
            raise CorruptTensorError(f"{where} claims full but a parent lacks coordinates")


def first_level_positions(tensor) -> tuple[int, int]:
    """The positions [begin, end) of the first level's entries (a level iterated by
    position), without walking them: where threads that split them by position start
    and stop (a GPU's thread per nonzero)."""
    level = tensor.tensor_type.levels[0]
    if level.definition.iterate == "coordinate":
        raise ValueError(f"level 0 ({level.kind}) is iterated by coordinate, not position")
    begin, end = _bounds(level.definition.functions["pos_bounds"],
                         _env(tensor, 0, np.zeros(1, dtype=np.int64), []),
                         tensor.level_arrays[0], f"level 0 ({level.kind})", 1)
    return int(begin[0]), int(end[0])


def second_level_bounds(tensor) -> tuple[np.ndarray, np.ndarray]:
    """Per coordinate of a full first level, the positions [begin, end) of the second
    level's entries under it (a level iterated by position), from the levels'
    functions, without walking the entries: where a GPU's entry split finds the rows a
    window of positions touches."""
    levels = tensor.tensor_type.levels
    if len(levels) < 2 or not levels[0].full or levels[1].definition.iterate == "coordinate":
        raise ValueError("an entry split needs a full first level above a level iterated "
                         "by position")
    _, positions, coords, _ = _step(tensor, 0, np.zeros(1, np.int64), [], False)
    begin, end = _bounds(levels[1].definition.functions["pos_bounds"],
                         _env(tensor, 1, positions, [coords.astype(np.int64)]),
                         tensor.level_arrays[1], f"level 1 ({levels[1].kind})", len(positions))
    full_begin = np.zeros(tensor.level_extents[0], np.int64)
    full_end = np.zeros(tensor.level_extents[0], np.int64)
    full_begin[coords], full_end[coords] = begin, end
    return full_begin, full_end


def position_bounds(begin: int, end: int, entries: int) -> np.ndarray:
    """Split points of positions [begin, end) into ranges of ``entries`` (the last may
    be shorter)."""
    return np.append(np.arange(begin, end, entries, dtype=np.int64), np.int64(end)) \
        if end > begin else np.array([begin], np.int64)


def entry_windows(begin: np.ndarray, end: np.ndarray, entries: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Windows of ``entries`` positions over rows whose entries are the positions
    [begin[r], end[r]), and each window's rows [first, end): (windows, the firsts then
    the ends). ValueError where rows are not increasing runs of positions."""
    if len(begin) and (np.any(begin[1:] < end[:-1]) or np.any(end < begin)):
        raise ValueError("an entry split needs each row's entries to follow the row "
                         "before's in position order; these rows' positions do not")
    nonempty = end > begin
    windows = position_bounds(int(begin[nonempty].min()) if nonempty.any() else 0,
                              int(end[nonempty].max()) if nonempty.any() else 0, entries)
    first = np.searchsorted(end, windows[:-1], side="right")  # rows ending past the start
    last = np.searchsorted(begin, windows[1:], side="left")  # rows starting before the end
    return windows, np.concatenate([first, last]).astype(np.int64)
