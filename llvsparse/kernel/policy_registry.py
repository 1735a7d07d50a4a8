"""Registering workspace policies from Python (``register_workspace_policy``): the
registry itself and the four shipped policies are ir/schedule/workspace_policies.py's.

A policy is a drain algorithm the YAML level language cannot express (a sort, bucket
counts, a bitmap scan), so a plugin author adds one as a ``WorkspacePolicy`` object
(ir/schedule/workspace_policy.py) with a store emitter built on
``backends/llvm/workspace_store.Store``.
The compiler asks the object, never its name. Compiled kernels are cached (in memory
and on disk) under ``policy_key``: a plugin's includes the source of the modules that
define its classes, so an edited policy is compiled again, not served from the cache.
"""

from __future__ import annotations

import hashlib
import inspect
import uuid

from ..backends.llvm.workspace_store import Store
from ..ir.schedule.workspace import WorkspaceKind
from ..ir.schedule.workspace_policies import (
    PLUGINS,
    SHIPPED,
    checked_policy,
    policy_key,
    workspace_policies,
)
from ..ir.schedule.workspace_policy import WorkspacePolicy

__all__ = ["checked_policy", "policy_key", "register_workspace_policy",
           "unregister_workspace_policy", "workspace_policies"]


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
    if name in PLUGINS and not replace:
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
    PLUGINS[name] = (policy, _source_key(policy))
    return policy


def unregister_workspace_policy(name: str) -> None:
    """Remove a registered policy (a KeyError naming the registered ones if none has
    ``name``; shipped ones cannot be removed)."""
    if name not in PLUGINS:
        raise KeyError(f"no registered workspace policy {name!r} (registered: "
                       f"{', '.join(map(repr, PLUGINS)) or 'none'})")
    del PLUGINS[name]


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
