"""compile / evaluate / einsum: from an expression and formats to a callable kernel."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

from ..backends.cpu import OTHER_FORM_SUFFIX, JitKernel, load_object
from ..backends.llvm.codegen import emit_kernel
from ..caching import disk as disk_cache
from ..caching.memory import KERNELS
from ..calls.binding import BoundCall
from ..calls.broadcast_terms import BroadcastTerms
from ..calls.diagonals import PATTERN_FORMAT
from ..calls.instance import Instance
from ..calls.interpreted import TARGETS
from ..calls.kernel_calls import KernelCalls
from ..calls.scheduling import ScheduleMethods, explain, gpu_schedule_of, gpu_sizes, resolve
from ..calls.workspaces import checked_precompute_meta, checked_workspace_meta
from ..formats.registry import generation as registry_generation
from ..ir.loops.gpu_plan import SCHEDULES as GPU_SCHEDULES
from ..ir.loops.gpu_plan import GpuMappingError
from ..ir.loops.result_fill import result_fill
from ..ir.notation import syntax as nt
from ..ir.notation.aliases import separate_repeated_uses
from ..ir.notation.diagonals import separate_diagonals
from ..ir.notation.operators import user_operators
from ..ir.notation.result_type import as_computed, compute_dtype, result_dtype
from ..ir.plan.lowering import Request
from ..ir.schedule.directives import Schedule
from ..ir.schedule.workspace_policies import checked_policy, policy_key
from ..ir.types import TensorType, fill_key, type_key
from ..notation.parse import parse
from ..tensors.coerce import natural_format
from ..tensors.describe import kernel_repr
from ..tensors.format import Format, FormatError, as_format
from ..tensors.tensor import StoredTensor
from ..tensors.value_types import checked_index_dtype, checked_value_dtype
from .build import build, build_converting, conversion_formats, retyped
from .inspection import KernelInspection
from .pickling import instance_meta, reduce_kernel

_CACHE = KERNELS  # compiled instances by specialization, bounded by bytes


class Kernel(ScheduleMethods, KernelInspection, KernelCalls):
    """A compiled expression; call it with tensors by name, many times.

    Machine code is specialized per value/index dtype on first use and cached. The
    scheduling methods (``split``, ``reorder``, ``parallelize``, ...) return new kernels.
    """

    def __init__(self, assignment: nt.Assignment | str, formats: dict[str, object],
                 out_format: object = None, fastmath: bool = False,
                 out_index_dtype: str | None = None, convert: bool = True,
                 workspace: str | None = None, precompute: bool | None = None,
                 finite: bool = False, counting: bool = False, target: str = "cpu",
                 gpu_schedule: str | None = None, extents: dict[str, int] | None = None,
                 schedule: object = None):
        self.assignment = parse(assignment) if isinstance(assignment, str) else assignment
        checked_policy(workspace)
        # Output indices only affine subscripts use: their extents (padding), else 'valid'.
        self.index_extents = {str(k): int(v) for k, v in (extents or {}).items()}
        if target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
        if gpu_schedule is not None and gpu_schedule not in GPU_SCHEDULES:
            raise ValueError(f"gpu_schedule must be one of {', '.join(GPU_SCHEDULES)} or "
                             f"None (the rule of ir/loops/gpu_plan.py), not {gpu_schedule!r}")
        self.gpu_schedule = gpu_schedule  # how the GPU grid splits the kernel's work
        self.target = target  # "interpret": calls walk the loop IR in Python (tests)
        # "cuda-emulated": the device kernel run over its grid on the CPU (gpu_call.py);
        # "cuda": on a GPU through cuda-python (gpu_device.py). Code per instance:
        self.device_cache: dict = {}
        if precompute not in (None, True, False):
            raise ValueError(f"precompute must be True, False or None (the rule chooses), "
                             f"not {precompute!r}")
        self.workspace = workspace  # a workspace policy's name; None: paper 002's rule picks
        # operand workspaces (ir/schedule/precompute.py); None: its rule
        self.precompute = precompute
        self.finite = finite  # operands' values finite: factors move into sums (finite_sums)
        self.counting = counting  # a counting build: each call sets loop_count
        self.loop_count: int | None = None  # loop heads the last call ran (counting)
        orders = {a.tensor: len(a.indices) for a in self.assignment.accesses()}
        out = self.assignment.lhs.tensor
        self.formats: dict[str, Format] = {}
        for name, order in orders.items():
            spec = out_format if name == out and out_format is not None else formats.get(name)
            if spec is None:
                spec = "dense"
            try:
                self.formats[name] = as_format(spec, order)
            except FormatError as error:
                used = f"{order} {'index' if order == 1 else 'indices'}"
                raise FormatError(f"{name} (used with {used}): {error}") from None
        unknown = set(formats) - set(orders)
        if unknown:
            raise ValueError(f"formats given for tensors not in the expression: {sorted(unknown)}")
        self.plan = resolve(schedule, self.assignment, self.formats, target)
        # "search": bindings time the autoscheduler's candidates (schedule_search.py).
        self.searching = isinstance(schedule, str) and schedule == "search"
        self._apply_plan()
        self.fastmath = fastmath
        self.out_index_dtype = out_index_dtype
        self.convert = convert
        # Internally each further index order of a repeated input is an operand of its
        # own (see separate_repeated_uses), given the same tensor on every call.
        self._assignment, self._aliases = separate_repeated_uses(self.assignment)
        for alias, original in self._aliases.items():
            self.formats[alias] = self.formats[original]
        self._alias_uses = {a.tensor: nt.Access(self._aliases[a.tensor], a.indices)
                            for a in self._assignment.accesses() if a.tensor in self._aliases}
        # A(i,i) on a level that cannot locate i reads a hidden diagonal pattern.
        self._assignment, self._patterns = separate_diagonals(self._assignment, self.formats)
        for pattern in self._patterns:
            self.formats[pattern] = PATTERN_FORMAT
        self._user_names = self.assignment.tensors()
        self._names = self._assignment.tensors()
        self._accesses = self._assignment.accesses()
        self._signatures: dict[tuple, Instance] = {}  # call-path cache of instances
        self._last_plan: tuple | None = None  # (extent, threads), weights, Split
        self._last_bound: BoundCall | None = None
        self.last_call: BoundCall | None = None  # the binding the last call ran (fast_calls)
        self._sparse: Kernel | None = None  # see _sparse_workspace
        self._merged: Kernel | None = None  # see _merging
        self._auto: dict[str, Kernel] = {}  # by workspace policy: see _auto_workspace
        self._finite: Kernel | None = None  # see _finite_sums
        self._windows: Kernel | bool | None = None  # see _entry_split; False: it has none
        self._sums_move: bool | None = None
        self._broadcast: BroadcastTerms | None = None  # see _without_empty_terms
        self.last: Instance | None = None

    def _apply_plan(self) -> None:
        """The workspace and GPU schedule a user's schedule names (they must agree with
        the arguments given beside it)."""
        plan = self.plan
        if plan is not None and plan.workspace is not None:
            if self.workspace not in (None, plan.workspace):
                raise ValueError(f"workspace={self.workspace!r} but the schedule precomputes "
                                 f"into {plan.workspace!r}")
            checked_policy(plan.workspace)
            self.workspace = plan.workspace
        if plan is not None and plan.sum_workspace is not None:  # ir/schedule/precompute_sums.py
            if self.precompute is False:
                raise ValueError("precompute=False but the schedule precomputes the product "
                                 f"of {', '.join(plan.sum_workspace)} into a row")
            self.precompute = True
        self.gpu_sizes = gpu_sizes(plan)  # threads per block, entries per thread
        mapped = gpu_schedule_of(plan)
        if mapped is not None:
            if self.gpu_schedule not in (None, mapped):
                raise ValueError(f"gpu_schedule={self.gpu_schedule!r} but the schedule's GPU "
                                 f"units map to {mapped!r}")
            self.gpu_schedule = mapped

    def with_directive(self, directive) -> Kernel:
        """This kernel with ``directive`` appended to its schedule (a new kernel)."""
        current = self.plan.schedule if self.plan is not None else Schedule()
        out = self.assignment.lhs.tensor
        formats = {n: self.formats[n] for n in self._user_names if n != out}
        return Kernel(self.assignment, formats, self.formats[out], self.fastmath,
                      self.out_index_dtype, self.convert, self.workspace
                      if self.plan is None or self.plan.workspace is None else None,
                      precompute=self.precompute, finite=self.finite, counting=self.counting,
                      target=self.target, gpu_schedule=self.gpu_schedule
                      if gpu_schedule_of(self.plan) is None else None,
                      extents=self.index_extents, schedule=current.then(directive))

    @property
    def schedule(self) -> str:
        """The kernel's schedule and how each part of it runs (threads, chunks, order)."""
        inst = self._default()
        last = self._last_bound
        if self.searching:
            head = "search: each binding times the autoscheduler's candidates on its " \
                "operands once (the winner is kept on disk per operand signature)\n"
        else:
            head = ""
        return head + explain(self.plan, inst.parallel_mode,
                       tuple(ix.name for ix in self._assignment.lhs.indices
                             if isinstance(ix, nt.IndexVar)), self.workspace,
                       self._gpu_line(),
                       getattr(last, "auto", None))

    def _gpu_line(self) -> str | None:
        """The GPU schedule ``schedule`` names: the user's, or on a GPU target the rule's
        default for this kernel class (ir/gpu_plan.default_schedule), or why it has none."""
        if self.gpu_schedule is not None or self.target not in ("cuda", "cuda-emulated"):
            return self.gpu_schedule
        try:
            return f"{self.gpu_plan().schedule} (the default for this kernel class)"
        except GpuMappingError as error:
            return f"none: {error}"

    __repr__ = kernel_repr
    __reduce__ = reduce_kernel

    @property
    def aliases(self) -> dict[str, nt.Access]:
        """Operand names the kernel gave further index orders of a repeated input, and
        the caller's use each stands for (``A__1``: ``A(j,i)`` in ``A(i,j) * A(j,i)``)."""
        return dict(self._alias_uses)

    @property
    def patterns(self) -> dict[str, str]:
        """Hidden operands that stand for a diagonal use such as ``A(i,i)`` on a level
        that cannot look ``i`` up, each with the index it spans (see diagonals.py)."""
        return {pattern: use.var for pattern, use in self._patterns.items()}

    def _user_name(self, name: str) -> str:
        """The name the caller knows an operand by (an alias's original)."""
        return self._aliases.get(name, name)

    # -- specialization -----------------------------------------------------------------
    def instance(self, dtypes: dict[str, str] | None = None,
                 index_dtypes: dict[str, str] | None = None,
                 fills: dict[str, float] | None = None) -> Instance:
        types, dtype, key = self.instance_keys(dtypes, index_dtypes, fills)
        cached = _CACHE.get(key)
        if cached is None:
            disk_key = self.disk_key(types)  # 1 ms (the host CPU's features): on a miss
            cached = self._load(disk_key, types, dtype)
            if cached is None:
                cached = build_converting(self._request(types), types, self._patterns,
                                          self.formats, self.convert)
                other_key = disk_key + "-other"  # stored once it is compiled
                if cached.jit.other_builder is not None:
                    cached.jit.other_builder = _stored(cached.jit.other_builder, other_key)
                disk_cache.store(disk_key, cached.jit.object_code,
                                 instance_meta(cached, other_key))
            _CACHE[key] = cached
        self.last = cached
        return cached

    def instance_keys(self, dtypes: dict[str, str] | None,
                      index_dtypes: dict[str, str] | None,
                      fills: dict[str, float] | None = None
                      ) -> tuple[dict[str, TensorType], str, tuple]:
        """The operand types for these dtypes and fill values (by default each format's),
        the result dtype, and the key of their instance in memory. The result's fill
        value is the expression's on the operands' (see ``result_fill``)."""
        names, out = self._names, self._assignment.lhs.tensor
        unknown = (set(dtypes or {}) | set(index_dtypes or {})) - set(self._user_names) \
            - set(self._patterns)
        if unknown:
            raise ValueError(f"dtypes given for tensors not in the expression: "
                             f"{sorted(unknown)}")
        dtypes = {n: str(checked_value_dtype((dtypes or {}).get(
            self._user_name(n), "bool" if n in self._patterns else "float64"))) for n in names}
        index_dtypes = {n: str(checked_index_dtype((index_dtypes or {}).get(self._user_name(n),
                                                                            "int32")))
                        for n in names}
        dtypes[out] = result_dtype(self._assignment, dtypes)
        formats = {n: self.formats[n].with_fill((fills or {}).get(self._user_name(n),
                                                                  self.formats[n].fill))
                   for n in names if n != out}
        formats[out] = self.formats[out]
        types = {n: formats[n].tensor_type(dtypes[n], index_dtypes[n]) for n in names}
        declared = self.formats[out].fill
        fill = result_fill(as_computed(self._assignment, dtypes), types, dtypes[out], declared)
        if self.formats[out].declares_fill and fill_key(declared) != fill_key(fill):
            raise ValueError(f"the output format declares fill value {declared}, but the "
                             f"expression's is {fill} (its value where no operand stores "
                             "an entry); leave the output's fill out")
        types[out] = self.formats[out].with_fill(fill).tensor_type(dtypes[out],
                                                                   index_dtypes[out])
        key = (str(self._assignment), tuple(sorted((n, types[n]) for n in names)),
               self.fastmath, self.convert, policy_key(self.workspace), self.precompute,
               self.finite, self.counting, registry_generation(), self._plan_key())
        return types, dtypes[out], key

    @property
    def schedule_text(self) -> str | None:
        """A user's schedule as the scheduling language writes it, or "search" (None:
        auto)."""
        if self.searching:
            return "search"
        return None if self.plan is None else str(self.plan.schedule)

    def _plan_key(self) -> str:
        """The schedule's part of cache keys: a user's schedule as text."""
        return "" if self.plan is None else str(self.plan.schedule)

    def disk_key(self, types: dict[str, TensorType]) -> str:
        """The key of the instance for ``types`` in the disk cache (and in pickles): it
        names the host CPU and versions, so another machine's is another key."""
        used = [n.op for n in nt.subexpressions(self._assignment.rhs)
                if isinstance(n, nt.Call | nt.Reduction)]  # user functions' bodies
        return disk_cache.entry_key(
            (str(self._assignment), tuple((n, type_key(types[n])) for n in self._names),
             self.fastmath, self.convert, policy_key(self.workspace), self.precompute,
             self.finite, self.counting, self._plan_key()) + ((
                 user_operators(used),) if any(
                 op.template is not None for op in used) else ()))

    def _load(self, key: str, types: dict[str, TensorType], dtype: str) -> Instance | None:
        """An instance from the disk cache, with no LLVM work, or None."""
        out = self._assignment.lhs.tensor
        entry = disk_cache.load(key, disk_cache.kernel_check(
            {n: t.order for n, t in types.items()}, out))
        if entry is None:
            return None
        instance = self.from_object(*entry, key, types, dtype)
        if instance is None:
            disk_cache.discard(key)  # metadata this version cannot use: rebuild it
        return instance

    def from_object(self, obj: bytes, meta: dict, key: str, types: dict[str, TensorType],
                    dtype: str) -> Instance | None:
        """An instance from object code and its metadata (see ``instance_meta``), or None
        where this version cannot use them."""
        try:
            kernel = load_object(obj, meta["name"], key)
            conversions = conversion_formats(self.formats, meta["conversions"], types)
            converted_types = retyped(types, conversions)
            if meta["other_form_key"] and not kernel.has_other:
                kernel.other_builder = functools.partial(
                    self._other_from_disk, meta["other_form_key"],
                    kernel.name + OTHER_FORM_SUFFIX, converted_types, dtype, conversions)
            return Instance(converted_types, meta["concrete"], kernel, dtype, conversions,
                            meta["lattices"], self._names, meta["parallel_mode"],
                            meta["initializes_output"], checked_workspace_meta(meta["workspace"]),
                            precomputes=checked_precompute_meta(meta["precomputes"]),
                            other_forms=_checked_notes(meta["other_forms"]))
        except (RuntimeError, KeyError, TypeError, ValueError, AttributeError):
            return None

    def _other_from_disk(self, key: str, name: str, types: dict[str, TensorType], dtype: str,
                         conversions: dict[str, Format]) -> JitKernel:
        """The other form of a kernel loaded from the disk cache: its own entry, or
        compiled (and stored) if the process that built the kernel never ran it."""
        entry = disk_cache.load(key)
        if entry is not None:
            try:
                return load_object(entry[0], name, key)
            except RuntimeError:
                disk_cache.discard(key)
        return _stored(build(self._request(types), types, conversions).jit.other_builder,
                       key)()

    def _request(self, types: dict[str, TensorType]) -> Request:
        """What lowering needs for these operand types: the assignment as computed and
        the dtype it computes in (float64 for ``A(i) < 0.5``, whose result is bool)."""
        dtypes = {n: t.dtype for n, t in types.items()}
        return Request(as_computed(self._assignment, dtypes), self._names,
                       compute_dtype(self._assignment, dtypes), self.fastmath, self.workspace,
                       self.precompute, emit_kernel, self.finite, self.counting,
                       plan=self.plan)

def _stored(build: Callable[[], JitKernel], key: str) -> Callable[[], JitKernel]:
    """``build``, storing what it compiles in the disk cache under ``key``."""
    def build_and_store() -> JitKernel:
        kernel = build()
        disk_cache.store(key, kernel.object_code, {"name": kernel.name})
        return kernel
    return build_and_store


def compile(assignment: str | nt.Assignment, out_format: object = None, fastmath: bool = False,
            workspace: str | None = None, precompute: bool | None = None,
            counting: bool = False, target: str = "cpu", gpu_schedule: str | None = None,
            extents: dict[str, int] | None = None, schedule: object = None,
            **formats: object) -> Kernel:
    """Compile ``assignment`` for the given operand formats (names or Format objects).
    ``workspace`` names the temporary a scattered output goes through ('dense', 'hash',
    'sort', 'bucket' or a policy added by register_workspace_policy; None: paper 002's
    rule picks). ``precompute``: True copies each operand
    whose access is invariant in a loop nested inside its own into a dense temporary
    that the inner loop locates into (triangle counting's L(i,j) under loops i, k, j),
    False never does, None leaves it to the rule of ir/schedule/precompute.py. ``counting``: a
    counting build, whose calls set ``kernel.loop_count`` (loop heads run: iterations
    and loop entries; backends/llvm/counting.py), for complexity checks. ``target``:
    "cpu" (native code), or "interpret": each call walks the kernel's loop IR in Python
    over the operands' arrays (slow; a check that the loop IR says all a kernel does),
    "cuda" (the planned device kernel on a GPU, through cuda-python: the ``cuda`` extra)
    or "cuda-emulated" (the same device kernel run over its grid on the CPU).
    ``gpu_schedule``: how a GPU grid splits the work ("thread_per_row", "nonzero_split",
    "count_fill"; None: the rule of ir/loops/gpu_plan.py picks per kernel class).
    ``extents``: the extents of output indices that only affine subscripts use
    (``y(i) = x(i+r-1) * w(r)`` padded 'same': ``{"i": len(x)}``); without, 'valid'.
    ``schedule``: a Schedule, its text (``"split(i, i0, i1, 64); parallelize(i0,
    cpu_thread, no_races)"``, see ir/schedule/directives.py), None/"auto" (the rules and the cost
    model choose per call: ir/plan/autoschedule.py) or "search" (each binding times the
    model's candidates once and keeps the winner on disk: schedule_search.py)."""
    return Kernel(assignment, formats, out_format, fastmath, workspace=workspace,
                  precompute=precompute, counting=counting, target=target,
                  gpu_schedule=gpu_schedule, extents=extents, schedule=schedule)


# Kernel objects of evaluate(), the most recently used last; each keeps its compiled
# instances alive past their eviction from the byte-bounded cache, so they are few.
_KERNELS: dict[tuple, Kernel] = {}
_KERNELS_KEPT = 64
_KERNELS_LOCK = threading.Lock()


def evaluate(assignment: str | nt.Assignment, out_format: object = "dense",
             check: bool = True, **tensors):
    """Compile (cached in memory) and run; returns a Tensor."""
    parsed = parse(assignment) if isinstance(assignment, str) else assignment
    formats = {}
    for name, value in tensors.items():
        formats[name] = value.format if isinstance(value, StoredTensor) else natural_format(value)
    out_spec = out_format
    key = (str(parsed), tuple(sorted((n, f) for n, f in formats.items() if isinstance(f, Format))),
           tuple(sorted((n, f) for n, f in formats.items() if isinstance(f, str))),
           out_spec if isinstance(out_spec, (str, Format)) else repr(out_spec),
           getattr(out_spec, "declares_fill", False))  # Format(fill=0) == Format()
    with _KERNELS_LOCK:
        kernel = _KERNELS.pop(key, None)
        if kernel is None:
            kernel = Kernel(parsed, formats, out_spec)
        _KERNELS[key] = kernel
        if len(_KERNELS) > _KERNELS_KEPT:
            del _KERNELS[next(iter(_KERNELS))]
    return kernel(check=check, **tensors)


def _checked_notes(notes: list | None) -> tuple[str, ...] | None:
    """Loop notes from a disk entry's metadata: strings, or a ValueError."""
    if notes is None:
        return None
    if not all(isinstance(note, str) for note in notes):
        raise ValueError(f"other_forms {notes!r}")
    return tuple(notes)
