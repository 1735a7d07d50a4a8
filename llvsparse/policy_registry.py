"""The workspace policies there are: the four shipped ones and those registered from
Python (``register_workspace_policy``), by name.

A policy is a drain algorithm the YAML level language cannot express (a sort, bucket
counts, a bitmap scan), so a plugin author adds one as a ``WorkspacePolicy`` object
(ir/workspace_policy.py) with a store emitter built on ``backends/llvm/workspace_store.Store``.
The compiler asks the object, never its name. Compiled kernels are cached (in memory
and on disk) under ``policy_key``: a plugin's includes the source of the modules that
define its classes, so an edited policy is compiled again, not served from the cache.
"""

from __future__ import annotations

import hashlib
import inspect
import uuid
from typing import TYPE_CHECKING

import numpy as np
from llvmlite import ir

from .backends.llvm.workspace_bucket import BucketStore
from .backends.llvm.workspace_store import DenseStore, HashStore, SortStore, Store
from .ir.workspace import WorkspaceKind
from .ir.workspace_policy import WorkspaceBytes, WorkspacePolicy

if TYPE_CHECKING:
    from .backends.llvm.codegen import KernelCompiler
    from .ir.workspace_schedule import WorkspacePlan

LIST_AND_MARKER_BYTES = 16  # an int64 marker and an int64 list slot per coordinate
COUNT_BYTES = 8  # a bucket workspace's int64 count per row


class _Dense(WorkspacePolicy):
    """A value, a marker and a list slot per coordinate, allocated on every call."""

    def fixed_bytes(self, itemsize: int) -> WorkspaceBytes:
        return WorkspaceBytes(per_coordinate=itemsize + LIST_AND_MARKER_BYTES)


class _Bucket(WorkspacePolicy):
    """Records keyed by the last index in the output's index type; a count per row and
    a dense accumulator over the last index allocated on every call."""

    def new_store(self, kc: KernelCompiler, plan: WorkspacePlan,
                  extents: list[ir.Value]) -> Store:
        key = ir.IntType(np.dtype(plan.temporary.type.index_dtype).itemsize * 8)
        return BucketStore(kc, extents, key)

    def fixed_bytes(self, itemsize: int) -> WorkspaceBytes:
        return WorkspaceBytes(per_row=COUNT_BYTES,
                              per_column=itemsize + LIST_AND_MARKER_BYTES)


DENSE = _Dense(
    "dense", DenseStore,
    "dense workspace over {vars}: a value and a mark per coordinate, a list of the "
    "touched ones",
    "its touched coordinates, by a bitmap scan or, where they spread, a sort",
    "its touched list (marks of a new run)", kind=WorkspaceKind.DENSE)
HASH = WorkspacePolicy(
    "hash", HashStore,
    "sparse workspace over {vars}: an open-addressing table of (coordinate, value), a "
    "list of its occupied slots",
    "its entries gathered through its list of occupied slots, then sorted by coordinate "
    "(by radix when many)",
    "its list of occupied slots")
SORT = WorkspacePolicy(
    "sort", SortStore,
    "sparse workspace over {vars}: (coordinate, value) pairs appended as produced",
    "its pairs by coordinate (by radix when many), the values of one coordinate summed",
    "its pair count", appends=True, always_sorts=True)
BUCKET = _Bucket(
    "bucket", BucketStore,
    "sparse workspace over {vars}: the producer counts the entries of each row (all but "
    "the last index), then places them in its bucket",
    "its rows in order, each bucket reduced in a dense accumulator over the last index",
    "its buckets freed, its row counts zeroed", appends=True)

SHIPPED = {policy.name: policy for policy in (DENSE, HASH, SORT, BUCKET)}
_PLUGINS: dict[str, tuple[WorkspacePolicy, str]] = {}  # by name: the policy, its cache key


def workspace_policies() -> dict[str, WorkspacePolicy]:
    """Every policy by name, the shipped ones first."""
    return {**SHIPPED, **{name: policy for name, (policy, _) in _PLUGINS.items()}}


def register_workspace_policy(policy: WorkspacePolicy, replace: bool = False
                              ) -> WorkspacePolicy:
    """Make ``policy`` available as ``compile(..., workspace=policy.name)``. A shipped
    name is refused, another plugin's unless ``replace`` (ValueError); a malformed
    policy raises TypeError or ValueError naming what is wrong."""
    if not isinstance(policy, WorkspacePolicy):
        raise TypeError(f"a workspace policy is a WorkspacePolicy, not {type(policy).__name__}")
    name = policy.name
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a workspace policy's name is an identifier, not {name!r}")
    if name in SHIPPED:
        raise ValueError(f"workspace policy {name!r} is shipped with llvsparse: choose "
                         f"another name (taken: {', '.join(map(repr, workspace_policies()))})")
    if name in _PLUGINS and not replace:
        raise ValueError(f"workspace policy {name!r} is already registered: pass "
                         "replace=True to replace it, or choose another name")
    if not (isinstance(policy.store, type) and issubclass(policy.store, Store)):
        raise TypeError(f"workspace policy {name!r}: its store must be a subclass of "
                        f"llvsparse.backends.llvm.workspace_store.Store, not {policy.store!r}")
    if not isinstance(policy.kind, WorkspaceKind):
        raise TypeError(f"workspace policy {name!r}: its kind must be a WorkspaceKind")
    for field in ("layout", "order", "clear"):
        text = getattr(policy, field)
        try:
            text.format(vars="i, j")
        except (AttributeError, IndexError, KeyError, ValueError) as error:
            raise ValueError(f"workspace policy {name!r}: its {field} text {text!r} is "
                             f"not a str.format template over {{vars}} ({error})") from None
    _PLUGINS[name] = (policy, _source_key(policy))
    return policy


def unregister_workspace_policy(name: str) -> None:
    """Remove a registered policy (a KeyError naming the registered ones if none has
    ``name``; shipped ones cannot be removed)."""
    if name not in _PLUGINS:
        raise KeyError(f"no registered workspace policy {name!r} (registered: "
                       f"{', '.join(map(repr, _PLUGINS)) or 'none'})")
    del _PLUGINS[name]


def checked_policy(name: str | None) -> WorkspacePolicy | None:
    """The policy named ``name`` (None: the rule chooses), or a ValueError naming the
    ones there are."""
    if name is None:
        return None
    policy = SHIPPED.get(name) if isinstance(name, str) else None
    if policy is None:
        plugin = _PLUGINS.get(name) if isinstance(name, str) else None
        if plugin is None:
            raise ValueError(f"unknown workspace {name!r}: use one of "
                             f"{', '.join(map(repr, workspace_policies()))} (or None to choose)")
        policy = plugin[0]
    return policy


def policy_key(name: str | None) -> object:
    """What a kernel's cache keys hold for its ``workspace`` argument: the name of a
    shipped policy (the compiler's sources cover its code), a plugin's name with the
    digest of its definition."""
    plugin = _PLUGINS.get(name) if name is not None else None
    return name if plugin is None else (name, plugin[1])


def _source_key(policy: WorkspacePolicy) -> str:
    """The digest of ``policy``'s fields and of the source of every module outside
    llvsparse that defines one of its classes or its store's; where a source cannot be
    read, a fresh random part (its kernels are then never reused by another process)."""
    parts = [repr(policy)]
    modules = {inspect.getmodule(cls) for cls in (*type(policy).__mro__, *policy.store.__mro__)}
    for module in sorted((m for m in modules if m is not None), key=lambda m: m.__name__):
        if module.__name__.partition(".")[0] in ("llvsparse", "builtins"):
            continue
        try:
            parts.append(inspect.getsource(module))
        except (OSError, TypeError):
            parts.append(uuid.uuid4().hex)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
