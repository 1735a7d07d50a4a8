"""Loop orders that follow storage: the constraints each operand's levels put on the
order of its indices' loops, and the order chosen among those they allow."""

from __future__ import annotations

import itertools

from ..concrete.expressions import Operand
from ..errors import ScheduleError
from ..types import TensorType


def order_loops(loop_vars: list[str], exprs_operands: list[Operand],
                types: dict[str, TensorType], bound: set[str],
                before: list[tuple[str, str]] = (), prefer: list[str] = (),
                derived: dict[str, tuple[tuple[str, int], ...]] | None = None,
                sparse_first: bool = False,
                soft: list[tuple[str, str]] = ()) -> list[str]:
    """Topologically order ``loop_vars`` under the storage constraints of the operands.

    An index derived from blocked levels counts as bound once its parts are. Among the
    orders the constraints allow, indices follow each operand's (and ``soft``'s) storage
    order where they can, so memory is walked in the order it is laid out (ELL's slots
    before rows, a row-major dense operand row by row). Then, with ``sparse_first``
    (outputs that take scattered updates), an index some operand must iterate goes before
    one only dense levels index: SpMM and MTTKRP get TACO's i,k,j order. A level that
    can locate may follow a level of a nested sum's index: the sum's loop, run inside,
    locates it at the index bound outside.
    """
    derived = derived or {}
    edges: set[tuple[str, str]] = set(before)
    for op in exprs_operands:
        levels = types[op.tensor].levels
        for k, var in enumerate(op.vars):
            if var not in loop_vars:
                continue
            for earlier in op.vars[:k]:
                parts = [p for p, _ in derived.get(earlier, ()) if p in loop_vars]
                if earlier in derived:
                    if not levels[k].can_locate:
                        edges.update((part, var) for part in parts)
                elif earlier in loop_vars and not levels[k].can_locate:
                    edges.add((earlier, var))
                elif earlier not in loop_vars and earlier not in bound \
                        and not levels[k].can_locate:
                    raise ScheduleError(
                        f"{op.tensor}: level {k} (index {var}) is reached only after index "
                        f"{earlier}, which is bound in an inner loop")
    iterated = {var for op in exprs_operands
                for var, level in zip(op.vars, types[op.tensor].levels)
                if not level.can_locate}
    preferred = set(soft)
    for op in exprs_operands:
        chain = [v for v in op.vars if v in loop_vars]
        preferred.update((a, b) for a, b in itertools.pairwise(chain) if a != b)
    rank = {v: (not (sparse_first and v in iterated),
                prefer.index(v) if v in prefer else len(prefer) + loop_vars.index(v))
            for v in loop_vars}
    remaining = list(loop_vars)
    order: list[str] = []
    while remaining:
        ready = [v for v in remaining
                 if not any(a in remaining and b == v for a, b in edges if a != v)]
        if not ready:
            cycle = ", ".join(sorted(remaining))
            raise ScheduleError(f"the storage orders of the operands conflict over indices "
                                f"{cycle} (operands whose levels store them in opposite orders: "
                                "a row-major A(i,j) with a column-major B(i,j), or with a "
                                "row-major B(j,i)); convert one operand or use an output that "
                                "takes inserts")
        def waiting(var: str) -> int:
            return sum(1 for a, b in preferred if b == var and a in remaining and a != var)

        pick = min(ready, key=lambda v: (waiting(v), rank[v]))
        order.append(pick)
        remaining.remove(pick)
    return order
