"""Scattered outputs get a workspace instead of a refusal (paper 002).

When the operands' storage orders produce an appended output's entries out of its
storage order (Gustavson's SpGEMM walks i, k, j into a row-major compressed C), the
statement is scheduled as if the output took inserts. The loops the output shares with
every nest, outermost, stay around a ``where``: per coordinate of them, the nests reduce
into a temporary over the remaining output indices (the producer), and the consumer
appends the temporary's entries to the output in its storage order. Which temporary
follows paper 002's rule (ir/schedule/workspace.py): dense for one remaining index, sparse
otherwise (``_sparse_policy``: bucket or sort); a caller may name any registered policy
(ir/schedule/workspace_policies.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...formats.loader import PROPERTY_NAMES
from ..concrete.expressions import Assign
from ..concrete.statements import TensorVar
from ..errors import ScheduleError
from ..types import LevelType, TensorType
from .scheduler import Nest, ScatteredOutputError, additive_terms, schedule
from .workspace import WorkspaceKind, workspace_level
from .workspace_policies import BUCKET, DENSE, SORT, checked_policy
from .workspace_policy import WorkspacePolicy


@dataclass(frozen=True)
class WorkspacePlan:
    """The temporary between a scattered nest and its output.

    ``hoisted``: the output's leading indices that stay outside (one consumer run per
    coordinate of them); ``vars``: the output indices the temporary covers, in the
    output's level order."""

    kind: WorkspaceKind
    policy: WorkspacePolicy
    hoisted: tuple[str, ...]
    vars: tuple[str, ...]
    temporary: TensorVar


def schedule_kernel(assign: Assign, types: dict[str, TensorType], split: bool = False,
                    policy: str | None = None, sparse: bool = True,
                    exact_sums: bool = False) -> list[Nest]:
    """``schedule``, with a workspace where the output would be scattered; without
    ``sparse``, the ScatteredOutputError where the rule would choose a sparse one."""
    try:
        return schedule(assign, types, split, exact_sums)
    except ScatteredOutputError as error:
        if split:
            raise
        return _with_workspace(assign, types, checked_policy(policy), error, sparse,
                               exact_sums)
    except ScheduleError as error:
        # A sum of terms whose loop orders differ (A @ B + D into CSR): each term
        # scattered into one workspace row, then appended (paper 002), instead of an
        # inner product over every coordinate of a converted operand.
        out = types[assign.tensor]
        if split or all(level.can_insert for level in out.levels) \
                or len(additive_terms(assign.rhs)) < 2:
            raise
        return _with_workspace(assign, types, checked_policy(policy), error, sparse,
                               exact_sums)


def _with_workspace(assign: Assign, types: dict[str, TensorType], policy: WorkspacePolicy | None,
                    error: ScheduleError, sparse: bool, exact_sums: bool) -> list[Nest]:
    out = types[assign.tensor]
    if assign.derived and not {g[0] for g in assign.guards} >= set(assign.vars) & {
            index for index, _ in assign.derived}:  # blocked levels' indices
        raise error
    stand_in = _insertable(out)
    if stand_in is None:
        raise error
    try:
        nests = schedule(assign, {**types, assign.tensor: stand_in}, exact_sums=exact_sums)
    except ScheduleError:
        raise error from None
    out_vars = assign.vars
    hoisted = 0
    # Nests of several terms that each produce the output in order still meet in a
    # workspace of the last index (B(i) + C(i+j) into CSR: both loop i, j).
    shared = len(out_vars) - (len(nests) > 1)
    while hoisted < shared and all(
            len(n.order) > hoisted and n.order[hoisted] == out_vars[hoisted] for n in nests):
        hoisted += 1
    ws_vars = tuple(out_vars[hoisted:])
    derived = {index for index, _ in assign.derived}  # bound inside the loops
    if not ws_vars or any(not set(ws_vars) - derived <= set(n.order) for n in nests):
        raise error
    kind = WorkspaceKind.DENSE if len(ws_vars) == 1 else WorkspaceKind.SPARSE
    if policy is None and kind is WorkspaceKind.SPARSE and not sparse:
        raise error
    if policy is None:
        policy = DENSE if kind is WorkspaceKind.DENSE else _sparse_policy(out, out_vars, ws_vars)
    kind = policy.kind
    level = workspace_level(kind is WorkspaceKind.DENSE)
    if level is None:
        raise error
    levels = tuple(LevelType(level, level.name, mode, tuple(
        (p, level.properties[p].default) for p in PROPERTY_NAMES)) for mode in range(len(ws_vars)))
    name = "w"
    while name in types:
        name += "_"
    temp = TensorVar(name, TensorType(levels, len(ws_vars), out.dtype, out.index_dtype),
                     policy.name)
    plan = WorkspacePlan(kind, policy, tuple(out_vars[:hoisted]), ws_vars, temp)
    return [Nest(n.assign, n.order, n.body, plan) for n in nests]


def _sparse_policy(out: TensorType, out_vars: tuple[str, ...], ws_vars: tuple[str, ...]
                   ) -> WorkspacePolicy:
    """Bucket where the output already holds a position per row of the workspace (its
    levels of the covered indices but the last are full), sort elsewhere. A sparse
    workspace's rows (its covered indices but the last) are always filled out of order
    (hoisting took every leading index the loops produce in order): bucket counts them
    and places each entry in its row, where sort sorts every entry (outer-product A*A:
    cage10 1.9-2.0x Gustavson's time against 5.5-7.5x; 0.18-0.75x sort's time on 14 real
    matrices). Its count per row, its accumulator over the last index and its pass over
    every row per run are of the output's own size where those levels are full (a CSR
    output with far more rows than products still pays them: 200k rows, 2k products,
    7.7 ms against sort's 0.7); over a level that is not (COO, DCSR) they could exceed
    the output by far."""
    rows = [out.levels[out_vars.index(v)] for v in ws_vars[:-1]]
    return BUCKET if all(level.full for level in rows) else SORT


def _insertable(out: TensorType) -> TensorType | None:
    """``out`` with every level replaced by one that takes random inserts at any
    coordinate (a full level sized by its extent), for scheduling the producer."""
    level = workspace_level(True)
    if level is None:
        return None
    props = tuple((p, level.properties[p].default) for p in PROPERTY_NAMES)
    return TensorType(tuple(LevelType(level, level.name, lv.mode, props) for lv in out.levels),
                      out.order, out.dtype, out.index_dtype)
