"""The shipped workspace policies and the registry of every policy by name.

The compiler asks a policy object (ir/schedule/workspace_policy.py), never its name; these are
the four llvsparse ships (their store emitters are the backend's, which knows them by
name) and the ones ``llvsparse.register_workspace_policy`` adds (llvsparse/kernel/policy_registry.py
checks a plugin and records it here). Pure data: ir/ never imports a backend.
"""

from __future__ import annotations

from .workspace import WorkspaceKind
from .workspace_policy import WorkspaceBytes, WorkspacePolicy

LIST_AND_MARKER_BYTES = 16  # an int64 marker and an int64 list slot per coordinate
COUNT_BYTES = 8  # a bucket workspace's int64 count per row


class _Dense(WorkspacePolicy):
    """A value, a marker and a list slot per coordinate, allocated on every call."""

    def fixed_bytes(self, itemsize: int) -> WorkspaceBytes:
        return WorkspaceBytes(per_coordinate=itemsize + LIST_AND_MARKER_BYTES)


class _Bucket(WorkspacePolicy):
    """Records keyed by the last index in the output's index type; a count per row and
    a dense accumulator over the last index allocated on every call."""

    def fixed_bytes(self, itemsize: int) -> WorkspaceBytes:
        return WorkspaceBytes(per_row=COUNT_BYTES,
                              per_column=itemsize + LIST_AND_MARKER_BYTES)


DENSE = _Dense(
    "dense", None,
    "dense workspace over {vars}: a value and a mark per coordinate, a list of the "
    "touched ones",
    "its touched coordinates, by a scan of its marks or a bitmap or, where they are "
    "few or spread, a sort",
    "its touched list (marks of a new run)", kind=WorkspaceKind.DENSE)
HASH = WorkspacePolicy(
    "hash", None,
    "sparse workspace over {vars}: an open-addressing table of (coordinate, value), a "
    "list of its occupied slots",
    "its entries gathered through its list of occupied slots, then sorted by coordinate "
    "(by radix when many)",
    "its list of occupied slots")
SORT = WorkspacePolicy(
    "sort", None,
    "sparse workspace over {vars}: (coordinate, value) pairs appended as produced",
    "its pairs by coordinate (by radix when many), the values of one coordinate summed",
    "its pair count", appends=True, always_sorts=True)
BUCKET = _Bucket(
    "bucket", None,
    "sparse workspace over {vars}: the producer counts the entries of each row (all but "
    "the last index), then places them in its bucket",
    "its rows in order, each bucket reduced in a dense accumulator over the last index",
    "its buckets freed, its row counts zeroed", appends=True, counts=True)

SHIPPED = {policy.name: policy for policy in (DENSE, HASH, SORT, BUCKET)}
PLUGINS: dict[str, tuple[WorkspacePolicy, str]] = {}  # by name: the policy, its cache key


def workspace_policies() -> dict[str, WorkspacePolicy]:
    """Every policy by name, the shipped ones first."""
    return {**SHIPPED, **{name: policy for name, (policy, _) in PLUGINS.items()}}


def checked_policy(name: str | None) -> WorkspacePolicy | None:
    """The policy named ``name`` (None: the rule chooses), or a ValueError naming the
    ones there are."""
    if name is None:
        return None
    policy = SHIPPED.get(name) if isinstance(name, str) else None
    if policy is None:
        plugin = PLUGINS.get(name) if isinstance(name, str) else None
        if plugin is None:
            raise ValueError(f"unknown workspace {name!r}: use one of "
                             f"{', '.join(map(repr, workspace_policies()))} (or None to choose)")
        policy = plugin[0]
    return policy


def policy_key(name: str | None) -> object:
    """What a kernel's cache keys hold for its ``workspace`` argument: the name of a
    shipped policy (the compiler's sources cover its code), a plugin's name with the
    digest of its definition."""
    plugin = PLUGINS.get(name) if name is not None else None
    return name if plugin is None else (name, plugin[1])


