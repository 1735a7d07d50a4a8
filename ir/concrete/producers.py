"""A statement with scalar temporaries read back as one expression.

Lowering needs, for a ``where`` whose producers fill scalar temporaries, the expression
the consumer computes with each temporary replaced by the sum that fills it (its
lattice is built from that), and each temporary's producer (lowered on its own).
"""

from __future__ import annotations

from .expressions import Apply, Operand, Sum
from .expressions import Expr as CinExpr
from .statements import Access, Assign, Stmt, Where, loop_nest, sequence_parts


def full_expr(stmt: Stmt) -> tuple[CinExpr, dict[str, tuple[CinExpr, Stmt]]]:
    """The expression an assignment computes with each temporary replaced by the sum
    that fills it, and each temporary's (sum, producer)."""
    if isinstance(stmt, Assign):
        return _as_cin(stmt.expr), {}
    if not isinstance(stmt, Where) or any(t.type.levels for t in stmt.temporaries):
        raise ValueError("a statement through a workspace is lowered by "
                         "workspace_loops.lower_workspace, not as scalar temporaries")
    temps: dict[str, tuple[CinExpr, Stmt]] = {}
    for producer in sequence_parts(stmt.producer):
        loops, inner = loop_nest(producer)
        body, nested = full_expr(inner)
        temps.update(nested)
        assign = inner if isinstance(inner, Assign) else assign_of(inner)
        for forall in reversed(loops):
            body = Sum(forall.index.name, body, assign.reduce_op)
        temps[assign.access.name] = (body, producer)
    consumer, nested = full_expr(stmt.consumer)
    temps.update(nested)
    return _with_sums(consumer, {n: s for n, (s, _) in temps.items()}), temps


def _with_sums(expr: CinExpr, sums: dict[str, CinExpr]) -> CinExpr:
    """``expr`` with each temporary's placeholder replaced by the sum filling it."""
    if isinstance(expr, Operand) and not expr.vars and expr.tensor in sums:
        return sums[expr.tensor]
    if isinstance(expr, Apply):
        return Apply(expr.op, tuple(_with_sums(a, sums) for a in expr.args))
    return expr


def assign_of(stmt: Stmt) -> Assign:
    """The assignment at the bottom of ``stmt``'s loops and consumers."""
    while not isinstance(stmt, Assign):
        stmt = stmt.consumer if isinstance(stmt, Where) else loop_nest(stmt)[1]
    return stmt


def _as_cin(expr) -> CinExpr:
    """A statement expression as a compiler expression: a temporary's access becomes a
    placeholder operand with no levels (present everywhere)."""
    if isinstance(expr, Access):
        return Operand(expr.name, (), -1)
    if isinstance(expr, Apply):
        return Apply(expr.op, tuple(_as_cin(a) for a in expr.args))
    return expr
