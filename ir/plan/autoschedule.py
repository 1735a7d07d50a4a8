"""The autoscheduler's choice among the ways a kernel may run, from the cost model.

``autoschedule(info, stats)`` is the one entry point: ``info`` says what the compiled
kernel may vary (a scattered output's workspace policy, loops with an other form, a
thread split), ``stats`` the operands' statistics (ir/plan/cost_model.py). It returns an
``AutoChoice`` whose ``reasons`` explain each pick in a sentence. Where the model cannot
decide it says so (``form=None``: the binding's first calls time the forms, probe.py;
``workspace`` left to paper 002's rule) rather than guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..loops.gpu_plan import ENTRY_SPLIT, NONZERO_SPLIT
from ..opt.passes import PAIRS, PREFETCH, SELECT_OTHER
from ..schedule.workspace_policies import DENSE, HASH, SORT
from .cost_model import (
    OperandStats,
    cheapest,
    pairs_form,
    prefetch_form,
    select_form,
    spgemm_estimates,
    split_kind,
)

# The workspace policies the model has terms for (cost_model.spgemm_estimates).
MODELLED_POLICIES = (DENSE.name, HASH.name, SORT.name)


@dataclass(frozen=True)
class KernelInfo:
    """What a compiled kernel leaves open, in the model's terms.

    ``other_forms``: the notes of its loops that have an other form (ir/opt/passes.py's
    OTHER_FORMS; None when unknown, e.g. a kernel loaded from the disk cache without its
    loop IR). ``workspace``: the policy paper 002's rule gave a scattered output (None:
    no workspace); ``workspace_fixed``: the user named it. ``product``: the operands of a
    row-by-row product A(i,k)*B(k,j) (the one whose rows are walked, the one whose rows
    are located) and ``columns``, the extent of j. ``rows_operand``: the operand whose
    first level stores the output's first index (the rows threads share and a row-wise
    sum walks). ``threads``: the threads a call runs on. ``matching_rows``: for a union
    of two sparse operands stored in the output's order (A(i,j) + B(i,j)), the share of
    rows where both store equally many entries (None: no such pair)."""

    other_forms: frozenset[str] | None = frozenset()
    workspace: str | None = None
    workspace_fixed: bool = False
    product: tuple[str, str] | None = None
    columns: int = 0
    rows_operand: str | None = None
    threads: int = 1
    matching_rows: float | None = None


@dataclass(frozen=True)
class AutoChoice:
    """What the autoscheduler picked: ``workspace`` (a policy name, None where the kernel
    has no workspace or the model keeps the rule's), ``form`` ("first", "other", or None:
    timed on the first calls), ``split`` ("rows", "entries", "windows", or None on one thread) and
    one sentence per pick in ``reasons``."""

    workspace: str | None
    form: str | None
    split: str | None
    reasons: tuple[str, ...]

    def __str__(self) -> str:
        """One line per pick and why (what ``kernel.schedule`` prints)."""
        return "\n".join(self.reasons) if self.reasons else "nothing to choose"


def autoschedule(info: KernelInfo, stats: Mapping[str, OperandStats]) -> AutoChoice:
    """The model's picks for a kernel ``info`` on operands with ``stats`` (by name)."""
    reasons: list[str] = []
    workspace = _workspace(info, stats, reasons)
    form = _form(info, stats, reasons)
    split = None
    if info.threads > 1:
        kind, why = split_kind(stats.get(info.rows_operand) if info.rows_operand else None,
                               info.threads)
        split = kind
        reasons.append(f"thread split: {why}")
    return AutoChoice(workspace, form, split, tuple(reasons))


def _workspace(info: KernelInfo, stats: Mapping[str, OperandStats],
               reasons: list[str]) -> str | None:
    if info.workspace is None:
        return None
    if info.workspace_fixed:
        reasons.append(f"workspace: {info.workspace!r}, as the user named it")
        return info.workspace
    if info.product is None or info.workspace not in MODELLED_POLICIES \
            or any(name not in stats for name in info.product):
        reasons.append(f"workspace: {info.workspace!r} by paper 002's rule (the model has "
                       "no terms for this kernel's producer)")
        return info.workspace
    a, b = (stats[name] for name in info.product)
    estimates = spgemm_estimates(a, b, info.columns, MODELLED_POLICIES)
    best, decided = cheapest(estimates, info.workspace)
    table = "; ".join(f"{e.name} {e.ns / 1e6:.3g} ms" for e in estimates)
    if best is None or (not decided and best.name != info.workspace):
        reasons.append(f"workspace: {info.workspace!r} by paper 002's rule; no estimate "
                       f"beats it by more than the model's error ({table})")
        return info.workspace
    reasons.append(f"workspace: {best.name!r}, estimated cheapest ({table}); {best.terms}")
    return best.name


def _form(info: KernelInfo, stats: Mapping[str, OperandStats],
          reasons: list[str]) -> str | None:
    forms = info.other_forms
    if forms is None:
        reasons.append("loop form: timed on the first calls (the kernel's loops are unknown "
                       "here)")
        return None
    if not forms:
        return None
    picks: list[tuple[str | None, str]] = []
    for note in sorted(forms):
        if note == PAIRS and info.rows_operand in stats:
            picks.append(pairs_form(stats[info.rows_operand]))
        elif note == PREFETCH and info.product is not None and info.product[1] in stats:
            picks.append(prefetch_form(stats[info.product[1]]))
        elif note == SELECT_OTHER and info.matching_rows is not None:
            picks.append(select_form(info.matching_rows))
        else:
            picks.append((None, f"no model for {note!r}"))
    chosen = {form for form, _ in picks}
    why = "; ".join(reason for _, reason in picks)
    if len(chosen) == 1 and None not in chosen:
        form = chosen.pop()
        reasons.append(f"loop form: {form} ({why})")
        return form
    reasons.append(f"loop form: timed on the first calls ({why})")
    return None


# A row longer than this many threads' shares of a nonzero split is split inside.
ENTRY_SPLIT_ROW_SHARES = 8


def gpu_schedule(rule: str, max_per_row: int, entries: int) -> tuple[str, str]:
    """The GPU schedule for a call, from the rule's (ir/gpu_plan.default_schedule) and
    the longest row of the operands the split loop's rows lead to: a nonzero split
    gives a row to one thread at most, so a row of many threads' shares of entries is
    the launch's critical path; then threads split inside rows (entry_split, where it
    fits: the caller checks). Returns (schedule, why)."""
    if rule != NONZERO_SPLIT or max_per_row <= ENTRY_SPLIT_ROW_SHARES * entries:
        return rule, f"{rule}, the rule's for this kernel class"
    return ENTRY_SPLIT, (f"{ENTRY_SPLIT}: a row of {max_per_row} entries, more than "
                         f"{ENTRY_SPLIT_ROW_SHARES} threads' shares of {entries}, would be "
                         "one thread's under a nonzero split")
