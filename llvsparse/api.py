"""compile / evaluate / einsum: from an expression and formats to a callable kernel."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from . import cache as disk_cache
from . import runtime
from .auto_choice import choose
from .backends.cpu import OTHER_FORM_SUFFIX, JitKernel, load_object
from .backends.cuda import emit_ptx
from .backends.llvm.codegen import emit_kernel
from .binding import BoundCall, ShapeError, as_tensor, expected_entries, views
from .coerce import natural_format
from .describe import kernel_repr
from .diagonals import PATTERN_FORMAT, diagonal_pattern
from .finite_sums import all_finite, sums_move
from .format import Format, FormatError, as_format
from .formats.registry import generation as registry_generation
from .gpu_call import device_code, device_phases, emulated_call, gpu_plan
from .gpu_device import device_call
from .instance import Instance
from .interpreted import TARGETS, interpret_call
from .ir import notation as nt
from .ir.affine import valid_extent
from .ir.directives import Schedule
from .ir.errors import ScheduleError
from .ir.gpu_plan import SCHEDULES as GPU_SCHEDULES
from .ir.gpu_plan import GpuPlan
from .ir.loops import Program, show_program
from .ir.operators import user_operators
from .ir.parallel import dense_like
from .ir.result_fill import result_fill
from .ir.result_type import as_computed, compute_dtype, result_dtype
from .ir.schedule_plan import Chunks
from .ir.transforms.aliases import separate_repeated_uses
from .ir.transforms.diagonals import separate_diagonals
from .ir.transforms.lowering import Request
from .ir.types import TensorType, fill_key, type_key
from .ir.workspace_policies import checked_policy, policy_key
from .kernel_build import build, build_converting, conversion_formats, retyped
from .kernel_cache import KERNELS
from .live_copies import live_copy
from .notation_parse import parse
from .pickling import instance_meta, reduce_kernel
from .scheduling import (
    ScheduleMethods,
    check_bounds,
    chunked,
    combiner,
    explain,
    gpu_schedule_of,
    resolve,
)
from .tensor import Tensor, checked_index_dtype, checked_value_dtype
from .workspaces import (
    check_precomputes,
    check_workspace,
    checked_precompute_meta,
    checked_workspace_meta,
)

_CACHE = KERNELS  # compiled instances by specialization, bounded by bytes


class Kernel(ScheduleMethods):
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
                             f"None (the rule of ir/gpu_plan.py), not {gpu_schedule!r}")
        self.gpu_schedule = gpu_schedule  # how the GPU grid splits the kernel's work
        self.target = target  # "interpret": calls walk the loop IR in Python (tests)
        # "cuda-emulated": the device kernel run over its grid on the CPU (gpu_call.py);
        # "cuda": on a GPU through cuda-python (gpu_device.py). Code per instance:
        self.device_cache: dict = {}
        if precompute not in (None, True, False):
            raise ValueError(f"precompute must be True, False or None (the rule chooses), "
                             f"not {precompute!r}")
        self.workspace = workspace  # a workspace policy's name; None: paper 002's rule picks
        self.precompute = precompute  # operand workspaces (ir/precompute.py); None: its rule
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
        self._schedule_spec = schedule
        self.plan = resolve(schedule, self.assignment, self.formats, target)
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
        self._sparse: Kernel | None = None  # see _sparse_workspace
        self._merged: Kernel | None = None  # see _merging
        self._auto: dict[str, Kernel] = {}  # by workspace policy: see _auto_workspace
        self._finite: Kernel | None = None  # see _finite_sums
        self._sums_move: bool | None = None
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
        return explain(self.plan, self._schedule_spec, inst.parallel_mode,
                       tuple(ix.name for ix in self._assignment.lhs.indices
                             if isinstance(ix, nt.IndexVar)), self.workspace,
                       self.gpu_schedule)

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
        """A user's schedule as the scheduling language writes it (None: auto)."""
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

    # -- inspection ---------------------------------------------------------------------
    def _default(self) -> Instance:
        return self.last or self.instance()

    def _with_code(self) -> Instance:
        """The current instance, recompiled if it came from the disk cache (no IR kept)."""
        return self.code_of(self._default())

    def code_of(self, inst: Instance) -> Instance:
        """``inst``, recompiled if it came from the disk cache (no IR kept)."""
        jit_code = inst.jit
        together = jit_code.compiled is not None and jit_code.compiled.module is jit_code.module
        if jit_code.llvm_ir is None or (jit_code.has_other and not together):
            inst.jit = build(self._request(inst.types), inst.types, inst.conversions,
                             lazy=False).jit
        return inst

    def rebuilt(self, inst: Instance, retag: Callable[[Program], Program]) -> JitKernel:
        """``inst``'s code built again for a GPU plan (gpu_call.py): ``retag`` runs on
        its loop IR before translation (the plan's tags, and the assembly phases a
        sparse output is counted and filled in)."""
        request = replace(self._request(inst.types), retag=retag)
        return build(request, inst.types, inst.conversions, lazy=False).jit

    @property
    def llvm_ir(self) -> str:
        return self._with_code().jit.llvm_ir

    @property
    def llvm_ir_optimized(self) -> str:
        return self._with_code().jit.llvm_ir_optimized

    @property
    def asm(self) -> str:
        return self._with_code().jit.asm

    @property
    def compile_times(self) -> dict[str, float]:
        """Seconds per phase of the last cold compile (empty when loaded from disk)."""
        return dict(self._default().jit.phases)

    @property
    def lattices(self) -> str:
        """Every loop's iteration lattice, one line per loop as lowered."""
        return self._default().lattices

    def gpu_plan(self) -> GpuPlan:
        """How the kernel maps onto a GPU grid (ir/gpu_plan.py); GpuMappingError where
        it has no GPU mapping yet."""
        return gpu_plan(self, self._with_code())

    def ptx(self, sm: str = "sm_80") -> str:
        """PTX of the planned device kernel for an NVIDIA GPU of compute capability
        ``sm`` (needs no GPU); GpuMappingError where the kernel has no GPU mapping yet."""
        inst = self._with_code()
        plan = gpu_plan(self, inst)
        code = device_code(self, inst, plan)
        return emit_ptx(code.llvm_ir, code.name, sm, device_phases(plan), plan.lanes)

    def export(self, path: str | Path, name: str = "llvsparse_kernel") -> tuple[Path, Path]:
        """Write an object file (``.o``) or shared library (``.so``) plus a C header."""
        from .export import export_kernel

        return export_kernel(self, self._with_code(), Path(path), name)

    @property
    def concrete(self) -> str:
        """Concrete index notation of the scheduled statements."""
        return self._default().concrete

    @property
    def loops(self) -> str:
        """The loop IR: each loop, what it iterates and locates, and the fast forms the
        optimization passes chose for it (in brackets); under a user's schedule, that
        schedule first."""
        text = show_program(self.program(self._default()))
        return text if self.plan is None else f"schedule: {self.plan.schedule}\n{text}"

    def program(self, inst: Instance) -> Program:
        """The loop IR of ``inst``, one of this kernel's instances (lowered again where
        it was loaded from the disk cache)."""
        if inst.program is None:
            inst.program = build(self._request(inst.types), inst.types,
                                 inst.conversions).program
        return inst.program()

    # -- calling ------------------------------------------------------------------------
    def __call__(self, *, check: bool = True, threads: int | None = None, **tensors):
        """Run on tensors given by name. ``check=False`` skips the O(nnz) validation of
        trusted inputs; ``threads`` overrides ``ls.set_num_threads`` for this call;
        ``out=array`` writes a dense-like result into ``array`` (see ``BoundCall``),
        unless the expression has an operand named ``out``."""
        if self.target == "interpret":
            return interpret_call(self, check, tensors)
        if self.target == "cuda-emulated":
            return emulated_call(self, check, tensors, self.device_cache)
        if self.target == "cuda":
            return device_call(self, check, tensors, self.device_cache)
        out = tensors.pop("out", None) if "out" not in self._user_names else None
        bound = None if self._last_bound is None else \
            self._last_bound.reuse(tensors, threads, check)
        if bound is None:
            bound = self._last_bound = self.bind(check=check, threads=threads, **tensors)
        result = bound(out)
        self.loop_count = bound.loop_count
        return result

    def bind(self, *, check: bool = True, threads: int | None = None,
             **tensors) -> BoundCall:
        """Validate, specialize and prepare descriptors once; the returned callable runs
        the kernel on these operands with almost no Python work (for calls in a loop)."""
        bound = self._bind(check, threads, tensors)
        if self.finite or not all_finite(bound.operands):
            return bound
        if self._sums_move is None:
            self._sums_move = sums_move(self._request(bound.inst.types).assignment,
                                        bound.inst.types)
        if not self._sums_move:
            return bound
        fast = self._finite_sums().bind(check=False, threads=threads, **tensors)
        fast.guard = (functools.partial(all_finite, bound.operands), bound)
        return fast

    def _bind(self, check: bool, threads: int | None, tensors: dict) -> BoundCall:
        """``bind``, for this kernel's own plan."""
        names, out = self._user_names, self._assignment.lhs.tensor
        missing = [n for n in names if n != out and n not in tensors]
        if missing:
            raise TypeError(f"missing tensors: {', '.join(missing)}")
        if out in tensors:
            raise TypeError(f"{out} is the kernel's output, not an operand (to write into an "
                            "array, pass out=array)")
        unknown = sorted(set(tensors) - set(names))
        if unknown:
            raise TypeError(f"tensors not in the expression: {', '.join(unknown)}")
        if not isinstance(check, (bool, np.bool_)):
            raise TypeError(f"check must be True or False, not {check!r}")
        given = {n: as_tensor(tensors[n], self.formats[n], n) for n in names if n != out}
        extents = self._extents(given)
        check_bounds(self.plan, extents)
        if check:
            for tensor in given.values():
                tensor.validate()
        out_shape = tuple(extents[v.name] for v in self.assignment.lhs.indices)
        wide = max(out_shape, default=0) >= 2**31 - 1
        given.update({pattern: diagonal_pattern(
            given[self._user_name(use.tensor)], use, extents[use.var],
            str(checked_index_dtype(None, extents[use.var])))
            for pattern, use in self._patterns.items()})
        signature = (wide, registry_generation(),
                     *((t.dtype, t.index_dtype, fill_key(t.fill_value)) for t in given.values()))
        inst = self._signatures.get(signature)
        if inst is None:
            dtypes = {n: t.dtype.name for n, t in given.items()}
            index_dtypes = {n: t.index_dtype.name for n, t in given.items()}
            index_dtypes[out] = self.out_index_dtype or ("int64" if wide else "int32")
            fills = {n: t.fill_value for n, t in given.items()}
            inst = self._signatures[signature] = self.instance(dtypes, index_dtypes, fills)
        self.last = inst
        inputs = {n: given[self._user_name(n)] for n in self._names if n != out}
        refreshes = []  # converted copies read the tensors' current values per call
        converted = []  # their sources: a binding is reused only while theirs are sealed
        for name, fmt in inst.conversions.items():
            converted.append(inputs[name])
            inputs[name], refresh = live_copy(inputs[name], fmt, self._user_name(name))
            refreshes.append(refresh)
        threads = runtime.get_num_threads() if threads is None else \
            runtime.checked_thread_count(threads)
        expected = expected_entries(inputs.values())
        parallel = (threads > 1 and inst.parallel_mode is not None
                    and out_shape[inst.parallel_mode] > 1
                    and sum(len(t.values) for t in inputs.values()) >= PARALLEL_MIN_WORK
                    and (not inst.jit.assembly or expected >= ASSEMBLY_MIN_ENTRIES))
        if self.plan is not None:  # a user's schedule says whether threads run
            parallel = self._scheduled_parallel(inst, threads, out_shape, extents)
        stored = sum(len(t.values) for t in inputs.values())
        try:
            check_workspace(inst.workspace, out_shape, threads if parallel else 1,
                            None if self.workspace is not None else stored)
        except MemoryError:
            if self.workspace is not None:
                raise
            # Paper 002: where a dense workspace would not fit, a sparse one.
            return self._sparse_workspace().bind(check=check, threads=threads, **tensors)
        try:
            if inst.precomputes is not None:  # (no dict of shapes built on every call)
                check_precomputes(inst.precomputes, {n: t.shape for n, t in inputs.items()},
                                  threads if parallel else 1,
                                  None if self.precompute is not None else stored)
        except MemoryError:
            if self.precompute is not None:
                raise
            return self._merging().bind(check=check, threads=threads, **tensors)
        # The autoscheduler's picks from the operands' statistics (auto_choice.py).
        auto = choose(self._assignment.lhs, self._accesses, inst, inputs,
                      self.workspace is not None, threads if parallel else 1)
        if auto is not None and inst.workspace and auto.workspace is not None \
                and auto.workspace != inst.workspace[0].split()[0]:
            return self._auto_workspace(auto.workspace).bind(check=False, threads=threads,
                                                             **tensors)
        holders = [inputs[n].holder(check_shallow=not check) for n in inputs]
        even = auto is not None and auto.split == "rows"
        plan = self._thread_plan(inst, threads, extents, inputs, even) if parallel else None
        out_format = self.formats[out].with_fill(inst.types[out].fill)
        bound = BoundCall(inst, out_format, out_shape, holders, plan, expected,
                          auto.form if auto is not None else None)
        bound.auto = auto
        if plan is not None and self.plan is not None and self.plan.parallel.reduces:
            bound.combine = combiner(self.plan.parallel.operator)
        bound.refreshes = refreshes
        bound.operands = {n: tensors[n] for n in names if n != out}
        # The caller's tensors' own descriptors (a converted operand's source's).
        bound.operand_holders = [given[n].holder(check_shallow=False) for n in bound.operands]
        bound.wrapped = {n: (a.shape, a.dtype) for n, a in bound.operands.items()
                         if isinstance(a, np.ndarray) and views(inputs[n].values, a)}
        bound.requested_threads = threads
        bound.patterned = bool(self._patterns)
        bound.converted = converted
        bound.inputs_by_name = inputs  # what the kernel reads, by its names (interpreter)
        return bound

    def _scheduled_parallel(self, inst: Instance, threads: int, out_shape,
                            extents: dict[str, int]) -> bool:
        """Whether threads run this call under a user's schedule: where it parallelizes
        a loop, which must then be one whose rows threads can own."""
        parallel = self.plan.parallel
        if parallel is None:
            return False
        if parallel.reduces:
            if out_shape and not dense_like(inst.types[self._assignment.lhs.tensor]):
                raise ScheduleError(f"parallelize({parallel.name}, {parallel.unit}, "
                                    f"{parallel.races}): each thread reduces into a private "
                                    "output, which needs a dense-like output format")
            return threads > 1 and extents[parallel.index] > 1
        if inst.parallel_mode is None:
            raise ScheduleError(f"parallelize({parallel.name}, {parallel.unit}, "
                                f"{parallel.races}): threads cannot own rows of this "
                                f"kernel's output ({self.formats[self.assignment.lhs.tensor]})"
                                ": it is assembled by one thread")
        return threads > 1 and out_shape[inst.parallel_mode] > 1

    def _thread_plan(self, inst: Instance, threads: int, extents: dict[str, int],
                     inputs: dict[str, Tensor], even: bool = False) -> runtime.Split:
        """How threads share the split loop's coordinates: as a user's schedule says, or
        in chunks of about equal stored entries of the output's first index (``even``:
        equal row ranges, where the autoscheduler finds the rows even)."""
        scheduled = self.plan.parallel if self.plan is not None else None
        var = scheduled.index if scheduled is not None else \
            self._assignment.lhs.indices[inst.parallel_mode].name
        if scheduled is None:
            return self._plan(extents[var], threads,
                              [] if even else self.entries_per_row(inputs, var))
        weights = self.entries_per_row(inputs, var)
        chunks = scheduled.chunks
        if scheduled.reduces and chunks.by == "balanced":  # one private output per thread
            chunks = Chunks("parts", threads)
        return chunked(chunks, extents[var], threads, inputs, weights)

    def _sparse_workspace(self) -> Kernel:
        """This kernel with a sorted-list workspace (made once)."""
        if self._sparse is None:
            self._sparse = self._variant("sort", self.precompute)
        return self._sparse

    def _auto_workspace(self, policy: str) -> Kernel:
        """This kernel with the workspace policy the autoscheduler picked (made once)."""
        if policy not in self._auto:
            self._auto[policy] = self._variant(policy, self.precompute)
        return self._auto[policy]

    def _merging(self) -> Kernel:
        """This kernel without operand workspaces (made once): where their temporaries
        would not fit, the operands' slices are merged again."""
        if self._merged is None:
            self._merged = self._variant(self.workspace, False)
        return self._merged

    def _finite_sums(self) -> Kernel:
        """This kernel with factors moved into the sums the user placed (made once), for
        finite operands (finite_sums.py)."""
        if self._finite is None:
            self._finite = self._variant(self.workspace, self.precompute, finite=True)
        return self._finite

    def _variant(self, workspace: str | None, precompute: bool | None,
                 finite: bool | None = None) -> Kernel:
        """This kernel's statement and formats with another workspace choice."""
        out = self.assignment.lhs.tensor
        formats = {n: self.formats[n] for n in self._user_names if n != out}
        return Kernel(self.assignment, formats, self.formats[out], self.fastmath,
                      self.out_index_dtype, self.convert, workspace, precompute=precompute,
                      finite=self.finite if finite is None else finite,
                      counting=self.counting, schedule=self.schedule_text)

    def _plan(self, extent: int, threads: int, weights: list[np.ndarray]) -> runtime.Split:
        """The split of the last binding while its weights are the same arrays (cached on
        their tensors): splitting 800k rows costs 4 ms, a call on them 8."""
        last = self._last_plan
        if last is not None and last[0] == (extent, threads) and len(last[1]) == len(weights) \
                and all(a is b for a, b in zip(last[1], weights)):
            return last[2]
        total = functools.reduce(np.add, weights) if weights else None
        plan = runtime.split(extent, threads, total)
        self._last_plan = ((extent, threads), weights, plan)
        return plan

    def entries_per_row(self, inputs: dict[str, Tensor], var: str) -> list[np.ndarray]:
        """Stored entries under each coordinate of ``var`` (the split loop's index) in
        each sparse input whose first level stores it: their sum evens out threads' work."""
        parts = []
        for access in self._accesses:
            tensor = inputs.get(access.tensor)
            if tensor is None or all(lv.full for lv in tensor.tensor_type.levels):
                continue
            first = tensor.tensor_type.levels[0]
            if first.mode is None or first.block is not None \
                    or access.indices[first.mode] != nt.IndexVar(var):
                continue
            parts.append(tensor.entries_per_first_coordinate())
        return parts

    def _extents(self, inputs) -> dict[str, int]:
        """Each index variable's extent, from the operands given by the caller's names."""
        extents: dict[str, int] = {}
        where: dict[str, str] = {}
        for access in self.assignment.accesses():
            if access.tensor not in inputs:
                continue
            tensor = inputs[access.tensor]
            if tensor.order != len(access.indices):
                raise ShapeError(f"{access.tensor} has order {tensor.order} but is indexed "
                                 f"as {access}")
            for var, size in zip(access.indices, tensor.shape):
                if isinstance(var, nt.AffineIndex):
                    continue  # ir/affine.py guards it
                if var.name in extents and extents[var.name] != size:
                    raise ShapeError(
                        f"index {var.name} has extent {extents[var.name]} in "
                        f"{where[var.name]} but {size} in {access.tensor} (shape {tensor.shape})")
                extents[var.name] = size
                where[var.name] = f"{access.tensor} (shape {tensor.shape})"
        return self._affine_extents(extents, inputs)

    def _affine_extents(self, extents: dict[str, int], inputs) -> dict[str, int]:
        """Extents of the indices only affine subscripts use: given (``extents=``, the
        padding) or 'valid' (see ir/affine.valid_extent)."""
        for name, size in self.index_extents.items():
            if name in extents and extents[name] != size:
                raise ShapeError(f"extents= gives index {name} extent {size}, but the "
                                 f"operands give it {extents[name]}")
            extents[name] = size
        accesses = [a for a in self.assignment.accesses()[1:] if a.tensor in inputs]
        shapes = {a.tensor: inputs[a.tensor].shape for a in accesses}
        for var in self.assignment.lhs.indices:
            if var.name not in extents:
                size = valid_extent(var, accesses, extents, shapes)
                if size is not None:
                    extents[var.name] = size
        return extents


def _checked_notes(notes: list | None) -> tuple[str, ...] | None:
    """Loop notes from a disk entry's metadata: strings, or a ValueError."""
    if notes is None:
        return None
    if not all(isinstance(note, str) for note in notes):
        raise ValueError(f"other_forms {notes!r}")
    return tuple(notes)


# Stored input values below which handing work to the pool costs more than it saves
# (measured on 2 threads, uniform CSR: SpMV with 250k nonzeros 0.97x, 500k 1.24x, 1M
# 1.6x; SpMM, 64 columns, with 100k nonzeros and 640k dense values 1.44x).

PARALLEL_MIN_WORK = 500_000

# Stored sparse entries below which a sparse output is assembled on one thread: counting,
# sizing and filling in phases costs two more meetings of the threads and an allocation
# (SDDMM, rank 64, on 2 threads: 24k-40k entries 0.92-1.08x, 95k-150k 1.28-1.30x).
ASSEMBLY_MIN_ENTRIES = 64_000


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
    False never does, None leaves it to the rule of ir/precompute.py. ``counting``: a
    counting build, whose calls set ``kernel.loop_count`` (loop heads run: iterations
    and loop entries; backends/llvm/counting.py), for complexity checks. ``target``:
    "cpu" (native code), or "interpret": each call walks the kernel's loop IR in Python
    over the operands' arrays (slow; a check that the loop IR says all a kernel does),
    "cuda" (the planned device kernel on a GPU, through cuda-python: the ``cuda`` extra)
    or "cuda-emulated" (the same device kernel run over its grid on the CPU).
    ``gpu_schedule``: how a GPU grid splits the work ("thread_per_row", "nonzero_split",
    "count_fill"; None: the rule of ir/gpu_plan.py picks per kernel class).
    ``extents``: the extents of output indices that only affine subscripts use
    (``y(i) = x(i+r-1) * w(r)`` padded 'same': ``{"i": len(x)}``); without, 'valid'.
    ``schedule``: a Schedule, its text (``"split(i, i0, i1, 64); parallelize(i0,
    cpu_thread, no_races)"``, see ir/directives.py) or None/"auto" (the rules choose)."""
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
        formats[name] = value.format if isinstance(value, Tensor) else natural_format(value)
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
