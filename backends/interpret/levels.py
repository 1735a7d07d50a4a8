"""One operand level as the interpreter reads it: its YAML functions run on scalars.

The loop IR names levels (``A.1``) and what is done with them (iterate its positions
or coordinates, locate a coordinate); what that means for a given level is its YAML
definition's bodies, run here by the same host interpreter that unpacks and validates
tensors (formats/interpret.py), so a plugin level works with no code here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...formats.interpret import run_function
from ...ir.errors import InternalCompilerError
from ...ir.types import NOT_WINDOWED, WINDOW_PARAMS


@dataclass(frozen=True)
class Parent:
    """Where a level is read from: its parent's position (and, for a run of duplicates,
    the run's last position) and the coordinates of the two levels above it."""

    first: int = 0
    last: int = 0
    coordinate: int = 0
    grand_coordinate: int = 0


class LevelReader:
    """Level ``k`` of a tensor: bounds, accesses and locates at one parent."""

    def __init__(self, tensor: Any, k: int) -> None:
        level = tensor.tensor_type.levels[k]
        self.definition = level.definition
        self.arrays = tensor.level_arrays[k]
        extents = tensor.level_extents
        params = tensor.params[k]
        self.fixed = {"N": extents[k], "N_child": extents[k + 1] if k + 1 < len(extents) else 0,
                      **{n: v for n, v in params.items() if n not in WINDOW_PARAMS}}
        self.where = f"{tensor.name or 'operand'} level {k} ({level.kind})"
        # A view's level is read through a window: view coordinate j is base coordinate
        # start + j * step, for j in [0, count) (backends/llvm/window.py).
        self.window = None if level.window == NOT_WINDOWED else \
            tuple(int(params[name]) for name in WINDOW_PARAMS)
        self.extent = extents[k] if self.window is None else self.window[2]

    def base(self, j: int) -> int:
        """The level's own coordinate of view coordinate ``j`` (itself, unwindowed)."""
        return j if self.window is None else self.window[0] + j * self.window[1]

    @property
    def by_coordinate(self) -> bool:
        return self.definition.iterate == "coordinate"

    def _run(self, function: str, parent: Parent, at: int, **names: int) -> tuple[int, ...]:
        fn = self.definition.functions.get(function)
        if fn is None:
            raise InternalCompilerError(f"the loop IR asks {self.where} for {function}, "
                                        "which its definition does not declare")
        env = {**self.fixed, "p_parent": at, "i_parent": parent.coordinate,
               "i_grandparent": parent.grand_coordinate, **names}
        return tuple(int(np.asarray(v).item()) if np.ndim(v) == 0 else v
                     for v in run_function(fn, env, self.arrays, f"{self.where} {function}"))

    def entries(self, parent: Parent) -> list[tuple[int, int]]:
        """(coordinate, position) of every entry under ``parent``, in storage order; a run
        of duplicates spans its positions' children; a window's view coordinates."""
        if self.by_coordinate:
            begin, end = self._run("coord_bounds", parent, parent.first)
            viewed = range(begin, end) if self.window is None else range(self.window[2])
            found = ((j, self._run("coord_access", parent, parent.first, i=self.base(j)))
                     for j in viewed if begin <= self.base(j) < end)
            return [(j, p) for j, (p, ok) in found if ok]
        if self.window is None:
            return self._stored(parent)
        start, step, count = self.window
        return [((c - start) // step, p) for c, p in self._stored(parent)
                if 0 <= c - start < count * step and (c - start) % step == 0]

    def _stored(self, parent: Parent) -> list[tuple[int, int]]:
        """(coordinate, position) of the stored entries of a level iterated by position."""
        begin = self._run("pos_bounds", parent, parent.first)[0]
        end = self._run("pos_bounds", parent, parent.last)[1]
        result = []
        for p in range(begin, end):
            i, ok = self._run("pos_access", parent, parent.first, p=p)
            if ok:
                result.append((i, p))
        return result

    def locate(self, parent: Parent, i: int) -> tuple[int, bool]:
        """The position of coordinate ``i`` under ``parent``, and whether it is stored."""
        if self.window is not None and not 0 <= i < self.window[2]:
            return 0, False
        if not self.definition.can_locate:  # a one-wide subsection: [i, i + 1)
            lo, hi = self._run("subsection", parent, parent.first, i_lo=self.base(i),
                               i_hi=self.base(i) + 1)
            return lo, lo < hi
        p, found = self._run("locate", parent, parent.first, i=self.base(i))
        return p, bool(found)
