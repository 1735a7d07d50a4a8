"""A tensor argument as the kernel sees it: its descriptor fields loaded once, its arrays
as growable references, and calls of its level functions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from llvmlite import ir

from ...ir.errors import InternalCompilerError
from ...ir.types import TensorType
from . import scalars
from .bodies import I64, ArrayRef, emit_body
from .emit_base import I8P, I32, ZERO
from .window import LevelWindow

if TYPE_CHECKING:
    from .codegen import KernelCompiler



class TensorIR:
    """IR-side handles for one kernel argument."""

    def __init__(self, kc: KernelCompiler, index: int, ttype: TensorType, is_output: bool):
        b = kc.b
        self.kc = kc
        self.type = ttype
        self.is_output = is_output
        slot = b.gep(kc.function.args[0], [ir.Constant(I64, index)])
        self.desc = b.load(slot, name=f"desc{index}")
        fields = [b.load(b.gep(self.desc, [ir.Constant(I32, 0), ir.Constant(I32, f)]))
                  for f in range(6)]
        _, self.extents_ptr, self.sizes_ptr, self.arrays_ptr, self.caps_ptr, params = fields
        self.extents = [b.load(b.gep(self.extents_ptr, [ir.Constant(I64, k)]))
                        for k in range(len(ttype.levels))]
        self.params: dict[tuple[int, str], ir.Value] = {}
        for n, key in enumerate(ttype.param_slots()):
            self.params[key] = b.load(b.gep(params, [ir.Constant(I64, n)]))
        # A windowed level's functions see the whole level (base extents, coordinates);
        # the loops see the window's extent (see window.py).
        self.level_extents = list(self.extents)
        self.windows: dict[int, LevelWindow] = {}
        for k, level in enumerate(ttype.levels):
            if level.window:
                if is_output:
                    raise InternalCompilerError("a window of a tensor (a view) cannot be an output")
                self.windows[k] = LevelWindow(self, k)
                self.extents[k] = self.windows[k].count
        self.slots = ttype.array_slots()
        self.index_element = ir.IntType(8 * np.dtype(ttype.index_dtype).itemsize)
        self.vals_slot = len(self.slots)
        self.pointers: dict[int, ir.Value] = {}
        self.frozen = False  # output pointers loaded once (see freeze)
        self.prechecked: set[int] = set()  # slots whose capacity a loop ensured up front
        # An output's array pointers and capacities live in locals while the kernel runs
        # (stores into the arrays cannot alias them) and go back to the descriptor at exit.
        self.local_pointers: dict[int, ir.AllocaInstr] = {}
        self.local_caps: dict[int, ir.AllocaInstr] = {}
        for slot in range(len(self.slots) + 1):
            if is_output:
                index = ir.Constant(I64, slot)
                self.local_pointers[slot] = b.alloca(I8P, name=f"out.ptr{slot}")
                b.store(b.load(b.gep(self.arrays_ptr, [index])), self.local_pointers[slot])
                self.local_caps[slot] = b.alloca(I64, name=f"out.cap{slot}")
                b.store(b.load(b.gep(self.caps_ptr, [index])), self.local_caps[slot])
            else:
                self.pointers[slot] = self._load_pointer(b, slot)

    def element(self, slot: int) -> ir.Type:
        if slot == self.vals_slot:
            return scalars.element_type(self.type.dtype)
        return self.index_element

    def _load_pointer(self, b: ir.IRBuilder, slot: int) -> ir.Value:
        if slot in self.local_pointers:
            raw = b.load(self.local_pointers[slot])
        else:
            raw = b.load(b.gep(self.arrays_ptr, [ir.Constant(I64, slot)]))
        return b.bitcast(raw, self.element(slot).as_pointer())

    def write_back(self, b: ir.IRBuilder) -> None:
        """Publish the output's (possibly grown) arrays to its descriptor."""
        for slot, pointer in self.local_pointers.items():
            index = ir.Constant(I64, slot)
            b.store(b.load(pointer), b.gep(self.arrays_ptr, [index]))
            b.store(b.load(self.local_caps[slot]), b.gep(self.caps_ptr, [index]))

    def freeze(self) -> None:
        """Load every array pointer once: an output sized up front never moves again, and
        a pointer kept in a register lets LLVM vectorize loops that store through it."""
        for slot in range(len(self.slots) + 1):
            self.pointers[slot] = self._load_pointer(self.kc.b, slot)
        self.frozen = True

    def array_ref(self, slot: int, init: int | None = None) -> ArrayRef:
        if not self.is_output or self.frozen:
            return ArrayRef(self.pointers[slot], self.element(slot),
                            invariant=not self.is_output)
        return ArrayRef(lambda b, s=slot: self._load_pointer(b, s), self.element(slot),
                        lambda b, index, s=slot, v=init: self.kc.ensure_store(self, s, index,
                                                                              v))

    def level_arrays(self, level: int) -> dict[str, ArrayRef]:
        arrays = {}
        for name, adef in self.type.levels[level].definition.arrays.items():
            slot = self.type.slot_of(level, name).index
            arrays[name] = self.array_ref(slot, adef.init)
        return arrays

    def env(self, level: int, **values: ir.Value) -> dict[str, ir.Value]:
        nlevels = len(self.type.levels)
        env = {"N": self.level_extents[level],
               "N_child": self.level_extents[level + 1] if level + 1 < nlevels else ZERO,
               "i_parent": ZERO, "i_grandparent": ZERO, "p_parent": ZERO}
        for (k, name), value in self.params.items():
            if k == level:
                env[name] = value
        env.update(values)
        for name, above in (("i_parent", level - 1), ("i_grandparent", level - 2)):
            if above in self.windows and name in values:
                env[name] = self.windows[above].base_coordinate(self.kc.b, values[name])
        return env

    def call(self, level: int, function: str, **values: ir.Value) -> list[ir.Value]:
        if level in self.windows:
            return self.windows[level].call(self.kc.b, function, self._raw_call(level),
                                            values)
        return self._raw_call(level)(function, values)

    def _raw_call(self, level: int):
        """The level's own function bodies, inlined (coordinates are base coordinates)."""
        definition = self.type.levels[level].definition

        def raw(function: str, values: dict[str, ir.Value]) -> list[ir.Value]:
            if function == "locate" and not definition.can_locate:
                return self._locate_by_subsection(level, values)
            return emit_body(self.kc.b, definition.functions[function],
                             self.env(level, **values), self.level_arrays(level))
        return raw

    def _locate_by_subsection(self, level: int, values: dict[str, ir.Value]) -> list[ir.Value]:
        """Locate coordinate i in a level that finds subsections (and cannot locate):
        the subsection [i, i + 1); found where it holds a position (an ordered level
        stores i at most once there, or first there)."""
        b = self.kc.b
        i = values.pop("i")
        values.update(i_lo=i, i_hi=b.add(i, ir.Constant(i.type, 1)))
        definition = self.type.levels[level].definition
        lo, hi = emit_body(b, definition.functions["subsection"], self.env(level, **values),
                           self.level_arrays(level))
        return [lo, b.icmp_signed("<", lo, hi)]
