"""Iteration algebra and iteration lattices (paper 003 section 4, paper 004 section 4).

The region an operator's result can be nonzero in is derived from how the operator acts
on fill values, never from its name: f(0, 0) != 0 needs the whole universe, an operator
that is zero whenever one argument is absent intersects, anything else unions.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

from .cin import Apply, Const, Expr, Operand, Sum
from .schedule import ScheduleError

UNIVERSE_UID = -1
# A union of n sparse operands has 2**n points, each a loop case of its own: past this
# many the kernel takes minutes to build (8 sparse vectors into a sparse sum: 255 points,
# 78 s) and is too large to run well.
MAX_POINTS = 128
# Values a stored operand is tried with, to learn where an operator is zero: finite (an
# absent entry annihilates a product even against inf), small and huge ones (a > 10).
_PROBES = (1.0, -2.5, 3.0, 0.5, -0.75, 1e300, -1e300)
# Each case of an outer loop holds its own copy of the inner loops, so cases multiply
# across levels: four matrices of two sparse levels each, added into a third such one,
# took 434 cases (3 MB of IR, over a minute to compile; five sparse vectors into a sparse
# vector, 211 cases, take about 3 s). A nest stops here.
MAX_NEST_CASES = 256


# A kernel is lowered again for each phase of a threaded assembly and in its other form
# (see codegen.KernelCompiler.other_form): all of them together stop at this many cases.
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


class KernelTooLargeError(ScheduleError):
    """The loop nest would have more cases than a kernel may hold (MAX_NEST_CASES)."""


class CaseBudget:
    """Counts the cases emitted for one kernel, so that a nest too large to compile in
    seconds is refused while it is lowered, long before LLVM sees it. A loop of one case
    copies nothing and costs nothing here (a sum of 200 sparse vectors into a dense
    output is 200 such loops)."""

    def __init__(self, limit: int = MAX_NEST_CASES):
        self.limit = limit
        self.spent = 0

    def spend(self, cases: int = 1) -> None:
        self.spent += cases
        if self.spent > self.limit:
            raise KernelTooLargeError(
                f"the loops would hold more than {self.limit} cases (each way the sparse "
                "operands of an outer loop overlap gets its own copy of the inner loops), "
                "too many to compile in seconds: split the expression into statements of "
                "fewer sparse operands, store some operands in full, or use an output whose "
                "levels all take inserts, into which a sum is computed term by term")


@dataclass(frozen=True)
class Iter:
    """The level ``level`` of operand ``uid``, or the universe of a variable (uid -1)."""

    uid: int
    level: int

    @property
    def is_universe(self) -> bool:
        return self.uid == UNIVERSE_UID

    def __str__(self) -> str:
        return "U" if self.is_universe else f"#{self.uid}.{self.level}"


UNIVERSE = Iter(UNIVERSE_UID, 0)


def _is_zero(value: float) -> bool:
    return not math.isnan(value) and value == 0


@functools.cache  # operators are immutable values
def region(op, fill: float = 0.0) -> str:
    """'intersection', 'union', 'left' (first argument's region), 'universe', or for
    three or more arguments 'general' (see ``nonzero_when``)."""
    if op.arity > 2:
        return "general"
    if op.absent_annihilates:  # a semiring's product: an absent entry is its zero
        return "same" if op.arity == 1 else "intersection"
    if op.arity == 2 and op.annihilator is not None and _is_zero(op.annihilator - fill):
        return "intersection"  # declared: f(fill, y) = f(x, fill) = fill
    if op.arity == 1:
        return "same" if _is_zero(op.evaluate(fill)) else "universe"
    if not _is_zero(op.evaluate(fill, fill)):
        return "universe"
    zero_without_left = all(_is_zero(op.evaluate(fill, y)) for y in _PROBES)
    zero_without_right = all(_is_zero(op.evaluate(x, fill)) for x in _PROBES)
    if zero_without_left and zero_without_right:
        return "intersection"
    if zero_without_left:
        return "left"
    if zero_without_right:
        return "right"
    return "union"


@functools.cache
def nonzero_when(op, present: tuple[bool, ...]) -> bool:
    """Whether ``op`` can be nonzero when only the arguments marked ``present`` are
    stored (the others hold the fill value 0): ``where(c, a, b)`` can with ``c`` and
    ``b`` (a stored c of 0 picks b), not with ``c`` alone."""
    choices = [(0.0, *_PROBES) if p else (0.0,) for p in present]
    return any(not _is_zero(op.evaluate(*values)) for values in itertools.product(*choices))


def _general_points(op, subs: list[list[frozenset[Iter]]]) -> list[frozenset[Iter]]:
    """Lattice points of an operator of any arity: for each set of present arguments
    that can give a nonzero, every combination of their points."""
    points: list[frozenset[Iter]] = []
    for present in itertools.product((True, False), repeat=len(subs)):
        if all(present) or nonzero_when(op, present):
            chosen = [sub for sub, p in zip(subs, present) if p]
            points += [frozenset().union(*combo) for combo in itertools.product(*chosen)]
    return points


def _dedupe(points: list[frozenset[Iter]]) -> list[frozenset[Iter]]:
    return list(dict.fromkeys(points))  # first occurrences, in order


def _without_full_absent(points: list[frozenset[Iter]], is_full: Callable[[Iter], bool]
                         ) -> list[frozenset[Iter]]:
    """Drop the points that stand for a full iterator being absent, which it never is:
    those below another point that adds only full iterators to them (paper 003 section
    4.2). In A + B with B full, {A} goes because {A, B} covers it. In A*x + z with x
    full, {z} stands for "A*x absent", which A's absence alone makes happen, so it stays.
    A sum of n dense operands is one point (a pairwise test left n/2 of them)."""
    groups: dict[frozenset[Iter], list[frozenset[Iter]]] = {}
    sparse = {p: frozenset(it for it in p if not is_full(it)) for p in points}
    for point in points:
        groups.setdefault(sparse[point], []).append(point)
    return [p for p in points if not any(p < q for q in groups[sparse[p]])]


def _product(a: list[frozenset[Iter]], b: list[frozenset[Iter]]) -> list[frozenset[Iter]]:
    return [p | q for p in a for q in b]


def lattice_sets(expr: Expr, iter_of: Callable[[Operand], Iter | None],
                 is_full: Callable[[Iter], bool]) -> list[frozenset[Iter]]:
    """The lattice points of ``expr`` as iterator sets; the empty set stands for 'anywhere'.

    Points where a full iterator would be absent go at every step, not only at the end:
    a sum of n full vectors otherwise built all 2**n subsets (20 terms never finished).
    """
    if isinstance(expr, Operand):
        it = iter_of(expr)
        return [frozenset([it])] if it is not None else [frozenset()]
    if isinstance(expr, Const):
        return [frozenset()]
    if isinstance(expr, Sum):
        points = lattice_sets(expr.body, iter_of, is_full)
        if absent_reduction(expr) is not None:  # a semiring's empty reduction: its zero
            points = _dedupe(points + [frozenset()])
        return points
    assert isinstance(expr, Apply)
    subs = [lattice_sets(a, iter_of, is_full) for a in expr.args]
    kind = region(expr.op)
    if kind == "same":
        return subs[0]
    if kind == "universe" and len(subs) == 1:
        return _dedupe(subs[0] + [frozenset()])
    if kind == "general":
        points = _without_full_absent(_dedupe(_general_points(expr.op, subs)), is_full)
        return _checked(points)
    left, right = subs
    both = _product(left, right)
    if kind == "intersection":
        points = both
    elif kind == "left":
        points = both + left
    elif kind == "right":
        points = both + right
    else:
        points = both + left + right
    if kind == "universe":
        points = points + [frozenset()]
    return _checked(_without_full_absent(_dedupe(points), is_full))


def _checked(points: list[frozenset[Iter]]) -> list[frozenset[Iter]]:
    if len(points) > MAX_POINTS:
        raise ScheduleError(f"one loop would have {len(points)} cases (the ways its sparse "
                            f"operands can overlap), more than {MAX_POINTS}; split the "
                            "expression, or store some operands in full")
    return points


def absent_reduction(expr: Sum) -> Const | None:
    """A reduction's value where its body stores nothing, when that is not 0: a
    semiring's reduction skips absent entries, leaving its identity (min-plus: inf)."""
    op = expr.op
    if op.skips_absent and op.identity is not None and not _is_zero(op.identity):
        return Const(op.identity)
    return None


@dataclass
class Lattice:
    """Ordered lattice points (largest first) for one loop variable."""

    points: list[frozenset[Iter]]

    def subpoints(self, point: frozenset[Iter]) -> list[frozenset[Iter]]:
        return [q for q in self.points if q <= point]

    def __str__(self) -> str:
        return " | ".join("{" + ", ".join(sorted(str(i) for i in p)) + "}" for p in self.points)


def build_lattice(expr: Expr, iter_of: Callable[[Operand], Iter | None],
                  is_full: Callable[[Iter], bool]) -> Lattice:
    """Build the lattice and apply the property-based pruning of paper 003 section 4.2."""
    points = lattice_sets(expr, iter_of, is_full)
    if any(not p for p in points):
        points = [p | {UNIVERSE} for p in points]
    points = sorted(_dedupe(points), key=len, reverse=True)
    return Lattice(_without_full_absent(points, is_full))


def choose_iterated(lattice: Lattice, point: frozenset[Iter],
                    can_locate: Callable[[Iter], bool], is_full: Callable[[Iter], bool],
                    ) -> tuple[list[Iter], list[Iter]]:
    """Split a point into iterated and located iterators.

    Locating is only sound for an iterator that never has to drive the loop alone: every
    sub-point must keep at least one iterated iterator (locate only for intersections).
    """
    ranked = sorted(point, key=lambda it: (not is_full(it), can_locate(it), str(it)))
    iterated = [it for it in ranked if not can_locate(it)]
    for sub in lattice.subpoints(point):
        if not (set(sub) & set(iterated)):
            candidates = [it for it in ranked if it in sub]
            iterated.append(candidates[0])
    located = [it for it in ranked if it not in iterated]
    return iterated, located


def substitute_absent(expr: Expr, absent: Callable[[Operand], bool]) -> Expr | None:
    """``expr`` with absent operands replaced by the fill value and simplified.

    Returns None when the result is the fill value everywhere (nothing to compute). Only
    an absent operand is an exact zero that may annihilate: a literal 0 is a value like
    any other, so ``0 * v(i)`` over a stored NaN or inf computes NaN, as IEEE (and
    numpy) say, rather than folding to nothing.
    """
    if isinstance(expr, Operand):
        return None if absent(expr) else expr
    if isinstance(expr, Const):
        return expr
    if isinstance(expr, Sum):
        body = substitute_absent(expr.body, absent)
        if body is None:
            return absent_reduction(expr)
        return Sum(expr.var, body, expr.op, expr.hidden)
    assert isinstance(expr, Apply)
    args = [substitute_absent(a, absent) for a in expr.args]
    kind = region(expr.op)  # absent operands annihilate before constants fold: (A*B) *
    # (A/B) where neither stores an entry is absent, not 0 * (0/0) = NaN
    if kind == "general" and not nonzero_when(expr.op, tuple(a is not None for a in args)):
        return None
    if kind == "same" and args[0] is None:
        return None
    if kind == "intersection" and any(a is None for a in args):
        return None
    if kind == "left" and args[0] is None:
        return None
    if kind == "right" and args[1] is None:
        return None
    if all(a is None or isinstance(a, Const) for a in args):
        value = expr.op.evaluate(*[0.0 if a is None else a.value for a in args])
        return None if _is_zero(value) else Const(value)
    if expr.op.identity is not None and _is_zero(expr.op.identity) and expr.op.arity == 2 \
            and all(expr.op.evaluate(0.0, y) == y for y in _PROBES):  # or(0, 2.5) is 1
        if args[0] is None:
            return args[1]
        if args[1] is None:
            return args[0]
    return Apply(expr.op, tuple(Const(0.0) if a is None else a for a in args))
