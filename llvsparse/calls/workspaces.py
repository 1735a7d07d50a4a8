"""A workspace's size, checked before a kernel runs.

A workspace's policy says which of its arrays the kernel allocates from the output's
extents on each call (per thread; ``WorkspacePolicy.fixed_bytes``): a dense workspace a
value, a marker and a list slot per coordinate of the output indices it covers, a bucket
workspace a count per row (a coordinate of the covered indices but the last) and such a
dense accumulator over the last index (its buckets are sized inside the call, once the
entries are counted). Memory is committed lazily, so a workspace larger than the machine
would get the process killed while the kernel touches it; it is refused here instead,
with its name and size.
"""

from __future__ import annotations

import math

import numpy as np

from ..abi.results import physical_memory
from ..ir.schedule.precompute import MARK_BYTES
from ..ir.schedule.scheduler import Nest
from ..ir.types import TensorType


def workspace_meta(nests: list[Nest], types: dict[str, TensorType]) -> list | None:
    """[name, the output modes covered, bytes per coordinate, [bytes per row, bytes per
    coordinate of the last mode]] of a workspace: the arrays its policy allocates from
    the extents (zeros for those sized by the entries produced)."""
    plan = nests[0].workspace if nests else None
    if plan is None:
        return None
    assign = nests[0].assign
    levels = types[assign.tensor].levels
    modes = [levels[assign.vars.index(v)].mode for v in plan.vars]
    itemsize = max(np.dtype(plan.temporary.dtype).itemsize, 8)  # summed in 64 bits or more
    fixed = plan.policy.fixed_bytes(itemsize)
    return [f"{plan.policy.name} workspace {plan.temporary.name}({','.join(plan.vars)})",
            modes, fixed.per_coordinate, [fixed.per_row, fixed.per_column]]


def checked_workspace_meta(meta: object) -> list | None:
    """``meta`` as stored with a kernel, or a ValueError (the entry is rebuilt)."""
    if meta is None:
        return None
    if not (isinstance(meta, list) and len(meta) == 4 and isinstance(meta[0], str)
            and isinstance(meta[1], list) and all(type(m) is int for m in meta[1])
            and type(meta[2]) is int and isinstance(meta[3], list) and len(meta[3]) == 2
            and all(type(m) is int for m in meta[3])):
        raise ValueError(f"workspace {meta!r}")
    return meta


# Where the rule chose a workspace sized by extents, it must also be affordable beside
# the work: at most this many bytes per value the operands store, or this floor (a
# 3-entry SpMV at n = 2**31 otherwise allocated a 19 GB operand workspace, issue 37).
AFFORDABLE_FLOOR = 64 * 2**20
AFFORDABLE_PER_VALUE = 64


def affordable(nbytes: int, stored_values: int | None) -> bool:
    """Whether ``nbytes`` of workspace is in proportion to ``stored_values`` (None: the
    caller asked for the workspace, so only the machine's memory bounds it)."""
    return stored_values is None or nbytes <= max(AFFORDABLE_FLOOR,
                                                  AFFORDABLE_PER_VALUE * stored_values)


def check_workspace(meta: list | None, out_shape: tuple[int, ...], copies: int,
                    stored_values: int | None = None) -> None:
    """A MemoryError naming the workspace where ``copies`` of it (one per thread)
    would not fit in memory, or would not be affordable (``affordable``)."""
    if meta is None:
        return
    name, modes, per_coordinate, (per_row, per_column) = meta
    coordinates = math.prod(out_shape[m] for m in modes)
    if coordinates >= 2**62:  # its coordinates are numbered in 64-bit integers
        raise ValueError(f"the {name} would number {coordinates} coordinates, past the "
                         "2**62 its 64-bit keys hold: a smaller output shape is needed")
    columns = out_shape[modes[-1]] if modes else 1
    rows = coordinates // columns if columns else 0
    nbytes = (coordinates * per_coordinate + rows * per_row + columns * per_column) * copies
    total = physical_memory()
    if not affordable(nbytes, stored_values):
        raise MemoryError(f"the {name} would need {_size(nbytes)} for {stored_values} "
                          "stored values")
    if not nbytes or total is None or nbytes <= total:
        return
    each = f" for each of {copies} threads" if copies > 1 else ""
    if per_coordinate:
        parts = f"{coordinates} coordinates x {per_coordinate} bytes"
    else:
        parts = f"{rows} rows x {per_row} bytes + {columns} columns x {per_column} bytes"
    raise MemoryError(f"the {name} needs {_size(nbytes)} ({parts}{each}), more than this "
                      f"machine's {_size(total)} of memory; compile with workspace='hash' "
                      "or 'sort' for a workspace holding only the entries produced")


def precompute_meta(nests: list[Nest], types: dict[str, TensorType]) -> list | None:
    """[name, the operand, the operand's mode its slice runs over, bytes per coordinate]
    of each operand workspace (ir/schedule/precompute.py), or None."""
    entries = [[f"{'operand' if p.expr is None else 'sum'} workspace {p.temporary.name}({p.var})",
                p.operand.tensor,
                types[p.operand.tensor].levels[-1].mode,
                np.dtype(p.temporary.dtype).itemsize + MARK_BYTES]
               for nest in nests for p in nest.precomputes]
    return entries or None


def checked_precompute_meta(meta: object) -> list | None:
    """``meta`` as stored with a kernel, or a ValueError (the entry is rebuilt)."""
    if meta is None:
        return None
    if not (isinstance(meta, list) and meta and all(
            isinstance(e, list) and len(e) == 4 and isinstance(e[0], str)
            and isinstance(e[1], str) and type(e[2]) is int and type(e[3]) is int
            for e in meta)):
        raise ValueError(f"operand workspaces {meta!r}")
    return meta


def check_precomputes(meta: list | None, shapes: dict[str, tuple[int, ...]],
                      copies: int, stored_values: int | None = None) -> None:
    """A MemoryError naming the operand workspaces where ``copies`` of them (one per
    thread) would not fit in memory, or would not be affordable (``affordable``); each
    holds a value and a mark per coordinate of its operand's mode."""
    if meta is None:
        return
    nbytes = sum(shapes[operand][mode] * per for _, operand, mode, per in meta) * copies
    if not affordable(nbytes, stored_values):
        raise MemoryError(f"the operand workspaces would need {_size(nbytes)} for "
                          f"{stored_values} stored values")
    total = physical_memory()
    if total is not None and nbytes > total:
        names = ", ".join(name for name, *_ in meta)
        each = f" for each of {copies} threads" if copies > 1 else ""
        raise MemoryError(f"the {names} need {_size(nbytes)}{each}, more than this "
                          f"machine's {_size(total)} of memory; compile with "
                          "precompute=False to merge the operand's slices instead")


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"
