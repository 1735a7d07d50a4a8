"""Scattered outputs get a workspace instead of a refusal (paper 002).

When the operands' storage orders produce an appended output's entries out of its
storage order (Gustavson's SpGEMM walks i, k, j into a row-major compressed C), the
statement is scheduled as if the output took inserts. The loops the output shares with
every nest, outermost, stay around a ``where``: per coordinate of them, the nests reduce
into a temporary over the remaining output indices (the producer), and the consumer
appends the temporary's entries to the output in its storage order. Which temporary
follows paper 002's rule (ir/workspace.py): dense for one remaining index, sparse
otherwise; a caller may name the policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..formats.loader import PROPERTY_NAMES
from .cin import Assign
from .schedule import Nest, ScatteredOutputError, ScheduleError, schedule
from .statements import TensorVar
from .types import LevelType, TensorType
from .workspace import WorkspaceKind, workspace_level

# Workspace policies a caller may name: a dense array with a list of touched
# coordinates, a hash table, or a list of coordinates appended then sorted.
POLICIES = ("dense", "hash", "sort")


@dataclass(frozen=True)
class WorkspacePlan:
    """The temporary between a scattered nest and its output.

    ``hoisted``: the output's leading indices that stay outside (one consumer run per
    coordinate of them); ``vars``: the output indices the temporary covers, in the
    output's level order; ``policy``: one of POLICIES."""

    kind: WorkspaceKind
    policy: str
    hoisted: tuple[str, ...]
    vars: tuple[str, ...]
    temporary: TensorVar


def checked_policy(policy: str | None) -> str | None:
    """``policy``, or a ValueError naming the ones there are."""
    if policy is not None and policy not in POLICIES:
        raise ValueError(f"unknown workspace {policy!r}: use one of "
                         f"{', '.join(repr(p) for p in POLICIES)} (or None to choose)")
    return policy


def schedule_kernel(assign: Assign, types: dict[str, TensorType], split: bool = False,
                    policy: str | None = None) -> list[Nest]:
    """``schedule``, with a workspace where the output would be scattered."""
    try:
        return schedule(assign, types, split)
    except ScatteredOutputError as error:
        if split:
            raise
        return _with_workspace(assign, types, checked_policy(policy), error)


def _with_workspace(assign: Assign, types: dict[str, TensorType], policy: str | None,
                    error: ScheduleError) -> list[Nest]:
    out = types[assign.tensor]
    if assign.derived:
        raise error
    stand_in = _insertable(out)
    if stand_in is None:
        raise error
    try:
        nests = schedule(assign, {**types, assign.tensor: stand_in})
    except ScheduleError:
        raise error from None
    out_vars = assign.vars
    hoisted = 0
    while hoisted < len(out_vars) and all(
            len(n.order) > hoisted and n.order[hoisted] == out_vars[hoisted] for n in nests):
        hoisted += 1
    ws_vars = tuple(out_vars[hoisted:])
    if not ws_vars or any(not set(ws_vars) <= set(n.order) for n in nests):
        raise error
    kind = WorkspaceKind.DENSE if len(ws_vars) == 1 else WorkspaceKind.SPARSE
    if policy is None:
        policy = "dense" if kind is WorkspaceKind.DENSE else "sort"
    kind = WorkspaceKind.DENSE if policy == "dense" else WorkspaceKind.SPARSE
    level = workspace_level(kind is WorkspaceKind.DENSE)
    if level is None:
        raise error
    levels = tuple(LevelType(level, level.name, mode, tuple(
        (p, level.properties[p].default) for p in PROPERTY_NAMES)) for mode in range(len(ws_vars)))
    name = "w"
    while name in types:
        name += "_"
    temp = TensorVar(name, TensorType(levels, len(ws_vars), out.dtype, out.index_dtype))
    plan = WorkspacePlan(kind, policy, tuple(out_vars[:hoisted]), ws_vars, temp)
    return [Nest(n.assign, n.order, n.body, plan) for n in nests]


def _insertable(out: TensorType) -> TensorType | None:
    """``out`` with every level replaced by one that takes random inserts at any
    coordinate (a full level sized by its extent), for scheduling the producer."""
    level = workspace_level(True)
    if level is None:
        return None
    props = tuple((p, level.properties[p].default) for p in PROPERTY_NAMES)
    return TensorType(tuple(LevelType(level, level.name, lv.mode, props) for lv in out.levels),
                      out.order, out.dtype, out.index_dtype)
