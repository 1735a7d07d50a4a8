"""User schedules on kernels: the directive methods, the GPU schedule they name, the
threads' chunks they ask for, and ``kernel.schedule``'s account of what runs.

The language and its checks are in ir/schedule/ (directives.py; user_plan.py with
resolved.py and user_loops.py); this module connects them to a compiled
kernel: a directive method returns a new kernel with the directive appended, and a call
cuts the parallel loop's coordinates as the plan says.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..abi import thread_calls
from ..ir.errors import ScheduleError
from ..ir.notation import syntax as nt
from ..ir.notation.operators import Operator
from ..ir.schedule import directives as dv
from ..ir.schedule.resolved import Chunks, KernelIndices, SchedulePlan
from ..ir.schedule.user_plan import plan_schedule
from ..tensors.format import Format
from ..tensors.walk import entry_windows, second_level_bounds

if TYPE_CHECKING:
    from ..tensors.tensor import StoredTensor


class ScheduleMethods:
    """The scheduling language as methods: each returns a new kernel with the directive
    appended to this one's schedule (the kernel class provides ``with_directive``)."""

    def reorder(self, *indices: str):
        """Loops over ``indices`` in this order, outermost first."""
        return self.with_directive(dv.Reorder(tuple(str(i) for i in indices)))

    def split(self, index: str, outer: str, inner: str, factor: int):
        """``index = outer * factor + inner``: chunks of ``factor`` coordinates."""
        return self.with_directive(dv.Split(str(index), str(outer), str(inner), int(factor)))

    def divide(self, index: str, outer: str, inner: str, parts: int):
        """``index`` cut into ``parts`` chunks of equal coordinates."""
        return self.with_directive(dv.Divide(str(index), str(outer), str(inner), int(parts)))

    def fuse(self, outer: str, inner: str, fused: str):
        """Two nested loops as one over their pairs."""
        return self.with_directive(dv.Fuse(str(outer), str(inner), str(fused)))

    def pos(self, index: str, pos_index: str, access: str):
        """``index`` walked in the position space of ``access`` (text such as "A(i,j)")."""
        parsed = dv.parse_directive(f"pos({index}, {pos_index}, {access})")
        return self.with_directive(parsed)

    def coord(self, pos_index: str, index: str):
        return self.with_directive(dv.Coord(str(pos_index), str(index)))

    def bound(self, index: str, bound_index: str, value: int, kind: str = "max_exact"):
        """A promise about ``index``'s extent, checked on every call."""
        return self.with_directive(dv.parse_directive(
            f"bound({index}, {bound_index}, {value}, {kind})"))

    def precompute(self, expr: str, index: str, workspace_index: str, workspace: str):
        """``expr`` computed into a workspace (a workspace policy's name) over ``index``."""
        return self.with_directive(dv.Precompute(str(expr), str(index), str(workspace_index),
                                                 str(workspace)))

    def unroll(self, index: str, factor: int):
        return self.with_directive(dv.Unroll(str(index), int(factor)))

    def parallelize(self, index: str, unit: str = "cpu_thread", races: str = "no_races"):
        """The loop over ``index`` on parallel ``unit``s; ``races``: how shared writes
        are kept correct."""
        return self.with_directive(dv.parse_directive(
            f"parallelize({index}, {unit}, {races})"))


def resolve(schedule: object, assignment: nt.Assignment, formats: dict[str, Format],
            target: str) -> SchedulePlan | None:
    """The plan of a user's ``schedule`` (None where there is none), checked against
    the kernel's indices and its operands' formats."""
    if schedule is None or schedule in ("auto", "search"):
        return None
    plan = plan_schedule(dv.as_schedule(schedule), KernelIndices.of(assignment), target)
    parallel = plan.parallel
    if parallel is not None and parallel.chunks.by == "entries":
        fmt = formats.get(parallel.chunks.tensor)
        first = fmt.levels[0] if fmt is not None else None
        access = next(a for a in assignment.accesses() if a.tensor == parallel.chunks.tensor)
        if first is None or first.mode is None or \
                access.indices[first.mode] != nt.IndexVar(parallel.index):
            raise ScheduleError(f"pos over {parallel.chunks.tensor}: its first level does not "
                                f"store {parallel.index}, so its entries cannot be counted "
                                f"per coordinate of {parallel.index}")
    return plan


def gpu_schedule_of(plan: SchedulePlan | None) -> str | None:
    """The GPU mapping (ir/loops/gpu_plan.py's schedules) the plan's GPU units name."""
    if plan is None or not plan.gpu:
        return None
    units = {loop.unit for loop in plan.gpu}
    races = {loop.races for loop in plan.gpu}
    fused = any(o.kind == "fuse" for o in plan.origins.values())
    positions = any(o.kind == "pos" for o in plan.origins.values())
    if "gpu_warp" in units:
        return "warp_per_row"
    if "atomics" in races and fused and positions:
        return "thread_per_nonzero"
    if positions:
        return "nonzero_split"
    return "thread_per_row"


def gpu_sizes(plan: SchedulePlan | None) -> dict[str, int]:
    """The GPU grid's sizes the plan's splits name: ``block`` (threads per block), the
    factor of the split whose outer loop is on gpu_block and inner on gpu_thread, and
    ``entries`` (a nonzero split's stored entries per thread), the factor of the split
    of a position index whose outer loop is on gpu_thread. ScheduleError for a size the
    GPU mapping cannot take."""
    if plan is None or not plan.gpu:
        return {}
    units = {loop.index: loop.unit for loop in plan.gpu}
    sizes: dict[str, int] = {}
    for name, origin in plan.origins.items():
        if origin.kind != "split_outer":
            continue
        inner = plan.inner_of(name)
        factor = int(origin.param)
        if units.get(name) == "gpu_block" and units.get(inner) == "gpu_thread":
            if factor > 1024 or factor % 32:
                raise ScheduleError(f"split(..., {name}, {inner}, {factor}): a GPU block "
                                    "holds a multiple of 32 threads, at most 1024")
            sizes["block"] = factor
        parent = plan.origins.get(origin.parents[0])
        if units.get(name) == "gpu_thread" and parent is not None and parent.kind == "pos":
            sizes["entries"] = factor
    return sizes


def check_bounds(plan: SchedulePlan | None, extents: dict[str, int]) -> None:
    """Each ``bound`` directive's promise about an extent, on this call's operands."""
    for bound in plan.bounds if plan is not None else ():
        extent = extents.get(bound.index)
        if extent is None:
            continue
        broken = extent != bound.value if bound.kind == "max_exact" else extent > bound.value
        if broken:
            raise ScheduleError(f"{dv.directive_text(bound)}: index {bound.index} has extent "
                                f"{extent} in this call")


def chunked(chunks: Chunks, extent: int, threads: int, inputs: dict[str, StoredTensor],
            weights: list[np.ndarray]) -> thread_calls.Split:
    """The parallel loop's coordinates [0, extent) cut as the schedule asks."""
    if chunks.within:
        return windowed_chunks(chunks, threads, inputs[chunks.tensor])
    if chunks.by == "balanced":
        total = np.sum(weights, axis=0) if weights else None
        return thread_calls.split(extent, threads, total)
    if chunks.by == "coordinates":
        bounds = np.arange(0, extent + chunks.size, chunks.size).clip(max=extent)
    elif chunks.by == "parts":
        bounds = np.linspace(0, extent, min(chunks.size, max(extent, 1)) + 1).round()
    else:
        rows = inputs[chunks.tensor].entries_per_first_coordinate()
        cost = np.concatenate([[0], np.cumsum(rows)])
        step = cost[-1] / chunks.size if chunks.parts else chunks.size
        targets = np.arange(step, cost[-1], step) if step > 0 else np.zeros(0)
        bounds = np.concatenate([[0], np.searchsorted(cost, targets, side="left"), [extent]])
    cuts = np.unique(np.asarray(bounds, dtype=np.int64).clip(0, extent))
    ranges = tuple((int(lo), int(hi)) for lo, hi in itertools.pairwise(cuts) if hi > lo)
    return thread_calls.Split(ranges or ((0, extent),), tuple(range(len(ranges) or 1)), threads)


def windowed_chunks(chunks: Chunks, threads: int, tensor: StoredTensor) -> thread_calls.Split:
    """Windows of ``tensor``'s stored entries under the parallel loop's coordinates, cut
    anywhere, each with the rows it touches (ir/loops/entry_split.py). Consecutive windows of
    the schedule's size are grouped so that each thread draws a few of them (static
    chunking, as an OpenMP schedule of that size: windows still end at multiples of it);
    a thread per window of 256 entries would pay Python's chunk loop per window."""
    try:
        begin, end = second_level_bounds(tensor)
    except (AttributeError, ValueError) as error:
        raise ScheduleError(f"pos over {chunks.tensor}: threads that cut its rows need its "
                            f"stored positions per row ({error})") from None
    stored = int(np.sum(end - begin))
    most = threads * thread_calls.CHUNKS_PER_THREAD
    size = -(-stored // chunks.size) if chunks.parts else chunks.size or -(-stored // most)
    size = max(size, 1)
    size *= max(1, -(-stored // (size * most)))
    windows, rows = entry_windows(begin, end, size)
    count = len(windows) - 1
    if count < 1:
        return thread_calls.Split(((0, 0),), (0,), threads, windows=((0, 0),))
    cut = tuple((int(lo), int(hi)) for lo, hi in zip(rows[:count], rows[count:]))
    spans = tuple((int(lo), int(hi)) for lo, hi in itertools.pairwise(windows))
    return thread_calls.Split(cut, tuple(range(count)), threads, windows=spans)


def combiner(op: Operator) -> Callable[[list[np.ndarray]], np.ndarray]:
    """Private outputs combined elementwise by the reduction ``op`` (its ``evaluate`` on
    whole arrays where it takes them, else entry by entry)."""
    def combine(parts: list[np.ndarray]) -> np.ndarray:
        total = parts[0]
        for part in parts[1:]:
            try:
                joined = np.asarray(op.evaluate(total, part))
                if joined.shape != total.shape:
                    raise ValueError("not elementwise")
            except (TypeError, ValueError):
                joined = np.frompyfunc(op.evaluate, 2, 1)(total, part)
            total = joined.astype(part.dtype)
        return total
    return combine


def explain(plan: SchedulePlan | None, parallel_mode: int | None,
            out_vars: tuple[str, ...], workspace: str | None, gpu: str | None,
            auto: object = None) -> str:
    """What ``kernel.schedule`` prints: the schedule, then how each part runs."""
    if plan is None:
        lines = ["auto: the compiler's rules chose this kernel's schedule"]
        if parallel_mode is not None:
            lines.append(f"threads split index {out_vars[parallel_mode]} (the output's "
                         "first index) on inputs large enough to pay for threads: into "
                         "ranges of rows, or windows of entries that cut rows, as the "
                         "thread split below says")
        else:
            lines.append("one thread: no loop is split among threads")
        lines.append(f"workspace: {workspace or 'the rule of paper 002 picks where needed'}")
        if gpu:
            lines.append(f"GPU schedule: {gpu}")
        if auto is not None:  # the cost model's picks for the last call's operands
            lines += [f"on the last call's operands: {line}" for line in str(auto).splitlines()]
        return "\n".join(lines)
    lines = [str(plan.schedule) or "(empty: one thread, loops as the rules order them)"]
    if plan.order:
        lines.append(f"loop order: {', '.join(plan.order)}")
    if plan.parallel is not None and plan.parallel.kind == "nested":
        lines.append(f"threads run loop {plan.parallel.name} over {plan.parallel.index}, "
                     f"under other loops: {plan.parallel.chunks.describe()}; each thread "
                     "runs the loops outside it whole and writes only its coordinates")
    elif plan.parallel is not None and plan.parallel.reduces:
        lines.append(f"threads run loop {plan.parallel.name} over {plan.parallel.index}, "
                     f"which is reduced: {plan.parallel.chunks.describe()}, each into a "
                     f"private output, combined by {plan.parallel.operator.name} after")
    elif plan.parallel is not None and plan.parallel.chunks.within:
        lines.append(f"threads run loop {plan.parallel.name} over {plan.parallel.index}: "
                     f"{plan.parallel.chunks.describe()}; each thread stores the rows it "
                     "holds whole")
    elif plan.parallel is not None:
        lines.append(f"threads run loop {plan.parallel.name} over {plan.parallel.index}: "
                     f"{plan.parallel.chunks.describe()}; each thread owns whole "
                     f"coordinates of {plan.parallel.index}, so nothing races")
    elif not plan.gpu:
        lines.append("one thread (the schedule parallelizes no loop)")
    if plan.workspace:
        lines.append(f"workspace: {plan.workspace}")
    if gpu:
        sizes = ", ".join(f"{k} {v}" for k, v in gpu_sizes(plan).items())
        lines.append(f"GPU schedule: {gpu}" + (f" ({sizes})" if sizes else ""))
    return "\n".join(lines)
