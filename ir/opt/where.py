"""Where a loop-IR pass stands: what it is given beyond the loops (``Target``), the
loop it rewrites in its program (``Where``: the enclosing loops, whether it fills a
workspace), the walk that applies a pass to every loop, and the questions several
passes ask of a loop (the output's hooks around it, a thread's range test) and the
rewrites they share (a form chosen in both forms, or in the other form only)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..loops.legality import block_suffix, inserted_prefix
from ..loops.nodes import (
    Block,
    Case,
    Entries,
    If,
    InRange,
    Loop,
    LoopNode,
    Merge,
    Node,
    Program,
    Site,
    loops_of,
    walk,
)
from ..loops.notes import RANGE_TEST, split_by_threads
from ..types import unordered_append_output


@dataclass(frozen=True)
class Target:
    """What the passes need beyond the loops: which phase of a split assembly is built
    (a count phase has no output hooks), whether float operations may reassociate, and
    the dtype the kernel computes in (which the program then records)."""

    phase: str = "whole"
    fastmath: bool = False
    dtype: str = "float64"
    threads_over: str = ""  # the index a user's schedule splits among threads (not rows)
    unrolls: tuple[tuple[str, int], ...] = ()  # (index, factor) a user's schedule unrolls
    # (index, positions) a user's schedule tiles: that many of its positions per step, with
    # the loops inside it between them (jammed)
    tiles: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Where:
    """The loop a pass rewrites: its program, the target, the loops around it."""

    program: Program
    target: Target
    path: tuple[LoopNode, ...]  # the enclosing loops, outermost first
    producer: bool = False  # it fills a workspace whose entries a later node reads

    @property
    def bound(self) -> set[str]:
        return {loop.index for loop in self.path}


Visit = Callable[[LoopNode, tuple[LoopNode, ...], bool], LoopNode]


def map_loops(node: Node, visit: Visit, path: tuple[LoopNode, ...] = (),
         producer: bool = False) -> Node:
    """``node`` with ``visit`` applied to every loop, innermost first (``producer``: the
    loop fills a workspace, before the ``Entries`` of its block read it)."""
    if isinstance(node, Block):
        reads = next((k for k, n in enumerate(node.items) if isinstance(n, Entries)), -1)
        return Block(tuple(map_loops(item, visit, path, producer or k < reads)
                           for k, item in enumerate(node.items)))
    if isinstance(node, If):
        return If(node.condition, map_loops(node.then, visit, path, producer))
    if isinstance(node, Loop):
        body = map_loops(node.body, visit, (*path, node), producer)
        return visit(replace(node, body=body), path, producer)
    if isinstance(node, Merge):
        cases = tuple(Case(c.present, map_loops(c.body, visit, (*path, node), producer))
                      for c in node.cases)
        return visit(replace(node, cases=cases), path, producer)
    return node


def loop_body_nodes(node: LoopNode) -> list[Node]:
    """Every node inside a loop (each case's body, for a merge), outermost first."""
    bodies = [node.body] if isinstance(node, Loop) else [c.body for c in node.cases]
    return [n for body in bodies for n in walk(body)]


def guarded(node: LoopNode) -> bool:
    """Whether an affine subscript's guard sits inside the loop: the fast forms do not
    translate guarded bodies (yet)."""
    return any(isinstance(n, If) and isinstance(n.condition, InRange) for n in walk(node))


def output_hooks(where: Where, index: str) -> bool:
    """Whether the output closes a segment of appended entries (or a block) around loops
    over ``index`` (assembly.OutputAssembler.hooks_for); a workspace's producers write
    none."""
    levels = where.program.output_levels
    site = first_site(where.program)
    unordered = unordered_append_output(levels)
    if where.target.phase == "count" or site is None or unordered or where.producer:
        return False
    prefix, blocks = inserted_prefix(levels), block_suffix(levels)
    heads = [k for k in range(prefix, blocks) if k == prefix or not levels[k].branchless]
    heads += [blocks] if blocks < len(levels) else []
    names = site.out_vars
    return any(0 < h <= len(names) and names[h - 1] == index for h in heads)


def first_site(program: Program) -> Site | None:
    """Where the program's first loop sits (its nest's output indices)."""
    loops = loops_of(program.root)
    return loops[0].site if loops else None


def range_loop(where: Where, node: LoopNode) -> bool:
    """Whether the loop is clamped to a thread's range (the thread_rows pass tags it,
    and runs first)."""
    return split_by_threads(node)


def range_tested(node: LoopNode) -> bool:
    """Whether a thread's range cannot clamp the loop (thread_rows tagged it): each
    coordinate is tested against the range instead, which the fast forms that step
    past the loop's body cannot skip."""
    return RANGE_TEST in node.tags


def choose(node: LoopNode, **forms: object) -> LoopNode:
    """``node`` with ``forms`` chosen, in its first form and its other form alike."""
    other = None if node.other is None else replace(node.other, **forms)
    return replace(node, forms=replace(node.forms, **forms), other=other)


def in_other_form(node: LoopNode, **forms: object) -> LoopNode:
    """``node`` whose other form (timed against the first) has ``forms``."""
    return replace(node, other=replace(node.other or node.forms, **forms))


def all_insert_full(program: Program) -> tuple[bool, bool]:
    """Whether every output level takes inserts, and whether every one is full."""
    levels = program.output_levels
    return all(lv.can_insert for lv in levels), all(lv.full for lv in levels)
