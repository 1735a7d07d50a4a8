"""The binding's side of the autoscheduler: operand statistics and the kernel's open
choices, handed to ``ir.autoschedule.autoschedule``.

Statistics are O(rows) from each operand's entries per first coordinate (the counts that
already even out threads' work, walk.entries_per_coordinate) and kept on the tensor
while its descriptor is the same. What the kernel leaves open comes from its assignment
(which operands form a row-by-row product), its instance (the rule's workspace) and its
loop IR (loops with an other form, recorded on the instance and in its disk entry).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..ir.loops.notes import SELECT_OTHER
from ..ir.notation import syntax as nt
from ..ir.plan.autoschedule import AutoChoice, KernelInfo, autoschedule
from ..ir.plan.cost_model import OperandStats
from ..tensors.tensor import StoredTensor

# Picks fixed instead of modelled: {"off": True} makes every binding keep the rule's
# workspace, the probe's timing and weighted splits (the behaviour before the model);
# "workspace", "form" or "split" fix that pick (schedule_search.py times candidates so).
FORCED: dict[str, object] = {}


def operand_stats(tensor: StoredTensor) -> OperandStats:
    """``tensor``'s statistics, computed once per descriptor (its arrays)."""
    holder = tensor.holder()
    cached = tensor.__dict__.get("_auto_stats")
    if cached is None or cached[0] is not holder:
        itemsize = tensor.dtype.itemsize
        if all(level.full for level in tensor.tensor_type.levels):
            stats = OperandStats.dense(tuple(tensor.shape), itemsize)
        else:
            stats = OperandStats.from_row_counts(tuple(tensor.shape),
                                                 tensor.entries_per_first_coordinate(),
                                                 itemsize)
        cached = (holder, stats)
        tensor._auto_stats = cached
    return cached[1]


def other_forms(inst) -> frozenset[str] | None:
    """The notes of ``inst``'s loops that have an other form; None where unknown (an
    instance whose metadata predates them)."""
    if not inst.jit.has_other:
        return frozenset()
    return None if inst.other_forms is None else frozenset(inst.other_forms)


def kernel_info(lhs: nt.Access, accesses: Sequence[nt.Access], inst,
                inputs: Mapping[str, StoredTensor], workspace_fixed: bool,
                threads: int) -> KernelInfo:
    """What the bound kernel leaves open, from its assignment's ``lhs`` and operand
    ``accesses`` (by the kernel's names, as in ``inputs``)."""
    policy = inst.workspace[0].split()[0] if inst.workspace else None
    product, columns = _product(lhs, accesses, inputs)
    forms = other_forms(inst)
    matching = _matching_rows(lhs, accesses, inputs) if forms and SELECT_OTHER in forms \
        else None
    return KernelInfo(forms, policy, workspace_fixed, product, columns,
                      _rows_operand(lhs, accesses, inputs), threads, matching)


def choose(lhs: nt.Access, accesses: Sequence[nt.Access], inst,
           inputs: Mapping[str, StoredTensor], workspace_fixed: bool,
           threads: int) -> AutoChoice | None:
    """The model's choice for a binding, or None when ``FORCED`` turns it off."""
    if FORCED.get("off"):
        return None
    info = kernel_info(lhs, accesses, inst, inputs, workspace_fixed, threads)
    choice = autoschedule(info, _Stats(inputs))
    fixed = {key: FORCED[key] for key in ("workspace", "form", "split") if key in FORCED}
    if info.workspace is None or workspace_fixed:
        fixed.pop("workspace", None)
    if fixed:
        choice = replace(choice, **fixed, reasons=choice.reasons + tuple(
            f"{key}: {value!r}, fixed (a search's candidate)" for key, value in fixed.items()))
    return choice


class _Stats(Mapping):
    """Operands' statistics by name, each computed when the model first reads it (a
    kernel with nothing open reads none: O(rows) saved per binding)."""

    def __init__(self, inputs: Mapping[str, StoredTensor]):
        self.inputs = inputs

    def __getitem__(self, name: str) -> OperandStats:
        return operand_stats(self.inputs[name])

    def __contains__(self, name: object) -> bool:
        return name in self.inputs

    def __iter__(self):
        return iter(self.inputs)

    def __len__(self) -> int:
        return len(self.inputs)


def _sparse(tensor: StoredTensor) -> bool:
    return not all(level.full for level in tensor.tensor_type.levels)


def _names(access: nt.Access) -> tuple[str | None, ...]:
    return tuple(v.name if isinstance(v, nt.IndexVar) else None for v in access.indices)


def _product(lhs: nt.Access, accesses: Sequence[nt.Access],
             inputs: Mapping[str, StoredTensor]) -> tuple[tuple[str, str] | None, int]:
    """(A, B) of an output C(i,j) = A(i,k) * B(k,j) over two sparse row-major operands
    (their first level stores their first index), and j's extent."""
    out = _names(lhs)
    if len(out) != 2 or None in out:
        return None, 0
    operands = [a for a in accesses if a.tensor in inputs and len(a.indices) == 2]
    for a in operands:
        for b in operands:
            ia, ib = _names(a), _names(b)
            if a is b or ia[0] != out[0] or ib[1] != out[1] or ia[1] != ib[0] \
                    or ia[1] in out:
                continue
            ta, tb = inputs[a.tensor], inputs[b.tensor]
            if _sparse(ta) and _sparse(tb) and _row_major(ta) and _row_major(tb):
                return (a.tensor, b.tensor), int(tb.shape[1])
    return None, 0


def _row_major(tensor: StoredTensor) -> bool:
    levels = tensor.tensor_type.levels
    return bool(levels) and levels[0].mode == 0


def _rows_operand(lhs: nt.Access, accesses: Sequence[nt.Access],
                  inputs: Mapping[str, StoredTensor]) -> str | None:
    """The sparse operand whose first level stores the output's first index."""
    out = _names(lhs)
    if not out or out[0] is None:
        return None
    for access in accesses:
        tensor = inputs.get(access.tensor)
        if tensor is None or not _sparse(tensor):
            continue
        first = tensor.tensor_type.levels[0]
        if first.mode is not None and first.block is None \
                and _names(access)[first.mode] == out[0]:
            return access.tensor
    return None


def _matching_rows(lhs: nt.Access, accesses: Sequence[nt.Access],
                   inputs: Mapping[str, StoredTensor]) -> float | None:
    """For a union of two sparse operands indexed as the output and stored in its order
    (A(i,j) + B(i,j), both row-major): the share of rows where both store equally many
    entries, from the counts the statistics already read (O(rows)); None otherwise."""
    out = _names(lhs)
    pair = [inputs[a.tensor] for a in accesses if a.tensor in inputs and _names(a) == out
            and _sparse(inputs[a.tensor]) and _row_major(inputs[a.tensor])]
    if len(pair) != 2 or tuple(pair[0].shape) != tuple(pair[1].shape):
        return None
    first, second = (t.entries_per_first_coordinate() for t in pair)
    if len(first) != len(second) or not len(first):
        return None
    return float((first == second).mean())
