"""``schedule="search"``: time the ways a kernel may run on the actual operands once, and
keep the winner on disk per kernel and operand signature.

The candidates are the choices the autoscheduler makes today (auto_choice.py): a
scattered output's workspace policy, the loops' first or other form, equal rows or equal
entries per thread. Each candidate is bound once (its picks fixed through
``auto_choice.FORCED``), then all are called in interleaved rounds and the lowest median
wins. The winner is written as JSON under the disk cache's folder (cache.py), keyed by the
kernel's disk key and the operands' signature (shapes, dtypes, stored entries and their
spread over rows), so the next process, or the next compile, binds it without timing.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..caching import disk as disk_cache
from ..ir.schedule.workspace_policies import SHIPPED
from . import auto_choice
from .binding import BoundCall

ROUNDS = 5  # interleaved calls per candidate; the median counts
_LOCK = threading.Lock()  # auto_choice.FORCED is process-wide while a candidate binds


@dataclass(frozen=True)
class Candidate:
    """One way to run: ``workspace`` (None: the kernel's own), ``form`` ("first" or
    "other") and ``split`` ("rows", "entries", or None on one thread)."""

    workspace: str | None
    form: str
    split: str | None


@dataclass(frozen=True)
class SearchResult:
    """The winner, each candidate's median seconds (empty when read from disk), and
    whether it came from the disk."""

    winner: Candidate
    seconds: dict[Candidate, float]
    cached: bool


def search(kernel, *, threads: int | None = None, rounds: int = ROUNDS,
           **tensors) -> SearchResult:
    """The fastest candidate for ``kernel`` on ``tensors``, from the disk when a search
    on operands of the same signature ran before."""
    base = _bind(kernel, {"off": True}, threads, tensors)
    path = _entry_path(kernel, base)
    stored = _read(path)
    if stored is not None:
        return SearchResult(stored, {}, True)
    bindings = {}
    for candidate in candidates(kernel, base):
        bound = _bind(kernel, _fixed(candidate), threads, tensors)
        if bound.probe.forms == (candidate.form,):  # a policy's kernel may have one form
            bindings[candidate] = bound
    times: dict[Candidate, list[float]] = {c: [] for c in bindings}
    for call in bindings.values():
        call()  # warm: fresh buffers, the other form's compile
    for _ in range(max(rounds, 1)):
        for candidate, call in bindings.items():
            start = time.perf_counter()
            call()
            times[candidate].append(time.perf_counter() - start)
    seconds = {c: float(np.median(t)) for c, t in times.items()}
    winner = min(seconds, key=seconds.__getitem__)
    _write(path, winner, seconds)
    return SearchResult(winner, seconds, False)


def bind_searched(kernel, *, threads: int | None = None, **tensors) -> BoundCall:
    """``kernel`` bound to ``tensors`` the way ``search`` found fastest."""
    winner = search(kernel, threads=threads, **tensors).winner
    return _bind(kernel, _fixed(winner), threads, tensors)


def candidates(kernel, base: BoundCall) -> list[Candidate]:
    """The ways ``kernel``, bound as ``base`` with the model off, may run (every shipped
    workspace policy where the user named none)."""
    inst = base.inst
    policies: tuple[str | None, ...] = (None,)
    if inst.workspace and kernel.workspace is None:
        policies = tuple(SHIPPED)
    forms = ("first", "other") if inst.jit.has_other else ("first",)
    splits = ("rows", "entries") if base.plan is not None else (None,)
    return [Candidate(*way) for way in itertools.product(policies, forms, splits)]


def _fixed(candidate: Candidate) -> dict[str, object]:
    fixed = {"form": candidate.form}
    if candidate.workspace is not None:
        fixed["workspace"] = candidate.workspace
    if candidate.split is not None:
        fixed["split"] = candidate.split
    return fixed


def _bind(kernel, fixed: dict[str, object], threads: int | None, tensors: dict) -> BoundCall:
    with _LOCK, _forced(fixed):
        return kernel.bind(threads=threads, **tensors)


@contextlib.contextmanager
def _forced(fixed: dict[str, object]) -> Iterator[None]:
    saved = dict(auto_choice.FORCED)
    auto_choice.FORCED.clear()
    auto_choice.FORCED.update(fixed)
    try:
        yield
    finally:
        auto_choice.FORCED.clear()
        auto_choice.FORCED.update(saved)


def signature(tensors: dict) -> tuple:
    """What a search's winner is kept for: each operand's name, shape, dtype and the
    statistics the model reads (stored entries, their spread over rows)."""
    parts = []
    for name in sorted(tensors):
        tensor = tensors[name]
        stats = auto_choice.operand_stats(tensor)
        parts.append((name, stats.shape, str(tensor.dtype), stats.stored,
                      stats.nonempty_rows, stats.max_per_row))
    return tuple(parts)


def _entry_path(kernel, base: BoundCall) -> Path | None:
    folder = disk_cache.cache_dir()
    if folder is None:
        return None
    operands = dict(base.inputs_by_name)
    threads = base.plan.threads if base.plan is not None else 1
    key = disk_cache.entry_key((kernel.disk_key(base.inst.types), signature(operands),
                                threads, "search"))
    return folder / "search" / f"{key}.json"


def _read(path: Path | None) -> Candidate | None:
    if path is None or not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        winner = Candidate(**data["winner"])
    except (OSError, ValueError, TypeError, KeyError):
        with contextlib.suppress(OSError):
            path.unlink()  # unreadable: searched again
        return None
    return winner


def _write(path: Path | None, winner: Candidate, seconds: dict[Candidate, float]) -> None:
    if path is None:
        return
    data = {"winner": asdict(winner),
            "seconds": [[asdict(c), s] for c, s in seconds.items()]}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(data))
    os.replace(partial, path)
