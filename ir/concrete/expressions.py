"""Concrete index notation: the compiler's own expression and statement forms.

Accesses name one variable per *storage level* (hidden levels get fresh variables that
are summed over), every occurrence of a tensor gets its own id, and reductions are
explicit ``Sum`` nodes. The loops, temporaries and sequences around these expressions
are in ``statements.py``, whose printer gives ``kernel.concrete``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..notation.operators import ADD, MUL, NEG, Operator


@dataclass(frozen=True)
class Operand:
    tensor: str
    vars: tuple[str, ...]  # one per storage level
    uid: int
    complement: bool = False  # !B: 1 where B stores nothing (see lattice.py)

    def __str__(self) -> str:
        return f"{'!' if self.complement else ''}{self.tensor}({','.join(self.vars)})"


# The uid of an index's universe (the range 0..extent), which no operand has.
UNIVERSE_UID = -1


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


@dataclass(frozen=True)
class Const:
    value: float

    def __str__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class Apply:
    op: Operator
    args: tuple[Expr, ...]

    def __str__(self) -> str:
        return text(self)


@dataclass(frozen=True)
class Sum:
    """``op`` folded over ``var``; ``hidden``: over a storage-only or blocked level's
    variable, a sum the frontend adds that no user wrote."""

    var: str
    body: Expr
    op: Operator = ADD
    hidden: bool = False

    def __str__(self) -> str:
        return text(self)


Expr = Operand | Const | Apply | Sum


def text(expr: Expr) -> str:
    """The printed form of ``expr``, built without recursion: a product of 256 factors
    nests 256 deep, past what Python's stack allows a recursive printer."""
    done: list[str] = []
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, ready = stack.pop()
        if isinstance(node, (Operand, Const)):
            done.append(str(node))
        elif not ready:
            stack.append((node, True))
            kids = node.args if isinstance(node, Apply) else (node.body,)
            stack.extend((kid, False) for kid in reversed(kids))
        elif isinstance(node, Sum):
            done[-1] = f"sum_{node.var}({done[-1]})"
        elif node.op.symbol[0].isalpha():  # a function: min(a, b), where(c, a, b)
            parts = done[len(done) - len(node.args):]
            del done[len(done) - len(node.args):]
            done.append(f"{node.op.name}({', '.join(parts)})")
        elif node.op.arity == 1:
            done[-1] = f"{node.op.symbol}{done[-1]}"
        else:
            parts = done[len(done) - len(node.args):]
            del done[len(done) - len(node.args):]
            done.append("(" + f" {node.op.symbol} ".join(parts) + ")")
    return done[0]


@dataclass(frozen=True)
class Assign:
    """``out(vars) = rhs`` or, with ``accumulate``, ``out(vars) += rhs``."""

    tensor: str
    vars: tuple[str, ...]
    rhs: Expr
    accumulate: bool = False
    # Indices computed from blocked levels' variables: (index, ((var, multiplier), ...)).
    derived: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
    # Affine subscripts' derived indices (ir/concrete/affine.py): their constant terms, and the
    # level (tensor, level) whose extent each must fall within.
    offsets: tuple[tuple[str, int], ...] = ()
    guards: tuple[tuple[str, str, int], ...] = ()
    divisors: tuple[tuple[str, int], ...] = ()  # strides inverted: h = (x - r) / 2
    # The loop order a user's schedule asks for (ir/schedule/user_plan.py), outermost first.
    loop_order: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.tensor}({','.join(self.vars)}) {'+=' if self.accumulate else '='} {self.rhs}"


def nodes(expr: Expr) -> Iterator[Expr]:
    """``expr`` and everything under it, parents first, left to right; without
    recursion, since a product of 256 factors nests 256 deep."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, Apply):
            stack.extend(reversed(node.args))
        elif isinstance(node, Sum):
            stack.append(node.body)


def uses(expr: Expr) -> list[Operand]:
    """Every use of an operand in ``expr``, left to right, repeats included."""
    return [node for node in nodes(expr) if isinstance(node, Operand)]


def operands(expr: Expr) -> list[Operand]:
    """The operands of ``expr``, left to right, each once: ``A(i) + A(i)`` reads one
    operand (one iterator) twice."""
    return list(dict.fromkeys(uses(expr)))


def contains_sum(expr: Expr) -> bool:
    return any(isinstance(node, Sum) for node in nodes(expr))


def expr_vars(expr: Expr) -> set[str]:
    """Variables used anywhere in ``expr`` (including summed ones)."""
    return {v for o in operands(expr) for v in o.vars}


def free_vars(expr: Expr) -> set[str]:
    if isinstance(expr, Operand):
        return set(expr.vars)
    if isinstance(expr, Apply):
        return set().union(*(free_vars(a) for a in expr.args)) if expr.args else set()
    if isinstance(expr, Sum):
        return free_vars(expr.body) - {expr.var}
    return set()


def hoist_sums(expr: Expr, exact: bool = False) -> Expr:
    """Move sums outward through products and negation: a * sum_v(b) -> sum_v(a * b).

    This lets hidden-level sums (DIA's diagonal) and nested reductions join the loop
    nest of the enclosing statement instead of needing a temporary. With ``exact``, a
    sum the user placed stays under the factors outside it, which then multiply the
    finished sum: inf * (0 + 1) is inf where inf * 0 + inf * 1 is NaN. Hidden sums still
    move: each of their terms is one stored entry (absent ones annihilate anyway).
    """
    if isinstance(expr, Sum):
        return Sum(expr.var, hoist_sums(expr.body, exact), expr.op, expr.hidden)
    if not isinstance(expr, Apply):
        return expr
    args = tuple(hoist_sums(a, exact) for a in expr.args)
    if expr.op is NEG and isinstance(args[0], Sum) and args[0].op is ADD:  # -max(x) is min(-x)
        inner = args[0]
        return Sum(inner.var, hoist_sums(Apply(NEG, (inner.body,)), exact), inner.op,
                   inner.hidden)
    if expr.op is MUL:
        for k, arg in enumerate(args):
            others = args[:k] + args[k + 1:]
            if isinstance(arg, Sum) and arg.op is ADD and (arg.hidden or not exact) and all(
                    arg.var not in expr_vars(o) for o in others):
                rebuilt = Apply(MUL, others[:k] + (arg.body,) + others[k:])
                return Sum(arg.var, hoist_sums(rebuilt, exact), arg.op, arg.hidden)
    return Apply(expr.op, args)


def peel_sums(expr: Expr) -> tuple[list[str], Expr]:
    """Split ``sum_a sum_b body`` into ([a, b], body)."""
    summed: list[str] = []
    while isinstance(expr, Sum) and expr.op is ADD:
        summed.append(expr.var)
        expr = expr.body
    return summed, expr


def linear_in(expr: Expr, uid: int) -> bool:
    """Whether expr is linear in operand uid (so duplicates may be summed after the fact)."""
    count = [o.uid for o in uses(expr)].count(uid)
    if count != 1:
        return False

    def walk(e: Expr) -> bool:
        if isinstance(e, Operand):
            return e.uid == uid
        if isinstance(e, Sum):
            return e.op.kind == "add" and walk(e.body)
        if isinstance(e, Apply):
            inside = [walk(a) for a in e.args]
            if not any(inside):
                return False
            if e.op.kind in ("add", "sub", "neg", "mul"):
                return True
            return e.op.kind == "div" and inside[0] and not inside[1]
        return False
    return walk(expr)


def indexed_operands(expr: Expr) -> list[Operand]:
    """The uses in ``expr`` of operands with indices (scalar temporaries left out)."""
    return [op for op in operands(expr) if op.vars]


def sums_in(expr: Expr) -> list[Sum]:
    """The outermost sums of ``expr``, left to right."""
    if isinstance(expr, Sum):
        return [expr]
    if isinstance(expr, Apply):
        return [s for a in expr.args for s in sums_in(a)]
    return []


def reduction_loops(expr: Sum) -> tuple[list[str], Expr, Operator]:
    """The variables a reduction's loops run over together, its body and its operator:
    a sum's nested sums, one index of any other reduction (folded one at a time, each
    with its own fill of missed coordinates)."""
    if expr.op is not ADD:
        return [expr.var], expr.body, expr.op
    vars_: list[str] = []
    while isinstance(expr, Sum) and expr.op is ADD:
        vars_.append(expr.var)
        expr = expr.body
    return vars_, expr, ADD


def sum_operator(expr: Expr) -> Operator | None:
    return reduction_loops(expr)[2] if isinstance(expr, Sum) else None


def summed_vars(expr: Expr) -> frozenset[str]:
    return frozenset(reduction_loops(expr)[0]) if isinstance(expr, Sum) else frozenset()


def replaced_in(expr: Expr, old: Expr, new: Expr) -> Expr:
    """``expr`` with the subexpression ``old`` (where it is an argument) ``new``."""
    if expr == old:
        return new
    if isinstance(expr, Apply):
        return Apply(expr.op, tuple(replaced_in(a, old, new) for a in expr.args))
    return expr
