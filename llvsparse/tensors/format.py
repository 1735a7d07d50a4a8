"""Tensor formats: a list of levels (level format, stored mode, properties) and named formats.

A level whose ``mode`` is ``None`` stores no tensor mode (DIA's diagonal slot, ELL's slot
index): the compiler sums over it as a hidden index. Named formats are resolved here, in
the public API; the compiler only ever sees ``TensorType``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..formats.registry import generation as registry_generation
from ..formats.registry import get_level
from ..ir.types import PROPERTY_NAMES, LevelType, TensorType, fill_key


class FormatError(ValueError):
    """A format description that cannot describe a tensor."""


@dataclass(frozen=True)
class Level:
    """One level of a format: a level format name, the mode it stores, and settings."""

    kind: str
    mode: int | None = None
    properties: Mapping[str, bool] = field(default_factory=dict)
    params: Mapping[str, int] = field(default_factory=dict)
    block: int | None = None  # stores (mode coordinate // block), or % block when inner
    inner: bool = False

    def __post_init__(self) -> None:
        """Refuse settings that would otherwise be coerced into something else: a
        property "false" read as True, a mode 0.0, a block of -1."""
        if not isinstance(self.kind, str):
            raise FormatError(f"a level format name must be a string, not {self.kind!r}")
        if self.mode is not None:
            object.__setattr__(self, "mode", _whole(self.mode, f"mode of level {self.kind!r}",
                                                    least=0))
        for what, settings in (("properties", self.properties), ("params", self.params)):
            if not isinstance(settings, Mapping):
                raise FormatError(f"{what} of level {self.kind!r} must be a mapping, not "
                                  f"{settings!r}")
        for prop, value in self.properties.items():
            if not isinstance(value, (bool, np.bool_)):
                raise FormatError(f"property {prop!r} of level {self.kind!r} must be True or "
                                  f"False, not {value!r}")
        if self.block is not None:
            object.__setattr__(self, "block", _whole(self.block, f"block of level "
                                                     f"{self.kind!r}", least=1))
        if not isinstance(self.inner, (bool, np.bool_)) or (self.inner and self.block is None):
            raise FormatError(f"inner of level {self.kind!r} must be True or False, and True "
                              "only with a block")

    def key(self) -> tuple:
        return (self.kind, self.mode, tuple(sorted(self.properties.items())),
                tuple(sorted(self.params.items())), self.block, self.inner)


# Level parameters fit int32 indices, so that sizes derived from one (rows * W) stay
# within int64: W = 2**62 made 4 * W wrap to 0 bytes, and the kernel wrote past them.
PARAM_LIMIT = 2**31 - 1


def _whole(value, what: str, least: int) -> int:
    """``value`` as an int of at least ``least``; bools and floats are refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < least:
        kind = "a positive" if least == 1 else "a non-negative"
        raise FormatError(f"{what} must be {kind} integer, not {value!r}")
    return int(value)


def _level(spec: Level | str, mode: int | None) -> Level:
    if isinstance(spec, Level):
        return spec if spec.mode is not None or mode is None else Level(
            spec.kind, mode, spec.properties, spec.params, spec.block, spec.inner)
    if isinstance(spec, str):
        return Level(spec, mode)
    raise FormatError(f"a level must be a Level or a level format name, not {spec!r}")


def checked_fill(value) -> float | complex:
    """A fill value as a float: any real number, inf, -inf and NaN included; a complex
    one as a complex where its imaginary part is not 0 (a complex tensor's); a string
    or an array is refused rather than coerced (a 0-d array, as pydata/sparse keeps its
    fill values, is a number)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biufc":
        value = value.item()
    if isinstance(value, (complex, np.complexfloating)):
        return float(value.real) if value.imag == 0 else complex(value)
    if isinstance(value, (bool, np.bool_, int, float, np.integer, np.floating)):
        return float(value)
    raise FormatError(f"a fill value is a number (inf and NaN included), not {value!r}")


class Format:
    """An ordered list of levels; the levels' modes give the mode ordering. ``fill`` is
    the value of every entry the levels do not store (paper 004: part of the format);
    0 unless given. ``declares_fill``: it was given, so an output of this format must
    have it (a kernel whose result's fill is another refuses the output)."""

    fill: float = 0.0  # (formats pickled before fill values existed)
    declares_fill: bool = False

    def __init__(self, levels: Sequence[Level | str], modes: Sequence[int] | None = None,
                 name: str | None = None, fill: float | None = None):
        self.fill = checked_fill(0.0 if fill is None else fill)
        self.declares_fill = fill is not None
        if modes is not None and len(modes) != len(levels):
            raise FormatError("modes must give one mode per level")
        resolved = []
        for k, spec in enumerate(levels):
            default_mode = modes[k] if modes is not None else None
            level = _level(spec, default_mode)
            if level.mode is None and modes is None and isinstance(spec, str):
                level = Level(spec, k)
            resolved.append(level)
        self.levels: tuple[Level, ...] = tuple(resolved)
        self.name = name
        stored = [lv.mode for lv in self.levels if lv.mode is not None]
        self.order = len(set(stored))
        if sorted(set(stored)) != list(range(self.order)):
            raise FormatError(f"levels store modes {stored}; expected each of 0..{self.order - 1}")
        for mode in set(stored):
            sharing = [lv for lv in self.levels if lv.mode == mode]
            if len(sharing) > 1 and not all(lv.block for lv in sharing):
                raise FormatError(f"{len(sharing)} levels store mode {mode}; a mode is split "
                                  "over several levels only by blocks (block=...)")
        for level in self.levels:
            self._check_level(level)

    @staticmethod
    def _check_level(level: Level) -> None:
        definition = get_level(level.kind)
        for prop, value in level.properties.items():
            if prop not in PROPERTY_NAMES:
                raise FormatError(f"unknown property {prop!r} for level {level.kind!r}")
            pdef = definition.properties[prop]
            if not pdef.configurable and pdef.default != value:
                raise FormatError(f"property {prop!r} of level {level.kind!r} is fixed "
                                  f"to {pdef.default}")
        for param, value in level.params.items():
            if param not in definition.params:
                raise FormatError(f"level {level.kind!r} has no parameter {param!r}")
            if _whole(value, f"parameter {param} of level {level.kind!r}", 1) > PARAM_LIMIT:
                raise FormatError(f"parameter {param} of level {level.kind!r} is {value}, "
                                  f"more than the {PARAM_LIMIT} a parameter may be")

    def key(self) -> tuple:
        if "_key" not in self.__dict__:
            self._key = (*self.layout_key(), fill_key(self.fill))
        return self._key

    def layout_key(self) -> tuple:
        """The levels, without the fill value."""
        return tuple(level.key() for level in self.levels)

    def with_fill(self, fill: float) -> Format:
        """This format with another fill value (itself when it is the same)."""
        value = checked_fill(fill)
        if fill_key(value) == fill_key(self.fill):
            return self
        return Format(self.levels, name=self.name, fill=value)

    def __eq__(self, other: object) -> bool:
        """Another Format: the same levels and fill value. A name (``A.format == "csr"``,
        as code compares scipy's ``format``): its own, or one naming these levels, any
        fill. (Hashes stay the Format's: a dict keyed by Formats is looked up by one.)"""
        if isinstance(other, str):
            return other.lower() == self.name or _names_levels(other, self)
        return self is other or (isinstance(other, Format) and self.key() == other.key())

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        fill = f", fill={self.fill!r}" if fill_key(self.fill) != fill_key(0.0) else ""
        if self.name:
            return f"Format({self.name!r}{fill})"
        parts = [f"{lv.kind}:{lv.mode}" for lv in self.levels]
        return f"Format([{', '.join(parts)}]{fill})"

    def __getstate__(self) -> dict:
        """Pickled without its memo of tensor types, which holds this process's level
        definitions (another process may have registered others)."""
        return {k: v for k, v in self.__dict__.items() if k != "_types"}

    def tensor_type(self, dtype: str, index_dtype: str) -> TensorType:
        """The compiler's view of this format for given value and index dtypes (memoized:
        the call path needs it for every operand)."""
        key = (dtype, index_dtype, registry_generation())
        cache = self.__dict__.setdefault("_types", {})
        if key not in cache:
            cache[key] = self._tensor_type(dtype, index_dtype)
        return cache[key]

    def _tensor_type(self, dtype: str, index_dtype: str) -> TensorType:
        levels = []
        for level in self.levels:
            definition = get_level(level.kind)
            props = {p: definition.properties[p].default for p in PROPERTY_NAMES}
            props.update(level.properties)
            levels.append(LevelType(definition, level.kind, level.mode,
                                    tuple((p, bool(props[p])) for p in PROPERTY_NAMES),
                                    level.block, level.inner))
        return TensorType(tuple(levels), self.order, dtype, index_dtype, fill_key(self.fill))

    @property
    def has_hidden_levels(self) -> bool:
        """Storage-only or blocked levels: such formats are packed by named packers."""
        return any(level.mode is None or level.block for level in self.levels)


def _coo(order: int, modes: Sequence[int], ordered: bool = True) -> list[Level]:
    if order == 1:
        return [Level("compressed", modes[0], {"ordered": ordered})]
    levels = [Level("compressed", modes[0], {"unique": False, "ordered": ordered})]
    for k, mode in enumerate(modes[1:], start=1):
        last = k == order - 1
        levels.append(Level("singleton", mode, {"unique": last, "ordered": ordered}))
    return levels


def bcsr(block: Sequence[int] = (2, 2)) -> Format:
    """Block CSR: a CSR matrix of dense row-major blocks of shape ``block``."""
    rows, cols = (int(b) for b in block)
    if rows < 1 or cols < 1:
        raise FormatError(f"block shape must be positive, not {tuple(block)}")
    return Format([Level("dense", 0, block=rows), Level("compressed", 1, block=cols),
                   Level("dense", 0, block=rows, inner=True),
                   Level("dense", 1, block=cols, inner=True)], name=f"bcsr{rows}x{cols}")


def named_format(name: str, order: int, modes: Sequence[int] | None = None) -> Format:
    """Resolve a format name for a tensor of the given order ("bcsr2x3" sets the block)."""
    if not isinstance(name, str):
        raise FormatError(f"a format is a name, a Format or a list of levels, not {name!r}")
    key = name.lower()
    if key in ("gcxs", "dok"):  # pydata/sparse's names, as its arrays convert here
        key = "coo" if key == "dok" else "csr" if order == 2 else "csf"
    blocked = re.fullmatch(r"bcsr(?:(\d+)x(\d+))?", key)
    if blocked and order == 2:
        return bcsr((int(blocked[1] or 2), int(blocked[2] or 2)))
    if blocked:
        raise FormatError(f"format {name!r} is for matrices; this tensor has order {order}")
    if key not in NAMED_FORMATS:
        raise FormatError(f"unknown format {name!r}; known: {', '.join(sorted(NAMED_FORMATS))}")
    natural = list(modes) if modes is not None else list(range(order))
    if order == 0:
        return Format([], name="scalar")
    if key == "dense":
        levels: list[Level] = [Level("dense", m) for m in natural]
    elif key in ("coo", "sparse"):
        levels = _coo(order, natural)
    elif key == "coo-unordered":
        levels = _coo(order, natural, ordered=False)
    elif key == "csf":
        levels = [Level("compressed", m) for m in natural]
    elif key == "hash":
        levels = [Level("dense", m) for m in natural[:-1]] + [Level("hashmap", natural[-1])]
    elif order == 2 and key in _MATRIX_FORMATS:
        levels = _MATRIX_FORMATS[key]()
    elif key in _MATRIX_FORMATS:
        raise FormatError(f"format {name!r} is for matrices; this tensor has order {order}")
    else:
        raise FormatError(f"unknown format {name!r}; known: {', '.join(sorted(NAMED_FORMATS))}")
    return Format(levels, name=key if natural == list(range(order)) else f"{key}{tuple(natural)}")


def _names_levels(name: str, fmt: Format) -> bool:
    """Whether format name ``name`` gives ``fmt``'s levels (for its order)."""
    try:
        return named_format(name, fmt.order).layout_key() == fmt.layout_key()
    except FormatError:
        return False


_MATRIX_FORMATS = {
    "csr": lambda: [Level("dense", 0), Level("compressed", 1)],
    "csc": lambda: [Level("dense", 1), Level("compressed", 0)],
    "dcsr": lambda: [Level("compressed", 0), Level("compressed", 1)],
    "dcsc": lambda: [Level("compressed", 1), Level("compressed", 0)],
    "dia": lambda: [Level("dense", None), Level("range", 0), Level("offset", 1)],
    "ell": lambda: [Level("dense", None), Level("dense", 0), Level("singleton", 1)],
    "ell-rows": lambda: [Level("dense", 0), Level("dense", None), Level("singleton", 1)],
}

NAMED_FORMATS = {"dense", "coo", "coo-unordered", "sparse", "csf", "hash", "bcsr",
                 *_MATRIX_FORMATS}


def as_format(spec: Format | str | Sequence[Level | str], order: int) -> Format:
    """Accept a Format, a format name, or a list of levels."""
    if isinstance(spec, Format):
        fmt = spec
    elif isinstance(spec, str):
        fmt = named_format(spec, order)
    elif isinstance(spec, (list, tuple)):
        fmt = Format(list(spec))
    else:
        raise FormatError(f"a format is a name, a Format or a list of levels, not {spec!r}")
    if fmt.order != order:
        raise FormatError(f"format {fmt!r} describes order-{fmt.order} tensors, "
                          f"not order {order}")
    return fmt
