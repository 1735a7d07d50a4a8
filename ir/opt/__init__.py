"""Optimization passes over the loop IR: each decides, with its own legality check,
whether a fast form applies to a loop, and rewrites the loop node with it as data
(``Loop.forms``; ``Loop.other``: the kernel's other form, see passes.py).

Layering (stage 5 of ir/): imports only itself, the stages before it (notation, concrete,
schedule, loops), ir/'s shared top and formats/; backends do not import it."""

from __future__ import annotations

from dataclasses import replace

from ..loops.assembly_phases import assembly_phases
from ..loops.from_schedule import statement_of
from ..loops.lower import lower
from ..loops.lower_precompute import lower_precomputed
from ..loops.lower_workspace import lower_workspace
from ..loops.nodes import Program
from ..schedule.scheduler import Nest
from ..types import TensorType
from .passes import Target, gallop, optimize, prefetch, thread_rows


def loop_ir(nests: list[Nest], types: dict[str, TensorType], output: str,
            target: Target | None = None) -> Program:
    """A kernel's loop IR from the scheduler's nests: their concrete notation, lowered,
    with every pass run (a workspace kernel's: only the thread rows' tag and the
    prefetch, as its emitter uses no other fast form), and, for the whole kernel, the
    phases threads may assemble its output in."""
    statement = statement_of(nests, types)
    plan = nests[0].workspace if nests else None
    target = target or Target()
    if plan is not None:  # emitted without the other passes' fast forms (workspace_lower)
        program = optimize(lower_workspace(statement, types, output, plan, nests), target,
                           (thread_rows, gallop, prefetch))
    elif any(n.precomputes for n in nests):  # operand workspaces (precompute_loops)
        program = optimize(lower_precomputed(statement, types, output, nests), target)
    else:
        program = optimize(lower(statement, types, output, nests), target)
    if target.phase != "whole":
        return program
    return replace(program, phases=assembly_phases(program, types))
