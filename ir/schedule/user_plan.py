"""What a user's schedule asks of a kernel, checked before any IR is built.

Directives apply in order to the kernel's indices. Each derived index records where it
came from (its provenance: ``i0`` and ``i1`` are a split of ``i``, ``f`` a fusion of
``i`` and ``j``, ``fp`` the positions of ``A(i,j)`` along ``f``), so every directive
that names a derived index is traced back to the original loops and the operands'
storage. The result is a ``SchedulePlan``: the loop order the scheduler must keep, the
parallel loop and how its coordinates are cut into chunks, and the workspace choice.

A directive that does not fit raises ScheduleError naming why: an index that is not
there or a name taken twice, a ``pos`` over an operand that does not store the index,
a parallel loop whose writes race under the chosen strategy, a transformation this
compiler cannot lower yet (it says which).
"""

from __future__ import annotations

import re

from ..errors import ScheduleError
from .directives import (
    Bound,
    Coord,
    Directive,
    Divide,
    Fuse,
    Parallelize,
    Pos,
    Precompute,
    Reorder,
    Schedule,
    Split,
    Unroll,
)
from .resolved import CPU_UNITS, KernelIndices, Origin, ParallelLoop, SchedulePlan
from .user_loops import check_parallel, original_order, unroll
from .workspace_policies import DENSE, workspace_policies


def plan_schedule(schedule: Schedule, kernel: KernelIndices, target: str) -> SchedulePlan:
    """Check ``schedule`` against the kernel and resolve it (ScheduleError where a
    directive does not fit)."""
    plan = SchedulePlan(schedule, serial=True)
    # The indices loops run over now: the output's first, as the scheduler prefers; only
    # a reorder constrains the order the scheduler picks.
    live = [*kernel.out_vars, *(v for v in kernel.all_vars if v not in kernel.out_vars)]
    for directive in schedule.directives:
        _apply(plan, kernel, live, directive, target)
    plan.loops = tuple(live)
    order = original_order(plan, live)
    if any(isinstance(d, Reorder) for d in schedule.directives):
        plan.order = order
    check_parallel(plan, kernel, live)
    return plan


def _fresh(name: str, live: list[str], plan: SchedulePlan, what: str, text: str) -> None:
    if name in live or name in plan.origins or name in (o for o in plan.origins.values()
                                                         for o in o.parents):
        raise ScheduleError(f"{text}: the {what} {name} is already an index of this kernel")


def _present(name: str, live: list[str], plan: SchedulePlan, text: str) -> None:
    if name not in live:
        gone = any(name in origin.parents for origin in plan.origins.values())
        why = "was replaced by an earlier directive" if gone else "is not an index of this kernel"
        raise ScheduleError(f"{text}: index {name} {why} (indices now: {', '.join(live)})")


def _apply(plan: SchedulePlan, kernel: KernelIndices, live: list[str], d: Directive,
           target: str) -> None:
    text = str(Schedule((d,)))
    match d:
        case Reorder(indices):
            for name in indices:
                _present(name, live, plan, text)
            slots = sorted(live.index(n) for n in indices)
            for slot, name in zip(slots, indices):
                live[slot] = name
        case Split(index, outer, inner, _) | Divide(index, outer, inner, _):
            _present(index, live, plan, text)
            if outer == inner:
                raise ScheduleError(f"{text}: the outer and inner index need two names")
            _fresh(outer, live, plan, "outer index", text)
            _fresh(inner, live, plan, "inner index", text)
            kind = "split" if isinstance(d, Split) else "divide"
            param = d.factor if isinstance(d, Split) else d.parts
            plan.origins[outer] = Origin(f"{kind}_outer", (index,), param)
            plan.origins[inner] = Origin(f"{kind}_inner", (index,), param)
            slot = live.index(index)
            live[slot:slot + 1] = [outer, inner]
        case Fuse(outer, inner, fused):
            _present(outer, live, plan, text)
            _present(inner, live, plan, text)
            if live.index(inner) != live.index(outer) + 1:
                raise ScheduleError(f"{text}: {inner} must be the loop directly inside "
                                    f"{outer} (loops now: {', '.join(live)})")
            _fresh(fused, live, plan, "fused index", text)
            plan.origins[fused] = Origin("fuse", (outer, inner))
            slot = live.index(outer)
            live[slot:slot + 2] = [fused]
        case Pos(index, pos_index, tensor, indices):
            _present(index, live, plan, text)
            _fresh(pos_index, live, plan, "position index", text)
            stored = kernel.operands.get(tensor)
            if stored is None:
                raise ScheduleError(f"{text}: {tensor} is not an operand of this kernel")
            if stored != indices:
                raise ScheduleError(f"{text}: {tensor} is accessed as {tensor}"
                                    f"({','.join(stored)}) in this kernel")
            covered = plan.covered(index)
            if not set(covered) <= set(stored):
                missing = ", ".join(v for v in covered if v not in stored)
                raise ScheduleError(f"{text}: the loop over {index} does not iterate "
                                    f"{tensor}: {tensor} is not indexed by {missing}")
            plan.origins[pos_index] = Origin("pos", (index,), f"{tensor}({','.join(indices)})")
            live[live.index(index)] = pos_index
        case Coord(pos_index, index):
            _present(pos_index, live, plan, text)
            if plan.origins.get(pos_index, Origin("", ())).kind != "pos":
                raise ScheduleError(f"{text}: {pos_index} is not a position index")
            _fresh(index, live, plan, "coordinate index", text)
            plan.origins[index] = Origin("coord", (pos_index,))
            live[live.index(pos_index)] = index
        case Bound(index, bound_index, _, kind):
            _present(index, live, plan, text)
            if kind.startswith("min"):
                raise ScheduleError(f"{text}: loops start at coordinate 0; only max_exact "
                                    "and max_constraint bounds apply")
            if index in plan.origins:
                raise ScheduleError(f"{text}: only an original index's extent is bound")
            _fresh(bound_index, live, plan, "bound index", text)
            plan.origins[bound_index] = Origin("bound", (index,), d.value)
            live[live.index(index)] = bound_index
            plan.bounds = (*plan.bounds, d)
        case Precompute(_, index, workspace_index, _):
            _present(index, live, plan, text)
            if _whole(d.expr, kernel) or workspace_index != index:
                _fresh(workspace_index, live, plan, "workspace index", text)
            _precompute(plan, kernel, d, text)
        case Unroll(index, factor):
            _present(index, live, plan, text)
            unroll(plan, index, factor, text)
        case Parallelize(index, unit, races):
            _present(index, live, plan, text)
            if (unit in CPU_UNITS) != (not target.startswith("cuda")):
                where = "a CPU target" if unit in CPU_UNITS else "target='cuda' or 'cuda-emulated'"
                raise ScheduleError(f"{text}: unit {unit} needs {where}, and this kernel's "
                                    f"target is {target!r}")
            loop = ParallelLoop(index, unit, races)
            if unit in CPU_UNITS:
                if plan.parallel is not None:
                    raise ScheduleError(f"{text}: loop {plan.parallel.index} is already "
                                        "parallel; nested CPU parallelism is not lowered yet")
                plan.parallel = loop
                plan.serial = False
            else:
                plan.gpu = (*plan.gpu, loop)
                plan.serial = False


def _precompute(plan: SchedulePlan, kernel: KernelIndices, d: Precompute, text: str) -> None:
    """The precompute this compiler lowers: the whole right-hand side into a workspace
    over the output's last index (paper 002), in the named policy's storage."""
    if not kernel.out_vars or d.index != kernel.out_vars[-1]:
        raise ScheduleError(f"{text}: a workspace is lowered over the output's last index "
                            f"({', '.join(kernel.out_vars) or 'none: a scalar output'}) "
                            "only, for now")
    if not _whole(d.expr, kernel):
        _sum_workspace(plan, kernel, d, text)
        return
    if plan.workspace is not None:
        raise ScheduleError(f"{text}: the kernel already has a workspace ({plan.workspace})")
    plan.workspace = d.workspace


def _whole(expr: str, kernel: KernelIndices) -> bool:
    """Whether ``expr`` is the whole right-hand side (with or without its sums)."""
    return "".join(expr.split()) in ["".join(form.split()) for form in kernel.rhs]


def _factors(expr: str, kernel: KernelIndices) -> list[str] | None:
    """The operands of ``expr`` where it is a product of the right-hand side's operands
    (``B(i,k,l) * D(l,j)``), as they are written; None otherwise."""
    parts = [p.strip() for p in expr.split("*")]
    found = []
    for part in parts:
        match = re.fullmatch(r"(\w+)\(([\w\s,]*)\)", part)
        if match is None:
            return None
        indices = tuple(v.strip() for v in match.group(2).split(",") if v.strip())
        if kernel.operands.get(match.group(1)) != indices:
            return None
        found.append(match.group(1))
    return found


def _sum_workspace(plan: SchedulePlan, kernel: KernelIndices, d: Precompute, text: str
                   ) -> None:
    """A product of some of the right-hand side's factors, reduced into a dense row over
    the output's last index (ir/schedule/precompute_sums.py), the rest multiplying the row."""
    names = _factors(d.expr, kernel)
    if names is None or not 0 < len(set(names)) < len(kernel.operands):
        raise ScheduleError(f"{text}: a workspace takes the whole right-hand side "
                            f"({kernel.rhs[-1]}) or a product of some of its operands, "
                            "not all of them")
    inner = {v for n in names for v in kernel.operands[n]}
    outer = {v for n, vars_ in kernel.operands.items() if n not in names for v in vars_}
    summed = inner - outer - set(kernel.out_vars)
    if not summed or d.index not in {kernel.operands[n][-1] for n in names}:
        raise ScheduleError(f"{text}: a product precomputed into a row over {d.index} sums "
                            f"an index the other factors lack and has an operand indexed "
                            f"by {d.index} last ({d.expr} does not)")
    if d.workspace in workspace_policies() and d.workspace != DENSE.name:
        raise ScheduleError(f"{text}: a product's sum is reduced into a dense row; name "
                            f"the workspace {DENSE.name!r} or give it a name, not "
                            f"{d.workspace!r}")
    if plan.sum_workspace is not None or plan.workspace is not None:
        raise ScheduleError(f"{text}: the kernel already has a workspace")
    plan.sum_workspace = tuple(names)
