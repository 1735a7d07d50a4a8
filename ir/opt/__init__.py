"""Optimization passes over the loop IR: each decides, with its own legality check,
whether a fast form applies to a loop, and rewrites the loop node with it as data
(``Loop.forms``; ``Loop.other``: the kernel's other form, see passes.py).

Layering (stage 5 of ir/): imports only itself, the stages before it (notation, concrete,
schedule, loops), ir/'s shared top and formats/; backends do not import it."""

from __future__ import annotations

from dataclasses import replace

from ..concrete.statements import Stmt
from ..loops.assembly_phases import assembly_phases
from ..loops.lower import lower
from ..loops.lower_precompute import lower_precomputed
from ..loops.lower_workspace import lower_workspace
from ..loops.nodes import Program
from ..schedule.statement_parts import output_workspace, precomputes_of
from ..types import TensorType
from .passes import (
    Target,
    case_steps,
    gallop,
    optimize,
    prefetch,
    reserve_appends,
    straight_line,
    thread_rows,
)


def loop_ir(statement: Stmt, types: dict[str, TensorType], output: str,
            target: Target | None = None) -> Program:
    """A kernel's loop IR from its concrete statement: lowered, with every pass run (a
    workspace kernel's: only the thread rows' tag, gallop, the steps inside a merge's
    cases, the prefetch, the room reserved for appends and straight-line code, as its
    emitter uses no other fast form), and, for the whole kernel, the
    phases threads may assemble its output in."""
    target = target or Target()
    if output_workspace(statement) is not None:  # without the other passes' fast forms
        program = optimize(lower_workspace(statement, types, output), target,
                           (thread_rows, gallop, case_steps, prefetch, reserve_appends,
                            straight_line))
    elif precomputes_of(statement):  # operand workspaces (precompute_loops)
        program = optimize(lower_precomputed(statement, types, output), target)
    else:
        program = optimize(lower(statement, types, output), target)
    if target.phase != "whole":
        return program
    return replace(program, phases=assembly_phases(program, types))
