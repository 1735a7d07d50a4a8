"""Concrete index notation: the compiler's own expression and statement forms.

Accesses name one variable per *storage level* (hidden levels get fresh variables that
are summed over), every occurrence of a tensor gets its own id, and reductions are
explicit ``Sum`` nodes. The loops, temporaries and sequences around these expressions
are in ``statements.py``, whose printer gives ``kernel.concrete``.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvsparse.operators import ADD, MUL, NEG, Operator


@dataclass(frozen=True)
class Operand:
    tensor: str
    vars: tuple[str, ...]  # one per storage level
    uid: int

    def __str__(self) -> str:
        return f"{self.tensor}({','.join(self.vars)})"


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
        if self.op.arity == 1:
            return f"{self.op.symbol}{self.args[0]}"
        return "(" + f" {self.op.symbol} ".join(str(a) for a in self.args) + ")"


@dataclass(frozen=True)
class Sum:
    var: str
    body: Expr
    op: Operator = ADD

    def __str__(self) -> str:
        return f"sum_{self.var}({self.body})"


Expr = Operand | Const | Apply | Sum


@dataclass(frozen=True)
class Assign:
    """``out(vars) = rhs`` or, with ``accumulate``, ``out(vars) += rhs``."""

    tensor: str
    vars: tuple[str, ...]
    rhs: Expr
    accumulate: bool = False
    # Indices computed from blocked levels' variables: (index, ((var, multiplier), ...)).
    derived: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()

    def __str__(self) -> str:
        return f"{self.tensor}({','.join(self.vars)}) {'+=' if self.accumulate else '='} {self.rhs}"


def operands(expr: Expr) -> list[Operand]:
    """All operands in ``expr``, left to right."""
    if isinstance(expr, Operand):
        return [expr]
    if isinstance(expr, Apply):
        return [o for a in expr.args for o in operands(a)]
    if isinstance(expr, Sum):
        return operands(expr.body)
    return []


def contains_sum(expr: Expr) -> bool:
    if isinstance(expr, Sum):
        return True
    return isinstance(expr, Apply) and any(contains_sum(a) for a in expr.args)


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


def hoist_sums(expr: Expr) -> Expr:
    """Move sums outward through products and negation: a * sum_v(b) -> sum_v(a * b).

    This lets hidden-level sums (DIA's diagonal) and nested reductions join the loop
    nest of the enclosing statement instead of needing a temporary.
    """
    if isinstance(expr, Sum):
        return Sum(expr.var, hoist_sums(expr.body), expr.op)
    if not isinstance(expr, Apply):
        return expr
    args = tuple(hoist_sums(a) for a in expr.args)
    if expr.op is NEG and isinstance(args[0], Sum):
        inner = args[0]
        return Sum(inner.var, hoist_sums(Apply(NEG, (inner.body,))), inner.op)
    if expr.op is MUL:
        for k, arg in enumerate(args):
            others = args[:k] + args[k + 1:]
            if isinstance(arg, Sum) and arg.op is ADD and all(
                    arg.var not in expr_vars(o) for o in others):
                rebuilt = Apply(MUL, others[:k] + (arg.body,) + others[k:])
                return Sum(arg.var, hoist_sums(rebuilt), arg.op)
    return Apply(expr.op, args)


def peel_sums(expr: Expr) -> tuple[list[str], Expr]:
    """Split ``sum_a sum_b body`` into ([a, b], body)."""
    summed: list[str] = []
    while isinstance(expr, Sum) and expr.op is ADD:
        summed.append(expr.var)
        expr = expr.body
    return summed, expr
