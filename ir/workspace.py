"""Workspace insertion as a rewrite of concrete index notation (paper 002, section 6.2).

A loop nest whose output receives its entries out of storage order ("scattered", e.g.
Gustavson's SpGEMM runs i,k,j into a row-major compressed C) cannot append to the
output directly. The rewrite puts a temporary between computation and assembly:
``where(consumer, producer)``, the producer reducing into the workspace ``w`` and the
consumer copying ``w`` into the output in its storage order. The rules:

* no workspace when every output level takes random inserts, when the output is an
  unordered coordinate list, or when the loops already produce entries in storage order;
* after hoisting the loops the nest and the output share outermost, a *dense* workspace
  when exactly one output variable follows the reduction variables (a row accumulator);
* otherwise a *sparse* workspace over the remaining output variables.

Code generation does not consume the result yet; the choice is data that can be printed
and tested. Level capabilities decide everything: no level format is named here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..formats.loader import PROPERTY_NAMES, LevelDef
from ..formats.registry import level_formats
from .cin import operands
from .schedule import unordered_append_output
from .statements import Access, Assign, Forall, IndexVar, Stmt, TensorVar, Where, loop_nest
from .types import LevelType, TensorType


class WorkspaceKind(enum.Enum):
    """Which workspace the rule picks (values are enum.auto: a level format may share a name)."""

    NONE = enum.auto()  # the output can be assembled directly
    DENSE = enum.auto()  # one dimension, allocated at its extent
    SPARSE = enum.auto()  # stores only the entries produced
    NOT_APPLICABLE = enum.auto()  # the rule does not cover this statement

    def __str__(self) -> str:
        return self.name.lower().replace("_", " ")


@dataclass(frozen=True)
class WorkspaceChoice:
    """The rule's decision, the statement after it (unchanged unless a workspace was
    inserted), why, and the workspace."""

    kind: WorkspaceKind
    statement: Stmt
    reason: str
    workspace: TensorVar | None = None


def insert_workspace(stmt: Stmt, types: dict[str, TensorType]) -> WorkspaceChoice:
    """Apply paper 002's workspace rule to one loop nest around one assignment."""
    def unchanged(kind: WorkspaceKind, reason: str) -> WorkspaceChoice:
        return WorkspaceChoice(kind, stmt, reason)

    loops, inner = loop_nest(stmt)
    if not isinstance(inner, Assign) or not isinstance(inner.access.tensor, str):
        return unchanged(WorkspaceKind.NOT_APPLICABLE,
                         "not a loop nest around one assignment to an operand")
    name = inner.access.tensor
    if not all(isinstance(ix, IndexVar) for ix in inner.access.indices) or \
            not all(isinstance(loop.index, IndexVar) for loop in loops):
        return unchanged(WorkspaceKind.NOT_APPLICABLE,
                         f"{name} or the loops use computed indices")
    out = types[name]
    if not out.levels:
        return unchanged(WorkspaceKind.NONE, f"{name} is a scalar")
    if all(level.can_insert for level in out.levels):
        return unchanged(WorkspaceKind.NONE, f"every level of {name} takes random inserts")
    if unordered_append_output(out):
        return unchanged(WorkspaceKind.NONE, f"{name} takes appends in any order")
    order = [loop.index.name for loop in loops]
    out_vars = [ix.name for ix in inner.access.indices]
    if order[:len(out_vars)] == out_vars:
        return unchanged(WorkspaceKind.NONE,
                         f"the loops produce {name}'s entries in its storage order")
    hoisted = 0
    while hoisted < len(out_vars) and order[hoisted] == out_vars[hoisted]:
        hoisted += 1
    rest, ws_vars = order[hoisted:], out_vars[hoisted:]
    reductions = [v for v in rest if v not in out_vars]
    dense = len(ws_vars) == 1 and bool(reductions) and rest[-1] == ws_vars[0] \
        and all(v in reductions for v in rest[:-1])
    kind = WorkspaceKind.DENSE if dense else WorkspaceKind.SPARSE
    level = workspace_level(dense)
    if level is None:
        return unchanged(WorkspaceKind.NOT_APPLICABLE,
                         f"no registered level format can hold a {kind} workspace")
    levels = tuple(LevelType(level, level.name, mode,
                             tuple((p, level.properties[p].default) for p in PROPERTY_NAMES))
                   for mode in range(len(ws_vars)))
    ws = TensorVar(_fresh_name(types, inner),
                   TensorType(levels, len(ws_vars), out.dtype, out.index_dtype))
    ws_access = Access(ws, tuple(IndexVar(v) for v in ws_vars))
    producer: Stmt = Assign(ws_access, inner.reduce_op if reductions else None, inner.expr)
    for var in reversed(rest):
        producer = Forall(IndexVar(var), producer)
    consumer: Stmt = Assign(inner.access, None if reductions else inner.reduce_op, ws_access)
    for var in reversed(ws_vars):
        consumer = Forall(IndexVar(var), consumer)
    result: Stmt = Where(consumer, producer, (ws,))
    for loop in reversed(loops[:hoisted]):
        result = Forall(loop.index, result, loop.tags)
    hoist = f" per {', '.join(order[:hoisted])}" if hoisted else ""
    why = (f"the loops {', '.join(order)} produce {name}({', '.join(out_vars)}) out of its "
           f"storage order; a {kind} workspace over {', '.join(ws_vars)}{hoist}")
    return WorkspaceChoice(kind, result, why, ws)


def workspace_level(dense: bool) -> LevelDef | None:
    """A registered level taking random inserts: for a dense workspace one that is full
    and sized by its extent, for a sparse one one that is not full."""
    for _, level in sorted(level_formats().items()):
        if not (level.can_locate and level.can_insert):
            continue
        full = level.properties["full"].default
        if (dense and full and level.sized_by_extent) or (not dense and not full):
            return level
    return None


def _fresh_name(types: dict[str, TensorType], inner: Assign) -> str:
    """``w``, or ``w1``, ``w2``... when an operand already has that name."""
    taken = set(types) | {op.tensor for op in operands(inner.expr)}
    name, k = "w", 0
    while name in taken:
        k += 1
        name = f"w{k}"
    return name
