"""What the compiler asks of a workspace's policy: one object per policy.

A policy is how a workspace keeps the producer's entries until the consumer appends them
to the output (a value per coordinate, appended pairs sorted, a hash table, buckets per
row): a drain algorithm the YAML level language cannot express, so the extension point
is Python. The scheduler, the loop IR (workspace_loops), the emitter (workspace_lower)
and the memory check before a call (llvsparse/calls/workspaces.py) ask the policy object, never
its name; ``llvsparse.register_workspace_policy`` adds one (ir/schedule/workspace_policies.py
holds the shipped ones and the registry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .workspace import WorkspaceKind

if TYPE_CHECKING:
    from .workspace_schedule import WorkspacePlan


class StoreClass(Protocol):
    """A plugin policy's store, as ir/ sees it: a backend class (a subclass of
    backends/llvm/workspace_store.Store) that builds itself for one kernel call from the
    emitter's compiler, the plan and the extents, all opaque here, so that ir/ names
    nothing of the backend, not even for type checkers."""

    def for_plan(self, kc: object, plan: WorkspacePlan, extents: list) -> object: ...


@dataclass(frozen=True)
class WorkspaceBytes:
    """Bytes of the arrays a workspace allocates from the output's extents on every
    call (per thread), checked against the machine's memory before the call: per
    coordinate of the indices it covers, per row (a coordinate of all of them but the
    last) and per coordinate of the last. Arrays sized by the entries produced are
    allocated inside the call (status: no memory when that fails) and count nothing."""

    per_coordinate: int = 0
    per_row: int = 0
    per_column: int = 0


@dataclass(frozen=True, eq=False)
class WorkspacePolicy:
    """A workspace policy (compared by identity: the registry holds one per name).

    ``name``: what ``compile(..., workspace=name)`` takes and ``kernel.concrete`` shows.
    ``store``: the emitter of its storage, a subclass of ``workspace_store.Store`` built by
    its ``for_plan`` (override ``new_store`` for other arguments); None for the shipped
    policies, whose stores the backend knows (ir/ never imports one). ``layout``,
    ``order`` and ``clear``: what the loop IR prints for its allocation (``{vars}``: the
    covered indices), for bringing its entries into the output's order, and for emptying
    it between coordinates of hoisted loops. ``kind``: DENSE when it holds a slot per
    coordinate of the covered indices (the temporary's levels are then full ones).
    ``appends``: the producer appends every product (summed by the drain) instead of
    reducing into its entry. ``counts``: the producer runs twice, first counting each
    row's entries, then placing them. ``always_sorts``: the drain orders the entries even for an
    output that keeps no order (it needs equal coordinates adjacent to sum them)."""

    name: str
    store: StoreClass | None
    layout: str
    order: str
    clear: str
    kind: WorkspaceKind = WorkspaceKind.SPARSE
    appends: bool = False
    always_sorts: bool = False
    counts: bool = False

    def new_store(self, kc: object, plan: WorkspacePlan, extents: list) -> object:
        """The store of one kernel call, allocated at the builder's position (a plugin's;
        the backend builds the shipped policies' stores)."""
        if self.store is None:
            raise TypeError(f"workspace policy {self.name!r} names no store")
        return self.store.for_plan(kc, plan, extents)

    def fixed_bytes(self, itemsize: int) -> WorkspaceBytes:
        """The arrays it allocates from the extents, for values of ``itemsize`` bytes as
        summed (8 or more): none, for a store sized by the entries produced."""
        del itemsize
        return WorkspaceBytes()
