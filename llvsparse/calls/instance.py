"""A kernel specialized to dtypes: what the in-memory and disk caches hold."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..backends.cpu import JitKernel
from ..ir.loops.nodes import Program
from ..ir.types import TensorType
from ..tensors.describe import instance_repr
from ..tensors.format import Format


@dataclass
class Instance:
    """A kernel specialized to dtypes: its statements and machine code."""

    types: dict[str, TensorType]
    concrete: str  # the scheduled statements, one per line
    jit: JitKernel
    dtype: str
    conversions: dict[str, Format]  # operands converted on each call, and to what
    lattices: str
    arg_order: list[str]
    parallel_mode: int | None = None  # output mode whose rows threads may split
    initializes_output: bool = False  # the kernel sets every entry of its dense output
    # A dense workspace: [its name, the output modes it covers, bytes per coordinate],
    # checked against memory before each call (see workspaces.check_workspace).
    workspace: list | None = None
    program: Callable[[], Program] | None = None  # its loop IR (None: loaded from disk)
    # Operand workspaces: [name, operand, its mode, bytes per coordinate] each, checked
    # against memory before each call (see workspaces.check_precomputes).
    precomputes: list | None = None
    # Notes of its loops that have an other form (ir/opt/passes.py OTHER_FORMS), which the
    # autoscheduler reads (auto_choice.py); None: unknown (an entry of an older version).
    other_forms: tuple[str, ...] | None = None

    __repr__ = instance_repr
