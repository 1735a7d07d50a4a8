"""Optimization passes over the loop IR: each decides, with its own legality check,
whether a fast form applies to a loop, and notes it on the loop node (see passes.py)."""

from __future__ import annotations

from ..from_schedule import statement_of
from ..lower_loops import Program, lower
from ..schedule import Nest
from ..types import TensorType
from .passes import Target, optimize


def loop_ir(nests: list[Nest], types: dict[str, TensorType], output: str,
            target: Target | None = None) -> Program:
    """A kernel's loop IR from the scheduler's nests: their concrete notation, lowered,
    with every pass run."""
    return optimize(lower(statement_of(nests, types), types, output), target or Target())
