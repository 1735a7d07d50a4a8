"""Calling a kernel: operands checked and bound to descriptors, the instance for their
dtypes chosen, and the work shared among threads as the kernel's schedule (or the rule
of equal stored entries per chunk) says."""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from ..abi import thread_calls
from ..formats.registry import generation as registry_generation
from ..ir.concrete.affine import valid_extent
from ..ir.errors import ScheduleError
from ..ir.notation import syntax as nt
from ..ir.schedule.parallel import dense_like
from ..ir.schedule.resolved import Chunks
from ..ir.types import fill_key
from ..tensors.format import Format
from ..tensors.tensor import StoredTensor
from ..tensors.value_types import checked_index_dtype
from . import auto_choice
from .auto_choice import choose
from .binding import BoundCall, ShapeError, as_tensor, expected_entries, views
from .broadcast_terms import BroadcastTerms
from .diagonals import diagonal_pattern
from .finite_sums import all_finite, sums_move
from .gpu_call import emulated_call
from .gpu_device import device_call
from .instance import Instance
from .interpreted import interpret_call
from .live_copies import live_copy
from .schedule_search import bind_searched
from .scheduling import check_bounds, chunked, combiner
from .workspaces import check_precomputes, check_workspace

# Stored input values below which handing work to the pool costs more than it saves
# (measured on 2 threads, uniform CSR: SpMV with 250k nonzeros 0.97x, 500k 1.24x, 1M
# 1.6x; SpMM, 64 columns, with 100k nonzeros and 640k dense values 1.44x).
PARALLEL_MIN_WORK = 500_000

# Stored sparse entries below which a sparse output is assembled on one thread: counting,
# sizing and filling in phases costs two more meetings of the threads and an allocation
# (SDDMM, rank 64, on 2 threads: 24k-40k entries 0.92-1.08x, 95k-150k 1.28-1.30x).
ASSEMBLY_MIN_ENTRIES = 64_000


class KernelCalls:
    """The calling half of ``api.Kernel`` (which provides ``instance``, ``formats``,
    ``plan`` and the statement's names)."""

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
        self.loop_count, self.last_call = bound.loop_count, bound
        return result

    def bind(self, *, check: bool = True, threads: int | None = None,
             **tensors) -> BoundCall:
        """Validate, specialize and prepare descriptors once; the returned callable runs
        the kernel on these operands with almost no Python work (for calls in a loop)."""
        if self.searching and not auto_choice.FORCED:  # not while a search binds
            return bind_searched(self, threads=threads, **tensors)
        bound = self._bind(check, threads, tensors)
        if self.finite or not all_finite(bound.operands):
            return self._without_empty_terms(bound, threads, tensors)
        if self._sums_move is None:
            self._sums_move = sums_move(self._request(bound.inst.types).assignment,
                                        bound.inst.types)
        if not self._sums_move:
            return self._without_empty_terms(bound, threads, tensors)
        fast = self._finite_sums().bind(check=False, threads=threads, **tensors)
        fast.guards.insert(0, (functools.partial(all_finite, bound.operands), bound))
        return fast

    def _without_empty_terms(self, bound: BoundCall, threads: int | None,
                             tensors: dict) -> BoundCall:
        """``bound``, or where the terms broadcast along an output index store nothing,
        the statement without them (broadcast_terms.py)."""
        if self._broadcast is None:
            def make(statement: nt.Assignment, formats: dict[str, Format],
                     out_format: Format, plain: bool) -> KernelCalls:
                kernel = type(self)(statement, formats, out_format, self.fastmath, None,
                                    self.convert, self.workspace, self.precompute,
                                    self.finite, self.counting,
                                    extents=self.index_extents)
                if plain:  # its terms are read as computed: bind it as it is
                    kernel._broadcast = BroadcastTerms(statement, {}, make, terms=False)
                return kernel
            self._broadcast = BroadcastTerms(self.assignment, {
                n: self.formats[n] for n in self._user_names}, make)
        return self._broadcast.bind(bound, threads, tensors)

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
        threads = thread_calls.get_num_threads() if threads is None else \
            thread_calls.checked_thread_count(threads)
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
        if auto is not None and auto.split == "windows":
            # A cut row's float sum is added in another order: only under fastmath.
            exact = self.fastmath or not np.issubdtype(inst.types[out].dtype, np.floating)
            windowed = self._entry_split(auto, threads, tensors) \
                if self.plan is None and exact else None
            if windowed is not None:
                return windowed
            auto = replace(auto, split="entries", reasons=(*auto.reasons, (
                "no entry split fits this kernel's loops" if exact else "an entry split "
                "would add a cut row's float sum in another order, which fastmath=True "
                "allows") + ": chunks of whole rows, of equal stored entries"))
        holders = [inputs[n].holder(check_shallow=not check) for n in inputs]
        even = auto is not None and auto.split == "rows"
        plan = self._thread_plan(inst, threads, extents, inputs, even) if parallel else None
        out_format = self.formats[out].with_fill(inst.types[out].fill)
        bound = BoundCall(inst, out_format, out_shape, holders, plan, expected,
                          auto.form if auto is not None else None)
        bound.auto = auto
        if plan is not None and self.plan is not None and self.plan.parallel.ranged:
            bound.splits_rows = False  # the chunks are not rows of the output
            if self.plan.parallel.reduces:
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
        if parallel.ranged:
            if out_shape and not dense_like(inst.types[self._assignment.lhs.tensor]):
                what = "reduces into a private output" if parallel.reduces else \
                    f"writes its coordinates of {parallel.index} under loops it runs whole"
                raise ScheduleError(f"parallelize({parallel.name}, {parallel.unit}, "
                                    f"{parallel.races}): each thread {what}, which needs a "
                                    "dense-like output format")
            return threads > 1 and extents[parallel.index] > 1
        if inst.parallel_mode is None:
            raise ScheduleError(f"parallelize({parallel.name}, {parallel.unit}, "
                                f"{parallel.races}): threads cannot own rows of this "
                                f"kernel's output ({self.formats[self.assignment.lhs.tensor]})"
                                ": it is assembled by one thread")
        return threads > 1 and out_shape[inst.parallel_mode] > 1

    def _thread_plan(self, inst: Instance, threads: int, extents: dict[str, int],
                     inputs: dict[str, StoredTensor], even: bool = False) -> thread_calls.Split:
        """How threads share the split loop's coordinates: as a user's schedule says, or
        in chunks of about equal stored entries of the output's first index (``even``:
        equal row ranges, where the autoscheduler finds the rows even)."""
        scheduled = self.plan.parallel if self.plan is not None else None
        var = scheduled.index if scheduled is not None else \
            self._assignment.lhs.indices[inst.parallel_mode].name
        if scheduled is None:
            return self._plan(extents[var], threads,
                              [] if even else self.entries_per_row(inputs, var))
        chunks = scheduled.chunks
        # Only the runtime's balanced split reads every operand's entries per row.
        weights = self.entries_per_row(inputs, var) if chunks.by == "balanced" else []
        if scheduled.reduces and chunks.by == "balanced":  # one private output per thread
            chunks = Chunks("parts", threads)
        return chunked(chunks, extents[var], threads, inputs, weights)

    def _sparse_workspace(self) -> KernelCalls:
        """This kernel with a sorted-list workspace (made once)."""
        if self._sparse is None:
            self._sparse = self._variant("sort", self.precompute)
        return self._sparse

    def _auto_workspace(self, policy: str) -> KernelCalls:
        """This kernel with the workspace policy the autoscheduler picked (made once)."""
        if policy not in self._auto:
            self._auto[policy] = self._variant(policy, self.precompute)
        return self._auto[policy]

    def _merging(self) -> KernelCalls:
        """This kernel without operand workspaces (made once): where their temporaries
        would not fit, the operands' slices are merged again."""
        if self._merged is None:
            self._merged = self._variant(self.workspace, False)
        return self._merged

    def _finite_sums(self) -> KernelCalls:
        """This kernel with factors moved into the sums the user placed (made once), for
        finite operands (finite_sums.py)."""
        if self._finite is None:
            self._finite = self._variant(self.workspace, self.precompute, finite=True)
        return self._finite

    def _entry_split(self, auto, threads: int, tensors: dict) -> BoundCall | None:
        """A binding of this kernel whose threads take windows of the rows operand's
        entries, cutting rows (the autoscheduler's ``windows``: one row holds more than
        a thread's share), as the schedule ``fuse(i, j); pos(..., A(i,j,...));
        parallelize(..., atomics)`` would; None where the kernel's loops have no entry
        split (its variant is then never tried again)."""
        if self._windows is None:
            self._windows = self._entry_split_variant()
        if self._windows is False:
            return None
        try:
            bound = self._windows.bind(check=False, threads=threads, **tensors)
        except ScheduleError:  # its loops are not one row loop over one loop of entries
            self._windows = False
            return None
        bound.auto = replace(auto, reasons=(*auto.reasons, f"schedule: {self._windows.schedule_text}"))
        return bound

    def _entry_split_variant(self) -> KernelCalls | bool:
        """This kernel under the schedule of an entry split over the sparse operand whose
        first index is the output's first (False where there is none to name)."""
        lhs = self.assignment.lhs
        row = lhs.indices[0] if lhs.indices else None
        taken = {v.name for a in (lhs, *self.assignment.accesses()) for v in a.indices
                 if isinstance(v, nt.IndexVar)}
        for access in self.assignment.accesses():
            if access.tensor == lhs.tensor or len(access.indices) < 2 \
                    or access.indices[0] != row or not isinstance(access.indices[1], nt.IndexVar):
                continue
            fused, positions = (next(n for n in (f"{base}{k}" for k in range(len(taken) + 1))
                                     if n not in taken) for base in ("f", "fp"))
            text = (f"fuse({row.name}, {access.indices[1].name}, {fused}); pos({fused}, "
                    f"{positions}, {access}); parallelize({positions}, cpu_thread, atomics)")
            try:
                return self._variant(self.workspace, self.precompute, schedule=text)
            except ScheduleError:
                continue
        return False

    def _variant(self, workspace: str | None, precompute: bool | None,
                 finite: bool | None = None, schedule: str | None = None) -> KernelCalls:
        """This kernel's statement and formats with another workspace choice (or
        ``schedule``)."""
        out = self.assignment.lhs.tensor
        formats = {n: self.formats[n] for n in self._user_names if n != out}
        return type(self)(self.assignment, formats, self.formats[out], self.fastmath,
                      self.out_index_dtype, self.convert, workspace, precompute=precompute,
                      finite=self.finite if finite is None else finite,
                      counting=self.counting, extents=self.index_extents,
                      schedule=schedule or (None if self.searching else self.schedule_text))

    def _plan(self, extent: int, threads: int, weights: list[np.ndarray]) -> thread_calls.Split:
        """The split of the last binding while its weights are the same arrays (cached on
        their tensors): splitting 800k rows costs 4 ms, a call on them 8."""
        last = self._last_plan
        if last is not None and last[0] == (extent, threads) and len(last[1]) == len(weights) \
                and all(a is b for a, b in zip(last[1], weights)):
            return last[2]
        total = functools.reduce(np.add, weights) if weights else None
        plan = thread_calls.split(extent, threads, total)
        self._last_plan = ((extent, threads), weights, plan)
        return plan

    def entries_per_row(self, inputs: dict[str, StoredTensor], var: str) -> list[np.ndarray]:
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
                    continue  # ir/concrete/affine.py guards it
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
