"""Slicing a tensor without copying it: ``A[10:100:2, :]``, ``A[:, 5]``, ``A[i, j]``.

A view (frontend/tensor.py's ``TensorView``, over ``WindowStorage`` here) shares its base
tensor's arrays. Its format is the base format
with each sliced level marked windowed (or strided); a dimension indexed by an integer
keeps its level, now storage-only over a one-coordinate window, which the compiler sums
over as a hidden index (the entry there, or nothing). The window numbers (start, step,
count) travel to the kernel as runtime parameters, so one compiled kernel serves every
window of the same shape class (see backends/llvm/window.py).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from ..backends.llvm.window import windowed_definition
from ..ir.types import (
    NOT_WINDOWED,
    PROPERTY_NAMES,
    STRIDED,
    WINDOWED,
    LevelType,
    TensorType,
    fill_key,
)
from .format import Format, Level, checked_fill, named_format
from .tensor import StoredTensor


@dataclass(frozen=True)
class Window:
    """The coordinates ``start + step * j`` for ``j`` in ``[0, count)`` of one base
    dimension; ``sliced``: a key other than ``:`` chose them (a ``0:n`` covering the whole
    dimension too, so that it shares the kernels of other windows); ``dropped``: indexed
    by an integer (the view has no such dimension)."""

    start: int
    step: int
    count: int
    sliced: bool = False
    dropped: bool = False

    @property
    def kind(self) -> int:
        """How a level over this dimension reads through the window (the kernel's type)."""
        if self.step != 1:
            return STRIDED
        return WINDOWED if self.sliced or self.dropped else NOT_WINDOWED

    def then(self, key, extent: int) -> Window:
        """This window sliced again by ``key`` (a slice or an integer), numpy's way."""
        if isinstance(key, slice):
            start, stop, step = key.indices(extent)
            if step < 0:
                raise ValueError(f"slice {_show(key)}: negative steps are not supported "
                                 "(a view iterates its base's coordinates upwards)")
            count = len(range(start, stop, step))
            whole = key.start is None and key.stop is None and step == 1
            return Window(self.start + self.step * start, self.step * step, count,
                          self.sliced or not whole)
        j = operator.index(key)
        if not -extent <= j < extent:
            raise IndexError(f"index {j} is out of bounds for a dimension of extent {extent}")
        j %= extent
        return Window(self.start + self.step * j, self.step, 1, True, dropped=True)


def is_window_key(indices) -> bool:
    """Whether ``indices`` slices (integers, slices, ``...``) rather than names index
    variables for index notation."""
    keys = indices if isinstance(indices, tuple) else (indices,)
    return all(k is Ellipsis or isinstance(k, (slice, int, np.integer))
               and not isinstance(k, (bool, np.bool_))
               and not (isinstance(k, slice) and k.step is not None and k.step < 0)
               for k in keys)


def view(tensor: StoredTensor, indices, view_class: type[WindowStorage]):
    """``tensor[indices]``: a view (of ``view_class``), or the entry itself when every
    index is an integer."""
    keys = _expanded(indices if isinstance(indices, tuple) else (indices,), tensor.order)
    if isinstance(tensor, WindowStorage):
        base, windows = tensor.base, list(tensor.windows)
    else:
        base, windows = tensor, [Window(0, 1, n) for n in tensor.shape]
    kept = [d for d, w in enumerate(windows) if not w.dropped]
    for d, key in zip(kept, keys):
        windows[d] = windows[d].then(key, windows[d].count)
    if all(w.dropped for w in windows):
        ones = [Window(w.start, w.step, 1, True) for w in windows]
        return view_class(base, ones).to_numpy()[(0,) * len(ones)]
    return view_class(base, windows)


def _expanded(keys: tuple, order: int) -> tuple:
    """``keys`` with ``...`` spelled out and missing trailing slices added."""
    if sum(k is Ellipsis for k in keys) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    given = [k for k in keys if k is not Ellipsis]
    if len(given) > order:
        raise IndexError(f"too many indices: the tensor has {order} dimensions but "
                         f"{len(given)} were indexed")
    fill = (slice(None),) * (order - len(given))
    if Ellipsis in keys:
        at = keys.index(Ellipsis)
        return keys[:at] + fill + keys[at + 1:]
    return keys + fill


class WindowedFormat(Format):
    """A base format read through windows: the same levels, each sliced level marked
    windowed or strided, an integer-indexed one storage-only."""

    def __init__(self, base: Format, windows: list[Window]):
        for level in base.levels:
            if level.block is not None:
                raise ValueError(f"{base!r} stores blocks; slicing a blocked format is not "
                                 "supported (convert it first)")
        renumber = {}
        for mode, window in enumerate(windows):
            if not window.dropped:
                renumber[mode] = len(renumber)
        levels = [Level(lv.kind, None if lv.mode is None else renumber.get(lv.mode),
                        lv.properties, lv.params) for lv in base.levels]
        super().__init__(levels, fill=base.fill)  # a view reads its base's fill value
        self.base = base
        self.windows = tuple(windows)
        self.kinds = tuple(NOT_WINDOWED if lv.mode is None else windows[lv.mode].kind
                           for lv in base.levels)

    def layout_key(self) -> tuple:
        """The base format's where no level is windowed (``A[:, :]``), so that a kernel
        compiled for the base takes such a view; the windows' kinds otherwise."""
        plain = super().layout_key()
        return (plain, self.kinds) if any(self.kinds) else plain

    def with_fill(self, fill: float) -> Format:
        """The same windows onto the base format with another fill value."""
        if fill_key(checked_fill(fill)) == fill_key(self.fill):
            return self
        return windowed_format(self.base.with_fill(fill), list(self.windows))

    def __repr__(self) -> str:
        return f"WindowedFormat({self.base!r}, {self.kinds})"

    def _tensor_type(self, dtype: str, index_dtype: str) -> TensorType:
        plain = super()._tensor_type(dtype, index_dtype)
        levels = []
        for level, kind in zip(plain.levels, self.kinds):
            props = dict(level.properties)
            definition = windowed_definition(level.definition, kind, props["ordered"],
                                             props["branchless"])
            levels.append(LevelType(definition, level.kind, level.mode,
                                    tuple((p, props[p]) for p in PROPERTY_NAMES),
                                    level.block, level.inner, kind))
        return TensorType(tuple(levels), plain.order, dtype, index_dtype, plain.fill_key)


_FORMATS: dict[tuple, WindowedFormat] = {}  # one per shape class: its types are memoized
_FORMATS_KEPT = 256


def windowed_format(base: Format, windows: list[Window]) -> WindowedFormat:
    """The WindowedFormat of ``base`` through ``windows``, shared by every view of that
    shape class, so that its compiler types are built once (a new view per call)."""
    key = (base, tuple((w.kind, w.dropped) for w in windows))
    fmt = _FORMATS.get(key)
    if fmt is None or fmt.base is not base:
        if len(_FORMATS) >= _FORMATS_KEPT:
            _FORMATS.clear()
        fmt = _FORMATS[key] = WindowedFormat(base, windows)
    return fmt


class WindowStorage:
    """A window onto a tensor, sharing its arrays: usable wherever a Tensor is read
    (kernel operands, ``to_numpy``, ``to_scipy``, ``evaluate``, ``einsum``). The storage
    half of a view, mixed before a tensor class (frontend/tensor.py's TensorView)."""

    base: StoredTensor
    windows: tuple[Window, ...]

    def __init__(self, base: StoredTensor, windows: list[Window]):
        fmt = windowed_format(base.format, windows)
        params = [dict(p) for p in base.params]
        for k, level in enumerate(base.format.levels):
            if fmt.kinds[k] != NOT_WINDOWED:
                w = windows[level.mode]
                params[k].update({"window.start": w.start, "window.step": w.step,
                                  "window.count": w.count})
        shape = [w.count for w in windows if not w.dropped]
        super().__init__(shape, fmt, base.dtype, base.index_dtype, base.level_extents,
                         base.level_arrays, params, base.values, base.fill, base.name)
        self.base = base
        self.base_shape = base.shape
        self.windows = tuple(windows)

    def __repr__(self) -> str:
        return f"<view {self.shape} of {self.base!r}>"

    def validate_shallow(self) -> None:
        """The base's O(1) checks, on the arrays this view reads: a tensor assigned to
        after the view was made (``A[i, j] = ...``) holds other arrays, which the base's
        checks would vouch for instead."""
        base = self.base
        same = (base.values is self.values and base.level_extents == self.level_extents
                and base.format == self.format.base and base.shape == self.base_shape
                and all(a is b for mine, theirs in zip(self.level_arrays, base.level_arrays)
                        for a, b in zip(mine.values(), theirs.values()))
                and all(p.items() <= q.items() for p, q in zip(base.params, self.params)))
        if not same:
            raise ValueError("the tensor this view was sliced from has changed since "
                             "(it holds other arrays now); slice it again")
        base.validate_shallow()

    def validate(self) -> None:
        self.validate_shallow()
        self.base.validate()

    def _copied(self, name: str) -> StoredTensor:
        """The view's entries in a new tensor of the named format: a copy kernel that
        visits only the window, or, where none can be scheduled, a sort on the host."""
        return self._convert(named_format(name, self.order), check=True)

    @property
    def nnz(self) -> int:
        """Entries stored inside the window (explicit zeros and duplicates included)."""
        return len(self._stored_entries()[1])

    def _stored_entries(self) -> tuple[np.ndarray, np.ndarray]:
        """The base's stored entries inside the window, at view coordinates, and the
        positions of their values (the base's values are the view's): what conversions
        of the view (a transposed operand, ``asformat``) pack from."""
        coords, positions = self.base._stored_entries()
        inside = np.ones(len(positions), dtype=bool)
        for d, w in enumerate(self.windows):
            offset = coords[d] - w.start
            inside &= (offset >= 0) & (offset < w.count * w.step) & (offset % w.step == 0)
        kept = [d for d, w in enumerate(self.windows) if not w.dropped]
        mapped = [(coords[d][inside] - self.windows[d].start) // self.windows[d].step
                  for d in kept]
        at = np.stack(mapped) if kept else np.zeros((0, int(inside.sum())), np.int64)
        return at.astype(np.int64), positions[inside]

    def entries_per_first_coordinate(self) -> np.ndarray:
        """The base's entries under each first-level coordinate the window keeps (all of
        their entries, inside the window's other dimensions or not): threads' weights."""
        counts = self.base.entries_per_first_coordinate()
        first = self.format.levels[0]
        if self.format.kinds[0] == NOT_WINDOWED or first.mode is None:
            return counts
        w = self.windows[self.base.format.levels[0].mode]
        return counts[w.start:w.start + w.count * w.step:w.step]

    def to_numpy(self) -> np.ndarray:
        return self._copied("dense").to_numpy()

    def to_scipy(self, format: str = "csr"):
        return self._copied("csr").to_scipy(format)


def _show(key: slice) -> str:
    parts = ["" if v is None else str(v) for v in (key.start, key.stop, key.step)]
    return ":".join(parts)
