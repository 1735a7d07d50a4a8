"""What a planned GPU kernel's launch needs from one binding, the same on the emulator and
on a device: how many threads run, and each thread's range of the split loop.

An entry split runs a thread per window of ``plan.entries`` consecutive positions of the
windowed loop's level (an operand's rows' entries), with the rows each window touches:
rows lie in increasing runs of positions, so a window's rows are found by two searches.

A kernel with a workspace (count_fill only) gives each thread a slice of an arena of
``ARENA_BUDGET`` bytes at most, sized by the output's columns (``ARENA_BYTES_PER_COLUMN``
a column: a dense workspace's value, mark and list entries and a sort's spare copy):
where a thread a row would not fit, threads take equal ranges of rows.

A thread per row runs ``extent`` threads, thread t on coordinate t (no bounds array). A
thread per nonzero runs a thread per ``plan.entries`` positions of the split loop's
level, read from the operand's first level without walking it. A
nonzero split runs a thread per range of coordinates holding about ``plan.entries``
stored entries (the operands' entries per coordinate, the weights CPU threads split
by): the split points are found by a search over their running sum, and a coordinate
heavier than a share gets a range of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..ir.loops.entry_split import ENTRY_WINDOW_TAG
from ..ir.loops.gpu_plan import NONZERO_SPLIT, POSITION_SPLIT_TAG, GpuMappingError, GpuPlan
from ..ir.loops.nodes import loops_of
from ..tensors.walk import (
    entry_windows,
    first_level_positions,
    position_bounds,
    second_level_bounds,
)
from .binding import BoundCall

if TYPE_CHECKING:
    from .served import ServedKernel


@dataclass(frozen=True)
class Launch:
    """One launch's threads, grid and (nonzero split) per-thread range bounds."""

    threads: int
    grid: int
    block: int
    bounds: np.ndarray | None  # int64, threads + 1 split points; None: one row a thread
    # An entry split's windows of positions (threads + 1 split points); its bounds are
    # then each thread's first row, then each thread's end row (2 * threads).
    windows: np.ndarray | None = None
    arena_slice: int = 0  # bytes of each thread's workspace slice (0: no workspace)

    @property
    def arena_bytes(self) -> int:
        return self.arena_slice * self.threads

    @property
    def bounds_address(self) -> int:
        return 0 if self.bounds is None else self.bounds.ctypes.data

    @property
    def windows_address(self) -> int:
        return 0 if self.windows is None else self.windows.ctypes.data


def extent_of(kernel: ServedKernel, plan: GpuPlan, shape: tuple[int, ...]) -> int:
    """The extent of the loop the grid splits: the output's index it runs over."""
    names = [v.name for v in kernel.assignment.lhs.indices]
    if plan.index not in names:
        raise GpuMappingError(f"the grid splits the loop over {plan.index}, which indexes "
                              "no mode of the output")
    return shape[names.index(plan.index)]


def split_points(weights: np.ndarray, entries: int) -> np.ndarray:
    """Bounds of ranges of coordinates [0, len(weights)) holding about ``entries`` units
    of work each, a coordinate costing its stored entries plus one."""
    extent = len(weights)
    if extent == 0:
        return np.zeros(1, np.int64)
    cost = np.cumsum(np.asarray(weights, np.float64) + 1.0)
    count = int(min(extent, max(1, -(-cost[-1] // entries))))
    targets = cost[-1] * np.arange(1, count) / count
    inner = np.searchsorted(cost, targets, side="left") + 1
    heavy = np.flatnonzero(np.asarray(weights) + 1.0 >= cost[-1] / count)
    return np.unique(np.concatenate([[0], np.clip(inner, 1, extent), heavy, heavy + 1,
                                     [extent]])).astype(np.int64)


ARENA_BUDGET = 1 << 28  # bytes of workspace arena a launch may take
ARENA_BYTES_PER_COLUMN = 64
ARENA_SLACK = 1 << 16  # a hash or sort workspace's first arrays, grown by copies


def workspace_launch(plan: GpuPlan, extent: int, shape: tuple[int, ...]) -> Launch:
    """A launch whose threads each hold a workspace slice (see the module's docstring):
    a thread a row where the arena holds them, else equal ranges of rows."""
    columns = math.prod(shape) // max(extent, 1) if extent else 0
    piece = ARENA_BYTES_PER_COLUMN * columns + ARENA_SLACK
    most = ARENA_BUDGET // piece
    if most < 1:
        raise GpuMappingError(f"a workspace of {columns} columns needs {piece} bytes a "
                              f"thread, more than the {ARENA_BUDGET}-byte arena")
    if extent <= most:
        return Launch(extent, plan.grid(extent), plan.block, None, arena_slice=piece)
    bounds = np.unique(np.linspace(0, extent, most + 1).astype(np.int64))
    threads = len(bounds) - 1
    return Launch(threads, plan.grid(threads), plan.block, bounds, arena_slice=piece)


def launch_of(kernel: ServedKernel, plan: GpuPlan, bound: BoundCall) -> Launch:
    """The launch of ``plan`` for the binding ``bound``."""
    if plan.windows:
        window = next(loop for loop in loops_of(plan.program.root)
                      if ENTRY_WINDOW_TAG in loop.tags)
        tensor = bound.inputs_by_name[window.iterator.tensor]
        if not hasattr(tensor, "level_arrays") or window.iterator.level != 1:
            raise GpuMappingError(f"{window.iterator.tensor}: an entry split windows the "
                                  "stored second level of an operand (copy a view first)")
        try:
            windows, rows = entry_windows(*second_level_bounds(tensor), plan.entries)
        except ValueError as error:
            raise GpuMappingError(f"{window.iterator.tensor}: {error}") from None
        threads = len(windows) - 1
        return Launch(threads, plan.grid(threads), plan.block, rows, windows)
    if plan.splits_positions:
        split = next(loop for loop in loops_of(plan.program.root)
                     if POSITION_SPLIT_TAG in loop.tags)
        tensor = bound.inputs_by_name[split.iterator.tensor]
        if not hasattr(tensor, "level_arrays"):
            raise GpuMappingError(f"{split.iterator.tensor} is a view: a thread per nonzero "
                                  "needs its stored positions (copy it first)")
        bounds = position_bounds(*first_level_positions(tensor), plan.entries)
        return Launch(len(bounds) - 1, plan.grid(len(bounds) - 1), plan.block, bounds)
    extent = extent_of(kernel, plan, bound.shape)
    if plan.workspace:
        return workspace_launch(plan, extent, bound.shape)
    if plan.schedule != NONZERO_SPLIT:  # a thread (or a warp's lanes) per coordinate
        threads = extent * plan.lanes
        return Launch(threads, plan.grid(threads), plan.block, None)
    weights = kernel.entries_per_row(bound.inputs_by_name, plan.index)
    total = np.sum(weights, axis=0) if weights else np.zeros(extent)
    bounds = split_points(total, plan.entries)
    threads = len(bounds) - 1
    return Launch(threads, plan.grid(threads), plan.block, bounds)
