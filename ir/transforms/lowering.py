"""Choosing how a statement is lowered: as one nest or split into several, with operands
as stored or converted to sorted coordinate lists. Each attempt answers by what it
returns (``Lowered`` or ``Refused``), so the choice is made here, over values, and the
API only builds the chosen kernel.

Code generation still refuses a nest it cannot emit by raising ScheduleError from deep
inside; ``_emit`` is the one place that turns that into a ``Refused``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from llvmlite import ir

from llvsparse import notation as nt

from ..cin import Assign
from ..codegen import KernelCompiler
from ..conversions import Modes, conversion_candidates, rescanned
from ..frontend import to_concrete
from ..lattice import KernelTooLargeError
from ..schedule import Nest, ScheduleError, schedule
from ..types import TensorType


@dataclass
class Lowered:
    """A statement lowered: its nests, the compiler that emitted them and its module,
    the operand types it was lowered for and the operands converted (mode orders)."""

    nests: list[Nest]
    builder: KernelCompiler
    module: ir.Module
    types: dict[str, TensorType]
    conversions: dict[str, Modes] = field(default_factory=dict)


@dataclass(frozen=True)
class Refused:
    """Why a statement could not be lowered."""

    error: ScheduleError


@dataclass(frozen=True)
class Request:
    """What to lower: the statement, its operands' names (the output first), the result's
    value type and whether float operations may reassociate."""

    assignment: nt.Assignment
    order: list[str]
    dtype: str
    fastmath: bool


def lower_kernel(request: Request, types: dict[str, TensorType],
                 converted: dict[str, Modes] | None = None) -> Lowered | Refused:
    """One nest per statement if code generation can emit it, else the statement split
    into one nest per additive term; the unsplit refusal stands where splitting does
    not schedule."""
    converted = converted or {}
    try:
        concrete = to_concrete(request.assignment, types)
    except ScheduleError as error:
        return Refused(error)
    nests = _scheduled(concrete, types, split=False)
    first = nests if isinstance(nests, Refused) else _emit(request, nests, types, converted)
    if isinstance(first, Lowered):
        return first
    split = _scheduled(concrete, types, split=True)
    return first if isinstance(split, Refused) else _emit(request, split, types, converted)


def lower_converting(request: Request, types: dict[str, TensorType], hidden: Iterable[str],
                     stored_so: Callable[[str, Modes], bool],
                     retype: Callable[[dict[str, Modes]], dict[str, TensorType]]
                     ) -> Lowered | Refused:
    """``lower_kernel``; where the operands' storage orders cannot be reconciled, with
    operands converted to sorted coordinate lists (``conversion_candidates``; ``retype``
    gives the types of a candidate's operands), the first candidate that lowers. A
    kernel too large stays refused: converted operands are as sparse."""
    first = lower_kernel(request, types)
    if isinstance(first, Lowered) or isinstance(first.error, KernelTooLargeError):
        return first
    for orders in conversion_candidates(request.assignment, types, hidden, stored_so):
        attempt = lower_kernel(request, retype(orders), orders)
        if isinstance(attempt, Lowered):
            return attempt
    return first


def _scheduled(concrete: Assign, types: dict[str, TensorType],
               split: bool) -> list[Nest] | Refused:
    """The scheduler's nests, or its refusal."""
    try:
        return schedule(concrete, types, split=split)
    except ScheduleError as error:
        return Refused(error)


def _emit(request: Request, nests: list[Nest], types: dict[str, TensorType],
          converted: dict[str, Modes]) -> Lowered | Refused:
    """The kernel's module, unless it would walk a converted operand whole for every
    coordinate of an outer loop (``rescanned``) or code generation refuses the nests."""
    reason = rescanned(nests, types, converted)
    if reason is not None:
        return Refused(ScheduleError(reason))
    builder = KernelCompiler(nests, types, request.order, request.dtype,
                             fastmath=request.fastmath)
    try:
        module = builder.compile()
    except ScheduleError as error:
        return Refused(error)
    return Lowered(nests, builder, module, types, dict(converted))
