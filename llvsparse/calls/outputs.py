"""Outputs that kernels assemble themselves: reserved before the call, adopted after it.

Everything that does not change between calls of one binding (which arrays to reserve,
how long each adopted array is, which levels share it) is worked out once here, so a
call costs a descriptor, the kernel, and per array a copy (small ones, whose buffers the
descriptor keeps for the next call) or a numpy view of the kernel's buffer.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..abi.results import check_fits_memory, with_spare
from ..abi.runtime import DescriptorHolder, KernelRuntimeError
from ..formats.interpret import evaluate_expr, length_function, run_function
from ..formats.registry import generation as registry_generation
from ..formats.registry import is_shipped
from ..tensors.format import Format
from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor


@dataclass(frozen=True)
class _Adopted:
    slot: int
    level: int
    name: str
    length: object  # the array's length expression (None: unsized)
    levels: tuple[int, ...]  # every level that names this array (shared arrays: several)


def output_params(fmt: Format, ttype, extents: list[int]) -> tuple[list[dict], list[int]]:
    """An output's level parameters, per level and in descriptor order: the format's,
    or the level's extent for one it leaves open (a hash output of W = N buckets)."""
    params = [{p: int(level.params.get(p, max(extent, 1))) for p in ttype.levels[k].params}
              for k, (level, extent) in enumerate(zip(fmt.levels, extents))]
    return params, [params[k][p] for k, p in ttype.param_slots()]


def refused_insert_error(fmt: Format, ttype, error: Exception) -> Exception:
    """A kernel's refused insert (status 3), naming the output levels whose fixed
    parameters bound the positions per parent, and how to give them more."""
    fixed = [f"level {k} ({level.kind}, {', '.join(f'{p}={v}' for p, v in level.params.items())})"
             for k, level in enumerate(fmt.levels)
             if ttype.levels[k].can_insert and level.params]
    advice = (f"; raise the parameter of {' or '.join(fixed)} in the format written to, "
              "or leave it unset (the level's default)" if fixed else "")
    return KernelRuntimeError(f"{error}{advice}; no entry was dropped, the call returned "
                              "no result", error.status)


@lru_cache(maxsize=1024)
def _length_function(expr: ast.expr, fixed: tuple[tuple[str, int], ...]):
    """``length_function``, compiled once per level definition's expression and fixed
    names: each binding of an eager chain's new intermediate result made its own (50 us
    of a 10 x 10 operation's 150)."""
    return length_function(expr, dict(fixed))


def _positions(size_function, env: dict[str, int]) -> int:
    """A level's ``size``, in Python integers where the body is one expression (numpy's
    int64 wraps: 2**32 rows of 2**32 buckets came out 0)."""
    body = size_function.body
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        return evaluate_expr(body[0].value, env)
    return int(run_function(size_function, env, {}, "size")[0])


class AssembledOutput:
    """The plan for one binding's sparse output.

    ``expected`` (a likely upper bound on stored values) reserves the arrays a kernel
    appends to: those of levels from the first one that cannot insert, whose elements
    need no initial value, and the values; each is capped by the coordinates its level
    can hold. A kernel grows any reservation that turns out too small.
    """

    def __init__(self, shape: tuple[int, ...], fmt: Format, ttype, expected: int):
        self.shape, self.format = shape, fmt
        self.generation = registry_generation()  # of the definitions the kernel was built by
        # Shipped level formats' assembly keeps their claims: their outputs are valid as
        # adopted (a chain's next kernel walked every intermediate result before).
        self.trusted = all(is_shipped(level.kind) for level in fmt.levels)
        self.dtype, self.index_dtype = np.dtype(ttype.dtype), np.dtype(ttype.index_dtype)
        self.extents = [shape[lv.mode] for lv in fmt.levels]
        self.params, self.flat_params = output_params(fmt, ttype, self.extents)
        slots = ttype.array_slots()
        self.values_slot = len(slots)
        self.adopted = [
            _Adopted(s.index, s.level, s.name, ttype.levels[s.level].definition.arrays[
                s.name].length, tuple(k for k, lv in enumerate(ttype.levels) if k == s.level
                                      or (s.shared and s.name in lv.definition.arrays)))
            for s in slots]
        appended = next((k for k, lv in enumerate(ttype.levels) if not lv.can_insert), None)
        # Arrays a kernel appends to: from the first level that cannot insert on, those
        # whose elements need no initial value, and the values.
        self.appended = [] if appended is None else [
            entry for entry in self.adopted if entry.level >= appended
            and ttype.levels[entry.level].definition.arrays[entry.name].init is None]
        self.reservations = self._reservations(expected) if appended is not None else []
        # Each adopted array's length as a function of (size, parent_size), by slot.
        self.length_of = {entry.slot: None if entry.length is None else _length_function(
            entry.length, (("N", self.extents[entry.level]),
                           *self.params[entry.level].items()))
            for entry in self.adopted}
        self.appended_slots = {entry.slot for entry in self.appended}
        # What a kernel's own allocation of each array starts as (``copy_out`` refills a
        # kept buffer with it): the level's declared init; values are zeroed where every
        # level inserts (see OutputAssembler.epilogue), else written before read.
        self.inits = {entry.slot: ttype.levels[entry.level].definition.arrays[
            entry.name].init for entry in self.adopted}
        self.inits[self.values_slot] = 0 if appended is None else None
        check_fits_memory(self._sized_up_front(ttype), "the output's storage sized before "
                          f"any entry is known ({fmt!r}, levels that take inserts)")
        # What the last call adopted, reserved for the next: a binding's calls usually
        # assemble the same number of entries, and then their memory is recycled whole.
        self.last: list[tuple[int, int, int]] | None = None
        self.last_lengths: list[int] = []  # (the entries ``last`` was made from)
        # adopt's walk, worked out once: (slot, level, length function, the (level,
        # name) of each level that names the array, whether it is appended to)
        self.steps = [(entry.slot, entry.level, self.length_of[entry.slot],
                       [(k, entry.name) for k in entry.levels],
                       entry.slot in self.appended_slots) for entry in self.adopted]

    def _sized_up_front(self, ttype) -> int:
        """Bytes of the levels a kernel sizes before it inserts (a hash output's W = N
        buckets per row), from each level's ``size`` function, and of their values."""
        positions, nbytes = 1, 0
        for k, level in enumerate(ttype.levels):
            if not level.can_insert:
                return nbytes
            env = {"parent_size": positions, "N": self.extents[k], **self.params[k]}
            positions = _positions(level.definition.functions["size"], env)
            nbytes += positions * self.index_dtype.itemsize * len(level.definition.arrays)
        return nbytes + positions * self.dtype.itemsize

    def _reservations(self, expected: int) -> list[tuple[int, int, int]]:
        if expected <= 0:
            return []
        coordinates = np.cumprod([max(e, 1) for e in self.extents], dtype=np.float64)
        reserved = [(e.slot, int(min(expected, coordinates[e.level])),
                     self.index_dtype.itemsize) for e in self.appended]
        reserved.append((self.values_slot, int(min(expected, coordinates[-1])),
                         self.dtype.itemsize))
        return reserved

    def reserve_for(self, holder: DescriptorHolder, entries: int) -> None:
        """Size the appended arrays for ``entries`` entries in the last level (threads'
        count), from each array's own length expression, with the spare room a
        one-thread call of this binding reserves (``reserve``): either way's collected
        arrays then fit the other's next call, so a binding that switches ways (see
        probe.py) recycles its memory rather than paying fresh page faults."""
        rows = math.prod(self.extents[:self.appended[0].level]) if self.appended else 1
        for entry in self.appended:
            parent = rows if entry.level == self.appended[0].level else entries
            holder.reserve(entry.slot, with_spare(self.length_of[entry.slot](entries, parent)),
                           self.index_dtype.itemsize)
        holder.reserve(self.values_slot, with_spare(entries), self.dtype.itemsize)

    def moved_slots(self) -> list[tuple[int, int]]:
        """(slot, element size) of the arrays threads append into buffers of their own
        when they gather the output (see gather.gather_parallel): those appended and the
        values."""
        return [(entry.slot, self.index_dtype.itemsize) for entry in self.appended] + [
            (self.values_slot, self.dtype.itemsize)]

    def holder(self, reserve: bool = True) -> DescriptorHolder:
        """Fresh output descriptor: reserved arrays, the rest NULL for the kernel to grow."""
        holder = DescriptorHolder(self.extents, [None] * (self.values_slot + 1),
                                  self.flat_params)
        if reserve:
            self.reserve(holder)
        return holder

    def reserve(self, holder: DescriptorHolder) -> None:
        """Reserve the planned arrays, or the last call's, in an empty descriptor."""
        for slot, count, itemsize in self.last or self.reservations:
            holder.reserve(slot, count, itemsize)

    def adopt(self, holder: DescriptorHolder) -> StoredTensor:
        """The kernel's arrays as a numpy-owned Tensor, sealed: its index arrays are made
        read-only as they are taken (see Tensor._seal), its values stay writeable; valid
        (not walked again before the next kernel) where shipped levels assembled it."""
        nlevels = len(self.extents)
        sizes = holder.sizes[:nlevels]
        level_arrays: list[dict[str, np.ndarray]] = [{} for _ in range(nlevels)]
        lengths = []
        index_dtype, inits = self.index_dtype, self.inits
        for slot, level, length_of, names, appended in self.steps:
            length = 0 if length_of is None else length_of(
                sizes[level], sizes[level - 1] if level else 1)
            array = holder.copy_out(slot, index_dtype, length, False, inits[slot])
            for k, name in names:
                level_arrays[k][name] = array
            if appended:
                lengths.append(length)
        values = holder.copy_out(self.values_slot, self.dtype, sizes[-1] if sizes else 1,
                                 True, inits[self.values_slot])
        if self.reservations:
            lengths.append(len(values))
            if lengths != self.last_lengths:
                self.last_lengths = lengths
                self.last = [(slot, with_spare(n), size)
                             for (slot, size), n in zip(self.moved_slots(), lengths)]
        made = tensor_class()
        tensor = made.__new__(made)
        tensor.__dict__.update(shape=self.shape, format=self.format, dtype=self.dtype,
                               index_dtype=self.index_dtype, level_extents=list(self.extents),
                               level_arrays=level_arrays,
                               params=[dict(p) for p in self.params], values=values,
                               name=None, _sealed=True, generation=self.generation)
        if self.trusted:  # (what _mark_valid does, its check of the levels made once)
            tensor._validated = tensor._sealed_state()
        return tensor
