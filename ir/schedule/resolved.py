"""The vocabulary of a resolved schedule: where each derived index comes from, how the
parallel loop is cut into chunks, the plan itself, and the kernel's indices a schedule is
checked against. ir/schedule/user_plan.py builds plans; ir/schedule/user_loops.py checks the loops
they run; lowering, the scheduled statement and the runtime read them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..notation import syntax as nt
from ..notation.operators import Operator
from .directives import Bound, Schedule

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
    may fall to two threads, which add into the output atomically (ir/loops/entry_split.py)."""

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
    # The operands (by name) whose product precompute reduces into a row
    sum_workspace: tuple[str, ...] | None = None
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
