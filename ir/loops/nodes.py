"""The loop IR: what a kernel does, loop by loop, between concrete notation and LLVM.

Concrete notation says which indices are looped over; the loop IR says how: a loop over
a coordinate range, over a level's positions, or a merge that co-iterates several
levels and dispatches on which of them hold the coordinate (the lattice's cases); the
levels located at a coordinate; what is accumulated, inserted or appended; the
temporaries allocated and cleared. Optimization passes (``ir/opt/``) rewrite loop nodes
with the fast forms they chose (``forms``, typed data a backend translates as given, and
``other``: the forms of the kernel's other form), and the printer shows them, so every
choice can be read and tested without generating code (``llvsparse dump --emit loops``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..concrete.expressions import Iter, Operand
from ..concrete.statements import Access, Affine, Expr, show_expr
from ..types import LevelType, TensorType
from .notes import NO_FORMS, Forms, changed, forms_text, jam_text

if TYPE_CHECKING:
    from ..concrete.lattice import Lattice
    from ..notation.operators import Operator
    from ..schedule.precompute import Precompute
    from ..schedule.workspace_schedule import WorkspacePlan


@dataclass(frozen=True)
class Facts:
    """What a pass may ask of an iterated or located level, without naming its format:
    its declared properties, whether its accesses always find, and how the loop reaches
    it (``segmented``: a duplicate-run of its parent level is open around it; ``runs``:
    the loop that iterates it steps over runs of equal coordinates, whose children see
    the whole run)."""

    full: bool = True
    ordered: bool = True
    unique: bool = True
    branchless: bool = False
    can_locate: bool = False
    always_found: bool = True  # pos_access (positions) or coord_access (coordinates)
    locate_always_found: bool = False
    segmented: bool = False
    above_unique: bool = True  # every level above it keeps one position per coordinate
    by_position: bool = False  # iterated over its positions (not its coordinates)
    runs: bool = False  # iterated a run of duplicate coordinates at a time (a segment)


@dataclass(frozen=True)
class Site:
    """Where a loop sits in its nest, for passes that need more than the loop itself."""

    nest: int  # which statement of a sequence
    order: tuple[str, ...]  # the nest's loop order
    depth: int  # this loop's place in it (-1: a loop of a sum lifted into a temporary)
    out_vars: tuple[str, ...]
    out_depth: int  # loops up to here bind the output's indices
    scatter: bool  # a reduction loop runs outside an output index
    accumulate: bool  # the statement adds to its output (+=, a split statement's term)
    derived: bool  # an output index is computed from blocked levels' indices
    contains_sum: bool  # the expression holds a sum left as a temporary
    lattice_points: int
    copies: bool = False  # it copies an operand into a temporary or clears it: no fast form
    additive: bool = True  # what it computes is reduced by + (duplicates may come one by one)


@dataclass(frozen=True)
class Ref:
    """Level ``level`` of operand ``uid`` (tensor ``tensor``), or an index's universe
    (``tensor`` empty): the range 0..extent."""

    tensor: str
    level: int
    uid: int
    facts: Facts = field(default=Facts(), compare=False)

    @property
    def universe(self) -> bool:
        return not self.tensor

    def __str__(self) -> str:
        return "U" if self.universe else f"{self.tensor}.{self.level}"


@dataclass(frozen=True)
class Chosen:
    """What code generation takes from a loop node rather than derive again: the point
    this node runs, which of the point's levels it iterates and which it locates at each
    coordinate, each case's sub-point (the levels present) and expression (absent
    operands folded into their fills; None: it computes nothing), the levels the
    lattice's top point co-iterates (whose streams a merge's tails resume) and how many
    points it has. ``lattice`` itself is kept for the lattice dump (ir/loops/lattice_text.py)."""

    lattice: Lattice = field(compare=False, repr=False)
    point: frozenset[Iter]
    iterated: tuple[Iter, ...]
    located: tuple[Iter, ...]
    case_exprs: tuple[object, ...]
    subpoints: tuple[frozenset[Iter], ...]
    streams: frozenset[Iter]
    points: int


@dataclass(frozen=True)
class Block:
    """Statements run in order."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Loop:
    """``index`` over one range: ``over`` 'coordinates' (a universe or a level that
    iterates coordinates) or 'positions' (a level's stored entries)."""

    index: str
    over: str
    iterator: Ref
    body: Node
    forms: Forms = NO_FORMS  # the fast forms passes chose (ir/loops/notes.py)
    other: Forms | None = None  # its forms in the kernel's other form (None: it has none)
    site: Site | None = field(default=None, compare=False, repr=False)
    expr: object = field(default=None, compare=False, repr=False)  # what each step computes
    chosen: Chosen | None = field(default=None, compare=False, repr=False)
    tags: tuple[str, ...] = ()  # how the loop maps onto parallel hardware (see tag)
    resumes: bool = False  # a merge's tail: it goes on from where the merge before stopped
    unroll: int = 1  # iterations per step of LLVM's unroller (a user's schedule asks)
    jam: tuple[int, ...] = ()  # positions per step, jammed (ir/opt/passes.jam); (): not


@dataclass(frozen=True)
class Case:
    """Run ``body`` where the levels ``present`` hold the coordinate (and the earlier
    cases did not apply)."""

    present: tuple[Ref, ...]
    body: Node


@dataclass(frozen=True)
class Merge:
    """Co-iterate ``iterators`` over ``index`` while every one has entries left, locating
    ``located`` at each coordinate, then run the first case whose levels are present."""

    index: str
    iterators: tuple[Ref, ...]
    located: tuple[Ref, ...]
    cases: tuple[Case, ...]
    forms: Forms = NO_FORMS  # the fast forms passes chose (ir/loops/notes.py)
    other: Forms | None = None  # its forms in the kernel's other form (None: it has none)
    site: Site | None = field(default=None, compare=False, repr=False)
    expr: object = field(default=None, compare=False, repr=False)  # what each step computes
    chosen: Chosen | None = field(default=None, compare=False, repr=False)
    tags: tuple[str, ...] = ()  # how the loop maps onto parallel hardware (see tag)
    resumes: bool = False  # a tail of the merge before it, going on where that stopped
    unroll: int = 1  # iterations per step of LLVM's unroller (a user's schedule asks)
    jam: tuple[int, ...] = ()  # positions per step, jammed (ir/opt/passes.jam); (): not


@dataclass(frozen=True)
class Bind:
    """``index`` takes the value of an expression of bound indices (a blocked level's
    coordinate: ``j = 2*A1_1 + A1_3``; an affine subscript's, -1 where a stride's
    division is inexact), so that the nodes after it in its block can locate the levels
    it indexes. Lowering places it at the loop whose index completes it."""

    index: str
    value: Affine


@dataclass(frozen=True)
class Locate:
    """Find the position of ``ref`` at the coordinate its index is bound to."""

    ref: Ref
    index: str


# What a write names: a scalar temporary, or an entry of the output, a workspace or an
# operand's precomputed copy (an access, whose indices say which entry).
Target = str | Access


def target_name(target: Target) -> str:
    """The temporary or tensor ``target`` writes."""
    return target if isinstance(target, str) else target.name


@dataclass(frozen=True)
class Accumulate:
    """``target op= value``: an output entry or a temporary reduced into (``operator``:
    the reduction's operator, whose declared properties code generation reads)."""

    target: Target
    op: str
    value: Expr
    operator: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Insert:
    """Store ``value`` at ``target`` in an output whose levels all take inserts."""

    target: Target
    value: Expr


@dataclass(frozen=True)
class Append:
    """Append the entry ``target = value`` to an output's appended levels."""

    target: Target
    value: Expr


@dataclass(frozen=True)
class Allocate:
    """A temporary (a scalar accumulator, or a workspace) comes into being; ``layout``
    says how a workspace stores its entries."""

    name: str
    dtype: str
    layout: str = ""


@dataclass(frozen=True)
class Clear:
    """Set a temporary to its reduction's identity (a workspace: ``through`` what; an
    access: that entry of an operand's precomputed copy)."""

    name: Target
    value: float
    through: str = ""


@dataclass(frozen=True)
class Sort:
    """Bring a workspace's entries into coordinate order (``how``: the method)."""

    name: str
    how: str


@dataclass(frozen=True)
class Entries:
    """``indices`` over the entries a workspace holds (in coordinate order where
    ``ordered``), running ``body`` at each."""

    name: str
    indices: tuple[str, ...]
    ordered: bool
    body: Node


@dataclass(frozen=True)
class Found:
    """The levels ``refs`` located at the loop's coordinate hold it."""

    refs: tuple[Ref, ...]

    def __str__(self) -> str:
        return " and ".join(f"{r} found" for r in self.refs)


@dataclass(frozen=True)
class Touched:
    """Something was accumulated into the temporary ``name`` since it was cleared."""

    name: str

    def __str__(self) -> str:
        return f"{self.name} touched"


@dataclass(frozen=True)
class Nonempty:
    """Every index of ``indices`` has a positive extent (loops that only locate run)."""

    indices: tuple[str, ...]

    def __str__(self) -> str:
        return f"{', '.join(self.indices)} nonempty"


@dataclass(frozen=True)
class Missed:
    """The loop over ``index`` folded fewer values into ``name`` than the index's extent."""

    name: str
    index: str

    def __str__(self) -> str:
        return f"{self.name} missed some {self.index}"


@dataclass(frozen=True)
class InRange:
    """The derived ``index`` lies within the extent of level ``level`` of ``tensor`` (an
    affine subscript's guard: outside it an operand reads its fill, the output takes
    nothing)."""

    index: str
    tensor: str
    level: int

    def __str__(self) -> str:
        return f"0 <= {self.index} < extent {self.tensor}.{self.level}"


Condition = Found | Touched | Nonempty | Missed | InRange


@dataclass(frozen=True)
class If:
    """Run ``then`` where ``condition`` holds."""

    condition: Condition
    then: Node


Node = (Block | Loop | Merge | Bind | Locate | Accumulate | Insert | Append | Allocate | Clear | Sort
        | Entries | If)
LoopNode = Loop | Merge


@dataclass(frozen=True)
class Statement:
    """What one statement of a kernel (a nest; a node's ``Site.nest`` says which) holds
    beside its loops, for code generation: the output's indices and the loop order, the
    operands it reads, whether it adds to the output and the operator a scattered
    reduction folds it with, and the plans of the temporaries it writes through (operand
    precomputes, the output's workspace). The indices it derives from others are bound
    by its ``let`` nodes, at the loop that completes each."""

    out_vars: tuple[str, ...]
    order: tuple[str, ...]
    operands: tuple[Operand, ...]
    accumulate: bool = False
    reduce_op: Operator | None = None  # None: the output is written, not folded into
    precomputes: tuple[Precompute, ...] = ()
    workspace: WorkspacePlan | None = None


@dataclass(frozen=True)
class CallingConvention:
    """How a kernel is called: its arguments' names (the output first) and storage
    types, the dtype values are computed in, and whether float operations may
    reassociate. With the program, all a backend is given."""

    arg_order: tuple[str, ...]
    types: dict[str, TensorType] = field(hash=False)
    dtype: str = "float64"
    fastmath: bool = False


@dataclass
class Program:
    """A kernel's loop IR, with what passes need to know about its output."""

    root: Node
    output: str
    output_levels: tuple[LevelType, ...]
    nests: int
    output_fill: float = 0.0  # row clearing writes zeros
    dtype: str = "float64"  # what values are computed in (a comparison's output is bool)
    producer_runs: int = 1  # a workspace whose producers run twice (count, then place)
    phases: tuple[str, ...] = ()  # how threads assemble the output (ir/loops/assembly_phases.py)
    statements: tuple[Statement, ...] = ()  # one per nest, indexed by Site.nest


def tag(node: LoopNode, mapping: str) -> LoopNode:
    """``node`` with the parallel ``mapping`` added (once): the threads that split its
    range, as the emitter then clamps it."""
    return node if mapping in node.tags else replace(node, tags=(*node.tags, mapping))


def named_levels(node: LoopNode) -> tuple[Ref, ...]:
    """Every level (or universe) a loop names: the ones it iterates, then the ones a
    merge locates at each coordinate."""
    if isinstance(node, Loop):
        return (node.iterator,)
    return (*node.iterators, *node.located)


def children(node: Node) -> list[Node]:
    if isinstance(node, Block):
        return list(node.items)
    if isinstance(node, (Loop, Entries)):
        return [node.body]
    if isinstance(node, If):
        return [node.then]
    if isinstance(node, Merge):
        return [case.body for case in node.cases]
    return []


def leading_locates(node: LoopNode) -> list[Ref]:
    """The levels located at each coordinate of ``node`` before its body runs: a merge's
    own, then each body's leading ``Locate`` nodes."""
    bodies = [node.body] if isinstance(node, Loop) else [c.body for c in node.cases]
    found = list(node.located) if isinstance(node, Merge) else []
    for body in bodies:
        for item in body.items if isinstance(body, Block) else (body,):
            if not isinstance(item, Locate):
                break
            found.append(item.ref)
    return found


def walk(node: Node):
    """Every node, outermost first."""
    yield node
    for child in children(node):
        yield from walk(child)


def loops_of(node: Node) -> list[LoopNode]:
    return [n for n in walk(node) if isinstance(n, (Loop, Merge))]


# ---------------------------------------------------------------------------- printing

def _notes(node: LoopNode) -> str:
    notes = [jam_text(node.jam)] if node.jam else []
    notes += forms_text(node.forms)
    notes += [f"unroll {node.unroll}"] if node.unroll > 1 else []
    other = forms_text(changed(node.forms, node.other or node.forms))
    notes = [", ".join(notes)] if notes else []
    notes += [f"other form: {', '.join(other)}"] if other else []
    shown = f"  [{'; '.join(notes)}]" if notes else ""
    return shown + (f"  {{{', '.join(node.tags)}}}" if node.tags else "")


def _refs(refs: tuple[Ref, ...]) -> str:
    return ", ".join(f"{r} runs" if r.facts.runs else str(r) for r in refs)


def _resuming(node: LoopNode) -> str:
    return ", resuming" if node.resumes else ""


_PHASE_ARGUMENTS = {"count": "count(lo, hi)", "fill": "fill(lo, hi, offset)",
                    "append": "append(lo, hi)", "finish": "finish(total)"}


def show_program(program: Program) -> str:
    """A kernel's loop IR as text: its loops, then the phases threads may assemble its
    output in (ir/loops/assembly_phases.py), where it has them."""
    phases = ", ".join(_PHASE_ARGUMENTS.get(p, p) for p in program.phases)
    return show(program.root) + (f"\nthreads assemble in phases: {phases}" if phases else "")


def show(node: Node, depth: int = 0) -> str:
    """The loop IR as indented text, one node per line."""
    pad = "  " * depth
    if isinstance(node, Block):
        return "\n".join(show(item, depth) for item in node.items)
    if isinstance(node, Loop):
        over = f"runs of {node.over}" if node.iterator.facts.runs else node.over
        return (f"{pad}for {node.index} in {over} of {node.iterator}{_resuming(node)}:"
                f"{_notes(node)}"
                f"\n{show(node.body, depth + 1)}")
    if isinstance(node, Merge):
        located = f" locating {_refs(node.located)}" if node.located else ""
        head = f"{pad}merge {node.index} over {_refs(node.iterators)}{located}{_resuming(node)}:"
        lines = [head + _notes(node)]
        for case in node.cases:
            empty = isinstance(case.body, Block) and not case.body.items
            lines.append(f"{pad}  case {_refs(case.present) or 'anywhere'}:"
                         + (" nothing" if empty else ""))
            if not empty:
                lines.append(show(case.body, depth + 2))
        return "\n".join(lines)
    if isinstance(node, Bind):
        return f"{pad}let {node.index} = {node.value}"
    if isinstance(node, Locate):
        return f"{pad}locate {node.ref} at {node.index}"
    if isinstance(node, Accumulate):
        return f"{pad}{node.target} {node.op}= {show_expr(node.value)}"
    if isinstance(node, Insert):
        return f"{pad}insert {node.target} = {show_expr(node.value)}"
    if isinstance(node, Append):
        return f"{pad}append {node.target} = {show_expr(node.value)}"
    if isinstance(node, Allocate):
        layout = f" ({node.layout})" if node.layout else ""
        return f"{pad}allocate {node.name}: {node.dtype}{layout}"
    if isinstance(node, Clear):
        through = f" through {node.through}" if node.through else ""
        return f"{pad}clear {node.name} = {node.value!r}{through}"
    if isinstance(node, Sort):
        return f"{pad}sort {node.name}: {node.how}"
    if isinstance(node, Entries):
        order = ", in order" if node.ordered else ""
        return (f"{pad}for {', '.join(node.indices)} in entries of {node.name}{order}:"
                f"\n{show(node.body, depth + 1)}")
    assert isinstance(node, If)
    return f"{pad}if {node.condition}:\n{show(node.then, depth + 1)}"
