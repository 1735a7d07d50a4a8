"""compile / evaluate / einsum: from an expression and formats to a callable kernel."""

from __future__ import annotations

import functools
import itertools
import math
import mmap
import re
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import cache as disk_cache
from . import notation as nt
from . import runtime
from .backends.cpu import (
    GATHER_PHASES,
    OTHER_FORM_SUFFIX,
    SPLIT_PHASES,
    JitKernel,
    jit,
    load_object,
)
from .coerce import foreign_tensor, is_foreign_sparse, natural_format
from .describe import bound_summary, instance_repr, kernel_repr
from .diagonals import PATTERN_FORMAT, diagonal_pattern, separate_diagonals
from .format import Format, FormatError, as_format, named_format
from .formats.registry import changed_since
from .formats.registry import generation as registry_generation
from .gather import Scratch, gather_parallel
from .ir.cin import operands
from .ir.codegen import KernelCompiler
from .ir.from_schedule import statement_of
from .ir.frontend import to_concrete
from .ir.lattice import KernelTooLargeError, variants_within_budget
from .ir.schedule import ScheduleError, schedule
from .ir.statements import concrete_text
from .ir.types import TensorType, type_key
from .kernel_cache import KERNELS
from .live_copies import Refresh, live_copy
from .outputs import AssembledOutput, output_params, refused_insert_error
from .pickling import instance_meta, reduce_kernel
from .probe import ASSEMBLIES, FORMS, Probe, Way
from .refusals import advised
from .results import MIN_BYTES, RESULTS, check_fits_memory
from .tensor import Tensor, checked_index_dtype, checked_value_dtype

if TYPE_CHECKING:
    from llvmlite.ir import Module as LLVMModule


class ShapeError(ValueError):
    """Operands whose dimensions disagree with the expression or with each other."""


@dataclass
class Instance:
    """A kernel specialized to dtypes: its statements and machine code."""

    types: dict[str, TensorType]
    concrete: str  # the scheduled statements, one per line
    jit: JitKernel
    dtype: str
    conversions: dict[str, Format]  # operands converted on each call, and to what
    lattices: str
    arg_order: list[str]
    parallel_mode: int | None = None  # output mode whose rows threads may split
    initializes_output: bool = False  # the kernel sets every entry of its dense output

    __repr__ = instance_repr



_CACHE = KERNELS  # compiled instances by specialization, bounded by bytes


def _result_dtype(assignment: nt.Assignment, dtypes: dict[str, str]) -> str:
    inputs = [np.dtype(dtypes[t]) for t in assignment.tensors() if t != assignment.lhs.tensor]
    literals = [lit.value for lit in _literals(assignment.rhs)]
    result = np.result_type(*inputs, *literals) if inputs or literals else np.dtype("float64")
    if _has_op(assignment.rhs, ("div",)) and result.kind in "biu":
        result = np.dtype("float64")
    if result.kind == "b" and _has_op(assignment.rhs, ("sub", "neg")):
        raise TypeError("subtraction and negation of bool tensors are refused, as numpy "
                        "refuses them (their value would depend on how the expression is "
                        "split); give an operand an integer dtype")
    if result.kind == "u":
        result = np.dtype("int64")
    if result.kind == "i":
        limits = np.iinfo(result)
        for value in literals:
            if not isinstance(value, bool) and isinstance(value, int) \
                    and not limits.min <= value <= limits.max:
                raise OverflowError(f"the literal {value} does not fit the result dtype "
                                    f"{result} (numpy refuses it too); write it as a float "
                                    "or give an operand a wider dtype")
    return str(result)


def _literals(expr: nt.Expr):
    if isinstance(expr, nt.Literal):
        yield expr
    for child in nt.children(expr):
        yield from _literals(child)


def _has_op(expr: nt.Expr, kinds: tuple[str, ...]) -> bool:
    return any(isinstance(e, nt.Call) and e.op.kind in kinds for e in nt.subexpressions(expr))


# Operands of at most this order are tried converted in every mode order (4! = 24 builds
# that may each fail); higher orders only in their natural one.
MAX_PERMUTED_ORDER = 4


def _mode_order(fmt: Format) -> list[int]:
    """The modes of a conversion's coordinate list, outermost first."""
    return [level.mode for level in fmt.levels]


def _refuse_rescans(nests, types: dict[str, TensorType],
                    conversions: dict[str, Format]) -> None:
    """With a transposed copy in the loops, refuse a loop that only outermost levels
    drive under a loop over an index they lack: those levels would be walked whole for
    every coordinate of the outer loop. CSR x CSR into CSR (or CSC) then becomes an
    inner product, O(rows x columns), where a workspace (not supported yet) would cost
    O(flops). The statement's own error stands instead."""
    if all(_mode_order(fmt) == sorted(_mode_order(fmt)) for fmt in conversions.values()):
        return
    for nest in nests:
        # A full output costs every coordinate anyway: there, full levels may drive.
        dense_out = all(level.full for level in types[nest.assign.tensor].levels)
        users = [o for o in operands(nest.body) if o.vars]
        for depth, var in enumerate(nest.order[1:], start=1):
            drivers = [o for o in users if var in o.vars]
            if not drivers or any(o.vars[0] != var for o in drivers):
                continue  # bounded by a level under the outer loops' coordinates
            outside = nest.order[:depth]
            if all(v in o.vars for o in drivers for v in outside):
                continue
            if dense_out and all(types[o.tensor].levels[0].full for o in drivers):
                continue
            names = ", ".join(sorted({o.tensor for o in drivers}))
            raise ScheduleError(f"{names} would be walked whole for every coordinate of "
                                f"{outside[0]}")


class Kernel:
    """A compiled expression; call it with tensors by name, many times.

    Machine code is specialized per value/index dtype on first use and cached.
    """

    def __init__(self, assignment: nt.Assignment | str, formats: dict[str, object],
                 out_format: object = None, fastmath: bool = False,
                 out_index_dtype: str | None = None, convert: bool = True):
        self.assignment = nt.parse(assignment) if isinstance(assignment, str) else assignment
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
        self.fastmath = fastmath
        self.out_index_dtype = out_index_dtype
        self.convert = convert
        # Internally each further index order of a repeated input is an operand of its
        # own (see nt.separate_repeated_uses), given the same tensor on every call.
        self._assignment, self._aliases = nt.separate_repeated_uses(self.assignment)
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
        self.last: Instance | None = None

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
                 index_dtypes: dict[str, str] | None = None) -> Instance:
        types, dtype, key = self.instance_keys(dtypes, index_dtypes)
        cached = _CACHE.get(key)
        if cached is None:
            disk_key = self.disk_key(types)  # 1 ms (the host CPU's features): on a miss
            cached = self._load(disk_key, types, dtype)
            if cached is None:
                cached = self._build_converting(types, dtype)
                other_key = disk_key + "-other"  # stored once it is compiled
                if cached.jit.other_builder is not None:
                    cached.jit.other_builder = _stored(cached.jit.other_builder, other_key)
                disk_cache.store(disk_key, cached.jit.object_code,
                                 instance_meta(cached, other_key))
            _CACHE[key] = cached
        self.last = cached
        return cached

    def instance_keys(self, dtypes: dict[str, str] | None,
                      index_dtypes: dict[str, str] | None
                      ) -> tuple[dict[str, TensorType], str, tuple]:
        """The operand types for these dtypes, the result dtype, and the key of their
        instance in memory."""
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
        dtypes[out] = _result_dtype(self._assignment, dtypes)
        types = {n: self.formats[n].tensor_type(dtypes[n], index_dtypes[n]) for n in names}
        key = (str(self._assignment), tuple(sorted((n, types[n]) for n in names)),
               self.fastmath, self.convert, registry_generation())
        return types, dtypes[out], key

    def disk_key(self, types: dict[str, TensorType]) -> str:
        """The key of the instance for ``types`` in the disk cache (and in pickles): it
        names the host CPU and versions, so another machine's is another key."""
        return disk_cache.entry_key(
            (str(self._assignment), tuple((n, type_key(types[n])) for n in self._names),
             self.fastmath, self.convert))

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
            conversions = {n: named_format("coo", types[n].order, modes)
                           for n, modes in meta["conversions"].items()}
            retyped = dict(types)
            for n, fmt in conversions.items():
                retyped[n] = fmt.tensor_type(types[n].dtype, types[n].index_dtype)
            if meta["other_form_key"] and not kernel.has_other:
                kernel.other_builder = functools.partial(
                    self._other_from_disk, meta["other_form_key"],
                    kernel.name + OTHER_FORM_SUFFIX, retyped, dtype, conversions)
            return Instance(retyped, meta["concrete"], kernel, dtype, conversions,
                            meta["lattices"], self._names, meta["parallel_mode"],
                            meta["initializes_output"])
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
        return _stored(self._build(types, dtype, conversions).jit.other_builder, key)()

    def _build_converting(self, types: dict[str, TensorType], dtype: str) -> Instance:
        """Build; if the operands' storage orders cannot be reconciled, convert operands
        to sorted coordinate lists: one at a time in natural mode order, then one at a
        time in every other mode order (a transposed use), then all at once, in the
        output's order and then in natural order."""
        try:
            return self._build(types, dtype, {})
        except ScheduleError as error:
            if not self.convert or isinstance(error, KernelTooLargeError):
                raise advised(error) from None  # converted operands are as sparse
            for orders in self._conversion_candidates(types):
                conversions = {n: named_format("coo", types[n].order, modes)
                               for n, modes in orders.items()}
                retyped = dict(types)
                for n, fmt in conversions.items():
                    retyped[n] = fmt.tensor_type(types[n].dtype, types[n].index_dtype)
                try:
                    return self._build(retyped, dtype, conversions)
                except ScheduleError:
                    continue
            raise advised(error) from None

    def _conversion_candidates(self, types: dict[str, TensorType]) -> list[dict]:
        """Operands to convert, each with the mode order of its coordinate list, in the
        order to try them."""
        out = self._assignment.lhs.tensor
        uses = {a.tensor: a.indices for a in self._accesses if a.tensor != out}
        inputs = [n for n in uses if types[n].order > 0 and n not in self._patterns]
        natural = {n: tuple(range(types[n].order)) for n in inputs}
        # Output indices outermost in its storage order, then the others as they appear.
        lhs = self._assignment.lhs.indices
        first = [lhs[lv.mode] for lv in types[out].levels if lv.mode is not None]
        rank = {v: k for k, v in enumerate(dict.fromkeys(
            [*first, *(v for n in inputs for v in uses[n])]))}
        along_output = {n: tuple(sorted(natural[n], key=lambda m, n=n: rank[uses[n][m]]))
                        for n in inputs}
        singles = [(n, natural[n]) for n in reversed(inputs)]
        singles += [(n, modes) for n in reversed(inputs)
                    if types[n].order <= MAX_PERMUTED_ORDER
                    for modes in itertools.permutations(natural[n]) if modes != natural[n]]
        # One already stored so would repeat the build that failed.
        return [{n: modes} for n, modes in singles
                if named_format("coo", len(modes), modes) != self.formats[n]] \
            + [along_output, natural]

    def _build(self, types: dict[str, TensorType], dtype: str,
               conversions: dict[str, Format], lazy: bool = True) -> Instance:
        """Lower and compile. ``lazy``: a kernel with two forms compiles its other form
        when first asked for (``JitKernel.other``), in a module of its own; otherwise
        both go in one module (what inspection and export show)."""
        start = time.perf_counter()
        concrete = to_concrete(self._assignment, types)
        order = self._names  # the output first, then the inputs
        try:
            nests = schedule(concrete, types)
            _refuse_rescans(nests, types, conversions)
            builder = KernelCompiler(nests, types, order, dtype, fastmath=self.fastmath)
            module = builder.compile()
        except ScheduleError as error:
            try:
                nests = schedule(concrete, types, split=True)
            except ScheduleError:
                raise error from None
            _refuse_rescans(nests, types, conversions)
            builder = KernelCompiler(nests, types, order, dtype, fastmath=self.fastmath)
            module = builder.compile()
        parallel_mode = _parallel_mode(nests, types, order[0])
        phases = SPLIT_PHASES if builder.can_split_assembly() else \
            GATHER_PHASES if builder.can_gather_assembly() else ()
        phases, other_form = variants_within_budget(builder.budget.spent, phases,
                                                    bool(builder.form_choices))
        for phase in phases:
            KernelCompiler(nests, types, order, dtype, fastmath=self.fastmath, phase=phase,
                           module=module).compile()
        other = functools.partial(_other_form, nests, types, order, dtype, self.fastmath,
                                  phases, builder.entry_name)
        if other_form and not lazy:
            other(module)
        if phases:
            parallel_mode = types[order[0]].levels[0].mode
        text = concrete_text(statement_of(nests, types))
        lowered = time.perf_counter() - start
        compiled = jit(module, builder.entry_name)
        compiled.phases = {"lower to IR": lowered, **compiled.phases}
        if other_form and lazy:
            compiled.other_builder = lambda: jit(other(None), builder.entry_name +
                                                 OTHER_FORM_SUFFIX)
        return Instance(types, text, compiled, dtype, conversions,
                        "\n".join(builder.lattice_log), order, parallel_mode,
                        builder.initializes_output)

    # -- inspection ---------------------------------------------------------------------
    def _default(self) -> Instance:
        return self.last or self.instance()

    def _with_code(self) -> Instance:
        """The current instance, recompiled if it came from the disk cache (no IR kept)."""
        inst = self._default()
        jit_code = inst.jit
        together = jit_code.compiled is not None and jit_code.compiled.module is jit_code.module
        if jit_code.llvm_ir is None or (jit_code.has_other and not together):
            inst.jit = self._build(inst.types, inst.dtype, inst.conversions, lazy=False).jit
        return inst

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

    def ptx(self, sm: str = "sm_80") -> str:
        """PTX for an NVIDIA GPU of compute capability ``sm`` (needs no GPU)."""
        from .backends.cuda import emit_ptx

        inst = self._with_code()
        return emit_ptx(inst.jit.llvm_ir, inst.jit.name, sm)

    def export(self, path: str | Path, name: str = "llvsparse_kernel") -> tuple[Path, Path]:
        """Write an object file (``.o``) or shared library (``.so``) plus a C header."""
        from .export import export_kernel

        return export_kernel(self, self._with_code(), Path(path), name)

    @property
    def concrete(self) -> str:
        """Concrete index notation of the scheduled statements."""
        return self._default().concrete

    # -- calling ------------------------------------------------------------------------
    def __call__(self, *, check: bool = True, threads: int | None = None, **tensors):
        """Run on tensors given by name. ``check=False`` skips the O(nnz) validation of
        trusted inputs; ``threads`` overrides ``ls.set_num_threads`` for this call;
        ``out=array`` writes a dense-like result into ``array`` (see ``BoundCall``),
        unless the expression has an operand named ``out``."""
        out = tensors.pop("out", None) if "out" not in self._user_names else None
        if self._last_bound is not None:
            bound = self._last_bound.reuse(tensors, threads, check)
            if bound is not None:
                return bound(out)
        bound = self.bind(check=check, threads=threads, **tensors)
        self._last_bound = bound
        return bound(out)

    def bind(self, *, check: bool = True, threads: int | None = None,
             **tensors) -> BoundCall:
        """Validate, specialize and prepare descriptors once; the returned callable runs
        the kernel on these operands with almost no Python work (for calls in a loop)."""
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
        given = {n: _as_tensor(tensors[n], self.formats[n], n) for n in names if n != out}
        extents = self._extents(given)
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
                     *((t.dtype, t.index_dtype) for t in given.values()))
        inst = self._signatures.get(signature)
        if inst is None:
            dtypes = {n: t.dtype.name for n, t in given.items()}
            index_dtypes = {n: t.index_dtype.name for n, t in given.items()}
            index_dtypes[out] = self.out_index_dtype or ("int64" if wide else "int32")
            inst = self._signatures[signature] = self.instance(dtypes, index_dtypes)
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
        expected = _expected_entries(inputs.values())
        parallel = (threads > 1 and inst.parallel_mode is not None
                    and out_shape[inst.parallel_mode] > 1
                    and sum(len(t.values) for t in inputs.values()) >= PARALLEL_MIN_WORK
                    and (not inst.jit.assembly or expected >= ASSEMBLY_MIN_ENTRIES))
        holders = [inputs[n].holder(check_shallow=not check) for n in inputs]
        plan = None
        if parallel:
            var = self._assignment.lhs.indices[inst.parallel_mode].name
            plan = self._plan(out_shape[inst.parallel_mode], threads,
                              self._entries_per_row(inputs, var))
        bound = BoundCall(inst, self.formats[out], out_shape, holders, plan, expected)
        bound.refreshes = refreshes
        bound.operands = {n: tensors[n] for n in names if n != out}
        # The caller's tensors' own descriptors (a converted operand's source's).
        bound.operand_holders = [given[n].holder(check_shallow=False) for n in bound.operands]
        bound.wrapped = {n: (a.shape, a.dtype) for n, a in bound.operands.items()
                         if isinstance(a, np.ndarray) and _views(inputs[n].values, a)}
        bound.requested_threads = threads
        bound.patterned = bool(self._patterns)
        bound.converted = converted
        return bound

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

    def _entries_per_row(self, inputs: dict[str, Tensor], var: str) -> list[np.ndarray]:
        """Stored entries under each coordinate of ``var`` (the split loop's index) in
        each sparse input whose first level stores it: their sum evens out threads' work."""
        parts = []
        for access in self._accesses:
            tensor = inputs.get(access.tensor)
            if tensor is None or all(lv.full for lv in tensor.tensor_type.levels):
                continue
            first = tensor.tensor_type.levels[0]
            if first.mode is None or first.block is not None \
                    or access.indices[first.mode].name != var:
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
                if var.name in extents and extents[var.name] != size:
                    raise ShapeError(
                        f"index {var.name} has extent {extents[var.name]} in "
                        f"{where[var.name]} but {size} in {access.tensor} (shape {tensor.shape})")
                extents[var.name] = size
                where[var.name] = f"{access.tensor} (shape {tensor.shape})"
        return extents


# Dense results from which threads share clearing or paging in the rows before the
# kernel. Below it the extra phase costs more than the page faults it moves (SpMM on 2
# threads with a fresh result: 5.6 MB 0.63-0.89x with it, 1.35x without; 19 MB level;
# 33 MB 1.77x vs 1.66x; 59 MB 1.65x vs 0.97x).
SHARED_CLEAR_BYTES = 16 << 20

# Stored input values below which handing work to the pool costs more than it saves
# (measured on 2 threads, uniform CSR: SpMV with 250k nonzeros 0.97x, 500k 1.24x, 1M
# 1.6x; SpMM, 64 columns, with 100k nonzeros and 640k dense values 1.44x).
PARALLEL_MIN_WORK = 500_000

# Stored sparse entries below which a sparse output is assembled on one thread: counting,
# sizing and filling in phases costs two more meetings of the threads and an allocation
# (SDDMM, rank 64, on 2 threads: 24k-40k entries 0.92-1.08x, 95k-150k 1.28-1.30x).
ASSEMBLY_MIN_ENTRIES = 64_000


class BoundCall:
    """A kernel bound to operands: each call allocates the output and runs native code.

    Dense-like outputs are allocated here and passed in (one reused descriptor); other
    outputs are grown by the kernel and adopted afterwards.
    """

    def __init__(self, inst: Instance, out_format: Format, out_shape: tuple[int, ...],
                 inputs: list[runtime.DescriptorHolder], plan: runtime.Split | None,
                 expected: int = 0):
        self.inst, self.format, self.shape = inst, out_format, out_shape
        self.out_type = inst.types[inst.arg_order[0]]
        self.inputs, self.plan = inputs, plan  # plan: chunks for threads, None for one
        # Dense-like outputs are allocated here, zeroed, and passed in; the kernel never
        # grows them.
        self.dense = not out_shape or _dense_like(self.out_type)
        self.new_small = None
        if self.dense:
            self.extents = [out_shape[lv.mode] for lv in out_format.levels]
            self.out_extents = tuple(self.extents)
            # The last out= array that passed the overlap check (see _into).
            self.checked_out: Callable[[], np.ndarray | None] = lambda: None
            self.size = math.prod(self.extents)
            self.dtype = np.dtype(self.out_type.dtype)
            params, self.flat_params = output_params(out_format, self.out_type, self.extents)
            self.result = Tensor.dense_outputs(out_shape, out_format, self.out_type,
                                               self.extents, params)
            # Below the pool's threshold a fresh result comes straight from numpy, left
            # uncleared where the kernel sets every entry (see ResultPool.zeros).
            if self.size * self.dtype.itemsize < MIN_BYTES:
                self.new_small = np.empty if inst.initializes_output else np.zeros
            self.output = runtime.DescriptorHolder(self.extents, [None], self.flat_params)
        else:
            self.assembled = AssembledOutput(out_shape, out_format, self.out_type, expected)
            self.output = self.assembled.holder(reserve=False)
        # The kernel in each form it has, each prepared on the shared descriptor when
        # first run (the other form may not be compiled yet: see JitKernel.other).
        self.code: dict[str, JitKernel] = {}
        self.calls: dict[str, Callable[[], int]] = {}
        # The form, and gathering threads or not: timed on the first calls (see probe.py).
        gathers = plan is not None and "append" in inst.jit.assembly
        self.probe = Probe(FORMS if inst.jit.has_other else FORMS[:1],
                           ASSEMBLIES if gathers else ASSEMBLIES[:1])
        self.way = None if self.probe.probing else self.probe.next_way()
        self.scratch = Scratch(self.assembled.moved_slots(), plan) if gathers else None
        self.busy = threading.Lock()  # the shared output descriptor: one call at a time
        self.refreshes: list[Refresh] = []  # see live_copies.py

    def __repr__(self) -> str:
        return f"<BoundCall {self.inst.concrete.splitlines()[0]}; {bound_summary(self)}>"

    def __reduce__(self):
        raise TypeError("a kernel binding holds pointers into its operands' memory and "
                        "cannot be pickled; pickle the Kernel (and the tensors) and bind "
                        "again")

    def _code(self, form: str) -> JitKernel:
        """The kernel in ``form``, with its call prepared on the shared descriptor."""
        code = self.code.get(form)
        if code is None:
            code = self.inst.jit if form == FORMS[0] else self.inst.jit.other
            self.calls[form] = runtime.prepared_call(code.address,
                                                     [self.output, *self.inputs])
            self.code[form] = code
        return code

    def _call(self, form: str) -> Callable[[], int]:
        self._code(form)
        return self.calls[form]

    def _run_dense(self, code: JitKernel, values: np.ndarray,
                   prepare: Callable[[int, int], None] | None = None) -> None:
        output = runtime.DescriptorHolder(self.extents, [values], self.flat_params)
        if self.plan:
            runtime.call_parallel(code.range_address, [output, *self.inputs],
                                  self.plan, prepare)
        else:
            runtime.call(code.address, [output, *self.inputs])

    def _run_one(self, form: str, values: np.ndarray) -> None:
        """One thread: through the shared descriptor, or a private one while another
        thread is inside this binding."""
        if self.busy.acquire(blocking=False):
            try:
                call = self.calls.get(form) or self._call(form)
                self.output.point_to(0, values)
                call()
            finally:
                self.output.forget(0)  # the result's memory is the caller's alone
                self.busy.release()
        else:
            self._run_dense(self._code(form), values)

    def _into(self, out: np.ndarray) -> np.ndarray:
        """``out`` as the flat values of this call's output, after checking it fits.

        The overlap with the inputs is checked once per ``out`` array: a loop that passes
        the same one again skips it (the binding's inputs are fixed, and an array's
        memory cannot move while it is alive): the check was 1.4 of the 2.2 µs that
        ``out=`` added to a 4.5 µs SpMV."""
        flags = getattr(out, "flags", None)
        if not isinstance(out, np.ndarray) or out.dtype != self.dtype \
                or out.shape != self.out_extents or not flags.c_contiguous \
                or not flags.writeable or not flags.aligned:
            raise ValueError(f"out= must be a writable, aligned, C-contiguous {self.dtype} "
                             f"array of shape {self.out_extents} (the output's levels in order)")
        if self.checked_out() is not out:
            for holder in self.inputs:
                if any(a is not None and np.may_share_memory(out, a) for a in holder.arrays):
                    raise ValueError("out= overlaps an input's memory; kernels assume "
                                     "outputs never alias inputs")
            self.checked_out = weakref.ref(out)  # weak: the binding keeps no result alive
        return out.reshape(-1)

    def reuse(self, tensors: dict, threads: int | None, check: bool) -> BoundCall | None:
        """This binding, if ``tensors`` are the same objects as last time (Tensors with the
        same arrays, numpy arrays of the same shape and dtype that the binding views
        without a copy) and the thread request matches. ``check`` validates the Tensors
        again (remembered for sealed ones, see ``Tensor.validate``)."""
        wanted = runtime.get_num_threads() if threads is None else threads
        if wanted != self.requested_threads or tensors.keys() != self.operands.keys():
            return None
        for (name, bound), holder in zip(self.operands.items(), self.operand_holders):
            given = tensors[name]
            if given is not bound:
                return None
            if isinstance(given, Tensor):
                if given.holder(check_shallow=True) is not holder:
                    return None
                if self.patterned and given._sealed_state() is None:
                    return None  # its entries may have moved: build the pattern again
                if check:
                    given.validate()
            elif self.wrapped.get(name) != (getattr(given, "shape", None),
                                            getattr(given, "dtype", None)):
                return None
        # A converted copy follows its source's values (live_copies.py), not its index
        # arrays: a source whose index arrays may have changed is converted again.
        if any(source._sealed_state() is None for source in self.converted):
            return None
        return self

    def __call__(self, out: np.ndarray | None = None):
        """Run the kernel; the result is a new Tensor. ``out`` (dense-like outputs only):
        a C-contiguous array of the output's shape and dtype to write into instead, so a
        loop of calls reuses memory whose pages are already mapped (a fresh 50 MB result
        costs its page faults on every call, taken by all threads at once)."""
        for refresh in self.refreshes:
            refresh()
        try:
            if self.way is not None:
                return self._run(self.way, out)
            way = self.probe.next_way()
            start = time.perf_counter()
            result = self._run(way, out)
            self.probe.record(way, time.perf_counter() - start)
            self.way = self.probe.choice  # set once the probe has chosen: no more timing
            return result
        except runtime.KernelRuntimeError as error:
            if error.status == runtime.STATUS_INSERT_REFUSED:
                raise refused_insert_error(self.format, self.out_type, error) from error
            raise

    def _run(self, way: Way, out: np.ndarray | None):
        form = way.form
        if self.dense:
            if out is None and self.new_small is not None:  # fresh, never dirty
                values, dirty = self.new_small(self.size, self.dtype), False
            elif out is None:  # large results reuse the memory of collected ones
                check_fits_memory(self.size * self.dtype.itemsize, "the output, "
                                  f"{'x'.join(map(str, self.shape))} stored whole,")
                values, dirty = RESULTS.zeros(self.size, self.dtype,
                                              self.inst.initializes_output)
            else:
                values, dirty = self._into(out), True
            fresh = not dirty
            dirty = dirty and not self.inst.initializes_output
            if self.plan and values.nbytes >= SHARED_CLEAR_BYTES and (dirty or fresh):
                # threads clear (out=, recycled) or page in (fresh) their rows first
                rows = values.reshape(self.extents[0], -1)
                self._run_dense(self._code(form), values,
                                _clear(rows) if dirty else _page_in(rows))
            else:
                if dirty:
                    values.fill(0)
                if self.plan:
                    self._run_dense(self._code(form), values)
                else:
                    self._run_one(form, values)
            return self.result(values)
        if out is not None:
            raise TypeError("out= needs a dense-like output (levels without arrays); this "
                            f"kernel assembles a {self.format.name or 'sparse'} output")
        if way.assembly == "gathered":
            return self._gathered(self._code(form))
        if self.plan and not self.scratch:  # threads count, then fill (see can_split_assembly)
            holders = [self.assembled.holder(reserve=False), *self.inputs]
            runtime.assemble_parallel(
                self._code(form).assembly, holders, self.plan,
                lambda total: self.assembled.reserve_for(holders[0], total))
            return self.assembled.adopt(holders[0])
        return self._assembled_on_one(form)

    def _assembled_on_one(self, form: str) -> Tensor:
        if self.busy.acquire(blocking=False):
            try:  # the shared descriptor, emptied by adoption or by a failed call
                self.output.clear()
                self.assembled.reserve(self.output)
                (self.calls.get(form) or self._call(form))()
                return self.assembled.adopt(self.output)
            finally:
                self.busy.release()
        holders = [self.assembled.holder(), *self.inputs]  # another thread is inside
        runtime.call(self._code(form).address, holders)
        return self.assembled.adopt(holders[0])

    def _gathered(self, code: JitKernel) -> Tensor:
        """Threads append into the binding's kept buffers (or, while another thread is
        inside this binding, fresh ones) and copy them into the output."""
        holders = [self.assembled.holder(reserve=False), *self.inputs]
        kept = self.scratch.lock.acquire(blocking=False)
        scratch = self.scratch if kept else Scratch(self.scratch.moved, self.plan)
        try:
            gather_parallel(code.assembly, holders, self.plan, scratch,
                            lambda total: self.assembled.reserve_for(holders[0], total))
        finally:
            if kept:
                self.scratch.lock.release()
        return self.assembled.adopt(holders[0])


def _other_form(nests, types: dict[str, TensorType], order: list[str], dtype: str,
                fastmath: bool, phases: tuple[str, ...], entry: str,
                module: LLVMModule | None) -> LLVMModule:
    """A kernel's functions in their other form, added to ``module`` or a new one."""
    for phase in ("whole", *phases):
        module = KernelCompiler(nests, types, order, dtype, fastmath=fastmath, phase=phase,
                                module=module, other_form=True,
                                name=entry + OTHER_FORM_SUFFIX).compile()
    return module


def _stored(build: Callable[[], JitKernel], key: str) -> Callable[[], JitKernel]:
    """``build``, storing what it compiles in the disk cache under ``key``."""
    def build_and_store() -> JitKernel:
        kernel = build()
        disk_cache.store(key, kernel.object_code, {"name": kernel.name})
        return kernel
    return build_and_store


def _clear(rows: np.ndarray) -> Callable[[int, int], None]:
    def clear(lo: int, hi: int) -> None:
        rows[lo:hi] = 0
    return clear


def _page_in(rows: np.ndarray) -> Callable[[int, int], None]:
    """Write one zero per page of a fresh zeroed array's rows [lo, hi), so the threads
    take its page faults together up front rather than mid-stream in the kernel (SpMM
    into a fresh 46 MB result on 2 threads: 8.4 vs 11.5 ms)."""
    step = max(mmap.PAGESIZE // rows.itemsize, 1)

    def page_in(lo: int, hi: int) -> None:
        rows[lo:hi].reshape(-1)[::step] = 0
    return page_in


def _expected_entries(inputs) -> int:
    """Stored values of the sparse operands together: a bound on a sparse output's size
    for unions, intersections and pattern-preserving kernels (products of sparse
    operands can exceed it; then the kernel grows the arrays as usual)."""
    return sum(len(t.values) for t in inputs
               if not all(lv.full for lv in t.tensor_type.levels))


def _dense_like(out_type: TensorType) -> bool:
    """Levels that are full, insert-only, array-free and sized by their extents: storage
    allocated up front from the shape."""
    return all(lv.full and lv.can_insert and not lv.definition.arrays
               and lv.definition.sized_by_extent for lv in out_type.levels)


def _parallel_mode(nests, types: dict[str, TensorType], out: str) -> int | None:
    """The output mode threads may split: the output's first index (every loop over it is
    clamped to a thread's rows; loops outside it run whole in each thread), into a
    dense-like output, so each thread writes only its own rows and the output can be
    allocated up front. (Sparse outputs that threads assemble in phases get their first
    mode in ``_build``.)

    Loops outside the split index may only walk storage-only levels (diagonals, slots):
    each thread then runs its rows of every diagonal, a contiguous run clamped by its
    bounds (banded SpMV on 2 threads: 1.6x). Under a loop over another index (a
    column-major operand) every thread would walk all of that operand's entries.
    """
    if len(nests) != 1 or not nests[0].order or not nests[0].assign.vars:
        return None
    nest = nests[0]
    split = nest.assign.vars[0]
    if nest.assign.derived or split not in nest.order:
        return None
    outer = set(nest.order[:nest.order.index(split)])
    for op in operands(nest.body):
        levels = types[op.tensor].levels
        if any(var in outer and level.mode is not None for var, level in zip(op.vars, levels)):
            return None
    out_type = types[out]
    return out_type.levels[0].mode if _dense_like(out_type) else None


def _views(values: np.ndarray, array: np.ndarray) -> bool:
    """Whether a wrapped operand's values are ``array``'s memory (no copy was made)."""
    return values.size == array.size and values.dtype == array.dtype and \
        values.__array_interface__["data"][0] == array.__array_interface__["data"][0]


def _as_tensor(value, fmt: Format, name: str):
    order = value.order if isinstance(value, Tensor) else \
        value.ndim if is_foreign_sparse(value) else np.ndim(value)
    if order != fmt.order:
        raise ShapeError(f"{name} is used with {fmt.order} "
                         f"{'index' if fmt.order == 1 else 'indices'} but has {order} "
                         f"{'dimension' if order == 1 else 'dimensions'}")
    if isinstance(value, Tensor):
        if value.format != fmt:
            raise TypeError(f"{name} is stored as {value.format!r}, but the kernel was "
                            f"compiled for {fmt!r}; convert it with .asformat()")
        changed = changed_since([level.kind for level in fmt.levels], value.generation)
        if changed is not None:
            raise FormatError(f"{name} was laid out by an earlier definition of level format "
                              f"{changed!r}, registered again since; pack it again from "
                              "its data")
        return value
    foreign = foreign_tensor(value, fmt)  # scipy.sparse, pydata/sparse
    if foreign is not None:
        return foreign
    array = np.asarray(value)
    if array.dtype == object:
        raise TypeError(f"{name}: cannot use a {type(value).__name__} as a tensor")
    return Tensor.from_numpy(array, format=fmt)


def compile(assignment: str | nt.Assignment, out_format: object = None, fastmath: bool = False,
            **formats: object) -> Kernel:
    """Compile ``assignment`` for the given operand formats (names or Format objects)."""
    return Kernel(assignment, formats, out_format, fastmath)


# Kernel objects of evaluate(), the most recently used last; each keeps its compiled
# instances alive past their eviction from the byte-bounded cache, so they are few.
_KERNELS: dict[tuple, Kernel] = {}
_KERNELS_KEPT = 64
_KERNELS_LOCK = threading.Lock()


def evaluate(assignment: str | nt.Assignment, out_format: object = "dense",
             check: bool = True, **tensors):
    """Compile (cached in memory) and run; returns a Tensor."""
    parsed = nt.parse(assignment) if isinstance(assignment, str) else assignment
    formats = {}
    for name, value in tensors.items():
        formats[name] = value.format if isinstance(value, Tensor) else natural_format(value)
    out_spec = out_format
    key = (str(parsed), tuple(sorted((n, f) for n, f in formats.items() if isinstance(f, Format))),
           tuple(sorted((n, f) for n, f in formats.items() if isinstance(f, str))),
           out_spec if isinstance(out_spec, (str, Format)) else repr(out_spec))
    with _KERNELS_LOCK:
        kernel = _KERNELS.pop(key, None)
        if kernel is None:
            kernel = Kernel(parsed, formats, out_spec)
        _KERNELS[key] = kernel
        if len(_KERNELS) > _KERNELS_KEPT:
            del _KERNELS[next(iter(_KERNELS))]
    return kernel(check=check, **tensors)


def einsum(subscripts: str, *operands, out_format: object = "dense"):
    """numpy-style einsum over tensors, e.g. ``einsum("ij,j->i", A, x)``."""
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum subscripts must be a string, not {type(subscripts).__name__}")
    compact = subscripts.replace(" ", "")
    if not re.fullmatch(r"[A-Za-z]*(,[A-Za-z]*)*->[A-Za-z]*", compact):
        raise ValueError(f"einsum subscripts are letters, one per mode, with one explicit "
                         f"output, as in 'ij,j->i' (no '...' or digits), not {subscripts!r}")
    inputs, output = compact.split("->")
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum: {len(terms)} operand subscripts but {len(operands)} operands")
    names = [f"T{k}" for k in range(len(terms))]
    rhs = " * ".join(f"{n}({','.join(t)})" for n, t in zip(names, terms))
    text = f"OUT({','.join(output)}) = {rhs}" if output else f"OUT = {rhs}"
    return evaluate(text, out_format=out_format, **dict(zip(names, operands)))

