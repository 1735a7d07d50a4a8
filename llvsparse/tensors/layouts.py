"""Which tensors are laid out as numpy or scipy.sparse lay out their arrays.

A level is recognised by what its YAML functions say, not by its name: a level whose
coordinates are [0, N) at positions ``p_parent * N + i`` is a dense axis; one whose
children are ``crd[pos[p]:pos[p+1]]`` is scipy's ``indptr``/``indices`` pair; one with a
single child ``crd[p]`` per parent is a COO coordinate array. A new YAML file with the
same bodies under another name is recognised too; anything else takes the generic path.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

# The bodies of each kind of level, as a level definition states them.
_SHAPES = {
    "axis": ("coordinate", {"coord_bounds": "return 0, N",
                            "coord_access": "return p_parent * N + i, True"}, set()),
    "segments": ("position", {"pos_bounds": "return pos[p_parent], pos[p_parent + 1]",
                              "pos_access": "return crd[p], True"}, {"pos", "crd"}),
    "single": ("position", {"pos_bounds": "return p_parent, p_parent + 1",
                            "pos_access": "return crd[p], True"}, {"crd"}),
}


@functools.cache
def _dumped(source: str) -> str:
    return ast.dump(ast.Module(ast.parse(source).body, []))


@functools.lru_cache(maxsize=256)
def level_shape(definition) -> str | None:
    """'axis', 'segments', 'single' or None, from a level definition's functions."""
    for shape, (iterate, bodies, arrays) in _SHAPES.items():
        if definition.iterate != iterate or set(definition.arrays) != arrays \
                or definition.params:
            continue
        functions = definition.functions
        if all(name in functions and ast.dump(ast.Module(list(functions[name].body), []))
               == _dumped(body) for name, body in bodies.items()):
            return shape
    return None


@dataclass(frozen=True)
class Layout:
    """How a tensor type maps onto numpy or scipy: ``kind`` is 'dense' (values in
    level order; ``modes`` the mode of each level), 'csr' / 'csc' (a dense axis over
    segments), or 'coo' (one segment of entries, one coordinate array per mode);
    ``canonical``: entries ordered and unique within each segment."""

    kind: str
    modes: tuple[int, ...]
    canonical: bool

    @property
    def transpose(self) -> tuple[int, ...] | None:
        """Axes that put level-ordered values in mode order; None when they already are."""
        if self.modes == tuple(range(len(self.modes))):
            return None
        return tuple(sorted(range(len(self.modes)), key=self.modes.__getitem__))


def layout_of(ttype) -> Layout | None:
    """The Layout of a tensor type, or None where its levels match none (blocks,
    storage-only levels, hashed or range levels, ...). Remembered per type object (a
    kernel's results share theirs): to_numpy of a small result costs microseconds."""
    known = _LAYOUTS.get(id(ttype))
    if known is not None and known[0] is ttype:
        return known[1]
    layout = _layout_of(ttype)
    if len(_LAYOUTS) >= 1024:
        _LAYOUTS.clear()
    _LAYOUTS[id(ttype)] = (ttype, layout)  # the type is held: its id is not reused
    return layout


_LAYOUTS: dict[int, tuple] = {}


def _layout_of(ttype) -> Layout | None:
    levels = ttype.levels
    if any(lv.block is not None or lv.mode is None or lv.window for lv in levels):
        return None  # (a view's windowed level holds more than the view: views.py)
    shapes = [level_shape(lv.definition) for lv in levels]
    modes = tuple(lv.mode for lv in levels)
    if all(s == "axis" for s in shapes) and sorted(modes) == list(range(len(modes))):
        return Layout("dense", modes, True)
    # Two levels, neither claiming every coordinate present; a COO's first level holds
    # repeats (a unique one allows one entry per row: no scipy matrix is that).
    if len(levels) != 2 or any(lv.full for s, lv in zip(shapes, levels) if s != "axis"):
        return None
    canonical = all(lv.ordered for lv in levels) and levels[-1].unique
    if shapes == ["axis", "segments"]:
        return Layout("csr" if modes == (0, 1) else "csc", modes, canonical)
    if shapes == ["segments", "single"] and not levels[0].unique:
        return Layout("coo", modes, canonical)
    return None
