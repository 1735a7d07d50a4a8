"""Index notation over a semiring: (+, *) replaced by (plus, times), as einsum's
``semiring=`` asks (``("min", "+")``: shortest paths, ``("or", "and")``: reachability).

Each product becomes ``times`` and each sum a reduction by ``plus``, both marked so that
an entry a tensor does not store is the semiring's zero (``plus``'s identity) rather
than 0 (see ``operators.semiring``).
"""

from __future__ import annotations

from llvsparse.ir.notation import syntax as nt
from llvsparse.ir.notation.operators import ADD, MUL
from llvsparse.notation.expr_api import semiring


def semiring_assignment(assignment: nt.Assignment, plus: object, times: object
                        ) -> nt.Assignment:
    """``assignment`` (products and sums only, as einsum writes them) over the
    semiring (``plus``, ``times``), given by name or operator."""
    plus_op, times_op = semiring(plus, times)  # type: ignore[arg-type]

    def convert(expr: nt.Expr) -> nt.Expr:
        if isinstance(expr, nt.Call):
            if expr.op is not MUL:
                raise ValueError(f"a semiring replaces products and sums only, not "
                                 f"{expr.op.name}")
            return nt.Call(times_op, tuple(convert(a) for a in expr.args))
        if isinstance(expr, nt.Reduction):
            if expr.op is not ADD:
                raise ValueError(f"a semiring replaces sums only, not {expr.op.name}")
            return nt.Reduction(plus_op, expr.var, convert(expr.body), expr.hidden)
        return expr

    return nt.Assignment(assignment.lhs, convert(assignment.rhs))
