"""Iteration lattices (paper 003 section 4, paper 004 section 4).

The region an operator's result differs from its fill value in is derived from how the
operator acts on its operands' fill values and from its declared properties (see
``algebra``), never from its name: an argument whose absence annihilates must be
present, the others may be absent, though not all at once nor in a combination that
leaves the value fixed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ScheduleError
from .algebra import (
    FillOf,
    acts_as_identity,
    annihilates,
    apply_fill,
    evaluate,
    expr_fill,
    is_complement,
    productive,
    same_value,
    sum_fill,
    zero_fill,
)
from .expressions import UNIVERSE_UID, Apply, Const, Expr, Iter, Operand, Sum

# A union of n sparse operands has 2**n points, each a loop case of its own: past this
# many the kernel takes minutes to build (8 sparse vectors into a sparse sum: 255 points,
# 78 s) and is too large to run well.
MAX_POINTS = 128


class KernelTooLargeError(ScheduleError):
    """The loop nest would have more cases than a kernel may hold (legality.MAX_NEST_CASES)."""


UNIVERSE = Iter(UNIVERSE_UID, 0)


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


def lattice_sets(expr: Expr, iter_of: Callable[[Operand], Iter | None],
                 is_full: Callable[[Iter], bool], fill_of: FillOf = zero_fill
                 ) -> list[frozenset[Iter]]:
    """The lattice points of ``expr`` as iterator sets; the empty set stands for 'anywhere'.

    An argument whose absence annihilates the operator (at the operands' fill values)
    must be present in every point; any other may be absent, though not all at once.
    A complement ``!B`` adds both B's point (where it contributes nothing) and the empty
    one, so that B's coordinates are co-iterated and skipped. A sum the user placed is
    a computed value where its body stores nothing (its identity), so it adds the empty
    point too. Points where a full iterator would be absent go at every step, not only
    at the end: a sum of n full vectors otherwise built all 2**n subsets.
    """
    return _sets(expr, iter_of, is_full, fill_of, {})


def _sets(expr: Expr, iter_of, is_full, fill_of: FillOf, memo: dict[int, float | None]
          ) -> list[frozenset[Iter]]:
    if isinstance(expr, Operand):
        it = iter_of(expr)
        if it is None:
            return [frozenset()]
        return [frozenset([it]), frozenset()] if is_complement(expr) else [frozenset([it])]
    if isinstance(expr, Const):
        return [frozenset()]
    if isinstance(expr, Sum):
        body = _sets(expr.body, iter_of, is_full, fill_of, memo)
        if expr.hidden or expr.op.identity is None:
            return body
        return _without_full_absent(_dedupe(body + [frozenset()]), is_full)
    assert isinstance(expr, Apply)
    subs = [_sets(a, iter_of, is_full, fill_of, memo) for a in expr.args]
    fills = tuple(expr_fill(a, fill_of, memo) for a in expr.args)
    whole = apply_fill(expr.op, fills)
    options = []
    for k, points in enumerate(subs):
        choices = [(p, True) for p in points]
        if fills[k] is not None and not annihilates(expr.op, fills, k, whole):
            choices.append((frozenset(), False))  # this argument absent
        options.append(choices)
    points = [frozenset().union(*(p for p, _ in combo))
              for combo in itertools.product(*options)
              if productive(expr.op, fills, tuple(kept for _, kept in combo))]
    points = _without_full_absent(_dedupe(points), is_full)
    if len(points) > MAX_POINTS:
        raise ScheduleError(f"one loop would have {len(points)} cases (the ways its sparse "
                            f"operands can overlap), more than {MAX_POINTS}; split the "
                            "expression, or store some operands in full")
    return points


@dataclass
class Lattice:
    """Ordered lattice points (largest first) for one loop variable."""

    points: list[frozenset[Iter]]

    def subpoints(self, point: frozenset[Iter]) -> list[frozenset[Iter]]:
        return [q for q in self.points if q <= point]

    def __str__(self) -> str:
        return " | ".join("{" + ", ".join(sorted(str(i) for i in p)) + "}" for p in self.points)


def build_lattice(expr: Expr, iter_of: Callable[[Operand], Iter | None],
                  is_full: Callable[[Iter], bool], fill_of: FillOf = zero_fill,
                  absent_adds: float | None = None) -> Lattice:
    """Build the lattice and apply the property-based pruning of paper 003 section 4.2.

    A point whose loop computes nothing in any of its cases goes too: the universe that
    ``2 * sum_j(A(i,j))`` or ``A(i) + 1`` would add only ever finds the result's fill
    there (a point that computes nothing itself but holds one that does, as {A, B} in
    ``A * !B``, stays: its loop skips B's coordinates). ``absent_adds``: what a
    coordinate where ``expr`` is absent contributes, if anything (the loop adds its
    values up and its fill is not 0): then every coordinate counts."""
    points = lattice_sets(expr, iter_of, is_full, fill_of)
    adds = absent_adds is not None
    if adds:
        points = points + [frozenset()]
    universal = any(not p for p in points)
    if universal:
        points = [p | {UNIVERSE} for p in points]
    points = _without_full_absent(sorted(_dedupe(points), key=len, reverse=True), is_full)
    computes = {p: adds or substitute_absent(expr, _absent_from(p, iter_of), fill_of,
                                             _finished_in(p, iter_of)) is not None
                for p in points}
    kept = [p for p in points if any(computes[q] for q in points if q <= p)]
    if universal and frozenset({UNIVERSE}) not in kept:
        # The universe was there for the coordinates no operand stores, and there the
        # result is its fill: A(i,j) + 1 with fill 1 iterates A's entries, not every j.
        kept = [p - {UNIVERSE} for p in kept]
    return Lattice(kept or points[:1])


def _absent_from(point: frozenset[Iter], iter_of) -> Callable[[Operand], bool]:
    def absent(op: Operand) -> bool:
        it = iter_of(op)
        return it is not None and it not in point
    return absent


def _finished_in(point: frozenset[Iter], iter_of) -> Callable[[Operand], bool]:
    def finished(op: Operand) -> bool:
        it = iter_of(op)
        return it is not None and it in point and it.level == len(op.vars) - 1
    return finished


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


def substitute_absent(expr: Expr, absent: Callable[[Operand], bool],
                      fill_of: FillOf = zero_fill,
                      finished: Callable[[Operand], bool] | None = None) -> Expr | None:
    """``expr`` with absent operands replaced by their fill values and simplified.

    Returns None when the result is the expression's fill value there (nothing to
    compute). An absent operand annihilates before constants fold: (A*B) * (A/B) where
    neither stores an entry is absent, not 0 * (0/0) = NaN. A literal is a value like any
    other, so ``0 * v(i)`` over a stored NaN or inf computes NaN, as IEEE (and numpy)
    say. A complement ``!B`` is 1 where B is absent, and absent where ``finished`` says
    B's entry was found at its last level (before that, inner loops decide). A sum the
    user placed whose body is absent is its identity, a computed value: ``s(i) *
    sum_j(A(i,j) * x(j))`` over an empty row is s(i) * 0, NaN for an infinite s(i).
    """
    memo: dict[int, float | None] = {}

    def walk(node: Expr) -> Expr | None:
        if isinstance(node, Operand):
            if is_complement(node):
                if absent(node):
                    return Const(1.0)
                return None if finished is not None and finished(node) else node
            return None if absent(node) else node
        if isinstance(node, Const):
            return node
        if isinstance(node, Sum):
            body = walk(node.body)
            if isinstance(body, Const) and node.op.identity is not None \
                    and same_value(body.value, float(node.op.identity)):
                return body  # a sum of its identity: no loop to run
            if body is not None:
                return Sum(node.var, body, node.op, node.hidden)
            if node.hidden:
                return None
            inner = expr_fill(node.body, fill_of, memo)
            value = sum_fill(node, inner)
            if value is not None and node.op.identity is not None and \
                    same_value(value, float(node.op.identity)):
                return Const(value)
            return Sum(node.var, Const(inner), node.op, node.hidden)  # n times ``inner``
        assert isinstance(node, Apply)
        args = [walk(a) for a in node.args]
        fills = tuple(expr_fill(a, fill_of, memo) for a in node.args)
        if not productive(node.op, fills, tuple(a is not None for a in args)):
            return None  # an absent operand annihilates before constants fold
        if all(a is None or isinstance(a, Const) for a in args):
            value = evaluate(node.op, [f if a is None else a.value
                                       for a, f in zip(args, fills)])
            whole = expr_fill(node, fill_of, memo)
            if any(a is None for a in args) and whole is not None and same_value(value, whole):
                return None
            return Const(value)
        identity = node.op.identity
        if identity is not None and node.op.arity == 2:
            for k in (0, 1):
                if args[k] is None and same_value(fills[k], float(identity)) \
                        and acts_as_identity(node.op, k, float(identity)):
                    return args[1 - k]
        return Apply(node.op, tuple(Const(f) if a is None else a for a, f in zip(args, fills)))

    return walk(expr)
