"""Windowed levels: a level read through a slice ``start, start + step, ...`` of its
coordinates (``count`` of them), without copying the tensor.

A kernel sees view coordinates ``j`` in ``[0, count)``; the level's own functions see base
coordinates ``c = start + j * step``. The numbers are runtime parameters of the tensor
(descriptor ``params``), so one compiled kernel serves every window of a shape class; the
type only says whether a level is windowed (``WINDOWED``) or also strided (``STRIDED``).

How a level is narrowed follows from what it declares, never from its name:
- coordinate iteration (``coord_bounds``/``coord_access``): the loop runs over view
  coordinates, each mapped to its base coordinate, so nothing outside the window is visited;
- position iteration of an ordered level whose ``pos_access`` always finds (and that is not
  branchless, whose one position per parent is read without a loop): the positions are
  narrowed by binary search (through ``pos_access``) to the window's first and last
  coordinates; a strided window then tests each coordinate for ``(c - start) % step == 0``;
- any other position iteration (unordered, may-miss or branchless levels): each stored
  coordinate is tested against the window;
- ``locate``: the view coordinate is mapped to its base coordinate first.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

from llvmlite import ir

from ...formats.loader import LevelDef
from ...ir.errors import InternalCompilerError
from ...ir.types import NOT_WINDOWED, STRIDED, WINDOW_PARAMS
from .bodies import I64, TRUE, is_true
from .emit_base import emit_lower_bound

if TYPE_CHECKING:
    from .tensor_ir import TensorIR

ONE = ir.Constant(I64, 1)
ZERO = ir.Constant(I64, 0)


class WindowedLevelDef(LevelDef):
    """A level definition seen through a window: its position accesses may now miss
    (coordinates outside the window or between strides), which the fast loop forms that
    trust an always-found access must know."""

    window: int = NOT_WINDOWED
    narrowed: bool = False

    def always_found(self, fn: str) -> bool:
        if fn == "pos_access" and (self.window == STRIDED or not self.narrowed):
            return False
        return LevelDef.always_found(self, fn)


def windowed_definition(definition: LevelDef, window: int, ordered: bool,
                        branchless: bool) -> LevelDef:
    """``definition`` as a level windowed ``window``-wise (itself when not windowed),
    given the level's resolved ``ordered`` and ``branchless`` properties."""
    if window == NOT_WINDOWED:
        return definition
    copy = WindowedLevelDef(**{f.name: getattr(definition, f.name) for f in fields(LevelDef)})
    object.__setattr__(copy, "window", window)  # a level definition is frozen
    object.__setattr__(copy, "narrowed", definition.iterate == "position" and ordered
                       and not branchless and LevelDef.always_found(definition, "pos_access"))
    return copy


class LevelWindow:
    """The IR values of one windowed level's window, and the level-function calls
    mapped through it."""

    def __init__(self, tensor: TensorIR, level: int):
        self.tensor, self.level = tensor, level
        self.start, self.step, self.count = (tensor.params[(level, name)]
                                             for name in WINDOW_PARAMS)
        lt = tensor.type.levels[level]
        self.strided = lt.window == STRIDED
        self.narrowed = bool(getattr(lt.definition, "narrowed", False))

    def base_coordinate(self, b: ir.IRBuilder, j: ir.Value) -> ir.Value:
        return b.add(self.start, b.mul(j, self.step)) if self.strided else \
            b.add(self.start, j)

    def ceil_view(self, b: ir.IRBuilder, offset: ir.Value) -> ir.Value:
        """The first view coordinate at or above base coordinate ``start + offset``
        (``offset`` >= 0)."""
        if not self.strided:
            return offset
        return b.sdiv(b.add(offset, b.sub(self.step, ONE)), self.step)

    def call(self, b: ir.IRBuilder, function: str, raw, values: dict) -> list[ir.Value]:
        """``function`` of the level through the window; ``raw(function, values)`` calls
        the level's own body."""
        if function == "pos_bounds":
            begin, end = raw(function, values)
            if not self.narrowed:
                return [begin, end]
            span = b.mul(self.count, self.step)
            last = b.sub(b.add(self.start, span), b.sub(self.step, ONE))  # past the last
            begin = self.seek(b, raw, values, begin, end, self.start)
            return [begin, self.seek(b, raw, values, begin, end, last)]
        if function == "pos_access":
            c, found = raw(function, values)
            offset = b.sub(c, self.start)
            inside = TRUE
            coord = self.ceil_view(b, offset)  # off the stride: the next one up, never kept
            if self.strided:  # on the stride: coord * step is the offset (one division)
                inside = b.icmp_signed("==", b.mul(coord, self.step), offset)
            if not self.narrowed:  # outside the window: -1 below it, count above it
                span = b.mul(self.count, self.step)
                within = b.icmp_unsigned("<", offset, span)
                inside = within if is_true(inside) else b.and_(inside, within)
                below = b.icmp_signed("<", offset, ZERO)
                outside = b.select(below, ir.Constant(I64, -1), self.count)
                coord = b.select(within, coord, outside)
            if not is_true(inside):
                found = inside if is_true(found) else b.and_(found, inside)
            return [coord, found]
        if function == "coord_bounds":
            begin, end = raw(function, values)
            past = b.add(self.start, b.mul(self.count, self.step))
            begin = _max(b, begin, self.start)
            end = _min(b, end, past)
            first = self.ceil_view(b, b.sub(begin, self.start))
            stop = self.ceil_view(b, _max(b, b.sub(end, self.start), ZERO))
            return [first, _max(b, stop, first)]
        if function in ("coord_access", "locate"):
            return raw(function, dict(values, i=self.base_coordinate(b, values["i"])))
        raise InternalCompilerError(f"level {self.level} is a window of a tensor (a view) and "
                            f"cannot be written ({function})")

    def seek(self, b: ir.IRBuilder, raw, values: dict, begin: ir.Value, end: ir.Value,
             target: ir.Value) -> ir.Value:
        """First position in [begin, end) whose base coordinate is >= target."""
        return emit_lower_bound(self.tensor.kc, begin, end, target,
                                lambda mid: raw("pos_access", dict(values, p=mid))[0], "win")


def _max(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def _min(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)
