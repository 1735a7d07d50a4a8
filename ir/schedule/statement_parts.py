"""A kernel's concrete statement read back as the loop nests lowering walks.

The statement says everything the scheduler chose (ir/schedule/rewrites.py builds it): each
nest's loop order is its ``forall``s (through the ``where``s of operand workspaces, whose
temporaries carry their plans; a sum workspace's summed loops run in its producer), the
output's workspace is a ``where`` whose temporary names its policy, under the loops it
is hoisted out of, and each nest's assignment carries its ``Source`` (the statement or
split term, the expression with its sums as written). This reads those back, one
``Part`` per nest, in the order the kernel runs them, so that lowering, the kernel's
metadata and the rules that plan on a schedule read the statement alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..concrete.expressions import Assign as CinAssign
from ..concrete.expressions import Expr as CinExpr
from ..concrete.statements import Assign, Forall, Precompute, Stmt, Where, loop_nest, sequence_parts
from ..notation.operators import ADD, Operator
from .workspace_plan import WorkspacePlan
from .workspace_policies import checked_policy


@dataclass(frozen=True)
class Part:
    """One loop nest of a statement: its assignment's source, its loop order (outermost
    first, the workspace's hoisted loops included), the expression its loops compute,
    the output's workspace, the operand workspaces it reads through, and the operator a
    scattered reduction folds the output with (None: written or added to)."""

    assign: CinAssign
    order: tuple[str, ...]
    body: CinExpr
    workspace: WorkspacePlan | None = None
    precomputes: tuple[Precompute, ...] = ()
    reduce_op: Operator | None = None


def output_workspace(stmt: Stmt) -> WorkspacePlan | None:
    """The plan of the output's workspace, where ``stmt`` reads the output through one:
    ``forall(hoisted, where(forall(vars, out = w(vars)), producers))``."""
    hoisted, inner = loop_nest(stmt)
    if not isinstance(inner, Where):
        return None
    temp = next((t for t in inner.temporaries if t.policy), None)
    if temp is None:
        return None
    policy = checked_policy(temp.policy)
    assert policy is not None
    covered = tuple(f.index.name for f in loop_nest(inner.consumer)[0])
    return WorkspacePlan(policy.kind, policy, tuple(f.index.name for f in hoisted), covered,
                         temp)


def parts_of(stmt: Stmt) -> list[Part]:
    """``stmt``'s loop nests, in the order they run."""
    plan = output_workspace(stmt)
    if plan is None:
        return [_part(part, (), None) for part in sequence_parts(stmt)]
    where = loop_nest(stmt)[1]
    assert isinstance(where, Where)
    return [_part(producer, plan.hoisted, plan) for producer in sequence_parts(where.producer)]


def _part(stmt: Stmt, outer: tuple[str, ...], workspace: WorkspacePlan | None) -> Part:
    order = list(outer)
    plans: list[Precompute] = []
    while True:
        if isinstance(stmt, Forall):
            order.append(stmt.index.name)
            stmt = stmt.body
            continue
        copies = [t.copies for t in stmt.temporaries if t.copies is not None] \
            if isinstance(stmt, Where) else []
        if not copies:
            break
        plans += copies
        order += [v for p in copies if p.expr is not None for v in p.summed]
        stmt = stmt.consumer
    assign = _assign_of(stmt)
    if assign.source is None:
        raise ValueError(f"the assignment {assign.access} is no scheduled nest's: its "
                         "statement was not built by the scheduler")
    folds = assign.reduce_op if assign.reduce_op not in (None, ADD) else None
    return Part(assign.source.assign, tuple(order), assign.source.body, workspace,
                tuple(sorted(plans, key=lambda p: p.replacement.uid)), folds)


def _assign_of(stmt: Stmt) -> Assign:
    """The assignment under a nest's loops, through its scalar temporaries' ``where``."""
    while not isinstance(stmt, Assign):
        if not isinstance(stmt, Where):
            raise TypeError("a loop nest ends in one assignment (or a where reading "
                             "scalar temporaries)")
        stmt = stmt.consumer
    return stmt


def precomputes_of(stmt: Stmt) -> tuple[Precompute, ...]:
    """Every operand workspace of ``stmt``'s nests, in the order they were planned."""
    return tuple(p for part in parts_of(stmt) for p in part.precomputes)
