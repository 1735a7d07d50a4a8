"""What the compiler knows about a tensor operand: its levels, dtypes and array slots.

These types are the contract between the public API (which resolves format names) and
the format-agnostic lowering: a level is a ``LevelDef`` plus resolved properties and the
tensor mode it stores (``None`` for a storage-only level such as a diagonal slot).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..formats.loader import LevelDef

PROPERTY_NAMES = ("full", "ordered", "unique", "branchless", "compact")
# How a level reads through a view's window (see window.py).
NOT_WINDOWED, WINDOWED, STRIDED = 0, 1, 2
# Descriptor parameters of a windowed level (after every level's own parameters). The dot
# keeps them apart from any name a level's YAML may declare.
WINDOW_PARAMS = ("window.start", "window.step", "window.count")


@dataclass(frozen=True)
class LevelType:
    """One storage level of a tensor type."""

    definition: LevelDef = field(compare=False)
    kind: str
    mode: int | None
    properties: tuple[tuple[str, bool], ...]
    block: int | None = None  # the level stores mode coordinate // block (% block if inner)
    inner: bool = False
    window: int = NOT_WINDOWED  # read through a view's slice of its coordinates

    def prop(self, name: str) -> bool:
        return dict(self.properties)[name]

    @property
    def full(self) -> bool:
        return self.prop("full")

    @property
    def ordered(self) -> bool:
        return self.prop("ordered")

    @property
    def unique(self) -> bool:
        return self.prop("unique")

    @property
    def branchless(self) -> bool:
        return self.prop("branchless")

    @property
    def can_locate(self) -> bool:
        return self.definition.can_locate

    @property
    def can_subsection(self) -> bool:
        """The positions of a parent's coordinates within a range, found without a walk
        (a level function of the format, valid only where the level is ordered)."""
        return self.definition.can_subsection and self.ordered and not self.block

    @property
    def can_insert(self) -> bool:
        return self.definition.can_insert

    @property
    def can_append(self) -> bool:
        return self.definition.can_append

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(self.definition.params)


@dataclass(frozen=True)
class ArraySlot:
    """Where a level array lives in a tensor descriptor's ``arrays`` table."""

    index: int
    level: int
    name: str
    kind: str  # 'pos' or 'crd'
    shared: bool


@dataclass(frozen=True)
class TensorType:
    """The static type of a kernel operand; part of every kernel cache key."""

    levels: tuple[LevelType, ...]
    order: int
    dtype: str
    index_dtype: str
    # The value of every entry not stored, as text ("0.0", "inf", "nan") so that types
    # with a NaN fill compare equal: it changes the code (see ir/concrete/lattice.py).
    fill_key: str = "0.0"

    @property
    def fill(self) -> float | complex:
        if self.fill_key.startswith("complex"):
            return complex(*map(float, self.fill_key[8:-1].split(",")))
        return float(self.fill_key)

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    def array_slots(self) -> list[ArraySlot]:
        """Level arrays in descriptor order; a shared array gets one slot, at first use."""
        return list(_array_slots(self))

    def _compute_array_slots(self) -> tuple[ArraySlot, ...]:
        slots: list[ArraySlot] = []
        shared_seen: set[str] = set()
        for k, level in enumerate(self.levels):
            for name, adef in level.definition.arrays.items():
                if adef.shared:
                    if name in shared_seen:
                        continue
                    shared_seen.add(name)
                slots.append(ArraySlot(len(slots), k, name, adef.kind, adef.shared))
        return tuple(slots)

    def slot_of(self, level: int, name: str) -> ArraySlot:
        adef = self.levels[level].definition.arrays[name]
        for slot in self.array_slots():
            if slot.name == name and (slot.level == level or (adef.shared and slot.shared)):
                return slot
        raise KeyError((level, name))

    def param_slots(self) -> list[tuple[int, str]]:
        """(level, param name) pairs in descriptor ``params`` order: the levels' own, then
        each windowed level's window (start, step, count; see backends/llvm/window.py)."""
        own = [(k, p) for k, level in enumerate(self.levels) for p in level.params]
        return own + [(k, p) for k, level in enumerate(self.levels) if level.window
                      for p in WINDOW_PARAMS]

    def levels_of_mode(self, mode: int) -> list[int]:
        return [k for k, level in enumerate(self.levels) if level.mode == mode]


@functools.lru_cache(maxsize=4096)
def _array_slots(ttype: TensorType) -> tuple[ArraySlot, ...]:
    """Memoized: the call path asks for slots on every kernel call."""
    return ttype._compute_array_slots()


def type_key(ttype: TensorType) -> tuple:
    """A stable, content-based key for a tensor type (for the on-disk kernel cache):
    level definitions are keyed by their bodies, so editing a YAML file invalidates it."""
    levels = []
    for level in ttype.levels:
        definition = level.definition
        bodies = tuple(sorted((n, f.source) for n, f in definition.functions.items()))
        arrays = tuple((a.name, a.kind, a.length_source, a.init, a.shared)
                       for a in definition.arrays.values())
        levels.append((level.kind, level.mode, level.properties, level.block, level.inner,
                       definition.iterate, bodies, arrays, tuple(definition.params),
                       level.window))
    return (tuple(levels), ttype.order, ttype.dtype, ttype.index_dtype, ttype.fill_key)


def fill_key(value: complex) -> str:
    """A fill value as the text ``TensorType.fill_key`` holds (one text per value, NaN
    included; a complex tensor's complex fill as ``complex(re,im)``)."""
    if isinstance(value, complex):
        return f"complex({value.real!r},{value.imag!r})"
    return repr(float(value))


def unordered_append_output(levels: Sequence[LevelType]) -> bool:
    """An output whose appended levels promise neither order nor uniqueness (e.g. an unordered coordinate list).

    Such an output can be appended to from anywhere in the loop nest. Its last level may
    promise uniqueness only below a level that does not (each entry its own parent): a
    unique top level (a hashed vector) would store a coordinate appended twice twice.
    """
    if not levels or not levels[0].can_append:
        return False
    return all(lv.can_append and not lv.ordered
               and (not lv.unique or 0 < k == len(levels) - 1)
               and (k == 0 or lv.branchless) for k, lv in enumerate(levels))
