"""What code generation needs of each nest of a kernel beside its loops: the facts of
its statement (``loops.Statement``), read off the parts of the scheduled statement."""

from __future__ import annotations

from ..concrete.expressions import operands
from ..schedule.statement_parts import Part
from .nodes import Statement


def statement_facts(parts: list[Part]) -> tuple[Statement, ...]:
    """What code generation needs of each nest beside its loops (loops.Statement)."""
    return tuple(Statement(p.assign.vars, p.order, tuple(operands(p.body)),
                           p.assign.accumulate, p.reduce_op, p.precomputes, p.workspace)
                 for p in parts)
