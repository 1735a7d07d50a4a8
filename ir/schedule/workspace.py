"""Paper 002's workspace rule (section 6.2): which temporary a scattered output needs.

A loop nest whose output receives its entries out of storage order ("scattered", e.g.
Gustavson's SpGEMM runs i,k,j into a row-major compressed C) cannot append to the
output directly; ``ir/schedule/workspace_schedule.py`` puts a temporary between computation and
assembly, ``where(consumer, producer)``. After hoisting the loops every nest shares
with the output outermost, the temporary is *dense* when one output index remains (a
row accumulator) and *sparse* otherwise. The temporary's levels are registered levels
chosen by their capabilities (``workspace_level``): no level format is named here.
"""

from __future__ import annotations

import enum

from ...formats.loader import LevelDef
from ...formats.registry import level_formats


class WorkspaceKind(enum.Enum):
    """Which workspace the rule picks (values are enum.auto: a level format may share a name)."""

    DENSE = enum.auto()  # one dimension, allocated at its extent
    SPARSE = enum.auto()  # stores only the entries produced

    def __str__(self) -> str:
        return self.name.lower()


def workspace_level(dense: bool) -> LevelDef | None:
    """A registered level taking random inserts: for a dense workspace one that is full
    and sized by its extent, for a sparse one one that is not full."""
    for _, level in sorted(level_formats().items()):
        if not (level.can_locate and level.can_insert):
            continue
        full = level.properties["full"].default
        if (dense and full and level.sized_by_extent) or (not dense and not full):
            return level
    return None
