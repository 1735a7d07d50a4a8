"""The operator path's fast lane: ``A @ x``, ``A * 2.0``, ``A + B`` on operands seen
before go straight to the bound kernel (issue 33's fixed cost).

An eager operation's plan (eager_plans.py) still paid, per call, its signature key, a
dict of operands, ``Kernel.__call__``'s reuse check (the descriptor key, the sealed
state of every Tensor) and the binding's general call path: 20 us of Python around a
0.3 us kernel on a 10 x 10 matrix, where scipy's ``A @ x`` takes 3 us. Here a call is
keyed by the operation and its operands' identities (a Tensor's ``id``, an ndarray's
type, a number's type and value), and served by what the plan's binding prepared: its
own descriptors and the kernel's chosen form, called directly.

What makes that safe is checked per call, in O(1): each Tensor operand is the same
object with the same arrays (by identity), shape, format, dtypes, parameters, extents
and level definitions as when its kernel call validated it, and its index arrays are
still read-only (sealed); each ndarray operand has the dtype and shape bound, and is
C-contiguous and aligned, so the kernel reads it where it lies. Anything else, or a
binding whose calls do more than run the kernel (threads, guards, converted operands,
a probe still timing forms, a counting build, a large output), takes the plan's path.

A chain (``(A + B) * 2 - C``) reads results that are new objects on every call. A fast
call's result is valid by construction (a shipped kernel assembled it, or it shares a
validated tensor's index arrays), so it carries a ``Lane``: the fast call that made it
and what it holds. A fast call's key names such an operand by its maker instead of its
identity (every result of one maker has the same format, dtypes, shape, parameters and
extents), and the call points its own descriptor at the operand's arrays: the next
operation of the chain is a fast call too, with no validation.
"""

from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Callable
from operator import is_
from typing import TYPE_CHECKING

import numpy as np

from ..abi import runtime, thread_calls
from ..formats.registry import generation as registry_generation
from ..tensors import made_as
from ..tensors.tensor import StoredTensor

if TYPE_CHECKING:
    from ..calls.binding import BoundCall

_FAST: dict[tuple, _Checked] = {}
FAST_KEPT = 64  # each keeps its operands alive: a bound kernel call holds them anyway
_SEEN: dict[tuple, None] = {}  # keys of calls made once (ids only: nothing kept alive)


def _operand_key(value: object) -> object:
    """What identifies ``value`` in a fast call's key (None: no fast call takes it): a
    Tensor's identity, or for a fast call's result the fast call that made it."""
    kind = type(value)
    if kind is made_as.made:
        lane = value.__dict__.get("_lane")
        return id(value) if lane is None else lane.key
    if kind is np.ndarray:
        return kind
    if kind is float:
        return None if math.isnan(value) else (kind, value, math.copysign(1.0, value))
    if kind is int:
        return (kind, value)
    return None


def key(operation: object, operands: tuple) -> tuple | None:
    """The fast call's key of ``operation`` on ``operands``, None where it has none."""
    keys = tuple(map(_operand_key, operands))
    return None if None in keys else (operation, *keys)


def called(operation: str, operands: tuple) -> object | None:
    """``operation`` on ``operands`` by a fast call made before; None where there is
    none or its checks fail (the caller takes the plan's path)."""
    fast = _FAST.get(key(operation, operands))
    return None if fast is None else fast(operands)


def remember(operation: object, operands: tuple, bound: BoundCall | None,
             pointwise: Callable | None, dense_result: bool, sources: tuple) -> None:
    """After a planned call of ``operation`` on ``operands``: a fast call for them where
    ``bound`` (the kernel's binding that just ran) or ``pointwise`` (the values path)
    serves them; ``dense_result``: the result is an ndarray (see ``eager_plans``);
    ``sources``: per kernel operand, (its name, the index of the operand it reads or
    None, the constant it reads then), the plan's."""
    for value in operands:  # a result changed since it was made is keyed by identity
        lane = value.__dict__.get("_lane") if type(value) is made_as.made else None
        if lane is not None and not lane.holds(value):
            del value.__dict__["_lane"]
    fast_key = key(operation, operands)
    if fast_key is None:
        return
    if fast_key not in _SEEN:  # operands seen once (a chain's intermediate result, new
        if len(_SEEN) >= FAST_KEPT:  # every call) get no fast call until seen again
            del _SEEN[next(iter(_SEEN))]
        _SEEN[fast_key] = None
        return
    fast = None
    if pointwise is not None:
        fast = _Checked(operands, None, pointwise.unchecked)
    elif bound is not None and _direct(bound, operands, sources):
        fast = _Checked(operands, _BoundKernel(bound, operands, dense_result, sources),
                        None)
    if fast is None or not fast.ready:
        return
    if len(_FAST) >= FAST_KEPT:
        del _FAST[next(iter(_FAST))]
    _FAST[fast_key] = fast


def forget() -> None:
    """Drop every fast call."""
    _FAST.clear()
    _SEEN.clear()


def _direct(bound: BoundCall, operands: tuple, sources: tuple) -> bool:
    """Whether a call of ``bound`` only runs its kernel on one thread: its way chosen,
    no guards, refreshes, converted copies, diagonal patterns or thread plan, not a
    counting build, and a dense output small enough to come straight from numpy (or
    an assembled one); its operands are ``operands`` as ``sources`` name them."""
    if bound.way is None or bound.guards or bound.refreshes or bound.converted \
            or bound.patterned or bound.plan is not None or bound.combine is not None \
            or bound.inst.jit.counter or bound.scratch is not None:
        return False
    if bound.dense and bound.new_small is None:
        return False
    # ndarray operands: only those the binding reads where they lie (no copy made)
    return len(bound.operands) == len(sources) and \
        all(bound.operands.get(name) is (constant if k is None else operands[k])
            for name, k, constant in sources) and \
        all(name in bound.inputs_by_name and (type(value) is not np.ndarray
                                             or name in bound.wrapped)
            for name, value in bound.operands.items())


def _objects(tensor: StoredTensor) -> tuple:
    """What a Tensor's descriptor and its remembered validation hold by identity: its
    shape, format, dtypes, level definitions' generation, values and index arrays."""
    fields = tensor.__dict__
    return (fields["shape"], fields["format"], fields["dtype"], fields["index_dtype"],
            fields["generation"], fields["values"],
            *[a for level in fields["level_arrays"] for a in level.values()])


class _Checked:
    """The per-call checks of a fast call's operands, then its work (``run``: a
    binding's kernel; ``pointwise``: numpy on the values), and its result's ``Lane``.
    ``ready``: the operands are as the fast call needs them (sealed and validated
    Tensors), so it is worth keeping.

    A Tensor passes while it holds the same objects (``_objects``; kept alive here, so
    none can be another that took its place), the same parameters and extents, and its
    index arrays are still read-only: what its remembered validation holds for. A
    result of another fast call (``lanes``: its position and maker) passes while its
    ``Lane`` holds."""

    __slots__ = ("generation", "known", "lane_key", "lanes", "pointwise", "ready", "run",
                 "tensors", "threads")

    def __init__(self, operands: tuple, run: _BoundKernel | None, pointwise: Callable | None):
        self.run, self.pointwise = run, pointwise
        self.lane_key = ("lane", id(self))
        laned = {k: x.__dict__["_lane"] for k, x in enumerate(operands)
                 if type(x) is made_as.made and "_lane" in x.__dict__}
        self.lanes = [(k, lane.maker) for k, lane in laned.items()]
        self.tensors = [(k, x, _objects(x), [dict(p) for p in x.params],
                         list(x.level_extents),
                         [a for level in x.level_arrays for a in level.values()])
                        for k, x in enumerate(operands)
                        if type(x) is made_as.made and k not in laned]
        self.ready = all(x._sealed_state() is not None and
                         x.__dict__.get("_validated") == x._sealed_state()
                         for _, x, _, _, _, _ in self.tensors)
        # addresses of the index arrays a pointwise result shares with its operand
        self.known = {id(a): a.ctypes.data for _, _, _, _, _, arrays in self.tensors
                      for a in arrays if a.size} if pointwise is not None else {}
        self.generation = registry_generation()
        self.threads = thread_calls.get_num_threads()

    def __call__(self, operands: tuple) -> object | None:
        for k, tensor, objects, params, extents, arrays in self.tensors:
            if operands[k] is not tensor or not all(map(is_, _objects(tensor), objects)) \
                    or tensor.params != params or tensor.level_extents != extents:
                return None
            for array in arrays:
                if array.flags.writeable:
                    return None
        for k, maker in self.lanes:
            tensor = operands[k]
            lane = tensor.__dict__.get("_lane") if type(tensor) is made_as.made else None
            if lane is None or lane.maker is not maker or not lane.holds(tensor):
                return None
        if registry_generation() != self.generation or \
                thread_calls.get_num_threads() != self.threads:
            return None
        result = self.pointwise(operands) if self.pointwise is not None else \
            self.run(operands)
        if type(result) is made_as.made and "_validated" in result.__dict__:
            known = self.known
            if self.pointwise is not None and self.lanes:  # (sharing its index arrays)
                known = operands[self.lanes[0][0]].__dict__["_lane"].addresses()
            result.__dict__["_lane"] = Lane(self, result, known)
        return result


class Lane:
    """A fast call's result, valid as made: its ``maker`` (the fast call) and what it
    held then (``_objects``, parameters and extents; every result of one maker has the
    same format, dtypes, shape, parameters and extents). It holds while the tensor
    still holds those objects and its index arrays are read-only. ``known``: addresses
    of arrays it shares with its maker's operands, by ``id`` (``.ctypes`` costs 2 us
    an array, ``from_buffer`` takes writeable arrays only); ``pointers``: its
    descriptor's slots, found on first use."""

    __slots__ = ("extents", "key", "known", "maker", "objects", "params", "pointers")

    def __init__(self, maker: _Checked, tensor: StoredTensor, known: dict[int, int]):
        self.maker, self.key, self.known = maker, maker.lane_key, known
        self.objects = _objects(tensor)
        self.params = [dict(p) for p in tensor.params]
        self.extents = list(tensor.level_extents)
        self.pointers: tuple | None = None

    def holds(self, tensor: StoredTensor) -> bool:
        if not all(map(is_, _objects(tensor), self.objects)) or \
                tensor.params != self.params or tensor.level_extents != self.extents:
            return False
        for array in self.objects[6:]:  # (the index arrays: see _objects)
            if array.flags.writeable:
                return False
        return True

    def slots(self, tensor: StoredTensor, names: list[tuple[int, str]]) -> tuple:
        """(arrays, pointers, capacities) of ``tensor``'s descriptor, whose array slots
        are ``names`` (level, array name), then the values."""
        if self.pointers is None:
            levels = tensor.level_arrays
            arrays = [levels[k].get(name) for k, name in names]
            arrays.append(tensor.values)
            self.pointers = (arrays, [self.address(a) for a in arrays],
                             [0 if a is None else len(a) for a in arrays])
        return self.pointers

    def address(self, array: np.ndarray | None) -> int | None:
        if array is None or not array.size:
            return None
        known = self.known.get(id(array))
        if known is None and not array.flags.writeable:
            known = runtime.taken_address(array)
        return known if known is not None else _address(array)

    def addresses(self) -> dict[int, int]:
        """The addresses of its index arrays found so far, by ``id`` (for a result that
        shares them, and so keeps them alive)."""
        if self.pointers is None:
            return self.known
        arrays, pointers = self.pointers[0][:-1], self.pointers[1][:-1]
        return {**self.known, **{id(a): p for a, p in zip(arrays, pointers)
                                 if a is not None and p is not None}}


class _BoundKernel:
    """A binding's kernel in its chosen form on descriptors of its own (the binding's
    are the plan's path's): ndarray operands are pointed to where they lie on each call
    (a solver's new ``x`` every iteration), the output is allocated fresh (dense) or
    assembled and adopted as the binding does."""

    def __init__(self, bound: BoundCall, operands: tuple, dense_result: bool,
                 sources: tuple):
        code = bound._code(bound.way.form)
        self.inputs = [runtime.DescriptorHolder(list(h.extents), list(h.arrays),
                                                list(h.params)) for h in bound.inputs]
        # ndarray operands: (position, the descriptor and slot the kernel reads it by,
        # dtype, shape)
        self.arrays = []
        # operands that are other fast calls' results: (position, their descriptor, its
        # array slots' names)
        self.laned: list[tuple[int, runtime.DescriptorHolder, list]] = []
        by_name = list(bound.inputs_by_name)
        for name, k, _ in sources:
            value = None if k is None else operands[k]
            if type(value) is np.ndarray:
                holder = self.inputs[by_name.index(name)]
                self.arrays.append((k, holder, len(holder.arrays) - 1, value.dtype,
                                    value.shape))
            elif type(value) is made_as.made and "_lane" in value.__dict__:
                self.laned.append((k, self.inputs[by_name.index(name)],
                                   value._slot_names()))
        self.dense, self.format, self.out_type = bound.dense, bound.format, bound.out_type
        if self.dense:
            self.output = runtime.DescriptorHolder(bound.extents, [None], bound.flat_params)
            self.output.caps[0] = bound.size
            self.new, self.size, self.dtype = bound.new_small, bound.size, bound.dtype
            row_major = [lv.mode for lv in bound.format.levels] == list(range(len(bound.shape)))
            self.shape = bound.shape
            self.result = bound.result if not dense_result else _ndarray_result(bound) \
                if row_major else lambda values: bound.result(values).to_numpy()
        else:
            self.assembled = bound.assembled
            self.output = bound.assembled.holder(reserve=False)
            self.result = None
        self.call = runtime.prepared_call(code.address, [self.output, *self.inputs])
        self.lock = threading.Lock()  # the descriptors: one call at a time

    def __call__(self, operands: tuple) -> object | None:
        for k, holder, slot, dtype, shape in self.arrays:
            array = operands[k]
            if array.dtype != dtype or array.shape != shape:
                return None
            flags = array.flags
            if not (flags.c_contiguous and flags.aligned):
                return None
        if not self.lock.acquire(blocking=False):
            return None
        try:
            for k, holder, slot, _, _ in self.arrays:
                array = operands[k]
                if holder.arrays[slot] is not array:  # (the descriptor keeps it alive)
                    holder.arrays[slot] = array
                    holder.pointers[slot] = _address(array)
            for k, holder, names in self.laned:  # (checked by _Checked: one maker's)
                tensor = operands[k]
                holder.arrays, pointers, caps = tensor.__dict__["_lane"].slots(tensor, names)
                holder.pointers[:len(pointers)] = pointers
                holder.caps[:len(caps)] = caps
            output = self.output
            if self.dense:
                values = self.new(self.size, self.dtype)
                if self.size:  # (its capacity was set once; the pointer is this call's,
                    # and the array is kept where a failed call's release looks)
                    output.arrays[0] = values
                    output.pointers[0] = ctypes.addressof(ctypes.c_byte.from_buffer(values))
                self.call()
                return self.result(values)
            output.clear()
            self.assembled.reserve(output)
            self.call()
            return self.assembled.adopt(output)
        except runtime.KernelRuntimeError as error:  # as the binding's call says it
            if error.status == runtime.STATUS_INSERT_REFUSED:
                # the calls layer, loaded by this refusal alone (ls.Tensor needs none)
                from ..calls.outputs import refused_insert_error

                raise refused_insert_error(self.format, self.out_type, error) from error
            raise
        finally:
            for _, holder, _ in self.laned:  # a chain's intermediate result is not kept
                holder.arrays = []  # alive here (pointed to again before each call)
            self.lock.release()


def _address(array: np.ndarray) -> int | None:
    """Where ``array``'s memory starts (``from_buffer`` is 5x cheaper than ``.ctypes``
    but takes writeable arrays only)."""
    if not array.size:
        return None
    if array.flags.writeable:
        return ctypes.addressof(ctypes.c_byte.from_buffer(array))
    return array.ctypes.data


def _ndarray_result(bound: BoundCall) -> Callable[[np.ndarray], np.ndarray]:
    """A dense result as an ndarray of the output's shape (row-major levels)."""
    shape = bound.shape
    if len(shape) == 1:
        return lambda values: values
    return lambda values: values.reshape(shape)
