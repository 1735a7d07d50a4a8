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

import re
from dataclasses import dataclass, field

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
from .workspace_policies import workspace_policies

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
    them where ``parts``), or 'balanced' (the runtime's split by stored entries)."""

    by: str = "balanced"
    size: int = 0
    tensor: str = ""
    parts: bool = False

    def describe(self) -> str:
        if self.by == "coordinates":
            return f"chunks of {self.size} coordinates"
        if self.by == "parts":
            return f"{self.size} chunks of equal coordinates"
        if self.by == "entries":
            amount = f"{self.size} chunks of" if self.parts else f"chunks of about {self.size}"
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
    # The operands (by name) whose product precompute reduces into a row
    sum_workspace: tuple[str, ...] | None = None
    gpu: tuple[ParallelLoop, ...] = ()  # loops mapped to GPU units
    bounds: tuple[Bound, ...] = ()

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
            if _whole(d.expr, kernel) or workspace_index != index:
                _fresh(workspace_index, live, plan, "workspace index", text)
            _precompute(plan, kernel, d, text)
        case Unroll(index, _):
            _present(index, live, plan, text)
            raise ScheduleError(f"{text}: unroll is not lowered yet (llvmlite cannot attach "
                                "LLVM's loop metadata; LLVM's own unroller runs on every "
                                "kernel)")
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
    if not _whole(d.expr, kernel):
        _sum_workspace(plan, kernel, d, text)
        return
    if plan.workspace is not None:
        raise ScheduleError(f"{text}: the kernel already has a workspace ({plan.workspace})")
    plan.workspace = d.workspace


def _whole(expr: str, kernel: KernelIndices) -> bool:
    """Whether ``expr`` is the whole right-hand side (with or without its sums)."""
    return "".join(expr.split()) in ["".join(form.split()) for form in kernel.rhs]


def _factors(expr: str, kernel: KernelIndices) -> list[str] | None:
    """The operands of ``expr`` where it is a product of the right-hand side's operands
    (``B(i,k,l) * D(l,j)``), as they are written; None otherwise."""
    parts = [p.strip() for p in expr.split("*")]
    found = []
    for part in parts:
        match = re.fullmatch(r"(\w+)\(([\w\s,]*)\)", part)
        if match is None:
            return None
        indices = tuple(v.strip() for v in match.group(2).split(",") if v.strip())
        if kernel.operands.get(match.group(1)) != indices:
            return None
        found.append(match.group(1))
    return found


def _sum_workspace(plan: SchedulePlan, kernel: KernelIndices, d: Precompute, text: str
                   ) -> None:
    """A product of some of the right-hand side's factors, reduced into a dense row over
    the output's last index (ir/precompute_sums.py), the rest multiplying the row."""
    names = _factors(d.expr, kernel)
    if names is None or not 0 < len(set(names)) < len(kernel.operands):
        raise ScheduleError(f"{text}: a workspace takes the whole right-hand side "
                            f"({kernel.rhs[-1]}) or a product of some of its operands, "
                            "not all of them")
    inner = {v for n in names for v in kernel.operands[n]}
    outer = {v for n, vars_ in kernel.operands.items() if n not in names for v in vars_}
    summed = inner - outer - set(kernel.out_vars)
    if not summed or d.index not in {kernel.operands[n][-1] for n in names}:
        raise ScheduleError(f"{text}: a product precomputed into a row over {d.index} sums "
                            f"an index the other factors lack and has an operand indexed "
                            f"by {d.index} last ({d.expr} does not)")
    if d.workspace in workspace_policies() and d.workspace != "dense":
        raise ScheduleError(f"{text}: a product's sum is reduced into a dense row; name "
                            f"the workspace 'dense' or give it a name, not {d.workspace!r}")
    if plan.sum_workspace is not None or plan.workspace is not None:
        raise ScheduleError(f"{text}: the kernel already has a workspace")
    plan.sum_workspace = tuple(names)


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
            if root in order and root not in last:
                raise ScheduleError(f"the schedule puts another loop between the loops "
                                    f"derived from {root} (tiling); this is not lowered yet")
            if root not in order:
                order.append(root)
        last = roots
    return tuple(order)


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
    plan.parallel = ParallelLoop(root, loop.unit, loop.races, _chunks(plan, loop.index, text),
                                 loop.index, kind, operator)


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
    if origin.kind == "pos":
        return Chunks("entries", 0, str(origin.param).split("(")[0])
    raise ScheduleError(f"{text}: a parallel {origin.kind} index is not lowered yet")
