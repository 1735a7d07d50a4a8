"""The GPU mapping of a kernel: which loop the grid splits, how, and the block size.

A planning rule over the loop IR, so the backend only translates what it is told: the
loop the ``thread rows`` pass marked (the output's first index, where each coordinate
writes only its own rows) is tagged for the grid. Its schedule says how threads share it:

- ``thread_per_row``: tags ``gpu_block``, ``gpu_thread``; the global thread index
  (blockIdx * blockDim + threadIdx) takes one coordinate of the loop.
- ``nonzero_split``: adds ``nonzero split``: each thread takes a range of coordinates
  holding about ``entries`` stored entries of the operands under the loop, split points
  found on the host by a search over the running count of entries per coordinate (heavy
  rows get a thread to themselves), so skewed rows do not leave most threads idle.
- ``thread_per_nonzero``: adds ``position split``, ``atomic adds``: where the split loop
  steps over a level's stored positions whose coordinates repeat, each thread takes a
  range of ``entries`` positions, so a row's entries may fall to several threads, which
  add their partial sums into the output with atomic adds (``atomicrmw``; the host
  zeroes the output first).
- ``entry_split``: adds ``entry split``, ``atomic adds``, and ``entry window`` on the one
  loop under the split loop that steps over an operand's stored positions (SpMV's
  row): each thread takes a window of ``entries`` consecutive positions of that level,
  found on the host with the rows it touches, so one heavy row is spread over many
  threads; a row cut by a window edge gets a partial sum from each thread that holds
  part of it. Only a thread's first and last rows can be cut: their sums are added into
  the output atomically (the host zeroes it first), the rows between are stored.
- ``warp_per_row``: tags ``gpu_block``, ``gpu_warp``, ``warp sums``: a warp of 32 lanes
  per coordinate; the innermost loop under it (tagged ``warp lanes``; the row's fast
  forms dropped) gives lane k its k-th, k+32-th, ... step: a row's positions (SpMV) or a
  dot product's full range (SDDMM, a warp per row, its lanes over k); the lanes'
  partial sums meet by shuffles (``shfl.sync.bfly``) before lane 0 writes each entry.
- ``warp_per_row_columns``: tags ``gpu_block``, ``gpu_warp``: a warp per coordinate
  whose lanes share the innermost loop over a full range of coordinates (SpMM's
  columns: lane k takes columns k, k+32, ...; ``warp lanes``), each lane writing its own
  output entries: no sums across lanes, coalesced reads of the operand's rows.
  The row's fast forms (row clearing, jam) are dropped: lanes share the row.
- ``count_fill``: adds ``count``, ``fill``: an assembled (sparse) output, sized on the
  host before the launch: a grid of threads counts each row's entries, the host scans
  the counts into offsets and allocates the output exactly, a second grid fills it. The
  device never allocates. A kernel with a workspace (SpGEMM's row accumulator) runs
  only so: each thread takes a range of rows and its workspace from its own slice of
  an arena the host sizes by the output's columns (gpu_launch.py), so the threads a
  launch runs are bounded by the arena's memory.

``thread_per_nonzero`` asked of a loop over rows that lead to one loop over entries
(as the scheduling language's ``fuse; pos; ...; atomics`` names it) is that
split: ``entry_split``.

``default_schedule`` is the autoscheduler's rule per kernel class. Anything without a
mapping is refused with a ``GpuMappingError`` naming the construct, never compiled into
a kernel that races.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..concrete.expressions import Operand
from ..notation.operators import ADD
from ..schedule.parallel import dense_like
from ..types import TensorType
from .assembly_phases import SPLIT_PHASES, can_count_and_fill
from .entry_split import (
    ATOMIC_TAG,
    ENTRY_SPLIT_TAG,
    atomic_adds_refusal,
    entry_split_refusal,
    plain,
    retag,
    split_entries,
    tagged,
)
from .nodes import (
    Accumulate,
    Allocate,
    Append,
    If,
    Insert,
    Loop,
    LoopNode,
    Merge,
    Program,
    loops_of,
    tag,
    target_name,
    walk,
)
from .notes import THREAD_ROWS

GPU_BLOCK = "gpu_block"  # the loop's range is split over the grid's blocks
GPU_THREAD = "gpu_thread"  # ... and over each block's threads
NONZERO_SPLIT_TAG = "nonzero split"  # ... a range of coordinates a thread, by entries
COUNT_TAG, FILL_TAG = "count", "fill"  # ... run twice: count a row's entries, then fill
POSITION_SPLIT_TAG = "position split"  # ... a range of the loop's positions a thread
GPU_WARP = "gpu_warp"  # a warp per coordinate of the loop
WARP_SUMS_TAG = "warp sums"  # its writes of lanes' partial sums are summed by shuffles
WARP_LANES_TAG = "warp lanes"  # the warp's lanes share this loop's positions, strided
WARP_SIZE = 32
BLOCK_SIZE = 128  # threads per block: four warps, a full occupancy unit on sm_70..sm_90
ENTRIES_PER_THREAD = 32  # nonzero split: a thread's share of stored entries

THREAD_PER_ROW, NONZERO_SPLIT, COUNT_FILL = "thread_per_row", "nonzero_split", "count_fill"
THREAD_PER_NONZERO, WARP_PER_ROW = "thread_per_nonzero", "warp_per_row"
WARP_COLUMNS, ENTRY_SPLIT = "warp_per_row_columns", "entry_split"
SCHEDULES = (THREAD_PER_ROW, NONZERO_SPLIT, THREAD_PER_NONZERO, WARP_PER_ROW, WARP_COLUMNS,
             COUNT_FILL, ENTRY_SPLIT)
_TAGS = {THREAD_PER_ROW: (GPU_BLOCK, GPU_THREAD),
         NONZERO_SPLIT: (GPU_BLOCK, GPU_THREAD, NONZERO_SPLIT_TAG),
         THREAD_PER_NONZERO: (GPU_BLOCK, GPU_THREAD, POSITION_SPLIT_TAG, ATOMIC_TAG),
         WARP_PER_ROW: (GPU_BLOCK, GPU_WARP, WARP_SUMS_TAG),
         WARP_COLUMNS: (GPU_BLOCK, GPU_WARP),
         COUNT_FILL: (GPU_BLOCK, GPU_THREAD, COUNT_TAG, FILL_TAG),
         ENTRY_SPLIT: (GPU_BLOCK, GPU_THREAD, ENTRY_SPLIT_TAG, ATOMIC_TAG)}


class GpuMappingError(ValueError):
    """A kernel (or one of its constructs) has no GPU mapping yet."""


@dataclass(frozen=True)
class GpuPlan:
    """How a kernel maps onto the grid: ``program`` with the split loop tagged, its
    ``index``, the ``schedule`` (one of SCHEDULES), the threads per block, and (nonzero
    split) the stored entries a thread takes."""

    program: Program
    index: str
    block: int = BLOCK_SIZE
    schedule: str = THREAD_PER_ROW
    entries: int = ENTRIES_PER_THREAD
    workspace: bool = False  # a workspace per thread, in slices of a host-sized arena

    def grid(self, threads: int) -> int:
        """Blocks that hold ``threads`` threads (at least one block)."""
        if threads < 0:
            raise ValueError(f"a thread count cannot be negative, not {threads}")
        return max(1, -(-threads // self.block))

    @property
    def splits_positions(self) -> bool:
        """Whether threads take ranges of the split loop's positions (atomic writes)."""
        return self.schedule == THREAD_PER_NONZERO

    @property
    def windows(self) -> bool:
        """Whether threads take windows of an inner loop's positions (entry_split)."""
        return self.schedule == ENTRY_SPLIT

    @property
    def lanes(self) -> int:
        """Threads per coordinate of the split loop (a warp, or one)."""
        return WARP_SIZE if self.schedule in (WARP_PER_ROW, WARP_COLUMNS) else 1

    @property
    def assembles(self) -> bool:
        """Whether the output is assembled by a count grid and a fill grid."""
        return self.schedule == COUNT_FILL


def _lane_loop(node: LoopNode) -> LoopNode:
    """The loop the warp's lanes share: strided, so its fast forms (jam, pairs,
    gallop, running sums...) do not apply."""
    return tag(plain(node), WARP_LANES_TAG)


def _assembled(program: Program) -> bool:
    return not dense_like(TensorType(program.output_levels, 0, program.dtype, "int32"))


def _walks_positions_below(split: LoopNode) -> bool:
    """Whether a loop under ``split`` steps over a level's stored entries (rows of
    varying length: the work per coordinate of the split loop varies)."""
    return any(isinstance(loop, Loop) and loop.over == "positions" or isinstance(loop, Merge)
               for loop in loops_of(split)[1:])


def position_split_refusal(program: Program, split: LoopNode) -> str | None:
    """Why threads cannot take ranges of the split loop's positions, adding into the
    output atomically (None: they can)."""
    if not (isinstance(split, Loop) and split.over == "positions"
            and not split.iterator.universe and split.iterator.level == 0):
        return ("its split loop does not step over the stored positions of an operand's "
                "first level")
    if split.chosen is not None and len(split.chosen.point) > 1:
        return ("another operand's level is iterated beside it, over coordinates a "
                "position range does not bound")
    return atomic_adds_refusal(program, split)


def _sum_read(expr: object) -> bool:
    """Whether ``expr`` reads a scalar temporary (a sum the lanes each hold part of)."""
    return isinstance(expr, Operand) and expr.uid == -1


def warp_refusal(program: Program, split: LoopNode) -> str | None:
    """Why a warp cannot run each coordinate of ``split`` (None: it can): the lanes
    share its innermost loop (over a level's positions or a full range), which may
    only sum into scalar temporaries by +; the output is written outside that loop,
    unconditionally (every lane reaches each shuffle), with such a sum; in floats."""
    inner = loops_of(split)[1:]
    lanes = inner[-1] if inner else None
    if not isinstance(lanes, Loop) or loops_of(lanes)[1:] or not (
            lanes.over == "positions" or lanes.iterator.facts.full):
        return ("its innermost loop is not one loop over a level's positions or a full "
                "range of coordinates")
    inside = {id(n) for n in walk(lanes)}
    for node in walk(split):
        if isinstance(node, If) and any(isinstance(w, (Accumulate, Insert, Append))
                                        and target_name(w.target) == program.output
                                        for w in walk(node.then)):
            return "it writes the output under a condition, which lanes may not all reach"
        if not isinstance(node, (Accumulate, Insert, Append)):
            continue
        output = target_name(node.target) == program.output
        if id(node) in inside and (output or not isinstance(node, Accumulate)
                                   or node.operator is not ADD):
            return "its innermost loop writes the output, or reduces by something other than +"
        if not (id(node) in inside) and output and not _sum_read(node.value):
            return "it writes the output with something other than a sum the lanes hold"
    if program.dtype not in ("float32", "float64"):
        return f"its values are {program.dtype}; warp shuffles here sum floats"
    return None


def _columns(split: LoopNode) -> LoopNode | None:
    """The innermost loop under ``split`` when it runs over a full range of coordinates
    (every coordinate stored: an operand's columns)."""
    inner = loops_of(split)[1:]
    last = inner[-1] if inner else None
    full = isinstance(last, Loop) and last.over == "coordinates" and last.iterator.facts.full
    return last if full and not loops_of(last)[1:] else None


def columns_refusal(program: Program, split: LoopNode) -> str | None:
    """Why a warp's lanes cannot share the columns of ``split``'s innermost loop (None:
    they can): each lane must write only output entries indexed by its columns."""
    columns = _columns(split)
    if columns is None:
        return "its innermost loop does not run over a full range of coordinates"
    inside = {id(n) for n in walk(columns)}
    for node in walk(split):
        if not isinstance(node, (Accumulate, Insert, Append)):
            continue
        mine = id(node) in inside
        indexed = any(getattr(ix, "name", None) == columns.index
                      for ix in getattr(node.target, "indices", ()))
        if (mine and not isinstance(node.target, str) and not indexed) or (
                not mine and target_name(node.target) == program.output):
            return ("its output entries are not each written by one column's lane "
                    "inside that loop")
        if mine and isinstance(node.target, str):
            return "it sums across the columns into a temporary, which lanes would split"
    return None


def default_schedule(program: Program, split: LoopNode) -> str:
    """The autoscheduler's GPU schedule per kernel class: an assembled output is counted
    then filled (the only way to size it on the host); where the split loop's
    coordinates lead to runs of stored entries and then to a full range of output
    columns (SpMM), a warp's lanes share the columns (coalesced; an operand narrower
    than a warp idles lanes); where they lead to runs of entries otherwise (SpMV, SDDMM,
    adds), threads share entries, not rows (nonzero split); where the split loop steps
    over positions whose coordinates repeat, a thread per range of entries adds into
    the output atomically; a loop over unique stored coordinates, or one leading to
    fixed work, runs a thread per coordinate."""
    if _assembled(program):
        return COUNT_FILL
    if split.over == "coordinates" and _walks_positions_below(split):
        return WARP_COLUMNS if columns_refusal(program, split) is None else NONZERO_SPLIT
    if isinstance(split, Loop) and not split.iterator.facts.unique \
            and position_split_refusal(program, split) is None:
        return THREAD_PER_NONZERO
    return THREAD_PER_ROW


def plan_gpu(program: Program, splittable: bool, block: int = BLOCK_SIZE,
             schedule: str | None = None, entries: int = ENTRIES_PER_THREAD) -> GpuPlan:
    """The GPU mapping of ``program``: threads over the loop over the output's first
    index, where CPU threads may split it too (``splittable``: the kernel's parallel
    mode, ir/schedule/parallel.py, so no loop outside it walks an operand's modes, which every
    thread would then walk whole). ``schedule``: one of SCHEDULES, None for the
    default rule's."""
    if not isinstance(block, int) or not 1 <= block <= 1024 or block % 32:
        raise ValueError(f"a GPU block holds a multiple of 32 threads, at most 1024, "
                         f"not {block!r}")
    if schedule is not None and schedule not in SCHEDULES:
        raise ValueError(f"unknown GPU schedule {schedule!r}; choose one of "
                         f"{', '.join(SCHEDULES)}")
    if not isinstance(entries, int) or entries < 1:
        raise ValueError(f"a nonzero split gives each thread at least one entry, not "
                         f"{entries!r}")
    if program.nests != 1:
        raise GpuMappingError(f"a kernel of {program.nests} loop nests (an additive "
                              "statement split) has no GPU mapping yet")
    workspace = next((n for n in walk(program.root) if isinstance(n, Allocate) and n.layout),
                     None)
    split = [loop for loop in loops_of(program.root) if THREAD_ROWS in loop.tags]
    if not split or not splittable:
        raise GpuMappingError("no loop of this kernel has a GPU thread mapping yet: none "
                              "runs over the output's first index with each coordinate "
                              "writing only its own rows and no loop outside it walking "
                              "an operand's modes")
    first = split[0]
    chosen = schedule or default_schedule(program, first)
    if _assembled(program) != (chosen == COUNT_FILL):
        raise GpuMappingError(
            f"GPU schedule {chosen} is for a dense-like output; an assembled (sparse) "
            "output needs count_fill" if chosen != COUNT_FILL else
            "GPU schedule count_fill assembles a sparse output; this kernel's output is "
            "dense-like (use thread_per_row or nonzero_split)")
    if chosen == THREAD_PER_NONZERO and (why := position_split_refusal(program, first)):
        if entry_split_refusal(program, first) is not None:
            raise GpuMappingError(f"GPU schedule thread_per_nonzero does not fit: {why}")
        chosen = ENTRY_SPLIT  # the same split where rows lead to the entries
    if chosen == ENTRY_SPLIT and (why := entry_split_refusal(program, first)):
        raise GpuMappingError(f"GPU schedule entry_split does not fit: {why}")
    if chosen == WARP_PER_ROW and (why := warp_refusal(program, first)):
        raise GpuMappingError(f"GPU schedule warp_per_row does not fit: {why}")
    if workspace is not None and chosen != COUNT_FILL:
        raise GpuMappingError(f"a workspace ({workspace.name}: {workspace.layout}) has a GPU "
                              f"mapping under count_fill only (threads' slices of an arena "
                              f"sized on the host), not under {chosen}")
    phases = program.phases
    if chosen == COUNT_FILL:
        if not can_count_and_fill(program):
            raise GpuMappingError("this kernel's assembled output cannot be built in count "
                                  "and fill phases (its rows are not outermost, or its "
                                  "levels are not a row-owned append group), which sizing "
                                  "it on the host before the launch needs")
        phases = SPLIT_PHASES  # the count and fill grids' functions, with setup and finish
    if chosen == WARP_COLUMNS and (why := columns_refusal(program, first)):
        raise GpuMappingError(f"GPU schedule {WARP_COLUMNS} does not fit: {why}")
    if chosen == ENTRY_SPLIT:
        program = split_entries(program, first, (GPU_BLOCK, GPU_THREAD))
        return GpuPlan(replace(program, phases=phases), first.index, block, chosen, entries)
    changes = {id(first): tagged(_TAGS[chosen])}
    if chosen == WARP_PER_ROW:
        changes = {id(loop): plain for loop in loops_of(first)}
        changes[id(first)] = lambda node: tagged(_TAGS[chosen])(plain(node))
        changes[id(loops_of(first)[-1])] = _lane_loop
    if chosen == WARP_COLUMNS:
        changes = {id(loop): plain for loop in loops_of(first)}
        changes[id(first)] = lambda node: tagged(_TAGS[chosen])(plain(node))
        changes[id(_columns(first))] = _lane_loop
    root = retag(program.root, changes)
    return GpuPlan(replace(program, root=root, phases=phases), first.index, block, chosen,
                   entries, workspace is not None)
