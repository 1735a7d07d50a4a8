"""The call path: a kernel bound to its operands, run with almost no Python work."""

from __future__ import annotations

import ctypes
import math
import mmap
import threading
import time
import weakref
from collections.abc import Callable

import numpy as np

from ..abi import runtime, thread_calls
from ..abi.results import MIN_BYTES, RESULTS, check_fits_memory
from ..backends.cpu import JitKernel
from ..formats.registry import changed_since
from ..ir.schedule.parallel import dense_like
from ..tensors import made_as
from ..tensors.coerce import foreign_tensor, is_foreign_sparse
from ..tensors.describe import bound_summary
from ..tensors.format import Format, FormatError
from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor
from .gather import Scratch, gather_parallel
from .instance import Instance
from .live_copies import Refresh
from .outputs import AssembledOutput, output_params, refused_insert_error
from .probe import ASSEMBLIES, FORCED, FORMS, Probe, Way


class ShapeError(ValueError):
    """Operands whose dimensions disagree with the expression or with each other."""


# Dense results from which threads share clearing or paging in the rows before the
# kernel. Below it the extra phase costs more than the page faults it moves (SpMM on 2
# threads with a fresh result: 5.6 MB 0.63-0.89x with it, 1.35x without; 19 MB level;
# 33 MB 1.77x vs 1.66x; 59 MB 1.65x vs 0.97x).
SHARED_CLEAR_BYTES = 16 << 20

# Stored operand values up to which a binding serves new operands of its signature
# (BoundCall._sibling): binding afresh costs 0.3-0.5 ms, what a 10 x 10 chain pays per
# operation; far below the entries at which threads or the output's reservation differ.
SIBLING_MAX_STORED = 1 << 14


class BoundCall:
    """A kernel bound to operands: each call allocates the output and runs native code.

    Dense-like outputs are allocated here and passed in (one reused descriptor); other
    outputs are grown by the kernel and adopted afterwards.
    """

    def __init__(self, inst: Instance, out_format: Format, out_shape: tuple[int, ...],
                 inputs: list[runtime.DescriptorHolder], plan: thread_calls.Split | None,
                 expected: int = 0, form: str | None = None):
        self.inst, self.format, self.shape = inst, out_format, out_shape
        # (still valid?, the binding to run instead), checked in order before every
        # call: a plan that holds only while the operands' values are finite
        # (finite_sums.py) or their broadcast terms store nothing (broadcast_terms.py).
        # A check's own ``loop_count`` (its kernels', counting builds) adds to the call's.
        self.guards: list[tuple[Callable[[], bool], BoundCall]] = []
        self.loop_count: int | None = None  # loop heads the last call ran (counting)
        self.out_type = inst.types[inst.arg_order[0]]
        self.inputs, self.plan = inputs, plan  # plan: chunks for threads, None for one
        # Threads over a reduced index (a user's schedule): each chunk into a private
        # output, combined elementwise by this.
        self.combine: Callable[[list[np.ndarray]], np.ndarray] | None = None
        self.splits_rows = True  # the plan's chunks are rows of the output (threads clear them)
        # Dense-like outputs are allocated here, zeroed, and passed in; the kernel never
        # grows them.
        self.dense = not out_shape or dense_like(self.out_type)
        self.new_small = None
        if self.dense:
            self.extents = [out_shape[lv.mode] for lv in out_format.levels]
            self.out_extents = tuple(self.extents)
            # The last out= array that passed the overlap check (see _into).
            self.checked_out: Callable[[], np.ndarray | None] = lambda: None
            self.size = math.prod(self.extents)
            self.dtype = np.dtype(self.out_type.dtype)
            params, self.flat_params = output_params(out_format, self.out_type, self.extents)
            self.result = tensor_class().dense_outputs(out_shape, out_format, self.out_type,
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
        # ``form``: the autoscheduler's pick (auto_choice.py), untimed; None: timed.
        forms = FORMS if inst.jit.has_other else FORMS[:1]
        if form in forms and "form" not in FORCED:
            forms = (form,)
        self.probe = Probe(forms, ASSEMBLIES if gathers else ASSEMBLIES[:1])
        self.auto = None  # the AutoChoice this binding follows (set by Kernel.bind)
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
            thread_calls.call_parallel(code.range_address, [output, *self.inputs],
                                  self.plan, prepare)
        else:
            runtime.call(code.address, [output, *self.inputs])

    def _reduced(self, code: JitKernel) -> np.ndarray:
        """Each chunk of a reduced index's loop into a private output starting as fills,
        then the outputs combined."""
        parts = [np.zeros(self.size, self.dtype) for _ in self.plan.chunks]
        outputs = [runtime.DescriptorHolder(self.extents, [part], self.flat_params)
                   for part in parts]
        thread_calls.call_private_outputs(code.range_address, outputs, self.inputs, self.plan)
        return self.combine(parts)

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
        without a copy) and the thread request matches; else a sibling for new Tensors
        of the same signature where that is safe (``_sibling``). ``check`` validates the
        Tensors again (remembered for sealed ones, see ``Tensor.validate``)."""
        wanted = thread_calls.get_num_threads() if threads is None else threads
        if wanted != self.requested_threads or tensors.keys() != self.operands.keys():
            return None
        for (name, bound), holder in zip(self.operands.items(), self.operand_holders):
            given = tensors[name]
            if given is not bound:
                return self._sibling(tensors, check)
            if isinstance(given, StoredTensor):
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

    def _sibling(self, tensors: dict, check: bool) -> BoundCall | None:
        """This binding's kernel, output plan and chosen way on new operands where
        binding afresh would choose the same: new Tensors of the same format, fill,
        dtypes and shape with few entries (where a binding's fixed cost matters: an eager
        chain's intermediate results are new tensors on every call), and new ndarrays of
        the same shape and dtype that it reads in place (a solver's new ``x`` each
        iteration: binding afresh cost 10 ms at 10^6 entries, threads' plan included,
        which depends on the sparse operands only). None where any of that fails, or the
        binding has converted copies, diagonal patterns or a finite-sums guard (and, for
        new Tensors, threads)."""
        if self.guards or self.converted or self.patterned:
            return None
        olds = list(self.operands.values())
        if len({id(t) for t in olds}) != len(olds):
            return None
        swap: dict[int, object] = {}
        stored, new_tensors = 0, False
        for name, old in self.operands.items():
            new = tensors[name]
            if type(new) is np.ndarray and new is not old:
                flags = new.flags
                if self.wrapped.get(name) != (new.shape, new.dtype) or \
                        not (flags.c_contiguous and flags.aligned):
                    return None
                swap[id(old)] = new
                continue
            if type(new) is not made_as.made or type(old) is not made_as.made:
                return None
            if new is not old:
                if new.format != old.format or new.dtype != old.dtype \
                        or new.index_dtype != old.index_dtype or new.shape != old.shape \
                        or new.generation != old.generation:
                    return None
                new_tensors = True
            stored += len(new.values)
            swap[id(old)] = new
        if new_tensors and (stored > SIBLING_MAX_STORED or self.plan is not None):
            return None
        if check:
            for tensor in swap.values():
                if type(tensor) is made_as.made:
                    tensor.validate()
        sibling = BoundCall.__new__(BoundCall)
        sibling.__dict__.update(self.__dict__)
        # The kernel's inputs: a new ndarray wrapped as the old one was (a view of it).
        sibling.inputs_by_name = {
            n: as_tensor(tensors[n], t.format, n) if n in self.wrapped
            and tensors[n] is not self.operands[n] else swap.get(id(t), t)
            for n, t in self.inputs_by_name.items()}
        sibling.inputs = [t.holder(check_shallow=not check)
                          for t in sibling.inputs_by_name.values()]
        sibling.operands = dict(tensors)
        made = tensor_class()
        sibling.operand_holders = [
            (t if type(t) is made else sibling.inputs_by_name[n]).holder(check_shallow=False)
            for n, t in tensors.items()]
        sibling.code, sibling.calls, sibling.busy = {}, {}, threading.Lock()
        if self.dense:
            sibling.output = runtime.DescriptorHolder(self.extents, [None], self.flat_params)
            sibling.checked_out = lambda: None
        else:
            sibling.output = self.assembled.holder(reserve=False)
        return sibling

    def __call__(self, out: np.ndarray | None = None):
        """Run the kernel; the result is a new Tensor. ``out`` (dense-like outputs only):
        a C-contiguous array of the output's shape and dtype to write into instead, so a
        loop of calls reuses memory whose pages are already mapped (a fresh 50 MB result
        costs its page faults on every call, taken by all threads at once)."""
        spent = None  # loop heads the checks ran
        for holds, fallback in self.guards:
            valid = holds()
            spent = _plus(spent, getattr(holds, "loop_count", None))
            if not valid:
                result = fallback(out)
                self.loop_count = _plus(fallback.loop_count, spent)
                return result
        counter = self.inst.jit.counter  # a counting build's (backends/llvm/counting.py)
        if counter:
            ctypes.c_int64.from_address(counter).value = 0
        result = self._counted(out)
        if counter:
            self.loop_count = _plus(ctypes.c_int64.from_address(counter).value, spent)
        return result

    def _counted(self, out: np.ndarray | None):
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
            if self.plan and self.combine is not None:
                values[...] = self._reduced(self._code(form))
                return self.result(values)
            fresh = not dirty
            dirty = dirty and not self.inst.initializes_output
            if self.plan and self.splits_rows and values.nbytes >= SHARED_CLEAR_BYTES \
                    and (dirty or fresh):
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
            thread_calls.assemble_parallel(
                self._code(form).assembly, holders, self.plan,
                lambda total: self.assembled.reserve_for(holders[0], total))
            return self.assembled.adopt(holders[0])
        return self._assembled_on_one(form)

    def _assembled_on_one(self, form: str) -> StoredTensor:
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

    def _gathered(self, code: JitKernel) -> StoredTensor:
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


def _plus(a: int | None, b: int | None) -> int | None:
    """A sum of loop counts, None where neither was counted."""
    return a if b is None else b if a is None else a + b


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


def expected_entries(inputs) -> int:
    """Stored values of the sparse operands together: a bound on a sparse output's size
    for unions, intersections and pattern-preserving kernels (products of sparse
    operands can exceed it; then the kernel grows the arrays as usual)."""
    return sum(len(t.values) for t in inputs
               if not all(lv.full for lv in t.tensor_type.levels))


def views(values: np.ndarray, array: np.ndarray) -> bool:
    """Whether a wrapped operand's values are ``array``'s memory (no copy was made)."""
    return values.size == array.size and values.dtype == array.dtype and \
        values.__array_interface__["data"][0] == array.__array_interface__["data"][0]


def as_tensor(value: object, fmt: Format, name: str) -> StoredTensor:
    """The caller's operand ``name`` as a Tensor stored in ``fmt`` (numpy and foreign
    sparse arrays are wrapped), refused where its order or format does not fit."""
    order = value.order if isinstance(value, StoredTensor) else \
        value.ndim if is_foreign_sparse(value) else np.ndim(value)
    if order != fmt.order:
        raise ShapeError(f"{name} is used with {fmt.order} "
                         f"{'index' if fmt.order == 1 else 'indices'} but has {order} "
                         f"{'dimension' if order == 1 else 'dimensions'}")
    if isinstance(value, StoredTensor):
        if value.format.layout_key() != fmt.layout_key():  # the kernel takes its fill
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
    return tensor_class().from_numpy(array, format=fmt)

