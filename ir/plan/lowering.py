"""Choosing how a statement is lowered: as one nest or split into several, with operands
as stored or converted to sorted coordinate lists. Each attempt answers by what it
returns (``Lowered`` or ``Refused``), so the choice is made here, over values, and the
API only builds the chosen kernel.

The backend's emitter comes with the request (``Request.emit``; ir/ never imports a
backend). What it cannot emit is asked of the nests' loop IR first (ir/loops/legality.py:
an output format that cannot be assembled, an unordered level co-iterated or appended
in order, a level located that cannot locate, too many cases, ...), so code generation
raises no refusal: the backend is only handed programs it can translate. The loop IR's
lowering raises where a sum's loops cannot be ordered; ``_emit`` turns that and the
checks' answers into a ``Refused``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..concrete.expressions import Assign, hoist_sums
from ..concrete.from_notation import to_concrete
from ..concrete.lattice import KernelTooLargeError
from ..errors import ScheduleError
from ..loops.bound import merged_tops, unbounded_walk
from ..loops.entry_split import entry_split_refusal, entry_window_loop, split_entries
from ..loops.legality import output_refusal, program_refusal, too_large
from ..loops.nodes import CallingConvention, Program, loops_of
from ..loops.notes import THREAD_ROWS
from ..notation import syntax as nt
from ..opt import loop_ir
from ..opt.passes import THREAD_RANGE, Target
from ..schedule.conversions import Modes, conversion_candidates, rescanned
from ..schedule.precompute import plan_precomputes
from ..schedule.resolved import SchedulePlan
from ..schedule.scattered_reduction import scattered_reduction
from ..schedule.scheduler import Nest
from ..schedule.user_statements import check_nest_order
from ..schedule.workspace_schedule import schedule_kernel
from ..types import TensorType


@dataclass
class Lowered:
    """A statement lowered: its nests, the backend's compiler that emitted them and its
    module, the operand types it was lowered for, its loop IR and the operands
    converted (mode orders)."""

    nests: list[Nest]
    builder: Any
    module: Any
    types: dict[str, TensorType]
    program: Program
    conversions: dict[str, Modes] = field(default_factory=dict)
    full_tops: tuple[str, ...] = ()  # operands read with their top level made full


@dataclass(frozen=True)
class Refused:
    """Why a statement could not be lowered."""

    error: ScheduleError


# The backend's emitter: a program of the loop IR and its calling convention, all it is
# given, to the compiler that emitted it and its module (backends/llvm/codegen.emit_kernel).
Emitter = Callable[[Program, CallingConvention], tuple[Any, Any]]


@dataclass(frozen=True)
class Request:
    """What to lower: the statement, its operands' names (the output first), the dtype
    the kernel computes in (the output's type has its own: bool for a comparison),
    whether float operations may reassociate, the workspace the caller named (None: the
    rule of paper 002 chooses) and whether operands are precomputed into workspaces
    (ir/schedule/precompute.py; None: its rule chooses). ``emit``: the backend's emitter, which
    compiles nests to a (compiler, module) pair or raises ScheduleError."""

    assignment: nt.Assignment
    order: list[str]
    dtype: str
    fastmath: bool
    workspace: str | None = None
    precompute: bool | None = None
    emit: Emitter | None = None
    finite: bool = False  # operands' values finite: factors move into sums the user placed
    counting: bool = False  # a counting build: every loop head counts (one form only)
    # A planning rule run on the loop IR before the backend translates it (a GPU plan's
    # tags: ir/loops/gpu_plan.py); None: the program as lowered and optimized.
    retag: Callable[[Program], Program] | None = None
    plan: SchedulePlan | None = None  # a user's schedule (ir/schedule/user_plan.py)


def calling_convention(request: Request, types: dict[str, TensorType]) -> CallingConvention:
    """How the kernel ``request`` asks for is called, with its operands' ``types``."""
    return CallingConvention(tuple(request.order), types, request.dtype, request.fastmath)


def target_of(request: Request, phase: str = "whole") -> Target:
    """What the loop IR's passes are told of ``request``: the phase, float semantics,
    dtype, and the reduced index a user's schedule runs threads over."""
    parallel = request.plan.parallel if request.plan is not None else None
    over = parallel.index if parallel is not None and parallel.ranged else ""
    plan = request.plan
    return Target(phase, request.fastmath, request.dtype, over,
                  plan.unrolls if plan is not None else (), plan.tiles if plan is not None else ())


def lower_kernel(request: Request, types: dict[str, TensorType],
                 converted: dict[str, Modes] | None = None,
                 sparse_workspace: bool = True, exact_sums: bool = False,
                 stored_outer: bool = False) -> Lowered | Refused:
    """One nest per statement if code generation can emit it, else the statement split
    into one nest per additive term; the unsplit refusal stands where splitting does
    not schedule. ``sparse_workspace``: whether the rule may choose a sparse workspace
    (one the caller named is always used). ``exact_sums``: no factor moves into a sum
    the user placed (schedule._schedule_one), which converted operands may avoid.
    ``stored_outer``: see ``conversions.rescanned``."""
    converted = converted or {}
    try:
        concrete = to_concrete(request.assignment, types)
    except ScheduleError as error:
        return Refused(error)
    if request.plan is not None:
        concrete = replace(concrete, loop_order=request.plan.order)
    if request.finite:  # 0 * x is 0 for finite x: an empty sum annihilates as stored 0s do
        concrete = replace(concrete, rhs=hoist_sums(concrete.rhs))
    nests = _scheduled(concrete, types, split=False, policy=request.workspace,
                       sparse=sparse_workspace, exact_sums=exact_sums)
    first = nests if isinstance(nests, Refused) else _emit(request, nests, types, converted,
                                                           stored_outer)
    if isinstance(first, Lowered):
        return first
    split = _scheduled(concrete, types, split=True, exact_sums=exact_sums)
    return first if isinstance(split, Refused) else _emit(request, split, types, converted,
                                                          stored_outer)


def lower_as_stored(request: Request, types: dict[str, TensorType]) -> Lowered | Refused:
    """``lower_kernel`` with the operands as stored and no sparse workspace the rule
    would choose (asformat's copies: a host sort beats one), sums exact where that
    lowers."""
    exact = lower_kernel(request, types, sparse_workspace=False, exact_sums=True)
    return exact if isinstance(exact, Lowered) else _factors_moved(request, types, exact)


def _factors_moved(request: Request, types: dict[str, TensorType], refused: Refused
                   ) -> Lowered | Refused:
    """``lower_kernel`` with factors moved into sums (schedule._schedule_one) where
    exact sums were ``refused``; that refusal stands if this one fails too."""
    moved = lower_kernel(request, types, sparse_workspace=False)
    return moved if isinstance(moved, Lowered) else refused


def lower_converting(request: Request, types: dict[str, TensorType], hidden: Iterable[str],
                     stored_so: Callable[[str, Modes], bool],
                     retype: Callable[[dict[str, Modes]], dict[str, TensorType]],
                     full_top: Callable[[str], TensorType | None] = lambda name: None
                     ) -> Lowered | Refused:
    """``lower_kernel``; where the operands' storage orders cannot be reconciled, with
    operands converted to sorted coordinate lists (``conversion_candidates``; ``retype``
    gives the types of a candidate's operands), the first candidate that lowers. A
    kernel too large stays refused: converted operands are as sparse. A sparse workspace
    the rule would choose comes last: a transposing copy of 2M entries through one took
    1.1 s a call, where the conversion sorts once and then gathers. Sums the user placed
    stay exact (no factor moved in) until then: a converted operand keeps them exact.
    ``full_top(name)``: the operand's type with its top level full (None: not offered),
    taken where that level is merged inside another loop (``merged_tops``)."""
    first = lower_kernel(request, types, sparse_workspace=False, exact_sums=True)
    if isinstance(first, Lowered):
        if unbounded_walk(first.program, types) is None:
            return _with_full_tops(request, first, set(hidden), full_top)
        # Walks an extent per stored entry (ir/loops/bound.py): a converted operand bounds it.
        bounded = _converted(request, types, hidden, stored_so, retype, bounded_only=True)
        if bounded is None:  # stored entries walked per stored entry beat an extent per one
            bounded = _converted(request, types, hidden, stored_so, retype,
                                 bounded_only=True, stored_outer=True)
        return first if bounded is None else bounded
    if isinstance(first.error, KernelTooLargeError):
        return _factors_moved(request, types, first)
    converted = _converted(request, types, hidden, stored_so, retype)
    if converted is not None:
        return converted
    last = lower_kernel(request, types)
    return last if isinstance(last, Lowered) else first


def _with_full_tops(request: Request, lowered: Lowered, hidden: set[str],
                    full_top: Callable[[str], TensorType | None]) -> Lowered:
    """``lowered``, or the same statement with the top levels it merges inside another
    loop made full, where that lowers: they are then located."""
    types = dict(lowered.types)
    names = []
    for name in merged_tops(lowered.program, types):
        # Only the statement's own inputs: not hidden ones, nor the temporaries
        # lowering adds (an operand workspace's copy).
        full = None if name in hidden or name not in request.order[1:] else full_top(name)
        if full is not None:
            types[name] = full
            names.append(name)
    if not names:
        return lowered
    attempt = lower_kernel(request, types, sparse_workspace=False, exact_sums=True)
    return replace(attempt, full_tops=tuple(names)) if isinstance(attempt, Lowered) \
        else lowered


def _converted(request: Request, types: dict[str, TensorType], hidden: Iterable[str],
               stored_so: Callable[[str, Modes], bool],
               retype: Callable[[dict[str, Modes]], dict[str, TensorType]],
               bounded_only: bool = False, stored_outer: bool = False) -> Lowered | None:
    """The first conversion candidate that lowers to a program walking no extent per
    stored entry (ir/loops/bound.py); failing that, unless ``bounded_only``, the first that
    lowers; or None. ``stored_outer``: see ``conversions.rescanned``."""
    fallback = None
    for orders in conversion_candidates(request.assignment, types, hidden, stored_so):
        converted_types = retype(orders)
        attempt = lower_kernel(request, converted_types, orders, sparse_workspace=False,
                               exact_sums=True, stored_outer=stored_outer)
        if not isinstance(attempt, Lowered):
            continue
        if unbounded_walk(attempt.program, converted_types) is None:
            return attempt
        fallback = fallback or attempt
    return None if bounded_only else fallback


def _not_as_scheduled(request: Request, program: Program) -> str | None:
    """Why a user's ``unroll`` has no loop to apply to (an index located, not iterated),
    or a tile no jammed loop, or None."""
    walked = {loop.index: loop for loop in loops_of(program.root)}
    plan = request.plan
    for index, factor in plan.unrolls if plan is not None else ():
        if index not in walked:
            return (f"unroll({index}, {factor}): no loop of this kernel runs over {index} "
                    f"(its loops: {', '.join(sorted(walked)) or 'none'})")
    for index, factor in plan.tiles if plan is not None else ():
        if index not in walked or walked[index].jam != (factor,):
            return (f"a tile of {factor} positions of {index} around the loops inside it: "
                    f"those loops must only locate levels that always hold the coordinate "
                    f"(a jammed loop, backends/llvm/jam.py), and in this kernel they do not")
    return None


def _unsplit(request: Request, program: Program) -> str | None:
    """Why threads cannot split the loop a user's schedule parallelizes (it must be one
    loop of one nest), or None."""
    parallel = request.plan.parallel if request.plan is not None else None
    if parallel is None or not parallel.ranged:
        return None
    tagged = [loop for loop in loops_of(program.root) if THREAD_RANGE in loop.tags]
    if len(tagged) == 1:
        return None
    return (f"parallelize({parallel.name}, ...): threads split one loop of one nest, and "
            f"this kernel runs {len(tagged) or 'no'} such loop{'s' * (len(tagged) != 1)} "
            f"over {parallel.index}")


def _entries_shared(plan: SchedulePlan, program: Program) -> Program | Refused:
    """``program`` with CPU threads taking windows of a row's entries where the user's
    schedule cuts chunks inside coordinates (ir/loops/entry_split.py); refused where the
    kernel has no such split."""
    parallel = plan.parallel
    if parallel is None or not parallel.chunks.within:
        return program
    rows = [loop for loop in loops_of(program.root) if THREAD_ROWS in loop.tags]
    why = "no loop over the output's first index is split by threads" if not rows \
        else entry_split_refusal(program, rows[0])
    window = entry_window_loop(rows[0]) if why is None else None
    if window is not None and window.iterator.tensor != parallel.chunks.tensor:
        why = (f"its loop over entries walks {window.iterator.tensor}'s, not those of "
               f"{parallel.chunks.tensor}, which the positions count")
    if why is not None:
        return Refused(ScheduleError(
            f"parallelize({parallel.name}, {parallel.unit}, {parallel.races}) over positions "
            f"that cut coordinates of {parallel.index}: {why}"))
    return split_entries(program, rows[0])


def _scheduled(concrete: Assign, types: dict[str, TensorType], split: bool,
               policy: str | None = None, sparse: bool = True, exact_sums: bool = False
               ) -> list[Nest] | Refused:
    """The scheduler's nests (with a workspace where the output would be scattered, a
    reduction other than + scattered into its output where folding it is refused), or
    its refusal."""
    try:
        nests = schedule_kernel(concrete, types, split=split, policy=policy, sparse=sparse,
                                exact_sums=exact_sums)
        if policy is not None and all(nest.workspace is None for nest in nests):
            raise ScheduleError(f"workspace={policy!r} does not apply: the loops produce "
                                f"{concrete.tensor}'s entries in the order its levels "
                                "keep, so nothing is scattered into a workspace; leave "
                                "workspace out")
        return nests
    except ScheduleError as error:
        scattered = None if split else scattered_reduction(concrete, types)
        return Refused(error) if scattered is None else [scattered]


def _emit(request: Request, nests: list[Nest], types: dict[str, TensorType],
          converted: dict[str, Modes], stored_outer: bool = False) -> Lowered | Refused:
    """The kernel's module, unless it would walk a converted operand whole for every
    coordinate of an outer loop (``rescanned``) or code generation refuses the nests."""
    reason = rescanned(nests, types, converted, stored_outer)
    if reason is not None:
        return Refused(ScheduleError(reason))
    if request.plan is not None:
        try:
            for nest in nests:
                check_nest_order(request.plan, nest.order)
        except ScheduleError as error:
            return Refused(error)
    nests = plan_precomputes(nests, types, request.precompute, request.dtype,
                             request.plan.sum_workspace if request.plan is not None else None)
    output = request.order[0]
    if request.emit is None:
        raise TypeError("Request.emit: lowering needs the backend's emitter")
    try:
        program = loop_ir(nests, types, output, target_of(request))
    except ScheduleError as error:  # a sum's loops that cannot be ordered
        return Refused(error)
    # What the backend cannot emit is known from the loop IR before it is asked
    # (ir/loops/legality.py); a backend that still cannot emits an InternalCompilerError.
    if (reason := _not_as_scheduled(request, program)) is not None:
        raise ScheduleError(reason)  # final: converting an operand to unroll would cost more
    if (reason := _unsplit(request, program)) is not None:
        return Refused(ScheduleError(reason))
    if (oversize := too_large(program)) is not None:
        return Refused(KernelTooLargeError(oversize))
    reason = output_refusal(types[output]) or \
        program_refusal(program, types[output], nests[0].assign.vars)
    if reason is not None:
        return Refused(ScheduleError(reason))
    if request.plan is not None:
        program = _entries_shared(request.plan, program)
        if isinstance(program, Refused):
            return program
    if request.retag is not None:
        program = request.retag(program)
    builder, module = request.emit(program, calling_convention(request, types))
    return Lowered(nests, builder, module, types, program, dict(converted))
