"""What a backend cannot emit, decided before it is asked: a reason, or None.

Lowering (plan/lowering.py) tries nests as written, split, and with operands
converted; it asks these checks of each candidate's loop IR, so that the choice is made
over values and a backend is only asked for programs it can translate (where one still
finds it cannot, that is an InternalCompilerError: the checks here missed a case).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..concrete.expressions import operands
from ..concrete.statements import Access, IndexVar
from ..types import LevelType, TensorType, unordered_append_output
from .nodes import (
    Accumulate,
    Append,
    Block,
    Entries,
    If,
    Insert,
    Locate,
    Loop,
    LoopNode,
    Merge,
    Missed,
    Node,
    Nonempty,
    Program,
    Ref,
    loops_of,
    named_levels,
    walk,
)

# Each case of an outer loop holds its own copy of the inner loops, so cases multiply
# across levels: four matrices of two sparse levels each, added into a third such one,
# took 434 cases (3 MB of IR, over a minute to compile; five sparse vectors into a sparse
# vector, 211 cases, take about 3 s). A nest stops here.
MAX_NEST_CASES = 256


# A kernel is lowered again for each phase of a threaded assembly and in its other form
# (backends/llvm/codegen.py: other_form): all of them together stop at this many cases.
MAX_KERNEL_CASES = 2 * MAX_NEST_CASES


def variants_within_budget(cases: int, phases: tuple[str, ...], other_form: bool,
                           limit: int = MAX_KERNEL_CASES) -> tuple[tuple[str, ...], bool]:
    """The assembly phases and whether the other form to build beside a kernel of
    ``cases`` cases: those that keep every copy within ``limit``, the other form given
    up first (it is only sometimes faster), then the threaded assembly. Three sparse
    matrices into an appended output (84 cases, 8 copies) took 40k instructions."""
    def total(kept: tuple[str, ...], form: bool) -> int:
        return cases * (1 + len(kept)) * (2 if form else 1)

    if other_form and total(phases, True) > limit:
        other_form = False
    if total(phases, other_form) > limit:
        phases = ()
    return phases, other_form



def inserted_prefix(levels: Sequence[LevelType]) -> int:
    """How many of an output's ``levels``, from the top, take inserts (the rest append)."""
    prefix = 0
    while prefix < len(levels) and levels[prefix].can_insert:
        prefix += 1
    return prefix


def block_suffix(levels: Sequence[LevelType]) -> int:
    """Where an output's block levels begin (its order where it has none): the levels
    below its last appended one that every coordinate exists under (full), that take
    inserts and keep no arrays, so that each appended entry of the level above owns a
    block of their positions (a sparse fibre's dense rank, ``[compressed, compressed,
    dense]``), filled with the result's fill when the entry is appended."""
    prefix = inserted_prefix(levels)
    start = len(levels)
    while start > prefix + 1 and levels[start - 1].full and levels[start - 1].can_insert \
            and not levels[start - 1].definition.arrays:
        start -= 1
    return start


def output_refusal(out: TensorType) -> str | None:
    """Why ``out``'s format cannot be assembled as an output, or None."""
    levels = out.levels
    prefix = inserted_prefix(levels)
    blocks = block_suffix(levels)
    for k, level in enumerate(levels):
        if level.mode is None:
            return (f"output level {k} ({level.kind}) stores no tensor mode; "
                    "such formats cannot be assembled")
        if prefix <= k < blocks and not level.can_append:
            what = "takes neither inserts nor appends" if not level.can_insert else \
                "takes inserts but sits below an appended level, and only full levels " \
                "without arrays, at the bottom, take a block per appended entry"
            return f"output level {k} ({level.kind}) {what}: this format cannot be an output"
        if k and level.branchless and levels[k - 1].unique:
            # One child per position of a level that keeps one position per coordinate:
            # one entry per coordinate there, whatever the result holds.
            return (f"output level {k} ({level.kind}) holds one child per position of "
                    f"level {k - 1} ({levels[k - 1].kind}), which keeps one position per "
                    "coordinate: this format stores at most one entry per coordinate there "
                    "and cannot be an output (a non-unique level above it can)")
    unordered = [k for k in range(prefix) if not levels[k].ordered]
    if unordered and prefix < len(levels):
        # Appended children land in visit order while their parents' edges are kept by
        # position: under a parent whose positions do not follow its coordinates
        # (buckets of a hash), the two orders differ and entries would swap values.
        k = unordered[0]
        return (f"output level {prefix} ({levels[prefix].kind}) appends below level {k} "
                f"({levels[k].kind}), whose positions do not follow its coordinates: "
                "appended children would not line up with their parents; make the lower "
                f"levels insert too, or order level {k}")
    return None


def appends_in_order(out: TensorType, out_vars: tuple[str, ...], var: str) -> bool:
    """Whether ``var``'s coordinates are appended to an output level that keeps them
    ordered (``out_vars``: the output's indices in level order)."""
    prefix, blocks = inserted_prefix(out.levels), block_suffix(out.levels)
    return any(v == var and prefix <= k < blocks and out.levels[k].ordered
               for k, v in enumerate(out_vars))


def _refs(node: LoopNode) -> tuple[Ref, ...]:
    return (node.iterator,) if isinstance(node, Loop) else node.iterators


def straight(node: LoopNode) -> bool:
    """Whether ``node`` runs as straight-line code per position: one branchless level
    iterated by position, nothing merged, no run of duplicates open above it."""
    refs = _refs(node)
    facts = refs[0].facts
    return len(refs) == 1 and node.site.lattice_points == 1 and not refs[0].universe \
        and facts.by_position and facts.branchless and not facts.segmented


def unordered_refusal(node: LoopNode, appended_in_order: bool, straight: bool) -> str | None:
    """Why ``node`` cannot iterate an unordered level, or None: co-iterated with another
    (a merge needs both in coordinate order), or alone where the output appends its
    index in order. A straight loop visits the level as it stores it and is exempt."""
    refs = _refs(node)
    single = len(refs) == 1
    if straight:
        return None
    for ref in refs:
        if ref.universe or ref.facts.ordered:
            continue
        if not single:
            return (f"{ref.tensor}: level {ref.level} is unordered and cannot be "
                    "co-iterated with another operand")
        if appended_in_order:
            return (f"{ref.tensor}: level {ref.level} is unordered, but the output "
                    f"appends index {node.index} in order")
    return None


def loop_refusal(program: Program, out: TensorType, out_vars: tuple[str, ...]) -> str | None:
    """Why a loop of ``program`` cannot be emitted, or None."""
    for node in loops_of(program.root):
        reason = unordered_refusal(node, appends_in_order(out, out_vars, node.index),
                                   straight(node)) or _under_run(node)
        if reason is not None:
            return reason
    return None


def program_refusal(program: Program, out: TensorType, out_vars: tuple[str, ...]
                    ) -> str | None:
    """Why ``program`` cannot be emitted, or None: its loops (``loop_refusal``), a
    locate of a level that cannot locate, an index whose extent no operand or output
    mode gives, an operand read where its levels are not all resolved, an output
    scattered into that takes neither inserts nor unordered appends, or a window
    written (``too_large`` is asked apart: a refusal that converting cannot lift)."""
    return (loop_refusal(program, out, out_vars) or _locates(program)
            or _extents(program, out_vars) or _unresolved(program.root, frozenset())
            or _scattered(program, out) or _windowed_output(out))


def _under_run(node: LoopNode) -> str | None:
    for ref in _refs(node):
        if ref.facts.segmented and not ref.facts.by_position:
            return (f"{ref.tensor}: level {ref.level} iterates coordinates under a "
                    "non-unique parent, which cannot be merged")
    return None


def _locates(program: Program) -> str | None:
    for node in walk(program.root):
        if isinstance(node, Locate) and not node.ref.facts.can_locate:
            return (f"{node.ref.tensor}: level {node.ref.level} must be iterated but its "
                    f"index {node.index} is already bound; it cannot locate")
    return None


def _extents(program: Program, out_vars: tuple[str, ...]) -> str | None:
    """An index looped over its universe (or asked for its extent) that no operand's
    level and no output mode is indexed by."""
    known = set(out_vars)
    needed: list[str] = []
    for node in walk(program.root):
        if isinstance(node, (Loop, Merge)) and node.expr is not None:
            known.update(v for op in operands(node.expr) for v in op.vars)
        if isinstance(node, Locate):
            known.add(node.index)
        if isinstance(node, (Accumulate, Insert, Append)):
            known.update(v for op in operands(node.value) for v in op.vars)
            if isinstance(node.target, Access):
                known.update(ix.name for ix in node.target.indices if isinstance(ix, IndexVar))
        if isinstance(node, (Loop, Merge)):
            refs = named_levels(node)
            known.update(node.index for r in refs if not r.universe)
            if any(r.universe for r in refs):
                needed.append(node.index)
        elif isinstance(node, If) and isinstance(node.condition, (Nonempty, Missed)):
            cond = node.condition
            needed.extend(cond.indices if isinstance(cond, Nonempty) else (cond.index,))
    missing = next((v for v in needed if v not in known), None)
    return None if missing is None else f"no operand gives the extent of index {missing}"


def _unresolved(node: Node, resolved: frozenset[tuple[int, int]]) -> str | None:
    """An operand read by a write before every one of its levels is iterated or
    located around it (or a complement the lattice left unresolved)."""
    if isinstance(node, Block):
        for item in node.items:
            if (reason := _unresolved(item, resolved)) is not None:
                return reason
            if isinstance(item, Locate):
                resolved |= {(item.ref.uid, item.ref.level)}
        return None
    if isinstance(node, (Loop, Merge)):
        inner = resolved | {(r.uid, r.level) for r in named_levels(node) if not r.universe}
        bodies = [node.body] if isinstance(node, Loop) else [c.body for c in node.cases]
        return next((r for b in bodies if (r := _unresolved(b, inner)) is not None), None)
    if isinstance(node, (If, Entries)):
        return _unresolved(node.then if isinstance(node, If) else node.body, resolved)
    if isinstance(node, (Accumulate, Insert, Append)):
        for op in operands(node.value):
            if op.complement:
                return f"{op}: a complement left unresolved at its point of use"
            if op.vars and (op.uid, len(op.vars) - 1) not in resolved:
                return f"{op}: levels left unresolved at the point of use"
    return None


def _scattered(program: Program, out: TensorType) -> str | None:
    """A nest writing its output out of order (a reduction loop outside an output
    index) into levels that take neither inserts nor unordered appends; a workspace
    kernel's producers scatter into the workspace instead, and an operand's copy into
    its temporary."""
    if any(isinstance(n, Entries) for n in walk(program.root)):
        return None
    if all(lv.can_insert for lv in out.levels) or unordered_append_output(out.levels):
        return None
    if any(node.site is not None and node.site.scatter and not node.site.copies
           for node in loops_of(program.root)):
        return f"output {program.output} cannot be scattered into"
    return None


def _windowed_output(out: TensorType) -> str | None:
    if any(level.window for level in out.levels):
        return "a window of a tensor (a view) cannot be an output"
    return None


def case_count(program: Program) -> int:
    """The cases a kernel's loops hold: each case of a loop whose lattice has more than
    one point is a copy of the loops inside it (a loop of one case copies nothing), and
    a workspace's producers that run twice are emitted twice."""
    count = 0
    for node in loops_of(program.root):
        if node.site is None or node.site.lattice_points <= 1:
            continue
        bodies = [node.body] if isinstance(node, Loop) else [c.body for c in node.cases]
        count += sum(1 for b in bodies if not (isinstance(b, Block) and not b.items))
    return count * program.producer_runs


def too_large(program: Program) -> str | None:
    """Why ``program`` holds too many cases to compile in seconds, or None."""
    cases = case_count(program)
    if cases <= MAX_NEST_CASES:
        return None
    return (f"the loops would hold more than {MAX_NEST_CASES} cases ({cases}: each way "
            "the sparse operands of an outer loop overlap gets its own copy of the inner "
            "loops), too many to compile in seconds: split the expression into statements "
            "of fewer sparse operands, store some operands in full, or use an output whose "
            "levels all take inserts, into which a sum is computed term by term")

