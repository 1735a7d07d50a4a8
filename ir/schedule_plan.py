"""What a user's schedule asks of a kernel, checked before any IR is built.

Directives apply in order to the kernel's indices. Each derived index records where it
came from (its provenance: ``i0`` and ``i1`` are a split of ``i``, ``f`` a fusion of
``i`` and ``j``, ``fp`` the positions of ``A(i,j)`` along ``f``), so every directive
that names a derived index is traced back to the original loops and the operands'
storage. The result is a ``SchedulePlan``: the loop order the scheduler must keep, the
parallel loop and how its coordinates are cut into chunks, and the workspace choice.

A directive that does not fit raises ScheduleError naming why: an index that is not
there or a name taken twice, a ``pos`` over an operand that does not store the index,
a parallel loop whose writes race under the chosen strategy, a transformation this
compiler cannot lower yet (it says which).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from . import notation as nt
from .directives import (
    Bound,
    Coord,
    Directive,
    Divide,
    Fuse,
    Parallelize,
    Pos,
    Precompute,
    Reorder,
    Schedule,
    Split,
    Unroll,
)
from .errors import ScheduleError
from .operators import Operator

CPU_UNITS = ("cpu_thread",)


@dataclass(frozen=True)
class Origin:
    """Where a derived index comes from: ``kind`` (split_outer, split_inner, divide_outer,
    divide_inner, fuse, pos), the indices it derives from, and its parameter (a split's
    factor, a divide's parts, a pos's operand text)."""

    kind: str
    parents: tuple[str, ...]
    param: object = None


@dataclass(frozen=True)
class Chunks:
    """How the parallel loop's coordinates are cut: ``by`` 'coordinates' (chunks of
    ``size`` coordinates), 'parts' (``size`` chunks of equal coordinates), 'entries'
    (chunks of about ``size`` stored entries of ``tensor``, or ``size`` equal parts of
    them where ``parts``), or 'balanced' (the runtime's split by stored entries).
    ``within``: entries chunks cut inside coordinates too (the positions of a fusion of
    the loop's index with the next, parallelized with atomics): a coordinate's entries
    may fall to two threads, which add into the output atomically (ir/entry_split.py)."""

    by: str = "balanced"
    size: int = 0
    tensor: str = ""
    parts: bool = False
    within: bool = False

    def describe(self) -> str:
        if self.by == "coordinates":
            return f"chunks of {self.size} coordinates"
        if self.by == "parts":
            return f"{self.size} chunks of equal coordinates"
        if self.by == "entries":
            amount = f"{self.size} chunks of" if self.parts else f"chunks of about {self.size}"
            if self.within:
                return (f"{amount} {self.tensor}'s stored entries, cut anywhere: a "
                        "coordinate cut by a chunk's edge gets each thread's partial sum, "
                        "added atomically")
            return f"{amount} {self.tensor}'s stored entries, cut between coordinates"
        return "chunks of about equal stored entries"


@dataclass(frozen=True)
class ParallelLoop:
    """The loop threads (or a GPU grid) split: its original ``index``, the ``unit`` and
    the race strategy the user named, and the chunks."""

    index: str
    unit: str
    races: str
    chunks: Chunks = Chunks()
    loop: str = ""  # the scheduled loop the user parallelized (derived from index)
    # 'rows': the output's first index, outermost (threads own its rows); 'nested': an
    # output index under other loops (threads own its coordinates, and each runs the
    # loops outside whole); 'reduced': an index the output does not have (each chunk
    # into a private output, combined by ``operator`` after).
    kind: str = "rows"
    operator: Operator | None = None

    @property
    def name(self) -> str:
        return self.loop or self.index

    @property
    def reduces(self) -> bool:
        return self.kind == "reduced"

    @property
    def ranged(self) -> bool:
        """Whether the loop is split by a range tag of its own (ir/opt/passes.py
        THREAD_RANGE), not by the row split every kernel may take."""
        return self.kind != "rows"


@dataclass
class SchedulePlan:
    """A schedule resolved against one kernel's indices and operands."""

    schedule: Schedule
    origins: dict[str, Origin] = field(default_factory=dict)
    order: tuple[str, ...] = ()  # original indices, outermost first, where reordered
    loops: tuple[str, ...] = ()  # the loops after every directive, outermost first
    parallel: ParallelLoop | None = None
    serial: bool = False  # a schedule without parallelize: one thread
    workspace: str | None = None  # the workspace policy precompute named
    gpu: tuple[ParallelLoop, ...] = ()  # loops mapped to GPU units
    bounds: tuple[Bound, ...] = ()
    unrolls: tuple[tuple[str, int], ...] = ()  # (original index, factor) unrolled
    tiles: tuple[tuple[str, int], ...] = ()  # (original index, positions) tiled (jammed)

    def covered(self, index: str) -> tuple[str, ...]:
        """The original indices a (derived) index's loop walks: a fusion's both."""
        origin = self.origins.get(index)
        if origin is None:
            return (index,)
        return tuple(v for parent in origin.parents for v in self.covered(parent))

    def inner_of(self, outer: str) -> str:
        """The inner index of the split or divide whose outer index is ``outer``."""
        origin = self.origins[outer]
        kind = origin.kind.replace("outer", "inner")
        return next(n for n, o in self.origins.items()
                    if o.kind == kind and o.parents == origin.parents)

    def root(self, index: str) -> str:
        """The original index ``index`` derives from (itself when original); a fused
        index derives from its outer one."""
        while index in self.origins:
            index = self.origins[index].parents[0]
        return index


@dataclass(frozen=True)
class KernelIndices:
    """What a schedule is checked against: the output's indices in level order, every
    index of the statement, and each operand's indices by tensor name."""

    output: str
    out_vars: tuple[str, ...]
    all_vars: tuple[str, ...]
    operands: dict[str, tuple[str, ...]]
    rhs: tuple[str, ...] = ()  # the right-hand side's texts: with and without its sums
    # The sums the right-hand side is linear in (``_linear_sums``), by their index.
    reductions: tuple[tuple[str, Operator], ...] = ()

    @classmethod
    def of(cls, assignment: nt.Assignment) -> KernelIndices:
        out = assignment.lhs
        names: list[str] = []
        operands: dict[str, tuple[str, ...]] = {}
        for access in assignment.accesses():
            plain = tuple(ix.name for ix in access.indices if isinstance(ix, nt.IndexVar))
            names += [n for n in plain if n not in names]
            if access.tensor != out.tensor:
                operands.setdefault(access.tensor, plain)
        out_vars = tuple(ix.name for ix in out.indices if isinstance(ix, nt.IndexVar))
        forms, rhs = [str(assignment.rhs)], assignment.rhs
        while isinstance(rhs, nt.Reduction):
            rhs = rhs.body
            forms.append(str(rhs))
        return cls(out.tensor, out_vars, tuple(names), operands, tuple(forms),
                   tuple(_linear_sums(assignment.rhs)))


def _linear_sums(expr: nt.Expr) -> list[tuple[str, Operator]]:
    """The sums (add-kind reductions) that the expression is linear in: reached from the
    top through sums and through products, negations and numerators whose other
    arguments do not hold them. Splitting such a sum's index into ranges and adding the
    partial results is exact (up to reassociation); past anything else (an addition of
    a term without it, a maximum) it is not."""
    found: list[tuple[str, Operator]] = []
    if isinstance(expr, nt.Reduction) and expr.op.kind == "add":
        found.append((expr.var.name, expr.op))
        found += _linear_sums(expr.body)
    elif isinstance(expr, nt.Call) and expr.op.kind in ("mul", "neg", "div"):
        args = expr.args[:1] if expr.op.kind == "div" else expr.args
        for arg in args:
            found += [(var, op) for var, op in _linear_sums(arg)
                      if not any(var in _reduced(other) for other in expr.args if other is not arg)]
    return found


def _reduced(expr: nt.Expr) -> set[str]:
    return {node.var.name for node in nt.subexpressions(expr) if isinstance(node, nt.Reduction)}


def plan_schedule(schedule: Schedule, kernel: KernelIndices, target: str) -> SchedulePlan:
    """Check ``schedule`` against the kernel and resolve it (ScheduleError where a
    directive does not fit)."""
    plan = SchedulePlan(schedule, serial=True)
    # The indices loops run over now: the output's first, as the scheduler prefers; only
    # a reorder constrains the order the scheduler picks.
    live = [*kernel.out_vars, *(v for v in kernel.all_vars if v not in kernel.out_vars)]
    for directive in schedule.directives:
        _apply(plan, kernel, live, directive, target)
    plan.loops = tuple(live)
    order = _original_order(plan, live)
    if any(isinstance(d, Reorder) for d in schedule.directives):
        plan.order = order
    _check_parallel(plan, kernel, live)
    return plan


def _fresh(name: str, live: list[str], plan: SchedulePlan, what: str, text: str) -> None:
    if name in live or name in plan.origins or name in (o for o in plan.origins.values()
                                                         for o in o.parents):
        raise ScheduleError(f"{text}: the {what} {name} is already an index of this kernel")


def _present(name: str, live: list[str], plan: SchedulePlan, text: str) -> None:
    if name not in live:
        gone = any(name in origin.parents for origin in plan.origins.values())
        why = "was replaced by an earlier directive" if gone else "is not an index of this kernel"
        raise ScheduleError(f"{text}: index {name} {why} (indices now: {', '.join(live)})")


def _apply(plan: SchedulePlan, kernel: KernelIndices, live: list[str], d: Directive,
           target: str) -> None:
    text = str(Schedule((d,)))
    match d:
        case Reorder(indices):
            for name in indices:
                _present(name, live, plan, text)
            slots = sorted(live.index(n) for n in indices)
            for slot, name in zip(slots, indices):
                live[slot] = name
        case Split(index, outer, inner, _) | Divide(index, outer, inner, _):
            _present(index, live, plan, text)
            if outer == inner:
                raise ScheduleError(f"{text}: the outer and inner index need two names")
            _fresh(outer, live, plan, "outer index", text)
            _fresh(inner, live, plan, "inner index", text)
            kind = "split" if isinstance(d, Split) else "divide"
            param = d.factor if isinstance(d, Split) else d.parts
            plan.origins[outer] = Origin(f"{kind}_outer", (index,), param)
            plan.origins[inner] = Origin(f"{kind}_inner", (index,), param)
            slot = live.index(index)
            live[slot:slot + 1] = [outer, inner]
        case Fuse(outer, inner, fused):
            _present(outer, live, plan, text)
            _present(inner, live, plan, text)
            if live.index(inner) != live.index(outer) + 1:
                raise ScheduleError(f"{text}: {inner} must be the loop directly inside "
                                    f"{outer} (loops now: {', '.join(live)})")
            _fresh(fused, live, plan, "fused index", text)
            plan.origins[fused] = Origin("fuse", (outer, inner))
            slot = live.index(outer)
            live[slot:slot + 2] = [fused]
        case Pos(index, pos_index, tensor, indices):
            _present(index, live, plan, text)
            _fresh(pos_index, live, plan, "position index", text)
            stored = kernel.operands.get(tensor)
            if stored is None:
                raise ScheduleError(f"{text}: {tensor} is not an operand of this kernel")
            if stored != indices:
                raise ScheduleError(f"{text}: {tensor} is accessed as {tensor}"
                                    f"({','.join(stored)}) in this kernel")
            covered = plan.covered(index)
            if not set(covered) <= set(stored):
                missing = ", ".join(v for v in covered if v not in stored)
                raise ScheduleError(f"{text}: the loop over {index} does not iterate "
                                    f"{tensor}: {tensor} is not indexed by {missing}")
            plan.origins[pos_index] = Origin("pos", (index,), f"{tensor}({','.join(indices)})")
            live[live.index(index)] = pos_index
        case Coord(pos_index, index):
            _present(pos_index, live, plan, text)
            if plan.origins.get(pos_index, Origin("", ())).kind != "pos":
                raise ScheduleError(f"{text}: {pos_index} is not a position index")
            _fresh(index, live, plan, "coordinate index", text)
            plan.origins[index] = Origin("coord", (pos_index,))
            live[live.index(pos_index)] = index
        case Bound(index, bound_index, _, kind):
            _present(index, live, plan, text)
            if kind.startswith("min"):
                raise ScheduleError(f"{text}: loops start at coordinate 0; only max_exact "
                                    "and max_constraint bounds apply")
            if index in plan.origins:
                raise ScheduleError(f"{text}: only an original index's extent is bound")
            _fresh(bound_index, live, plan, "bound index", text)
            plan.origins[bound_index] = Origin("bound", (index,), d.value)
            live[live.index(index)] = bound_index
            plan.bounds = (*plan.bounds, d)
        case Precompute(_, index, workspace_index, _):
            _present(index, live, plan, text)
            _fresh(workspace_index, live, plan, "workspace index", text)
            _precompute(plan, kernel, d, text)
        case Unroll(index, factor):
            _present(index, live, plan, text)
            _unroll(plan, index, factor, text)
        case Parallelize(index, unit, races):
            _present(index, live, plan, text)
            if (unit in CPU_UNITS) != (not target.startswith("cuda")):
                where = "a CPU target" if unit in CPU_UNITS else "target='cuda' or 'cuda-emulated'"
                raise ScheduleError(f"{text}: unit {unit} needs {where}, and this kernel's "
                                    f"target is {target!r}")
            loop = ParallelLoop(index, unit, races)
            if unit in CPU_UNITS:
                if plan.parallel is not None:
                    raise ScheduleError(f"{text}: loop {plan.parallel.index} is already "
                                        "parallel; nested CPU parallelism is not lowered yet")
                plan.parallel = loop
                plan.serial = False
            else:
                plan.gpu = (*plan.gpu, loop)
                plan.serial = False


def _precompute(plan: SchedulePlan, kernel: KernelIndices, d: Precompute, text: str) -> None:
    """The precompute this compiler lowers: the whole right-hand side into a workspace
    over the output's last index (paper 002), in the named policy's storage."""
    if not kernel.out_vars or d.index != kernel.out_vars[-1]:
        raise ScheduleError(f"{text}: a workspace is lowered over the output's last index "
                            f"({', '.join(kernel.out_vars) or 'none: a scalar output'}) "
                            "only, for now")
    if "".join(d.expr.split()) not in ["".join(form.split()) for form in kernel.rhs]:
        raise ScheduleError(f"{text}: only the whole right-hand side ({kernel.rhs[-1]}) is "
                            "precomputed into a workspace, for now")
    if plan.workspace is not None:
        raise ScheduleError(f"{text}: the kernel already has a workspace ({plan.workspace})")
    plan.workspace = d.workspace


def _unroll(plan: SchedulePlan, index: str, factor: int, text: str) -> None:
    """The original loop an ``unroll`` applies to: the index itself, or the one a split's
    inner index (or a bound) derives from, whose loop then steps ``factor`` at a time."""
    covered = plan.covered(index)
    origin = plan.origins.get(index)
    if len(covered) != 1 or (origin is not None and origin.kind in ("pos", "fuse")):
        raise ScheduleError(f"{text}: {index} walks {origin.kind if origin else 'several'} "
                            "indices' positions; unroll an original index or a split's inner "
                            "one")
    if origin is not None and origin.kind.endswith("_outer"):
        raise ScheduleError(f"{text}: {index} is the outer loop of a split (unrolling it would "
                            f"jam {plan.inner_of(index)} into it, which is not lowered); "
                            f"unroll {plan.inner_of(index)}")
    if factor < 2:
        raise ScheduleError(f"{text}: the factor must be at least 2")
    root = covered[0]
    if root in dict(plan.unrolls):
        raise ScheduleError(f"{text}: the loop over {root} is unrolled twice")
    plan.unrolls = (*plan.unrolls, (root, factor))


def _original_order(plan: SchedulePlan, live: list[str]) -> tuple[str, ...]:
    """The original indices in the order their (derived) loops now run; a split's two
    loops must stay together (tiling moves another loop between them, which is not
    lowered yet)."""
    for outer, origin in plan.origins.items():
        if not origin.kind.endswith("_outer"):
            continue
        inner = plan.inner_of(outer)
        if outer in live and inner in live and live.index(inner) < live.index(outer):
            raise ScheduleError(f"the schedule runs {inner} outside {outer}, the inner loop of "
                                "a split outside its outer one: that is not lowered yet")
    order: list[str] = []
    last: tuple[str, ...] = ()
    for name in live:
        roots = plan.covered(name)
        for root in roots:
            if root in order and root not in last and not _position_tile(plan, live, name):
                raise ScheduleError(f"the schedule puts another loop between the loops "
                                    f"derived from {root} (tiling); only a tile of an "
                                    "index's positions, its inner loop innermost, is lowered")
            if root not in order:
                order.append(root)
        last = roots
    return tuple(order)


MAX_TILE = 16  # positions per step of a tiled (jammed) loop: each keeps a sum in a register


def _position_tile(plan: SchedulePlan, live: list[str], inner: str) -> bool:
    """Whether ``inner``, placed after other loops than its split's outer one, tiles an
    index's positions (paper 001's SpMM: ``pos(j, jp, A(i,j)); split(jp, jp0, jp1, 8);
    reorder(jp0, k, jp1)``): the inner index of a split of a ``pos`` index, innermost,
    with only original indices between. Recorded in ``plan.tiles``; lowering runs such a
    loop jammed, that many positions per step with the loops between inside (each
    position's sums kept in their own order)."""
    origin = plan.origins.get(inner)
    if origin is None or origin.kind != "split_inner" or live[-1] != inner:
        return False
    through = plan.origins.get(origin.parents[0])
    if through is None or through.kind != "pos" or len(plan.covered(inner)) != 1:
        return False
    outer = next(n for n, o in plan.origins.items()
                 if o.kind == "split_outer" and o.parents == origin.parents)
    between = live[live.index(outer) + 1:-1]
    if outer not in live or not between or any(n in plan.origins for n in between):
        return False
    factor = int(origin.param)
    if not 2 <= factor <= MAX_TILE:
        raise ScheduleError(f"a tile of {factor} positions of {through.parents[0]}: tiles of "
                            f"2 to {MAX_TILE} positions are lowered (a sum in a register "
                            "each)")
    plan.tiles = (*plan.tiles, (plan.covered(inner)[0], factor))
    return True


def _check_parallel(plan: SchedulePlan, kernel: KernelIndices, live: list[str]) -> None:
    """The CPU parallel loop: outermost, over the output's first index (threads then
    own their rows: no two write one entry), cut into chunks by the directives that
    derived it."""
    loop = plan.parallel
    if loop is None:
        return
    text = f"parallelize({loop.index}, {loop.unit}, {loop.races})"
    covered = plan.covered(loop.index)
    root = covered[0]
    operator = None
    if root not in kernel.out_vars:
        kind, operator = "reduced", _check_reduced(kernel, loop, covered, text)
    elif root == kernel.out_vars[0] and (not plan.order or plan.order[0] == root):
        kind = "rows"
    else:
        kind = "nested"
    chunks = _chunks(plan, loop.index, text)
    if chunks.by == "entries" and loop.races == "atomics" and kind == "rows" \
            and len(covered) > 1:  # positions of a fusion: threads share coordinates
        chunks = replace(chunks, within=True)
    plan.parallel = ParallelLoop(root, loop.unit, loop.races, chunks, loop.index, kind,
                                 operator)


def _check_reduced(kernel: KernelIndices, loop: ParallelLoop, covered: tuple[str, ...],
                   text: str) -> Operator:
    """Threads over a reduced index each reduce into a private output, combined after
    (temporaries, parallel_reduction); the right-hand side must be linear in the sum
    over the index, so that private outputs starting as 0 add up to the result."""
    reduced = ", ".join(covered)
    if loop.races == "no_races":
        raise ScheduleError(
            f"{text}: threads over {reduced} would reduce into the same entries of "
            f"{kernel.output} (it is not {kernel.output}'s first index): that races; "
            "choose temporaries or parallel_reduction")
    if loop.races == "atomics":
        raise ScheduleError(f"{text}: CPU threads do not add atomically; choose temporaries "
                            "or parallel_reduction (each thread its own output, combined)")
    operators = dict(kernel.reductions)
    if covered[0] not in operators:
        raise ScheduleError(f"{text}: the right-hand side is not a sum over {covered[0]} "
                            "(through products only), so partial results over ranges of "
                            f"{covered[0]} do not add up to it")
    return operators[covered[0]]


def _chunks(plan: SchedulePlan, index: str, text: str) -> Chunks:
    """How the directives that derived the parallel index cut its coordinates."""
    origin = plan.origins.get(index)
    if origin is None:
        return Chunks()
    if origin.kind in ("split_inner", "divide_inner"):
        raise ScheduleError(f"{text}: {index} is the inner loop of a split; parallelize "
                            "its outer loop")
    if origin.kind == "pos":
        return Chunks("entries", 0, str(origin.param).split("(")[0])
    parent = origin.parents[0]
    size = int(origin.param)
    if origin.kind in ("split_outer", "divide_outer"):
        through = plan.origins.get(parent)
        if through is not None and through.kind == "pos":
            tensor = str(through.param).split("(")[0]
            return Chunks("entries", size, tensor, parts=origin.kind == "divide_outer")
        if through is not None and through.kind not in ("bound",):
            raise ScheduleError(f"{text}: chunks of a {through.kind} index are not lowered "
                                "yet")
        return Chunks("coordinates" if origin.kind == "split_outer" else "parts", size)
    raise ScheduleError(f"{text}: a parallel {origin.kind} index is not lowered yet")
