"""Entry splits: threads take windows of a row loop's stored entries, not whole rows.

A rewrite of the loop IR shared by CPU threads (a user's ``fuse; pos; split;
parallelize(..., atomics)``) and the GPU grid (ir/loops/gpu_plan.py's ``entry_split``). The
loop over the output's first index (rows) is tagged ``entry split`` and ``atomic adds``;
the one loop under it that steps over an operand's stored positions is tagged ``entry
window``: the kernel then takes a window [lo, hi) of those positions beside its range
of rows, so one heavy row is spread over several threads. A row cut by a window's edge
gets a partial sum from each thread that holds part of it: only a thread's first and
last rows can be cut, and their sums are added into the output atomically (the caller
zeroes it first); the rows between are stored. The loops' fast forms are dropped: a
jammed or paired row would cross a window's edge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..schedule.parallel import dense_like
from ..types import TensorType
from .nodes import Block, Case, If, Loop, LoopNode, Merge, Node, Program, loops_of, tag, walk
from .notes import without_forms

ATOMIC_TAG = "atomic adds"  # threads share output entries: writes add atomically
ENTRY_SPLIT_TAG = "entry split"  # a window of an inner loop's positions a thread
ENTRY_WINDOW_TAG = "entry window"  # ... this loop's positions, bounded by the window
ATOMIC_DTYPES = ("float32", "float64", "int32", "int64")  # what atomicrmw adds


def retag(node: Node, changes: dict[int, Callable[[LoopNode], LoopNode]]) -> Node:
    """``node`` with each loop whose id ``changes`` names rewritten by its function."""
    if id(node) in changes:
        node = changes[id(node)](node)
    if isinstance(node, Block):
        return Block(tuple(retag(item, changes) for item in node.items))
    if isinstance(node, If):
        return If(node.condition, retag(node.then, changes))
    if isinstance(node, Loop):
        return replace(node, body=retag(node.body, changes))
    if isinstance(node, Merge):
        return replace(node, cases=tuple(Case(c.present, retag(c.body, changes))
                                         for c in node.cases))
    return node


def tagged(tags: tuple[str, ...]) -> Callable[[LoopNode], LoopNode]:
    """A rewrite adding ``tags`` to a loop."""
    def add(node: LoopNode) -> LoopNode:
        for mapping in tags:
            node = tag(node, mapping)
        return node
    return add


def plain(node: LoopNode) -> LoopNode:
    """A loop with its fast forms dropped: threads (or a warp's lanes) share its rows,
    which a jammed, paired or cleared row would cross."""
    return without_forms(node)


def atomic_adds_refusal(program: Program, split: LoopNode) -> str | None:
    """Why threads under ``split`` cannot add into shared output entries atomically
    (None: they can)."""
    if split.forms.clear_rows:
        return "it zeroes each row of the output itself, which another thread adds into"
    if split.site is None or not split.site.additive:
        return "its output is not reduced by +, the one reduction atomic adds do"
    if program.dtype not in ATOMIC_DTYPES:
        return f"its values are {program.dtype}, which atomic adds do not take"
    return None


def entry_window_loop(split: LoopNode) -> LoopNode | None:
    """The loop an entry split windows: the one loop under ``split``, stepping over a
    level's stored positions (operands it locates, or intersects, ride along: every
    term needs an entry of the windowed level)."""
    inner = loops_of(split)[1:]
    if len(inner) != 1 or not isinstance(inner[0], Loop) or inner[0].over != "positions" \
            or inner[0].iterator.universe:
        return None
    return inner[0]


def entry_split_refusal(program: Program, split: LoopNode) -> str | None:
    """Why threads cannot take windows of the positions of the one loop under
    ``split``, adding each row's partial sums atomically (None: they can)."""
    if not isinstance(split, Loop) or split.over != "coordinates":
        return "its split loop does not run over the coordinates of a full level (rows)"
    if not dense_like(TensorType(program.output_levels, 0, program.dtype, "int32")):
        return "its output is assembled (sparse), not an array threads can add into"
    if any(isinstance(n, Merge) for n in walk(split)):
        return "it merges operands' levels, whose positions no one window bounds"
    window = entry_window_loop(split)
    if window is None or window.iterator.level != 1:
        return ("the loop under its split loop is not one loop over the stored positions "
                "of an operand's second level")
    return atomic_adds_refusal(program, split)


def split_entries(program: Program, split: LoopNode, tags: tuple[str, ...] = ()) -> Program:
    """``program`` with threads taking windows of the entries under ``split`` (checked by
    ``entry_split_refusal`` first); ``tags``: more tags for the split loop (a GPU grid's)."""
    changes: dict[int, Callable[[LoopNode], LoopNode]] = {
        id(loop): plain for loop in loops_of(split)}
    changes[id(split)] = lambda node: tagged((*tags, ENTRY_SPLIT_TAG, ATOMIC_TAG))(plain(node))
    changes[id(entry_window_loop(split))] = lambda node: tag(plain(node), ENTRY_WINDOW_TAG)
    return replace(program, root=retag(program.root, changes))


def windowed(program: Program) -> bool:
    """Whether a kernel of ``program`` takes a window of positions beside its rows."""
    return any(ENTRY_WINDOW_TAG in loop.tags for loop in loops_of(program.root))
