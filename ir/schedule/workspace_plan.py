"""The plan of an output's workspace: the temporary a scattered nest reduces into, and
the loops it is hoisted out of (ir/schedule/workspace_schedule.py chooses it)."""

from __future__ import annotations

from dataclasses import dataclass

from ..concrete.statements import TensorVar
from .workspace import WorkspaceKind
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
