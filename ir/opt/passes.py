"""The loop-IR optimization passes: each finds the loops where its fast form is legal
(``checks``) and rewrites the loop node with the form as data (``Loop.forms``), which the
printer shows and a backend translates as given.

A form timed against another at run time (llvsparse/calls/probe.py) goes in the loop's
``other`` forms: ``other_form`` rewrites the program into the kernel's other form, a
second program the runtime compiles and times against the first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..concrete.expressions import Operand, linear_in
from ..loops.legality import block_suffix, inserted_prefix
from ..loops.nodes import (
    Accumulate,
    Allocate,
    Append,
    Block,
    Clear,
    Found,
    If,
    Insert,
    Locate,
    Loop,
    LoopNode,
    Merge,
    Node,
    Program,
    Ref,
    leading_locates,
    loops_of,
    named_levels,
    tag,
    target_name,
)
from ..loops.notes import (
    GALLOP,
    JAM_LANES,
    PAIRS,
    PREFETCH,
    RANGE_TEST,
    SELECT_OTHER,
    THREAD_RANGE,
    THREAD_ROWS,
    Forms,
    Gallop,
    Pairs,
    Prefetch,
)
from . import checks
from .where import (
    Target,
    Where,
    all_insert_full,
    choose,
    guarded,
    in_other_form,
    loop_body_nodes,
    map_loops,
    output_hooks,
    range_loop,
    range_tested,
)

GALLOP_SKEW = 8  # a merge gallops where one range is over this many times another's
# (on comparable ranges the branch-free one-step merge is faster: uniform random rows
# 23 ms stepping vs 36 galloping)
RUN_UNROLL = 8  # running-sum loops: coordinate-list SpMV on 4M entries 9.5 -> 7.4 ms (4x: 7.9)
AHEAD = 4  # positions ahead whose rows are prefetched (4, 8 and 16 measured: 4 best)


def thread_rows(where: Where, node: LoopNode) -> LoopNode:
    """Threads split the output's first index: its loop, outside any other over it, runs
    a thread's range [lo, hi) of it (in a kernel of one nest). A level iterated by
    position in no coordinate order cannot be clamped to the range by a search: the
    loop then tests each coordinate (a ``range test`` tag)."""
    site = node.site
    split = where.target.threads_over  # a user's schedule names the loop
    if split:
        mapping = THREAD_RANGE if (where.program.nests == 1 and node.index == split
                                   and split not in where.bound) else ""
    elif (where.program.nests == 1 and bool(site.out_vars) and node.index == site.out_vars[0]
            and node.index in site.order and node.index not in where.bound):
        mapping = THREAD_ROWS
    else:
        mapping = ""
    if not mapping:
        return node
    unordered = any(not r.universe and r.facts.by_position and not r.facts.ordered
                    for r in ((node.iterator,) if isinstance(node, Loop) else node.iterators))
    return tag(tag(node, mapping), RANGE_TEST) if unordered else tag(node, mapping)


def _only_locates(node: LoopNode) -> bool:
    """Whether the loops inside ``node`` visit every coordinate and reach every level by
    a locate that always finds (jam.only_locate)."""
    for inner in loop_body_nodes(node):
        if isinstance(inner, Merge) or (isinstance(inner, If)
                                        and isinstance(inner.condition, Found)):
            return False
        if isinstance(inner, Loop) and not (inner.iterator.universe or
                                            checks.located_surely(inner.iterator.facts)):
            return False
        if isinstance(inner, Locate) and not checks.located_surely(inner.ref.facts):
            return False
    return True


def can_jam(where: Where, node: LoopNode) -> bool:
    """The loop-level check of unroll-and-jam (jam.can_jam), then the point's."""
    site = node.site
    if not isinstance(node, Loop) or site.depth < 0:
        return False
    inner = site.order[site.depth + 1:]
    if not inner or site.contains_sum or site.derived or (
            site.out_vars and site.out_vars[0] in inner and where.program.nests == 1) \
            or where.target.threads_over in inner:  # its loops run unclamped
        return False
    if any(output_hooks(where, v) for v in inner) or not _only_locates(node):
        return False
    all_insert, _ = all_insert_full(where.program)
    if not ((not site.scatter and site.out_depth == site.depth + 1)
            or (all_insert and set(inner) <= set(site.out_vars))):
        return False
    return checks.jammable(node.iterator.facts, node.over == "positions" and
                           not node.iterator.universe, site.lattice_points,
                           output_hooks(where, node.index), range_loop(where, node),
                           [r.facts for r in leading_locates(node)])


def jam(where: Where, node: LoopNode) -> LoopNode:
    """Unroll-and-jam: a sparse loop whose inner loops only locate runs 8, then 4
    positions per step (backends/llvm/jam.py)."""
    if not can_jam(where, node):
        return node
    tile = dict(where.target.tiles).get(node.index)
    return replace(node, jam=(tile,) if tile else JAM_LANES)


def pairs(where: Where, node: LoopNode) -> LoopNode:
    """Paired rows: two halves of a row loop run their sums side by side
    (backends/llvm/pairs.py)."""
    site = node.site
    all_insert, full = all_insert_full(where.program)
    if not isinstance(node, Loop) or site.depth < 0 or where.target.fastmath \
            or site.depth + 2 != len(site.order) or site.depth + 1 != site.out_depth \
            or site.scatter or site.derived or site.contains_sum or not (all_insert and full) \
            or output_hooks(where, site.order[site.depth + 1]) or can_jam(where, node) \
            or where.target.threads_over in site.order[site.depth + 1:]:
        return node
    inner = [n for n in loop_body_nodes(node) if isinstance(n, (Loop, Merge))]
    if len(inner) != 1 or not isinstance(inner[0], Loop) or inner[0].iterator.universe \
            or inner[0].site.lattice_points != 1:
        return node
    driver = inner[0]
    others = [n.ref.facts for n in loop_body_nodes(driver) if isinstance(n, Locate)]
    if not checks.pair_driver(driver.iterator.facts, driver.over == "positions", others):
        return node
    it = node.iterator
    if not checks.pairable(None if it.universe else it.facts, site.lattice_points,
                           output_hooks(where, node.index), range_tested(node),
                           [r.facts for r in leading_locates(node)]):
        return node
    clears = [n for n in loop_body_nodes(node) if isinstance(n, Clear)]
    writes = [n for n in loop_body_nodes(node) if isinstance(n, (Accumulate, Insert, Append))
              and len(clears) == 1 and n.target != clears[0].name]
    if len(clears) != 1 or len(writes) != 1:
        return node  # not one sum written once
    return in_other_form(node, pairs=Pairs(driver.index, driver.iterator, target_name(clears[0].name),
                                    clears[0].value, writes[0]))


def _gallops(node: LoopNode) -> bool:
    return isinstance(node, Merge) and checks.gallops(
        [None if r.universe or not r.facts.by_position else r.facts for r in node.iterators],
        node.site.lattice_points)


def gallop(where: Where, node: LoopNode) -> LoopNode:
    """Galloping intersection: where one range is far longer than another (the first
    form), or at every mismatch (the other form); and the lockstep test of equal
    ranges it allows, where no per-coordinate hooks or thread-range test intervene (an
    intersection's iterators then step together: A .* Aᵀ on the stencil 10.0 -> 8.7 ms;
    a union's merge, which branches on a match first, is left without it)."""
    if not _gallops(node):
        return node
    node = choose(node, gallop=Gallop(GALLOP_SKEW))
    if not output_hooks(where, node.index) and not range_loop(where, node):
        node = choose(node, lockstep=True)
    return in_other_form(node, gallop=Gallop(0))


def running_sums(where: Where, node: LoopNode) -> LoopNode:
    """A sorted run of duplicate coordinates summed as it comes (coordinate-list SpMV)."""
    site = node.site
    if not isinstance(node, Loop) or node.iterator.universe:
        return node
    all_insert, full = all_insert_full(where.program)
    order = site.order
    writes_next = node.index in order and order.index(node.index) + 1 == site.out_depth
    if checks.runs_sums(node.iterator.facts, node.over == "positions", site.lattice_points,
                        output_hooks(where, node.index), writes_next,
                        linear_in(node.expr, node.iterator.uid), full, site.accumulate,
                        site.scatter, all_insert):
        node = choose(node, running_sums=True, run_sum=_run_sum(node))
        return replace(node, unroll=RUN_UNROLL)
    return node


def _run_sum(node: LoopNode) -> str:
    """The temporary a running-sum loop keeps as its open run's sum: the first block
    inside it that allocates a temporary, clears it, sums into it and ends by writing
    it to the output ("": none; the body writes each position's value itself)."""
    for block in loop_body_nodes(node):
        items = block.items if isinstance(block, Block) else ()
        if len(items) >= 4 and isinstance(items[0], Allocate) and isinstance(items[1], Clear) \
                and isinstance(items[-1], (Insert, Append)) \
                and items[-1].value == Operand(items[0].name, (), -1):
            return items[0].name
    return ""


def select_cases(where: Where, node: LoopNode) -> LoopNode:
    """Case selection: the cases of a co-iteration computed unconditionally and picked
    with selects, where each case is a scalar expression (it produces a value) over
    operands at positions valid whether or not the operand is present (iterated
    positions inside the loop, always-found locates, full levels below them), and the
    body is the innermost one. A union such as A + B then has no data-dependent branch
    per coordinate, which on random sparsity patterns mispredicts about every other
    step. Where the cases may also branch (no hooks, no thread-range test), the two are
    timed against each other: selection is then the other form."""
    inside = loop_body_nodes(node) if isinstance(node, Merge) else []
    if not isinstance(node, Merge) or len(node.iterators) < 2 or len(node.cases) < 2 \
            or any(isinstance(n, (Loop, Merge, Allocate)) for n in inside):
        return node  # not innermost, or a case fills a temporary (a sum) first
    if any(isinstance(c.body, Block) and not c.body.items for c in node.cases):
        return node  # a case that computes nothing
    writes = [_final_write(c.body) for c in node.cases]
    if any(w is None or type(w) is not type(writes[0]) or w.target != writes[0].target
           for w in writes):
        return node  # the cases do not end in one write, which takes the selected value
    if any(not r.facts.locate_always_found for r in node.located) or any(
            isinstance(n, Locate) and not n.ref.facts.full for n in inside):
        return node  # a position that is not valid where its level misses
    split = not output_hooks(where, node.index) and not range_tested(node)
    return in_other_form(node, select=True) if split else choose(node, select=True)


def _final_write(body: Node) -> Accumulate | Insert | Append | None:
    """A case body's write, where it is its last item and only locates come before it."""
    items = body.items if isinstance(body, Block) else (body,)
    rest = [n for n in items if not isinstance(n, Locate)]
    return rest[0] if len(rest) == 1 and rest[0] is items[-1] \
        and isinstance(rest[0], (Accumulate, Insert, Append)) else None


def clear_rows(where: Where, node: LoopNode) -> LoopNode:
    """Row clearing: the kernel zeroes each output row just before scattering into it."""
    site = node.site
    if not isinstance(node, Loop) or where.path or where.target.phase != "whole" \
            or site.depth + 1 >= len(site.order) or node.jam:
        return node
    all_insert, full = all_insert_full(where.program)
    covers_all = site.lattice_points == 1 and (node.iterator.universe or node.iterator.facts.full) \
        and all(r.facts.full for r in leading_locates(node))
    if where.program.output_fill == 0 and checks.clears_rows(
            covers_all, THREAD_ROWS in node.tags, where.program.nests == 1, site.scatter,
            site.accumulate, all_insert, full):
        return choose(node, clear_rows=True)
    return node


def prefetch(where: Where, node: LoopNode) -> LoopNode:
    """Prefetch, a few positions ahead, the bounds and first entries of the rows the
    loop's body iterates at its next coordinates (backends/llvm/prefetch.py): B(k,:) under
    A(i,k), whose first reads in a random row order otherwise wait on memory."""
    if not isinstance(node, Loop) or node.iterator.universe:
        return node
    items = node.body.items if isinstance(node.body, Block) else (node.body,)
    located: dict[int, Ref] = {}
    rows: list[Ref] = []
    for item in items:
        if isinstance(item, Locate) and item.index == node.index \
                and item.ref.uid != node.iterator.uid:
            located[item.ref.uid] = item.ref
        elif isinstance(item, Loop) and not item.iterator.universe \
                and (parent := located.get(item.iterator.uid)) is not None \
                and parent.level + 1 == item.iterator.level \
                and checks.prefetches(node.iterator.facts, node.over == "positions",
                                      parent.facts, item.over == "positions"):
            rows.append(item.iterator)
    return in_other_form(node, prefetch=Prefetch(AHEAD, tuple(rows))) if rows else node


def case_steps(where: Where, node: LoopNode) -> LoopNode:
    """Steps inside the cases: a merge of several iterators whose cases branch advances,
    in each case's branch, the iterators it knows about by a constant step, so that the
    next positions do not wait on the coordinates just compared (backends/llvm/cases.py
    measures it). Not where the output's hooks or a thread-range test run around the
    cases (they need the step after them)."""
    if not isinstance(node, Merge) or len(node.iterators) < 2:
        return node
    hooks = node.site.depth >= 0 and output_hooks(where, node.index)
    return node if hooks or range_tested(node) else choose(node, case_steps=True)


def reserve_appends(where: Where, node: LoopNode) -> LoopNode:
    """Room for the loop's appends made before it: where the output appends an entry to
    its last level per write (no block levels below) and the loop is the last of the
    output's nest, or completes the output's indices without scattering, so each
    iteration appends at most one entry (a workspace's producers and a sum's loops
    write none); the emitter then tests no capacity inside the loop. Loops that copy an
    operand or sit under a guard take it too (their appends are the output's alike)."""
    site, levels = node.site, where.program.output_levels
    appends = inserted_prefix(levels) < len(levels) and block_suffix(levels) == len(levels)
    last = site.depth + 1 == len(site.order) or (not site.scatter
                                                 and site.depth + 1 == site.out_depth)
    if appends and last and site.depth >= 0 and not where.producer:
        return choose(node, reserve=True)
    return node


def straight_line(where: Where, node: LoopNode) -> LoopNode:
    """No loop where a loop would run once: over the positions of a branchless level
    (one child per parent position) in a lattice of one point, its one position read
    without a bound test. Not where a thread's range clamps it (the range may leave it
    empty), nor under a parent that steps over runs of duplicates as segments (the
    range then spans the run); a parent whose runs are summed as they come steps one
    position at a time."""
    it = node.iterator if isinstance(node, Loop) else None
    if it is None or it.universe or node.over != "positions" or not it.facts.branchless \
            or node.site.lattice_points != 1 or (range_loop(where, node) and it.facts.ordered):
        return node
    for loop in where.path:
        for ref in named_levels(loop):
            if (ref.uid, ref.level) == (it.uid, it.level - 1) and ref.facts.runs \
                    and not loop.forms.running_sums:
                return node
    return choose(node, straight=True)


def unroll_loops(where: Where, node: LoopNode) -> LoopNode:
    """A user's ``unroll(i, n)``: the loop over ``i`` runs ``n`` iterations per step of
    LLVM's unroller (the backend attaches the count to the loop's back edge); a
    running-sum loop keeps its own count."""
    factor = dict(where.target.unrolls).get(node.index, 1)
    if node.forms.running_sums:
        return node
    return replace(node, unroll=factor) if factor > 1 else node


PASSES = (thread_rows, jam, pairs, gallop, running_sums, select_cases, case_steps, clear_rows,
          prefetch, reserve_appends, straight_line, unroll_loops)


def optimize(program: Program, target: Target | None = None,
             passes: tuple[Callable[[Where, LoopNode], LoopNode], ...] = PASSES) -> Program:
    """``program`` with each pass run over every loop, in order (over a loop that
    copies an operand into a temporary, only thread_rows: it has no fast form)."""
    root, target = program.root, target or Target()
    for run in passes:
        def visit(node: LoopNode, path: tuple[LoopNode, ...], producer: bool,
                  run=run) -> LoopNode:
            if (node.site.copies or guarded(node)) and run not in (
                    thread_rows, reserve_appends, straight_line):
                return node
            return run(Where(program, target, path, producer), node)
        root = map_loops(root, visit)
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
    def swap(node: LoopNode, path: tuple[LoopNode, ...], producer: bool) -> LoopNode:
        return node if node.other is None else replace(node, forms=node.other, other=None)
    return replace(program, root=map_loops(program.root, swap))


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
