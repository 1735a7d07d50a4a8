"""The loop-IR optimization passes: each finds the loops where its fast form is legal
(``checks``) and rewrites the loop node with the form as data (``Loop.forms``), which the
printer shows and a backend translates as given.

A form timed against another at run time (llvsparse/calls/probe.py) goes in the loop's
``other`` forms: ``other_form`` rewrites the program into the kernel's other form, a
second program the runtime compiles and times against the first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..concrete.expressions import linear_in
from ..loops.nodes import (
    Allocate,
    Block,
    Case,
    Found,
    If,
    InRange,
    Locate,
    Loop,
    LoopNode,
    Merge,
    Node,
    Program,
    Ref,
    leading_locates,
    loops_of,
    tag,
    walk,
)
from ..loops.notes import (
    GALLOP,
    JAM_LANES,
    PAIRS,
    PREFETCH,
    SELECT_OTHER,
    THREAD_RANGE,
    THREAD_ROWS,
    Forms,
    Gallop,
    split_by_threads,
)
from ..types import unordered_append_output
from . import checks

GALLOP_SKEW = 8  # a merge gallops where one range is over this many times another's
# (on comparable ranges the branch-free one-step merge is faster: uniform random rows
# 23 ms stepping vs 36 galloping)
RUN_UNROLL = 8  # running-sum loops: coordinate-list SpMV on 4M entries 9.5 -> 7.4 ms (4x: 7.9)
AHEAD = 4  # positions ahead whose rows are prefetched (4, 8 and 16 measured: 4 best)


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
class _Where:
    program: Program
    target: Target
    path: tuple[LoopNode, ...]  # the enclosing loops, outermost first

    @property
    def bound(self) -> set[str]:
        return {loop.index for loop in self.path}


def _map(node: Node, visit: Callable[[LoopNode, tuple[LoopNode, ...]], LoopNode],
         path: tuple[LoopNode, ...] = ()) -> Node:
    """``node`` with ``visit`` applied to every loop, innermost first."""
    if isinstance(node, Block):
        return Block(tuple(_map(item, visit, path) for item in node.items))
    if isinstance(node, If):
        return If(node.condition, _map(node.then, visit, path))
    if isinstance(node, Loop):
        return visit(replace(node, body=_map(node.body, visit, (*path, node))), path)
    if isinstance(node, Merge):
        cases = tuple(Case(c.present, _map(c.body, visit, (*path, node))) for c in node.cases)
        return visit(replace(node, cases=cases), path)
    return node


def _inside(node: LoopNode) -> list[Node]:
    bodies = [node.body] if isinstance(node, Loop) else [c.body for c in node.cases]
    return [n for body in bodies for n in walk(body)]


def _guards(node: LoopNode) -> bool:
    """Whether an affine subscript's guard sits inside the loop: the fast forms do not
    translate guarded bodies (yet)."""
    return any(isinstance(n, If) and isinstance(n.condition, InRange) for n in walk(node))


def _hooks(where: _Where, index: str) -> bool:
    """Whether the output closes a segment of appended entries around loops over
    ``index`` (assembly.OutputAssembler.hooks_for)."""
    levels = where.program.output_levels
    site = _site(where.program)
    unordered = unordered_append_output(levels)
    if where.target.phase == "count" or site is None or unordered:
        return False
    prefix = next((k for k, lv in enumerate(levels) if not lv.can_insert), len(levels))
    heads = [k for k in range(prefix, len(levels)) if k == prefix or not levels[k].branchless]
    names = site.out_vars
    return any(0 < h <= len(names) and names[h - 1] == index for h in heads)


def _site(program: Program):
    loops = loops_of(program.root)
    return loops[0].site if loops else None


def _range_loop(where: _Where, node: LoopNode) -> bool:
    """Whether the loop is clamped to a thread's range (the thread_rows pass tags it,
    and runs first)."""
    return split_by_threads(node)


def thread_rows(where: _Where, node: LoopNode) -> LoopNode:
    """Threads split the output's first index: its loop, outside any other over it, runs
    a thread's range [lo, hi) of it (in a kernel of one nest)."""
    site = node.site
    if where.target.threads_over:  # a user's schedule names the loop
        split = where.target.threads_over
        return tag(node, THREAD_RANGE) if (where.program.nests == 1 and node.index == split
                                          and split not in where.bound) else node
    if (where.program.nests == 1 and bool(site.out_vars) and node.index == site.out_vars[0]
            and node.index in site.order and node.index not in where.bound):
        return tag(node, THREAD_ROWS)
    return node


def _choose(node: LoopNode, **forms: object) -> LoopNode:
    """``node`` with ``forms`` chosen, in its first form and its other form alike."""
    other = None if node.other is None else replace(node.other, **forms)
    return replace(node, forms=replace(node.forms, **forms), other=other)


def _other(node: LoopNode, **forms: object) -> LoopNode:
    """``node`` whose other form (timed against the first) has ``forms``."""
    return replace(node, other=replace(node.other or node.forms, **forms))


def _all_insert_full(program: Program) -> tuple[bool, bool]:
    levels = program.output_levels
    return all(lv.can_insert for lv in levels), all(lv.full for lv in levels)


def _only_locates(node: LoopNode) -> bool:
    """Whether the loops inside ``node`` visit every coordinate and reach every level by
    a locate that always finds (jam.only_locate)."""
    for inner in _inside(node):
        if isinstance(inner, Merge) or (isinstance(inner, If)
                                        and isinstance(inner.condition, Found)):
            return False
        if isinstance(inner, Loop) and not (inner.iterator.universe or
                                            checks.located_surely(inner.iterator.facts)):
            return False
        if isinstance(inner, Locate) and not checks.located_surely(inner.ref.facts):
            return False
    return True


def can_jam(where: _Where, node: LoopNode) -> bool:
    """The loop-level check of unroll-and-jam (jam.can_jam), then the point's."""
    site = node.site
    if not isinstance(node, Loop) or site.depth < 0:
        return False
    inner = site.order[site.depth + 1:]
    if not inner or site.contains_sum or site.derived or (
            site.out_vars and site.out_vars[0] in inner and where.program.nests == 1) \
            or where.target.threads_over in inner:  # its loops run unclamped
        return False
    if any(_hooks(where, v) for v in inner) or not _only_locates(node):
        return False
    all_insert, _ = _all_insert_full(where.program)
    if not ((not site.scatter and site.out_depth == site.depth + 1)
            or (all_insert and set(inner) <= set(site.out_vars))):
        return False
    return checks.jammable(node.iterator.facts, node.over == "positions" and
                           not node.iterator.universe, site.lattice_points,
                           _hooks(where, node.index), _range_loop(where, node),
                           [r.facts for r in leading_locates(node)])


def jam(where: _Where, node: LoopNode) -> LoopNode:
    """Unroll-and-jam: a sparse loop whose inner loops only locate runs 8, then 4
    positions per step (backends/llvm/jam.py)."""
    if not can_jam(where, node):
        return node
    tile = dict(where.target.tiles).get(node.index)
    return replace(node, jam=(tile,) if tile else JAM_LANES)


def pairs(where: _Where, node: LoopNode) -> LoopNode:
    """Paired rows: two halves of a row loop run their sums side by side
    (backends/llvm/pairs.py)."""
    site = node.site
    all_insert, full = _all_insert_full(where.program)
    if not isinstance(node, Loop) or site.depth < 0 or where.target.fastmath \
            or site.depth + 2 != len(site.order) or site.depth + 1 != site.out_depth \
            or site.scatter or site.derived or site.contains_sum or not (all_insert and full) \
            or _hooks(where, site.order[site.depth + 1]) or can_jam(where, node) \
            or where.target.threads_over in site.order[site.depth + 1:]:
        return node
    inner = [n for n in _inside(node) if isinstance(n, (Loop, Merge))]
    if len(inner) != 1 or not isinstance(inner[0], Loop) or inner[0].iterator.universe \
            or inner[0].site.lattice_points != 1:
        return node
    driver = inner[0]
    others = [n.ref.facts for n in _inside(driver) if isinstance(n, Locate)]
    if not checks.pair_driver(driver.iterator.facts, driver.over == "positions", others):
        return node
    it = node.iterator
    unclamped = _range_loop(where, node) and node.over == "positions" and not it.facts.ordered
    if not checks.pairable(None if it.universe else it.facts, site.lattice_points,
                           _hooks(where, node.index), unclamped,
                           [r.facts for r in leading_locates(node)]):
        return node
    return _other(node, pairs=True)


def _gallops(node: LoopNode) -> bool:
    return isinstance(node, Merge) and checks.gallops(
        [None if r.universe or not r.facts.by_position else r.facts for r in node.iterators],
        node.site.lattice_points)


def gallop(where: _Where, node: LoopNode) -> LoopNode:
    """Galloping intersection: where one range is far longer than another (the first
    form), or at every mismatch (the other form); and the lockstep test of equal
    ranges it allows, where no per-coordinate hooks or thread-range test intervene (an
    intersection's iterators then step together: A .* Aᵀ on the stencil 10.0 -> 8.7 ms;
    a union's merge, which branches on a match first, is left without it)."""
    if not _gallops(node):
        return node
    node = _choose(node, gallop=Gallop(GALLOP_SKEW))
    if not _hooks(where, node.index) and not _range_loop(where, node):
        node = _choose(node, lockstep=True)
    return _other(node, gallop=Gallop(0))


def running_sums(where: _Where, node: LoopNode) -> LoopNode:
    """A sorted run of duplicate coordinates summed as it comes (coordinate-list SpMV)."""
    site = node.site
    if not isinstance(node, Loop) or node.iterator.universe:
        return node
    all_insert, full = _all_insert_full(where.program)
    order = site.order
    writes_next = node.index in order and order.index(node.index) + 1 == site.out_depth
    if checks.runs_sums(node.iterator.facts, node.over == "positions", site.lattice_points,
                        _hooks(where, node.index), writes_next,
                        linear_in(node.expr, node.iterator.uid), full, site.accumulate,
                        site.scatter, all_insert):
        return replace(_choose(node, running_sums=True), unroll=RUN_UNROLL)
    return node


def select_cases(where: _Where, node: LoopNode) -> LoopNode:
    """Case selection: the cases of a co-iteration computed unconditionally and picked
    with selects, where each case is a scalar expression (it produces a value) over
    operands at positions valid whether or not the operand is present (iterated
    positions inside the loop, always-found locates, full levels below them), and the
    body is the innermost one. A union such as A + B then has no data-dependent branch
    per coordinate, which on random sparsity patterns mispredicts about every other
    step. Where the cases may also branch (no hooks, no thread-range test), the two are
    timed against each other: selection is then the other form."""
    inside = _inside(node) if isinstance(node, Merge) else []
    if not isinstance(node, Merge) or len(node.iterators) < 2 or len(node.cases) < 2 \
            or any(isinstance(n, (Loop, Merge, Allocate)) for n in inside):
        return node  # not innermost, or a case fills a temporary (a sum) first
    if any(isinstance(c.body, Block) and not c.body.items for c in node.cases):
        return node  # a case that computes nothing
    if any(not r.facts.locate_always_found for r in node.located) or any(
            isinstance(n, Locate) and not n.ref.facts.full for n in inside):
        return node  # a position that is not valid where its level misses
    unclamped = _range_loop(where, node) and not all(
        r.universe or not r.facts.by_position or r.facts.ordered for r in node.iterators)
    split = not _hooks(where, node.index) and not unclamped
    return _other(node, select=True) if split else _choose(node, select=True)


def clear_rows(where: _Where, node: LoopNode) -> LoopNode:
    """Row clearing: the kernel zeroes each output row just before scattering into it."""
    site = node.site
    if not isinstance(node, Loop) or where.path or where.target.phase != "whole" \
            or site.depth + 1 >= len(site.order) or node.jam:
        return node
    all_insert, full = _all_insert_full(where.program)
    covers_all = site.lattice_points == 1 and (node.iterator.universe or node.iterator.facts.full) \
        and all(r.facts.full for r in leading_locates(node))
    if where.program.output_fill == 0 and checks.clears_rows(
            covers_all, THREAD_ROWS in node.tags, where.program.nests == 1, site.scatter,
            site.accumulate, all_insert, full):
        return _choose(node, clear_rows=True)
    return node


def prefetch(where: _Where, node: LoopNode) -> LoopNode:
    """Prefetch, a few positions ahead, the bounds and first entries of the rows the
    loop's body iterates at its next coordinates (backends/llvm/prefetch.py): B(k,:) under
    A(i,k), whose first reads in a random row order otherwise wait on memory."""
    if not isinstance(node, Loop) or node.iterator.universe:
        return node
    items = node.body.items if isinstance(node.body, Block) else (node.body,)
    located: dict[int, Ref] = {}
    for item in items:
        if isinstance(item, Locate) and item.index == node.index \
                and item.ref.uid != node.iterator.uid:
            located[item.ref.uid] = item.ref
        elif isinstance(item, Loop) and not item.iterator.universe \
                and (parent := located.get(item.iterator.uid)) is not None \
                and parent.level + 1 == item.iterator.level \
                and checks.prefetches(node.iterator.facts, node.over == "positions",
                                      parent.facts, item.over == "positions"):
            return _other(node, prefetch=AHEAD)
    return node


def unroll_loops(where: _Where, node: LoopNode) -> LoopNode:
    """A user's ``unroll(i, n)``: the loop over ``i`` runs ``n`` iterations per step of
    LLVM's unroller (the backend attaches the count to the loop's back edge); a
    running-sum loop keeps its own count."""
    factor = dict(where.target.unrolls).get(node.index, 1)
    if node.forms.running_sums:
        return node
    return replace(node, unroll=factor) if factor > 1 else node


PASSES = (thread_rows, jam, pairs, gallop, running_sums, select_cases, clear_rows, prefetch,
          unroll_loops)


def optimize(program: Program, target: Target | None = None,
             passes: tuple[Callable[[_Where, LoopNode], LoopNode], ...] = PASSES) -> Program:
    """``program`` with each pass run over every loop, in order (over a loop that
    copies an operand into a temporary, only thread_rows: it has no fast form)."""
    root, target = program.root, target or Target()
    for run in passes:
        def visit(node: LoopNode, path: tuple[LoopNode, ...], run=run) -> LoopNode:
            if (node.site.copies or _guards(node)) and run is not thread_rows:
                return node
            return run(_Where(program, target, path), node)
        root = _map(root, visit)
    return replace(program, root=root, dtype=target.dtype)


def has_other_form(program: Program) -> bool:
    """Whether a loop of ``program`` has a second form, which the runtime times against
    the first on the first calls (llvsparse/calls/probe.py)."""
    return any(loop.other not in (None, loop.forms) for loop in loops_of(program.root))


def other_form(program: Program) -> Program:
    """The kernel's other form: ``program`` with each loop's other forms chosen. Which
    of the two is faster depends on the input's pattern (no count we found tells them
    apart), so a kernel with both is compiled both ways and the runtime times them
    (llvsparse/calls/probe.py). The first form: a union branches per case and steps
    only the operands it holds; an intersection searches past mismatches only where one
    range is far longer than the other; rows are summed one at a time. The other: a
    union computes every case and selects, an intersection searches past every
    mismatch, two rows' sums run side by side, the rows of later positions are
    prefetched."""
    def swap(node: LoopNode, path: tuple[LoopNode, ...]) -> LoopNode:
        return node if node.other is None else replace(node, forms=node.other, other=None)
    return replace(program, root=_map(program.root, swap))


def _other_form_names(first: Forms, other: Forms) -> set[str]:
    """The names of the forms ``other`` adds to ``first``."""
    names = {PAIRS} if other.pairs and not first.pairs else set()
    names |= {GALLOP} if other.gallop != first.gallop else set()
    names |= {SELECT_OTHER} if other.select and not first.select else set()
    return names | ({PREFETCH} if other.prefetch and not first.prefetch else set())


def other_form_notes(program: Program) -> tuple[str, ...]:
    """The names of the forms ``program``'s other form adds (a kernel's metadata, which
    ir/plan/autoschedule.py's cost model reads), in order."""
    return tuple(sorted({name for loop in loops_of(program.root) if loop.other is not None
                         for name in _other_form_names(loop.forms, loop.other)}))
