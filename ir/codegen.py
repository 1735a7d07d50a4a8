"""Format-agnostic lowering of scheduled statements to an llvmlite module.

The kernel walks each statement's loop order. For every loop it builds the lattice of the
expression, then co-iterates the iterated levels and locates the rest, calling only the
level functions declared in the operands' YAML definitions (inlined via ``bodies``).
Outputs are assembled through their levels' insert or append functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from llvmlite import ir

from . import jam, pairs, scalars
from .bodies import I1, I64, TRUE, ArrayRef, emit_body, is_true
from .cin import Apply, Const, Expr, Operand, Sum, contains_sum, operands, peel_sums, uses
from .lattice import CaseBudget, Iter, build_lattice, choose_iterated, substitute_absent
from .schedule import Nest, ScheduleError, order_loops
from .types import TensorType

I8 = ir.IntType(8)
I32 = ir.IntType(32)
I8P = I8.as_pointer()
I64P = I64.as_pointer()
# A tensor descriptor: nlevels, extents, sizes, arrays (level arrays then vals), caps, params.
DESCRIPTOR = ir.LiteralStructType([I64, I64P, I64P, I8P.as_pointer(), I64P, I64P])
STATUS_OK, STATUS_NO_MEMORY, STATUS_NEGATIVE_STORE = 0, 1, 2
# Extra arguments (after the descriptor table) of each phase of a split assembly.
PHASE_ARGUMENTS = {"setup": [], "count": [I64, I64, I64.as_pointer()],
                   "fill": [I64, I64, I64], "append": [I64, I64, I64.as_pointer()],
                   "finish": [I64]}
ZERO = ir.Constant(I64, 0)
ONE = ir.Constant(I64, 1)
RUN_UNROLL = 8  # running-sum loops: coordinate-list SpMV on 4M entries 9.5 -> 7.4 ms (4x: 7.9)
GALLOP_SKEW = 8  # see PointEmitter.skewed


@dataclass(frozen=True)
class LevelPos:
    """A resolved operand level: its position (or segment of duplicate positions)."""

    pos: ir.Value
    coord: ir.Value
    seg_end: ir.Value | None = None


@dataclass(frozen=True)
class Ctx:
    bound: dict[str, ir.Value] = field(default_factory=dict)
    levels: dict[int, tuple[LevelPos, ...]] = field(default_factory=dict)
    found: dict[int, ir.Value] = field(default_factory=dict)  # operands located late

    def bind(self, var: str, value: ir.Value) -> Ctx:
        return replace(self, bound={**self.bound, var: value})

    def resolve(self, uid: int, level: LevelPos) -> Ctx:
        return replace(self, levels={**self.levels, uid: self.levels.get(uid, ()) + (level,)})


@dataclass(frozen=True)
class RunState:
    """A loop's running sum over sorted runs of duplicate coordinates (see running_sums):
    the coordinate of the open run (-1 before the first) and its sum so far, plus the
    context outside the loop, in which a finished run's coordinate is bound to write it."""

    var: str
    coord: ir.AllocaInstr
    total: ir.AllocaInstr
    outer: Ctx


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
        env = {"N": self.extents[level],
               "N_child": self.extents[level + 1] if level + 1 < nlevels else ZERO,
               "i_parent": ZERO, "i_grandparent": ZERO, "p_parent": ZERO}
        for (k, name), value in self.params.items():
            if k == level:
                env[name] = value
        env.update(values)
        return env

    def call(self, level: int, function: str, **values: ir.Value) -> list[ir.Value]:
        fn = self.type.levels[level].definition.functions[function]
        return emit_body(self.kc.b, fn, self.env(level, **values), self.level_arrays(level))


class KernelCompiler:
    """Builds one kernel function for a list of nests writing one output."""

    def __init__(self, nests: list[Nest], types: dict[str, TensorType], arg_order: list[str],
                 dtype: str, name: str = "llvsparse_kernel", fastmath: bool = False,
                 phase: str = "whole", module: ir.Module | None = None,
                 other_form: bool = False):
        self.nests = nests
        self.types = types
        self.arg_order = arg_order
        self.dtype = dtype
        self.fastmath = fastmath
        # Some loops have two forms, and which is faster depends on the input's pattern
        # (no count we found tells them apart), so a kernel with any is compiled both
        # ways and the runtime times them (see llvsparse/probe.py). The first form: a
        # union branches per case and steps only the operands it holds; an intersection
        # searches past mismatches only where one range is far longer than the other;
        # rows are summed one at a time. The other (``other_form``): a union computes
        # every case and selects, an intersection searches past every mismatch, and two
        # rows' sums run side by side (see pairs.py).
        self.other_form = other_form
        self.form_choices = 0  # loops lowered where the other form differs
        self.phase = phase
        self.module = module or ir.Module(name="llvsparse")
        self.entry_name, self.range_name = name, f"{name}_range"
        table = DESCRIPTOR.as_pointer().as_pointer()
        everything = ir.Constant(I64, 2**63 - 1)
        if phase == "whole":
            # The body takes a range [lo, hi) of the outermost loop's coordinates, so
            # threads can split it; ``name`` runs the whole range (the documented C entry).
            self.function = ir.Function(self.module, ir.FunctionType(I32, [table, I64, I64]),
                                        name=f"{name}_range")
            self.lo, self.hi = self.function.args[1], self.function.args[2]
            whole = ir.Function(self.module, ir.FunctionType(I32, [table]), name=name)
            wb = ir.IRBuilder(whole.append_basic_block("entry"))
            wb.ret(wb.call(self.function, [whole.args[0], ZERO, everything]))
        else:
            self.function = ir.Function(self.module, ir.FunctionType(
                I32, [table, *PHASE_ARGUMENTS[phase]]), name=f"{name}_{phase}")
            ranged = phase in ("count", "fill", "append")
            self.lo = self.function.args[1] if ranged else ZERO
            self.hi = self.function.args[2] if ranged else everything
        self.function.args[0].add_attribute("noalias")
        # Threads split the output's first index: every loop over it is clamped to [lo, hi)
        # (loops outside it, e.g. DIA's diagonals, run whole in every thread).
        first = nests[0].assign.vars[0] if nests[0].assign.vars else None
        self.range_var = first if len(nests) == 1 and first in nests[0].order else None
        entry = self.function.append_basic_block("entry")
        self.b = ir.IRBuilder(entry)
        # malloc/free (not realloc) so the same IR also runs as a CUDA kernel.
        # The allocator is defined per target when the module is linked (backends): large
        # host buffers get transparent huge pages, device code calls plain malloc.
        self.malloc = self.declare("llvsparse_alloc", ir.FunctionType(I8P, [I64]))
        self.free = self.declare("free", ir.FunctionType(ir.VoidType(), [I8P]))
        self.memcpy = self.module.declare_intrinsic("llvm.memcpy", [I8P, I8P, I64])
        self.memset = self.module.declare_intrinsic("llvm.memset", [I8P, I64])
        # Whether the caller may skip zeroing a dense output (see initializes_output):
        self.clears_rows = False  # rows zeroed in the kernel (clearing_rows)
        self.stores_every_row = False  # sums stored unconditionally (write_point)
        self.skips_rows = False  # a loop over an output index may miss coordinates
        self.fail_blocks: dict[int, ir.Block] = {}
        self.tensors = {name: TensorIR(self, k, types[name], k == 0)
                        for k, name in enumerate(arg_order)}
        self.out_name = arg_order[0]
        self.operands: dict[int, Operand] = {}
        self.lattice_log: list[str] = []
        self.budget = CaseBudget()

    def declare(self, name: str, signature: ir.FunctionType) -> ir.Function:
        """A function of the module (phases share one module), declared once."""
        existing = self.module.globals.get(name)
        return existing if existing is not None else ir.Function(self.module, signature, name)

    # -- memory ------------------------------------------------------------------------
    def fail(self, status: int = STATUS_NO_MEMORY) -> ir.Block:
        """The block that publishes the output's arrays (so they are freed) and returns
        ``status``, one per status and function."""
        if status not in self.fail_blocks:
            name = "no_memory" if status == STATUS_NO_MEMORY else f"failed_{status}"
            with self.b.goto_block(self.function.append_basic_block(name)) as _:
                self.fail_blocks[status] = self.b.block
                if self.phase not in ("count", "fill"):  # threads share the descriptor
                    self.tensors[self.out_name].write_back(self.b)
                self.b.ret(ir.Constant(I32, status))
        return self.fail_blocks[status]

    def ensure_store(self, tensor: TensorIR, slot: int, index: ir.Value,
                     init: int | None) -> None:
        """Before a level function stores at ``index``: grow the array past it, and fail
        the call on a negative index (a wrong plugin function) instead of writing in
        front of the array."""
        ok = self.b.append_basic_block("store_index_ok")
        self.b.cbranch(self.b.icmp_signed("<", index, ZERO), self.fail(STATUS_NEGATIVE_STORE),
                       ok)
        self.b.position_at_end(ok)
        self.ensure(tensor, slot, self.b.add(index, ONE), init)

    def ensure(self, tensor: TensorIR, slot: int, needed: ir.Value, init: int | None) -> None:
        """Grow an output array to hold ``needed`` elements, filling new ones with ``init``
        (None: every element is written before it is read, so no fill)."""
        if slot in tensor.prechecked:
            return
        b = self.b
        cap_ptr, array_slot = tensor.local_caps[slot], tensor.local_pointers[slot]
        cap = b.load(cap_ptr)
        if self.phase == "fill":  # sized exactly by the count phase; threads never grow
            ok = b.append_basic_block("fits")
            b.cbranch(b.icmp_signed(">", needed, cap), self.fail(), ok)
            b.position_at_end(ok)
            return
        with b.if_then(b.icmp_signed(">", needed, cap), likely=False):
            grow = self.grow_function(tensor.element(slot), init)
            grown = b.call(grow, [b.load(array_slot), cap, needed])
            raw, new_cap = b.extract_value(grown, 0), b.extract_value(grown, 1)
            ok = b.append_basic_block("grown")
            b.cbranch(b.icmp_unsigned("==", raw, ir.Constant(I8P, None)), self.fail(), ok)
            b.position_at_end(ok)
            b.store(raw, array_slot)
            b.store(new_cap, cap_ptr)

    def grow_function(self, element: ir.Type, init: int | None) -> ir.Function:
        """The out-of-line slow path of ``ensure`` for one element type and fill: kept out
        of kernel loops (noinline, cold) so their registers are not spent on it."""
        name = f"llvsparse_grow_{element}_{'none' if init is None else init}".replace(" ", "")
        if name in self.module.globals:
            return self.module.globals[name]
        result = ir.LiteralStructType([I8P, I64])
        function = ir.Function(self.module, ir.FunctionType(result, [I8P, I64, I64]), name)
        function.linkage = "internal"
        function.attributes.add("noinline")
        function.attributes.add("cold")
        old, cap, needed = function.args
        b = ir.IRBuilder(function.append_basic_block("entry"))
        doubled = b.mul(cap, ir.Constant(I64, 2))
        new_cap = b.select(b.icmp_signed(">", needed, doubled), needed, doubled)
        new_cap = b.select(b.icmp_signed("<", new_cap, ir.Constant(I64, 16)),
                           ir.Constant(I64, 16), new_cap)
        width = max(1, element.width // 8) if isinstance(element, ir.IntType) else (
            8 if isinstance(element, ir.DoubleType) else 4)
        bytes_per = ir.Constant(I64, width)
        # A count past what a byte size can hold (or wrapped negative) fails like malloc.
        too_big = b.or_(b.icmp_signed("<", needed, ZERO),
                        b.icmp_signed(">", new_cap, ir.Constant(I64, (2**63 - 1) // width)))
        with b.if_then(too_big):
            b.ret(ir.Constant(result, [ir.Constant(I8P, None), ZERO]))
        raw = b.call(self.malloc, [b.mul(new_cap, bytes_per)])
        failed = b.icmp_unsigned("==", raw, ir.Constant(I8P, None))
        with b.if_then(failed):
            b.ret(ir.Constant(result, [ir.Constant(I8P, None), ZERO]))
        with b.if_then(b.icmp_unsigned("!=", old, ir.Constant(I8P, None))):
            b.call(self.memcpy, [raw, old, b.mul(cap, bytes_per), ir.Constant(I1, 0)])
            b.call(self.free, [old])
        if init is not None:
            typed = b.bitcast(raw, element.as_pointer())
            fill = (ir.Constant(element, float(init))
                    if not isinstance(element, ir.IntType) else ir.Constant(element, init))
            emit_counted_loop(b, b.alloca(I64), cap, new_cap,
                              lambda q: b.store(fill, b.gep(typed, [q], inbounds=True)))
        packed = b.insert_value(ir.Constant(result, ir.Undefined), raw, 0)
        b.ret(b.insert_value(packed, new_cap, 1))
        return function

    def counted_loop(self, start: ir.Value, stop: ir.Value,
                     body: Callable[[ir.Value], None], name: str = "fill") -> None:
        emit_counted_loop(self.b, self.alloca(I64, "q"), start, stop, body, name)

    def alloca(self, type_: ir.Type, name: str = "") -> ir.AllocaInstr:
        entry = self.function.entry_basic_block
        with self.b.goto_block(entry):
            self.b.position_at_start(entry)
            return self.b.alloca(type_, name=name)

    # -- driver ------------------------------------------------------------------------
    def compile(self) -> ir.Module:
        """Emit this compiler's function: the whole kernel, or one phase of a split
        assembly (see ``can_split_assembly``)."""
        out_type = self.types[self.out_name]
        args = self.function.args
        start = args[-1] if self.phase in ("fill", "finish") else None
        self.output = OutputAssembler(self, self.tensors[self.out_name], out_type,
                                      self.nests[0].assign.vars, self.phase, start)
        self.output.prologue()
        if self.output.all_insert:
            self.tensors[self.out_name].freeze()
        if self.phase in ("whole", "count", "fill", "append"):
            for nest in self.nests:
                for op in operands(nest.body):
                    self.operands[op.uid] = op
                self.lower_nest(nest)
        if self.phase in ("count", "append"):
            self.b.store(self.output.entries(), args[-1])
        if self.phase in ("whole", "finish"):
            self.output.epilogue()
        if self.phase in ("whole", "setup", "append", "finish"):
            self.tensors[self.out_name].write_back(self.b)
        self.b.ret(ir.Constant(I32, STATUS_OK))
        return self.module

    def can_split_assembly(self) -> bool:
        """Whether threads may assemble this kernel's sparse output together, in phases:
        ``setup`` sizes the output's fixed arrays, ``count(lo, hi)`` counts the entries
        rows [lo, hi) append, ``fill(lo, hi, offset)`` appends them from ``offset`` into
        arrays sized exactly, and ``finish(total)`` runs the levels' finalize functions.

        It needs one loop nest whose outermost loop is the output's first index, with
        dense loops inside the output's indices (see below), over output levels that
        are full and array-free (rows that threads own) followed by one append group
        whose parent is those rows, with no array there that must be initialized and
        grows with the entries. Call it after ``compile``.
        """
        if not self.rows_outermost():
            return False
        nest = self.nests[0]
        # Counting walks the same sparse loops as filling; it is cheaper only by the
        # dense loops inside the output's indices (a dot product per entry, as in
        # SDDMM), which it drops. Without them two passes on two threads measured no
        # faster than one pass (SpAdd 0.82-1.35x, Hadamard 0.66-1.22x, TTV into CSR
        # 0.83-1.17x over four runs): such kernels gather instead (can_gather_assembly).
        inner = [v for v in nest.order if v not in nest.assign.vars]
        if not inner or any(not self.types[op.tensor].levels[k].full
                            for op in operands(nest.body)
                            for k, v in enumerate(op.vars) if v in inner):
            return False
        return self.output.splittable()

    def can_gather_assembly(self) -> bool:
        """Whether threads may assemble this kernel's sparse output by gathering:
        ``setup`` as above, ``append(lo, hi, *entries)`` appends rows [lo, hi) into the
        thread's own buffers from position 0 (the row cells it owns stay shared), the
        caller concatenates the buffers in row order, and ``finish(total)`` as above.
        One pass over the inputs, plus a copy of the entries. Call it after ``compile``.
        """
        return self.rows_outermost() and self.output.gatherable()

    def rows_outermost(self) -> bool:
        """One loop nest whose outermost loop is the output's first index."""
        if len(self.nests) != 1 or self.range_var is None or self.nests[0].assign.derived:
            return False
        return bool(self.nests[0].order) and self.nests[0].order[0] == self.range_var

    def lower_nest(self, nest: Nest) -> None:
        out_vars = nest.assign.vars
        order = list(nest.order)
        self.nest = nest
        self.derived = dict(nest.assign.derived)
        if any(v in self.derived for v in out_vars):
            self.out_depth, self.scatter = len(order), True
        else:
            self.out_depth = max((order.index(v) + 1 for v in out_vars), default=0)
            self.scatter = any(order.index(v) < self.out_depth
                               for v in order if v not in out_vars)
        self.insert_output = self.output.all_insert
        self.repeats = False  # set when a fused non-unique loop revisits output coordinates
        self.run_state: RunState | None = None  # see running_sums
        if self.scatter and not (self.insert_output or self.output.unordered):
            raise ScheduleError(f"output {nest.assign.tensor} cannot be scattered into")
        self.loops(order, 0, nest.body, Ctx())

    def loops(self, order: list[str], depth: int, expr: Expr, ctx: Ctx) -> None:
        if depth == self.out_depth and not self.scatter:
            self.write_point(order, depth, expr, ctx)
            return
        if depth == len(order):
            self.output.write(self.value(expr, ctx), ctx)
            return
        leaf, jam_body, pair_body = None, None, None
        if depth + 1 == len(order):
            leaf = self.output.write
        elif jam.can_jam(self, order, depth, expr):
            jam_body = lambda lanes: jam.emit(self, order, depth + 1, expr, lanes)
        elif (driver := pairs.inner_driver(self, order, depth, expr)) is not None:
            pair_body = lambda lanes: pairs.emit(self, order[depth + 1], expr, driver, lanes)
        # Each iteration appends at most one output entry: the leaf writes one, or the
        # next depth writes one sum (TTV's j loop around its k reduction).
        appends = self.output.appends and (leaf is not None or (
            not self.scatter and depth + 1 == self.out_depth))
        self.emit_var(order[depth], expr, ctx,
                      lambda c, e: self.loops(order, depth + 1, e, c),
                      self.output.hooks_for(order[depth]), leaf, jam_body, appends, pair_body)

    def write_point(self, order: list[str], depth: int, expr: Expr, ctx: Ctx) -> None:
        if depth == len(order):
            self.output.write(self.value(expr, ctx), ctx)
            return
        b = self.b
        run = self.run_state
        if run is not None and run.var == order[depth - 1]:
            self.continue_run(run, ctx.bound[run.var])
            self.reduce(order[depth:], expr, ctx, run.total, None)
            return
        acc = self.alloca(scalars.compute_type(self.dtype), "acc")
        if self.output.all_insert and all(lv.full for lv in self.output.levels):
            # Storing an empty sum into zero-filled, full storage changes nothing, so the
            # row is written unconditionally (one branch less per row). A stored sum
            # starts at 0.0, as the sum the output's zero would give (a -0.0 start
            # would need a + 0 per row to turn an empty sum into 0.0: row-wise SpMV on
            # the stencil spent 8% on it).
            stored = self.output.overwrites()
            b.store(scalars.constant(self.dtype, 0) if stored else scalars.sum_start(self.dtype),
                    acc)
            self.stores_every_row |= stored
            self.reduce(order[depth:], expr, ctx, acc, None)
            self.output.write(b.load(acc), ctx)
            return
        b.store(scalars.sum_start(self.dtype), acc)
        if jam.only_locate(self, order[depth:], expr):
            self.reduce(order[depth:], expr, ctx, acc, None)
            with b.if_then(jam.all_nonempty(self, order[depth:])):
                self.output.write(b.load(acc), ctx)
            return
        touched = self.alloca(I1, "touched")
        b.store(ir.Constant(I1, 0), touched)
        self.reduce(order[depth:], expr, ctx, acc, touched)
        with b.if_then(b.load(touched)):
            self.output.write(b.load(acc), ctx)

    def write_sum(self, total: ir.Value, ctx: Ctx) -> None:
        """Write a finished sum; where it is stored rather than added, + 0 turns an empty
        sum's -0.0 into 0.0."""
        if self.output.overwrites():
            total = scalars.apply(self.b, "add", [total, scalars.constant(self.dtype, 0)],
                                  self.dtype)
        self.output.write(total, ctx)

    def continue_run(self, run: RunState, coord: ir.Value) -> None:
        """Where the coordinate changes, write the finished run and start a new sum.

        A branch, not a select: a select would chain every sum to the one before (one
        add latency per entry through the whole loop), while a predicted branch starts
        each run's adds afresh so that runs overlap (coordinate-list SpMV: 0.6-0.8x the
        time on real matrices, 0.8x on the stencil; measured against the select)."""
        b = self.b
        with b.if_then(b.icmp_signed("!=", b.load(run.coord), coord)):
            self.finish_run(run)
            b.store(scalars.sum_start(self.dtype), run.total)
            b.store(coord, run.coord)

    def finish_run(self, run: RunState) -> None:
        """Write the open run's sum, if a run is open."""
        b = self.b
        coord = b.load(run.coord)
        with b.if_then(b.icmp_signed(">=", coord, ZERO)):
            self.write_sum(b.load(run.total), self.bind(run.outer, run.var, coord))

    def reduce(self, order: list[str], expr: Expr, ctx: Ctx, acc: ir.Value,
               touched: ir.Value | None) -> None:
        """acc += expr summed over ``order``."""
        if not order:
            self.accumulate(self.value(expr, ctx), acc, touched)
            return
        leaf = None
        if len(order) == 1:
            leaf = lambda value, _ctx: self.accumulate(value, acc, touched)
        self.emit_var(order[0], expr, ctx,
                      lambda c, e: self.reduce(order[1:], e, c, acc, touched), None, leaf)

    def accumulate(self, value: ir.Value, acc: ir.Value, touched: ir.Value | None) -> None:
        total = scalars.apply(self.b, "add", [self.b.load(acc), value], self.dtype,
                              self.fastmath)
        self.b.store(total, acc)
        if touched is not None:
            self.b.store(ir.Constant(I1, 1), touched)

    def bind(self, ctx: Ctx, var: str, value: ir.Value) -> Ctx:
        """Bind a loop variable, then every index derived from blocked levels it completes."""
        ctx = ctx.bind(var, value)
        for index, parts in self.derived.items():
            if index not in ctx.bound and all(v in ctx.bound for v, _ in parts):
                total = ZERO
                for part, multiplier in parts:
                    scaled = self.b.mul(ctx.bound[part], ir.Constant(I64, multiplier))
                    total = self.b.add(total, scaled)
                ctx = ctx.bind(index, total)
        return ctx

    # -- values ------------------------------------------------------------------------
    def value(self, expr: Expr, ctx: Ctx) -> ir.Value:
        b = self.b
        if isinstance(expr, Const):
            return scalars.constant(self.dtype, expr.value)
        if isinstance(expr, Apply):
            args = [self.value(a, ctx) for a in expr.args]
            return scalars.apply(b, expr.op.kind, args, self.dtype, self.fastmath)
        if isinstance(expr, Sum):
            return self.nested_sum(expr, ctx)
        assert isinstance(expr, Operand)
        return self.operand_value(expr, ctx)

    def operand_value(self, op: Operand, ctx: Ctx) -> ir.Value:
        tensor = self.tensors[op.tensor]
        resolved = ctx.levels.get(op.uid, ())
        if len(resolved) != len(op.vars):
            raise ScheduleError(f"{op}: levels left unresolved at the point of use")
        vals = tensor.array_ref(tensor.vals_slot)
        src = tensor.type.dtype
        if not resolved:
            return self._load_val(vals, ZERO, src)
        last = resolved[-1]
        if last.seg_end is None:
            value = self._load_val(vals, last.pos, src)
            found = ctx.found.get(op.uid)
            if found is not None and not is_true(found):
                value = self.b.select(found, value, scalars.constant(self.dtype, 0))
            return value
        acc = self.alloca(scalars.compute_type(self.dtype), "dup")
        self.b.store(scalars.sum_start(self.dtype), acc)  # a segment is never empty
        self.counted_loop(last.pos, last.seg_end, lambda q: self.b.store(scalars.apply(
            self.b, "add", [self.b.load(acc), self._load_val(vals, q, src)], self.dtype),
            acc))
        return self.b.load(acc)

    def _load_val(self, vals: ArrayRef, index: ir.Value, src: str) -> ir.Value:
        stored = vals.load_raw(self.b, index)
        return scalars.load_value(self.b, stored, src, self.dtype)

    def nested_sum(self, expr: Sum, ctx: Ctx) -> ir.Value:
        summed, body = peel_sums(expr)
        ops = operands(body)
        for op in ops:
            self.operands[op.uid] = op
        order = order_loops(summed, ops, self.types, set(ctx.bound))
        acc = self.alloca(scalars.compute_type(self.dtype), "sum")
        self.b.store(scalars.constant(self.dtype, 0), acc)
        self.reduce(order, body, ctx, acc, None)
        return self.b.load(acc)

    # -- one loop variable ---------------------------------------------------------------
    def iter_of(self, ctx: Ctx, var: str) -> Callable[[Operand], Iter | None]:
        def find(op: Operand) -> Iter | None:
            k = len(ctx.levels.get(op.uid, ()))
            if k < len(op.vars) and op.vars[k] == var:
                return Iter(op.uid, k)
            return None
        return find

    def level_type(self, it: Iter):
        op = self.operands[it.uid]
        return self.types[op.tensor].levels[it.level]

    def is_full(self, it: Iter) -> bool:
        return it.is_universe or self.level_type(it).full

    def describe(self, lattice) -> str:
        def name(it: Iter) -> str:
            if it.is_universe:
                return "U"
            return f"{self.operands[it.uid].tensor}.{it.level}"
        return " > ".join("{" + ", ".join(sorted(name(i) for i in p)) + "}"
                          for p in lattice.points)

    def cascade_is_full(self, it: Iter, ctx: Ctx, var: str) -> bool:
        """An iterator covers every coordinate only if the levels located right after it
        (their indices already bound) are full too."""
        if it.is_universe:
            return True
        op = self.operands[it.uid]
        levels = self.types[op.tensor].levels
        k = it.level + 1
        while k < len(op.vars) and (op.vars[k] in ctx.bound or op.vars[k] == var):
            if not levels[k].full:
                return False
            k += 1
        return True

    def can_locate(self, it: Iter) -> bool:
        return not it.is_universe and self.level_type(it).can_locate

    def extent(self, var: str) -> ir.Value:
        candidates = [(op.tensor, k) for op in self.operands.values()
                      for k, v in enumerate(op.vars) if v == var]
        candidates += [(self.out_name, k) for k, v in enumerate(self.nest.assign.vars)
                       if v == var]
        if not candidates:
            raise ScheduleError(f"no operand gives the extent of index {var}")
        tensor, level = candidates[0]
        return self.tensors[tensor].extents[level]

    def emit_var(self, var: str, expr: Expr, ctx: Ctx, body: Callable[[Ctx, Expr], None],
                 hooks: Hooks | None, leaf: Leaf | None = None,
                 jam_body: Callable[[list[Ctx]], None] | None = None,
                 appends: bool = False,
                 pair_body: Callable[[list[Ctx]], None] | None = None) -> None:
        """The loops over ``var``: one per lattice point. ``body`` emits what runs at each
        coordinate; ``leaf``, when given, is the same body as a consumer of an already
        computed value (the innermost loop), which lets cases merge into selects;
        ``jam_body``, when given, is the body for several coordinates at once (see jam);
        ``appends``: each iteration appends at most one entry to the output;
        ``pair_body``, when given, is the body for two coordinates side by side, used in
        the other form (see pairs)."""
        find = self.iter_of(ctx, var)

        def is_full(it: Iter) -> bool:
            return self.is_full(it) and self.cascade_is_full(it, ctx, var)

        lattice = build_lattice(expr, find, is_full)
        self.lattice_log.append(f"{var}: {self.describe(lattice)}    over {expr}")
        # Every coordinate is visited with every operand present (none located that can
        # miss, as a looked-up S(i,j) against a full B(j,k) can).
        covers_all = len(lattice.points) == 1 and all(is_full(it) for it in lattice.points[0])
        if var in self.nest.assign.vars and not covers_all:
            self.skips_rows = True
        if covers_all and leaf is None and jam_body is None and self.may_clear_rows(var, ctx):
            body = self.clearing_rows(body)
        states = {it: self.iterator_state(it, var, ctx) for it in lattice.points[0]}
        for point in lattice.points:
            iterated, located = choose_iterated(lattice, point, self.can_locate, is_full)
            emitter = PointEmitter(self, var, expr, ctx, lattice, point, iterated, located,
                                   states, find, body, hooks, leaf, appends, jam_body, pair_body)
            emitter.emit()

    @property
    def initializes_output(self) -> bool:
        """Whether the kernel sets every entry of its dense output, so the caller need not
        zero it first (out=, a recycled result): it zeroes each row itself before
        scattering into it, or stores a sum at every coordinate of loops that visit
        them all (row-wise SpMV)."""
        if self.phase != "whole" or len(self.nests) != 1:
            return False
        return self.clears_rows or (self.stores_every_row and not self.skips_rows
                                    and not self.scatter)

    def may_clear_rows(self, var: str, ctx: Ctx) -> bool:
        """Whether the kernel may zero each row of its output itself, just before adding
        into it, rather than have the caller zero it all first: a dense output that one
        statement assigns (not +=) by scattering, in a loop over its first index that
        visits every row. The row is then zeroed in cache, and a pass over the whole
        output in memory is saved (SpMM on a 46 MB result: ~2 of 9 ms)."""
        out = self.output
        return (self.phase == "whole" and len(self.nests) == 1 and self.scatter
                and not ctx.bound and var == self.range_var and not self.nest.assign.accumulate
                and out.all_insert and all(lv.full for lv in out.levels))

    def clearing_rows(self, body: Callable[[Ctx, Expr], None]) -> Callable[[Ctx, Expr], None]:
        """``body``, after zeroing the output's row at the loop's coordinate."""
        out, tensor, b = self.output, self.tensors[self.out_name], self.b
        itemsize = np.dtype(tensor.type.dtype).itemsize

        def clear_then_body(ctx: Ctx, expr: Expr) -> None:
            # Set here, where the clearing is emitted: an expression that folds to its
            # fill value (A*B*0) emits no body, and then no row is cleared.
            self.clears_rows = True
            row = ctx
            for v in out.vars:
                if v not in row.bound:
                    row = row.bind(v, ZERO)
            start = out.prefix_position(row, len(out.levels) - 1)
            count = ONE
            for extent in tensor.extents[1:]:
                count = b.mul(count, extent)
            vals = tensor.array_ref(tensor.vals_slot)
            b.call(self.memset, [b.bitcast(vals.address(b, start), I8P),
                                 ir.Constant(ir.IntType(8), 0),
                                 b.mul(count, ir.Constant(I64, itemsize)), ir.Constant(I1, 0)])
            body(ctx, expr)
        return clear_then_body

    def in_range_loop(self, var: str, ctx: Ctx) -> bool:
        """Whether a loop over ``var`` only visits coordinates in [lo, hi)."""
        return var == self.range_var and var not in ctx.bound

    def clamp(self, begin: ir.Value, end: ir.Value) -> tuple[ir.Value, ir.Value]:
        b = self.b
        begin = b.select(b.icmp_signed(">", self.lo, begin), self.lo, begin)
        end = b.select(b.icmp_signed("<", self.hi, end), self.hi, end)
        return begin, end

    def iterator_state(self, it: Iter, var: str, ctx: Ctx) -> IterState:
        b = self.b
        if it.is_universe:
            cur = self.alloca(I64, f"{var}.u")
            begin, end = ZERO, self.extent(var)
            clamped = self.in_range_loop(var, ctx)
            if clamped:
                begin, end = self.clamp(begin, end)
            b.store(begin, cur)
            return IterState(it, "coordinate", cur, end, None, clamped)
        op = self.operands[it.uid]
        tensor = self.tensors[op.tensor]
        level = tensor.type.levels[it.level]
        parent = ctx.levels.get(op.uid, ())[-1] if it.level > 0 else None
        env = self.parent_env(op, it.level, ctx)
        if level.definition.iterate == "coordinate":
            if parent is not None and parent.seg_end is not None:
                raise ScheduleError(f"{op.tensor}: level {it.level} iterates coordinates under "
                                    "a non-unique parent, which cannot be merged")
            begin, end = tensor.call(it.level, "coord_bounds", **env)
            clamped = self.in_range_loop(var, ctx)
            if clamped:
                begin, end = self.clamp(begin, end)
            kind = "coordinate"
        elif parent is not None and parent.seg_end is not None:
            begin, _ = tensor.call(it.level, "pos_bounds", **env)
            last = dict(env, p_parent=b.sub(parent.seg_end, ONE))
            _, end = tensor.call(it.level, "pos_bounds", **last)
            kind = "position"
        else:
            begin, end = tensor.call(it.level, "pos_bounds", **env)
            kind = "position"
        if kind == "position":
            clamped = self.in_range_loop(var, ctx) and level.ordered
            if clamped:  # a thread's coordinates [lo, hi) are a run of sorted positions
                begin, end = (self.lower_bound(tensor, it.level, env, begin, end, bound)
                              for bound in (self.lo, self.hi))
        cur = self.alloca(I64, f"{op.tensor}{it.level}.cur")
        b.store(begin, cur)
        return IterState(it, kind, cur, end, parent, clamped)

    def cascade(self, op: Operand, level: int, ok: ir.Value, ctx: Ctx):
        """Locate the following levels whose indices are already bound."""
        b = self.b
        tensor = self.tensors[op.tensor]
        deeper: list[LevelPos] = []
        while level < len(op.vars) and op.vars[level] in ctx.bound:
            if not tensor.type.levels[level].can_locate:
                raise ScheduleError(f"{op.tensor}: level {level} must be iterated but its index "
                                    f"{op.vars[level]} is already bound; it cannot locate")
            env = self.parent_env(op, level, ctx)
            i = ctx.bound[op.vars[level]]
            pos, found = tensor.call(level, "locate", i=i, **env)
            if not is_true(found):
                ok = found if is_true(ok) else b.and_(ok, found)
            entry = LevelPos(pos, i)
            deeper.append(entry)
            ctx = ctx.resolve(op.uid, entry)
            level += 1
        return ok, deeper

    def lower_bound(self, tensor: TensorIR, level: int, env: dict[str, ir.Value],
                    begin: ir.Value, end: ir.Value, target: ir.Value) -> ir.Value:
        """First position in [begin, end) whose coordinate is >= target (binary search
        through the level's own pos_access)."""
        b = self.b
        low, high = self.alloca(I64, "bs.lo"), self.alloca(I64, "bs.hi")
        b.store(begin, low)
        b.store(end, high)
        head = b.append_basic_block("bs.head")
        body = b.append_basic_block("bs.body")
        done = b.append_basic_block("bs.done")
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(b.icmp_signed("<", b.load(low), b.load(high)), body, done)
        b.position_at_end(body)
        lo_value, hi_value = b.load(low), b.load(high)
        mid = b.add(lo_value, b.ashr(b.sub(hi_value, lo_value), ONE))
        coord, _ = tensor.call(level, "pos_access", p=mid, **env)
        below = b.icmp_signed("<", coord, target)
        b.store(b.select(below, b.add(mid, ONE), lo_value), low)
        b.store(b.select(below, hi_value, mid), high)
        b.branch(head)
        b.position_at_end(done)
        return b.load(low)

    def at_position(self, ctx: Ctx, var: str, it: Iter, p: ir.Value, expr: Expr) -> Ctx:
        """``ctx`` at position ``p`` of the level ``it`` iterates: ``var`` bound to its
        coordinate, and every operand level ``expr`` then binds resolved by a lookup
        that surely finds (as jammed and paired loops need)."""
        op = self.operands[it.uid]
        env = self.parent_env(op, it.level, ctx)
        coord, _ = self.tensors[op.tensor].call(it.level, "pos_access", p=p, **env)
        ctx = self.bind(ctx, var, coord).resolve(it.uid, LevelPos(p, coord))
        return jam.locate_bound(self, ctx, expr)

    def parent_env(self, op: Operand, level: int, ctx: Ctx) -> dict[str, ir.Value]:
        resolved = ctx.levels.get(op.uid, ())
        env: dict[str, ir.Value] = {}
        if level >= 1:
            env["p_parent"] = resolved[level - 1].pos
            env["i_parent"] = resolved[level - 1].coord
        if level >= 2:
            env["i_grandparent"] = resolved[level - 2].coord
        return env

    def sums_in_register(self, var: str, level) -> bool:
        """Whether this loop binds the output's last index, so that summing a run of
        duplicates (sorted, so adjacent) before one write keeps the sum in a register:
        COO SpMV then adds into y once per row instead of once per entry (2-3x on
        real matrices). Where writes happen deeper anyway (MTTKRP's rank loop),
        visiting duplicates one by one is cheaper."""
        order = self.nest.order
        return (level.ordered and not self.scatter and var in order
                and order.index(var) + 1 == self.out_depth)

    def running_sums(self, var: str, level, op: Operand, expr: Expr) -> bool:
        """Whether a sorted run of duplicates may be summed by one loop over its positions
        (see continue_run): one branch per position where the coordinate changes, instead
        of a nested loop per run whose two exits (SpMV rows of 1-10 entries) mispredicted
        per row; the order of the adds is the run's. It needs an output written by
        coordinate: full, random-access levels that the statement assigns rather than
        adds to."""
        return (not level.unique and self.sums_in_register(var, level)
                and self.fusable(op, expr) and not self.nest.assign.accumulate
                and all(lv.full for lv in self.output.levels))

    def fusable(self, op: Operand, expr: Expr) -> bool:
        """Duplicates may be visited one by one when the output only accumulates."""
        return (self.scatter or self.insert_output) and self.output.all_insert and \
            _linear_in(expr, op.uid)


def unroll(back_edge: ir.Instruction, count: int) -> None:
    """Ask LLVM to unroll the loop closed by ``back_edge`` ``count`` times (the pipeline
    unrolls no loop unasked; see backends/cpu.py)."""
    module = back_edge.module
    hint = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.count"),
                                ir.Constant(ir.IntType(32), count)])
    loop_id = module.add_metadata([ir.MetaDataString(module, f"loop.{len(module.metadata)}")])
    loop_id.operands = (loop_id, hint)  # a loop ID's first operand is itself
    back_edge.set_metadata("llvm.loop", loop_id)


def emit_counted_loop(b: ir.IRBuilder, counter: ir.AllocaInstr, start: ir.Value,
                      stop: ir.Value, body: Callable[[ir.Value], None],
                      name: str = "fill") -> None:
    """for q in range(start, stop): body(q), with ``counter`` as the loop variable.

    Its blocks are named ``name``.* (fill.* by default, which the dump and the loop-shape
    tests tell apart from the loops over index variables).
    """
    b.store(start, counter)
    head = b.append_basic_block(f"{name}.head")
    loop = b.append_basic_block(f"{name}.body")
    done = b.append_basic_block(f"{name}.done")
    b.branch(head)
    b.position_at_end(head)
    b.cbranch(b.icmp_signed("<", b.load(counter), stop), loop, done)
    b.position_at_end(loop)
    q = b.load(counter)
    body(q)
    b.store(b.add(q, ONE), counter)
    b.branch(head)
    b.position_at_end(done)


@dataclass
class IterState:
    it: Iter
    kind: str  # 'coordinate' or 'position'
    cur: ir.AllocaInstr
    end: ir.Value
    parent: LevelPos | None
    clamped: bool = False  # already limited to the thread's coordinates [lo, hi)


Hooks = tuple[Callable[[Ctx], object], Callable[[Ctx, object], None]]
Leaf = Callable[[ir.Value, Ctx], None]


class PointEmitter:
    """The loop (or straight-line code) for one lattice point, with its case dispatch."""

    def __init__(self, kc: KernelCompiler, var, expr, ctx, lattice, point, iterated, located,
                 states, find, body, hooks, leaf=None, appends=False, jam_body=None,
                 pair_body=None):
        self.kc, self.b = kc, kc.b
        self.leaf = leaf
        self.jam_body = jam_body
        self.pair_body = pair_body
        self.appends = appends  # an iteration appends at most one entry to the output
        self.var, self.expr, self.ctx = var, expr, ctx
        self.lattice, self.point = lattice, point
        self.iterated, self.located = iterated, located
        self.states, self.find, self.body, self.hooks = states, find, body, hooks
        self.seg_ends: dict[Iter, ir.Value] = {}  # end of each deduplicated segment
        self.running = False  # positions of duplicate coordinates summed as they come
        self.galloping = False  # mismatches skip ahead by search (see seek_common)
        self.lockstep = False  # every iterator holds the same coordinates (same_coordinates)
        self.absent: ir.Block | None = None  # straight-line code: where a miss goes

    def emit(self) -> None:
        b = self.b
        single = len(self.iterated) == 1
        state = self.states[self.iterated[0]]
        if (single and len(self.lattice.points) == 1 and state.kind == "position"
                and self.kc.level_type(state.it).branchless
                and (state.parent is None or state.parent.seg_end is None)):
            self.iteration(straight=True)
            return
        for it in self.iterated:
            if it not in self.states:
                raise ScheduleError("internal: iterator without state")
        for it in self.iterated:
            if not it.is_universe and not self.kc.level_type(it).ordered:
                op = self.kc.operands[it.uid]
                if not single:
                    raise ScheduleError(f"{op.tensor}: level {it.level} is unordered and cannot "
                                        "be co-iterated with another operand")
                if self.kc.output.appends_in_order(self.var):
                    # (an unordered level may hold its keys in order by chance)
                    raise ScheduleError(f"{op.tensor}: level {it.level} is unordered, but the "
                                        f"output appends index {self.var} in order")
        if self.jam_body is not None and self.jammable():
            for lanes in jam.LANES:  # the loop below then runs the remaining iterations
                self.jam_loop(lanes)
        if self.pair_body is not None and self.pairable():
            self.kc.form_choices += 1
            if self.kc.other_form:  # the loop below then runs the odd last iteration
                self.pair_loop()
        reserved = self.reserve_appends()
        self.running = self.runs_sums()
        if self.running:
            run_coord = self.kc.alloca(I64, "run.coord")
            run_sum = self.kc.alloca(scalars.compute_type(self.kc.dtype), "run.sum")
            b.store(ir.Constant(I64, -1), run_coord)
            self.kc.run_state = RunState(self.var, run_coord, run_sum, self.ctx)
        if self.may_step_together():
            with b.if_else(self.same_coordinates()) as (same, different):
                with same:
                    self.lockstep = True
                    self.emit_loop()
                    self.lockstep = False
                with different:
                    self.emit_merge()
        else:
            self.emit_merge()
        self.kc.tensors[self.kc.out_name].prechecked -= reserved
        if self.running:
            self.kc.finish_run(self.kc.run_state)
            self.kc.run_state = None

    def emit_merge(self) -> None:
        b = self.b
        if self.gallops() and self.kc.other_form:  # search past every mismatch
            self.galloping = True
            self.emit_loop()
        elif self.gallops():  # two versions of the loop: galloping pays off on skewed ranges
            with b.if_else(self.skewed()) as (skewed, balanced):
                with skewed:
                    self.galloping = True
                    self.emit_loop()
                with balanced:
                    self.galloping = False
                    self.emit_loop()
        else:
            self.emit_loop()

    def may_step_together(self) -> bool:
        """Whether the iterators may be checked for holding the same coordinates, to be
        stepped together: an intersection (a union's merge already branches on a match
        first, predicted where patterns coincide: A + Aᵀ on the stencil ran 8.9 ms as a
        merge, 9.9 with the check) whose iterators may gallop (see gallops), with no
        per-coordinate hooks or thread-range test."""
        return self.gallops() and not self.hooks \
            and not self.kc.in_range_loop(self.var, self.ctx)

    def same_coordinates(self) -> ir.Value:
        """Whether the iterators' ranges hold the same coordinates in the same order (A .*
        Aᵀ of a symmetric pattern, row by row): then one counter steps
        them all and every coordinate is a match, with no compare, select or branch per
        entry (A .* Aᵀ on the stencil 10.0 -> 8.7 ms). Otherwise the ranges' lengths
        differ (one compare), or a scan that LLVM vectorizes finds a difference."""
        b, kc = self.b, self.kc
        first, *others = self.iterated
        begin = {it: b.load(self.states[it].cur) for it in self.iterated}
        length = b.sub(self.states[first].end, begin[first])
        equal = kc.alloca(I1, "same")
        b.store(TRUE, equal)
        lengths_match = TRUE
        for it in others:
            other = b.sub(self.states[it].end, begin[it])
            lengths_match = b.and_(lengths_match, b.icmp_signed("==", other, length))
        with b.if_then(lengths_match):
            counter = kc.alloca(I64, "same.k")

            def compare(k: ir.Value) -> None:
                coords = []
                for it in self.iterated:
                    op = kc.operands[it.uid]
                    env = kc.parent_env(op, it.level, self.ctx)
                    coord, found = kc.tensors[op.tensor].call(
                        it.level, "pos_access", p=b.add(begin[it], k), **env)
                    coords.append(coord)
                    if not is_true(found):
                        b.store(b.and_(b.load(equal), found), equal)
                for coord in coords[1:]:
                    b.store(b.and_(b.load(equal), b.icmp_signed("==", coord, coords[0])),
                            equal)

            emit_counted_loop(b, counter, ZERO, length, compare, name="same")
        return b.and_(lengths_match, b.load(equal))

    def emit_loop(self) -> None:
        b = self.b
        head = b.append_basic_block(f"{self.var}.head")
        loop = b.append_basic_block(f"{self.var}.body")
        done = b.append_basic_block(f"{self.var}.done")
        b.branch(head)
        b.position_at_end(head)
        cond = TRUE
        for it in self.iterated:
            st = self.states[it]
            cmp = b.icmp_signed("<", b.load(st.cur), st.end)
            cond = cmp if cond is TRUE else b.and_(cond, cmp)
        b.cbranch(cond, loop, done)
        b.position_at_end(loop)
        self.latch = head
        self.iteration(straight=False)
        if not b.block.is_terminated:
            back = b.branch(head)
            if self.running:
                unroll(back, RUN_UNROLL)
        b.position_at_end(done)

    def runs_sums(self) -> bool:
        """Whether this loop sums runs of duplicates as they come (see running_sums)."""
        if len(self.iterated) != 1 or len(self.lattice.points) != 1 or self.hooks:
            return False
        it = self.iterated[0]
        if it.is_universe or self.states[it].kind != "position":
            return False
        return self.kc.running_sums(self.var, self.kc.level_type(it), self.kc.operands[it.uid],
                                    self.expr)

    def jammable(self) -> bool:
        """Whether this loop may visit several positions per step: one sparse level
        iterated by position, each position one coordinate (unique, always found), every
        other operand level at that coordinate located surely, and no per-coordinate
        output hooks or thread-range test."""
        kc = self.kc
        if len(self.iterated) != 1 or len(self.lattice.points) != 1 or self.hooks \
                or kc.in_range_loop(self.var, self.ctx):
            return False
        it = self.iterated[0]
        state = self.states[it]
        if it.is_universe or state.kind != "position" or (
                state.parent is not None and state.parent.seg_end is not None):
            return False
        level = kc.level_type(it)
        if not level.unique or not level.definition.always_found("pos_access"):
            return False
        return self.others_located_surely(it)

    def others_located_surely(self, it: Iter) -> bool:
        """Whether every operand level this loop resolves, but the iterated one, is
        located by a lookup that always finds."""
        for op in operands(self.expr):
            for k in range(len(self.ctx.levels.get(op.uid, ())), len(op.vars)):
                if op.vars[k] != self.var and op.vars[k] not in self.ctx.bound:
                    break
                if (op.uid, k) != (it.uid, it.level) and \
                        not jam.locates_surely(self.kc, op, k):
                    return False
        return True

    def pairable(self) -> bool:
        """Whether two iterations of this loop (one from each half of its range) may run
        side by side: one iterator, visiting each coordinate once without a test (no
        thread-range test left, no lookup that may miss), and no per-coordinate output
        hooks."""
        kc = self.kc
        if len(self.iterated) != 1 or len(self.lattice.points) != 1 or self.hooks:
            return False
        it = self.iterated[0]
        state = self.states[it]
        if kc.in_range_loop(self.var, self.ctx) and not state.clamped:
            return False
        if not it.is_universe:
            level = kc.level_type(it)
            access = "pos_access" if state.kind == "position" else "coord_access"
            if not level.unique or not level.definition.always_found(access) or (
                    state.parent is not None and state.parent.seg_end is not None):
                return False
        return self.others_located_surely(it)

    def pair_loop(self) -> None:
        """The first and the second half of the iterations side by side, one from each
        per step (see pairs); the loop below then runs the odd last one."""
        b, kc = self.b, self.kc
        state = self.states[self.iterated[0]]
        kc.lattice_log.append(f"{self.var}: the two halves side by side, their sums "
                              "in step (paired)")
        start = b.load(state.cur)
        count = b.sub(state.end, start)
        half = b.sdiv(b.select(b.icmp_signed(">", count, ZERO), count, ZERO),
                      ir.Constant(I64, 2))
        kc.counted_loop(start, b.add(start, half),
                        lambda cur: self.pair_body([self.lane(cur),
                                                    self.lane(b.add(cur, half))]),
                        name=f"{self.var}.pairs")
        b.store(b.add(start, b.add(half, half)), state.cur)

    def lane(self, cur: ir.Value) -> Ctx:
        """The context of the iteration at ``cur`` (a coordinate or a position) of a
        loop with one iterator, every operand level it binds resolved."""
        kc = self.kc
        it = self.iterated[0]
        if it.is_universe:
            return jam.locate_bound(kc, kc.bind(self.ctx, self.var, cur), self.expr)
        if self.states[it].kind == "position":
            return kc.at_position(self.ctx, self.var, it, cur, self.expr)
        op = kc.operands[it.uid]
        env = kc.parent_env(op, it.level, self.ctx)
        pos, _ = kc.tensors[op.tensor].call(it.level, "coord_access", i=cur, **env)
        ctx = kc.bind(self.ctx, self.var, cur).resolve(it.uid, LevelPos(pos, cur))
        return jam.locate_bound(kc, ctx, self.expr)

    def jam_loop(self, width: int) -> None:
        """Visit ``width`` consecutive positions per step while that many are left."""
        b, kc = self.b, self.kc
        it = self.iterated[0]
        state = self.states[it]
        step = ir.Constant(I64, width)
        kc.lattice_log.append(f"{self.var}: {width} positions per step (jammed)")
        head = b.append_basic_block(f"{self.var}.jam{width}.head")
        loop = b.append_basic_block(f"{self.var}.jam{width}.body")
        done = b.append_basic_block(f"{self.var}.jam{width}.done")
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(b.icmp_signed("<=", b.add(b.load(state.cur), step), state.end), loop, done)
        b.position_at_end(loop)
        cur = b.load(state.cur)
        self.jam_body([kc.at_position(self.ctx, self.var, it, b.add(cur, ir.Constant(I64, u)),
                                      self.expr) for u in range(width)])
        b.store(b.add(cur, step), state.cur)
        b.branch(head)
        b.position_at_end(done)

    def reserve_appends(self) -> set[int]:
        """Before a loop whose every iteration appends at most one output entry, make
        room for as many entries as it can iterate (each iteration advances an iterator)
        and return the output slots its stores then need not check: no capacity test
        and no call to the grow path inside the loop, so its registers stay in
        registers."""
        kc, b = self.kc, self.b
        if not self.appends or kc.phase not in ("whole", "append"):
            return set()
        bound = ZERO
        for it in self.iterated:
            st = self.states[it]
            bound = b.add(bound, b.sub(st.end, b.load(st.cur)))
        slots = kc.output.reserve_last_group(bound)
        kc.tensors[kc.out_name].prechecked |= slots
        return slots

    def iteration(self, straight: bool) -> None:
        b, kc = self.b, self.kc
        coords: dict[Iter, ir.Value] = {}
        for it in self.iterated:
            st = self.states[it]
            cur = b.load(st.cur)
            if st.kind == "coordinate":
                coords[it] = cur
                continue
            op = kc.operands[it.uid]
            env = kc.parent_env(op, it.level, self.ctx)
            coord, found = kc.tensors[op.tensor].call(it.level, "pos_access", p=cur, **env)
            coords[it] = coord
            if not is_true(found):
                skip = b.append_basic_block("skip")
                go = b.append_basic_block("found")
                b.cbranch(found, go, skip)
                b.position_at_end(skip)
                if straight:
                    self.absent = self.absent or b.append_basic_block("absent")
                    b.branch(self.absent)
                else:
                    b.store(b.add(cur, ONE), st.cur)
                    b.branch(self.latch)
                b.position_at_end(go)
        values = [coords[it] for it in self.iterated]
        i = values[0]
        if not self.lockstep:  # else every coordinate equals the first
            for v in values[1:]:
                i = b.select(b.icmp_signed("<", v, i), v, i)
        ctx = kc.bind(self.ctx, self.var, i)
        present: dict[Iter, ir.Value] = {}
        at_i: dict[Iter, ir.Value] = {}  # each iterator's coordinate test
        positions: dict[int, list[LevelPos]] = {}
        for it in self.iterated:
            eq = TRUE if len(self.iterated) == 1 or self.lockstep \
                else b.icmp_signed("==", coords[it], i)
            present[it] = at_i[it] = eq
            if it.is_universe:
                continue
            present[it], positions[it.uid] = self.resolve_iterated(it, i, eq, ctx)
        for it in self.located:
            present[it], positions[it.uid] = self.resolve_located(it, i, ctx)
        for uid, levels in positions.items():
            for level in levels:
                ctx = ctx.resolve(uid, level)
        ctx = self.late_locate(ctx)
        in_range = None
        clamped = all(self.states[it].clamped for it in self.iterated)
        if kc.in_range_loop(self.var, self.ctx) and not clamped:
            in_range = b.and_(b.icmp_signed("<=", kc.lo, i), b.icmp_signed("<", i, kc.hi))
            skip_to = b.append_basic_block("out_of_range")
            work = b.append_basic_block("in_range")
            b.cbranch(in_range, work, skip_to)
            b.position_at_end(work)
        saved = self.hooks[0](ctx) if self.hooks else None
        split = None if (straight or in_range is not None or self.hooks or self.lockstep) \
            else (coords, i)
        chosen = None if straight else self.selectable_cases(ctx, present)
        if split and chosen:  # both merges apply: branch per case, or select (other_form)
            kc.form_choices += 1
            if kc.other_form:
                split = None
            else:
                chosen = None
        if chosen:
            self.emit_selected(chosen, ctx)
            advanced = False
        else:
            advanced = self.dispatch(ctx, present, split, at_i)
        if self.hooks:
            self.hooks[1](ctx, saved)
        if in_range is not None:
            b.branch(skip_to)
            b.position_at_end(skip_to)
        if not straight and not advanced:
            for it in self.iterated:
                self.advance(it, coords[it], None if self.lockstep else i)
        elif self.absent is not None:
            b.branch(self.absent)
            b.position_at_end(self.absent)

    def resolve_iterated(self, it: Iter, i: ir.Value, eq: ir.Value, ctx: Ctx):
        """Position of an iterated level at coordinate i, then locate deeper bound levels."""
        b, kc = self.b, self.kc
        st = self.states[it]
        op = kc.operands[it.uid]
        tensor = kc.tensors[op.tensor]
        level = tensor.type.levels[it.level]
        env = kc.parent_env(op, it.level, self.ctx)
        cur = b.load(st.cur)
        if st.kind == "coordinate":
            pos, found = tensor.call(it.level, "coord_access", i=i, **env)
            ok = eq if is_true(found) else b.and_(eq, found)
            entry = LevelPos(pos, i)
        elif level.unique or self.running or (
                len(self.iterated) == 1 and kc.fusable(op, self.expr)
                and not kc.sums_in_register(self.var, level)):
            ok = eq
            entry = LevelPos(cur, i)
            if not level.unique and not self.running and self.var in kc.nest.assign.vars:
                kc.repeats = True
        else:
            seg = self.segment_end(tensor, it, op, cur, st.end, i, env)
            self.seg_ends[it] = seg
            ok = eq
            entry = LevelPos(cur, i, seg)
        ok, deeper = self.kc.cascade(op, it.level + 1, ok, ctx.resolve(op.uid, entry))
        return ok, [entry] + deeper

    def segment_end(self, tensor, it, op, cur, end, i, env) -> ir.Value:
        """First position after the run of duplicates of coordinate i."""
        b = self.b
        seg = self.kc.alloca(I64, "seg")
        b.store(b.add(cur, ONE), seg)
        head = b.append_basic_block("dedup.head")
        test = b.append_basic_block("dedup.test")
        step = b.append_basic_block("dedup.step")
        done = b.append_basic_block("dedup.done")
        b.branch(head)
        b.position_at_end(head)
        q = b.load(seg)
        b.cbranch(b.icmp_signed("<", q, end), test, done)
        b.position_at_end(test)
        coord, _ = tensor.call(it.level, "pos_access", p=q, **env)
        b.cbranch(b.icmp_signed("==", coord, i), step, done)
        b.position_at_end(step)
        b.store(b.add(q, ONE), seg)
        b.branch(head)
        b.position_at_end(done)
        return b.load(seg)

    def resolve_located(self, it: Iter, i: ir.Value, ctx: Ctx):
        kc = self.kc
        op = kc.operands[it.uid]
        tensor = kc.tensors[op.tensor]
        env = kc.parent_env(op, it.level, self.ctx)
        pos, found = tensor.call(it.level, "locate", i=i, **env)
        entry = LevelPos(pos, i)
        ok, deeper = self.kc.cascade(op, it.level + 1, found, ctx.resolve(op.uid, entry))
        return ok, [entry] + deeper

    def late_locate(self, ctx: Ctx) -> Ctx:
        """Locate operands whose next level's index was just derived (blocked levels)."""
        for op in operands(self.expr):
            resolved = len(ctx.levels.get(op.uid, ()))
            if resolved == len(op.vars) or op.vars[resolved] not in self.kc.derived \
                    or op.vars[resolved] not in ctx.bound or self.find(op) is not None:
                continue
            ok, deeper = self.kc.cascade(op, resolved, TRUE, ctx)
            for entry in deeper:
                ctx = ctx.resolve(op.uid, entry)
            previous = ctx.found.get(op.uid, TRUE)
            ok = ok if is_true(previous) else self.b.and_(previous, ok)
            ctx = replace(ctx, found={**ctx.found, op.uid: ok})
        return ctx

    def cases(self, ctx: Ctx, present: dict[Iter, ir.Value]):
        """(condition, expression, context) per subpoint, most operands first; the
        expression has absent operands replaced by their fill values (None: no result)."""
        point_uids = {it.uid for it in self.point}
        for sub in self.lattice.subpoints(self.point):
            sub_uids = {it.uid for it in sub}

            def absent(op: Operand, sub_uids=sub_uids) -> bool:
                it = self.find(op)
                return it is not None and (it.uid not in sub_uids or it.uid not in point_uids)

            cond = TRUE
            for it in sub:
                if not is_true(present.get(it, TRUE)):
                    cond = present[it] if is_true(cond) else self.b.and_(cond, present[it])
            case_ctx = replace(ctx, levels={u: lv for u, lv in ctx.levels.items()
                                            if u in sub_uids or u not in point_uids})
            yield cond, substitute_absent(self.expr, absent), case_ctx, frozenset(sub)

    def selectable_cases(self, ctx: Ctx, present: dict[Iter, ir.Value]) -> list | None:
        """The cases of a co-iteration whose values may all be computed unconditionally
        and picked with selects, or None: each case is a scalar expression (it produces a
        value) over operands at positions valid whether or not the operand is present
        (iterated positions inside the loop, always-found locates), and the body is the
        innermost one. A union such as A + B then has no data-dependent branch per
        coordinate, which on random sparsity patterns mispredicts about every other step.
        """
        if self.leaf is None or len(self.iterated) < 2:
            return None
        for it in self.point:
            if not it.is_universe and not is_true(present.get(it, TRUE)) and \
                    it not in self.iterated:
                return None  # a located operand that may miss: its position is not valid
        chosen = []
        for cond, expr, case_ctx, _ in self.cases(ctx, present):
            if expr is None or contains_sum(expr):
                return None
            chosen.append((cond, expr, case_ctx))
            if is_true(cond):
                break
        if len(chosen) < 2 or not self.positions_always_valid(ctx):
            return None
        return chosen

    def emit_selected(self, chosen, ctx: Ctx) -> None:
        b, kc = self.b, self.kc
        kc.budget.spend(len(chosen))
        value, taken = None, None
        for cond, expr, case_ctx in reversed(chosen):
            computed = kc.value(expr, case_ctx)
            value = computed if value is None else b.select(cond, computed, value)
            taken = cond if taken is None else b.or_(cond, taken)
        if is_true(taken):
            self.leaf(value, ctx)
        else:
            with b.if_then(taken, likely=True):
                self.leaf(value, ctx)

    def positions_always_valid(self, ctx: Ctx) -> bool:
        """Whether every operand position resolved at this coordinate may be read
        whether or not its operand is present (no deeper locate that can miss)."""
        for it in self.iterated:
            if it.is_universe:
                continue
            op = self.kc.operands[it.uid]
            levels = self.kc.types[op.tensor].levels
            for k in range(it.level + 1, len(ctx.levels.get(op.uid, ()))):
                if not levels[k].full:
                    return False
        return not any(not is_true(found) for found in ctx.found.values())

    def dispatch(self, ctx: Ctx, present: dict[Iter, ir.Value],
                 split: tuple[dict[Iter, ir.Value], ir.Value] | None = None,
                 at_i: dict[Iter, ir.Value] | None = None) -> bool:
        """Branch to the first case whose operands are present; return whether the
        iterators were advanced here.

        With ``split`` (the coordinates) and several iterators, each case advances the
        iterators it knows about by a constant step (see advance_case), so the next
        positions do not wait on the coordinates just loaded: a branch per coordinate
        instead of a load-compare-select chain per entry (cases computed unconditionally
        and selected, the earlier way, cost about 7 cycles per entry). CSR + CSR: real
        matrices 0.56-0.65x the time (Franz6 229 -> 127 us), power-law rows 0.74x, the
        stencil 0.9x; uniformly random patterns, where the branch mispredicts about every
        other entry, 1.56x (27.5 -> 43 ms, still ahead of scipy's 55)."""
        b = self.b
        done = b.append_basic_block("cases.done")
        joined = None
        if split is not None and len(self.iterated) > 1:
            joined = b.append_basic_block("cases.advanced")
        earlier: list[frozenset] = []
        for cond, expr, case_ctx, sub in self.cases(ctx, present):
            if not is_true(cond):
                then = b.append_basic_block("case")
                other = b.append_basic_block("case.else")
                b.cbranch(cond, then, other)
                b.position_at_end(then)
            if expr is not None:
                self.kc.budget.spend(1 if len(self.lattice.points) > 1 else 0)
                self.body(case_ctx, expr)
            if joined is not None:
                self.advance_case(sub, earlier, present, split, at_i)
                b.branch(joined)
            else:
                b.branch(done)
            if is_true(cond):
                break
            earlier.append(sub)
            b.position_at_end(other)
        if not b.block.is_terminated:
            b.branch(done)
        b.position_at_end(done)
        if joined is None:
            return False
        if self.galloping:  # only here do the two merges of an intersection differ
            self.kc.form_choices += 1
            self.seek_common(*split)
        else:
            for it in self.iterated:
                self.advance(it, split[0][it], split[1])
        b.branch(joined)
        b.position_at_end(joined)
        return True

    def advance_case(self, sub: frozenset, earlier: list[frozenset],
                     present: dict[Iter, ir.Value],
                     split: tuple[dict[Iter, ir.Value], ir.Value],
                     at_i: dict[Iter, ir.Value]) -> None:
        """Advance the iterators in the branch of the case whose operands are ``sub``:
        those in it are at the coordinate (one step); one that an earlier case, taken
        had it been at the coordinate, holds with operands all in ``sub`` is not (no
        step), where its presence is exactly its coordinate test; any other steps past
        the coordinate by a select."""
        coords, i = split
        for it in self.iterated:
            if it in sub:
                self.advance(it, coords[it], None)
            elif present[it] is at_i[it] and any(
                    it in prior and prior - {it} <= sub for prior in earlier):
                continue
            else:
                self.advance(it, coords[it], i)

    def gallops(self) -> bool:
        """Whether a mismatch may skip every iterator straight to the largest coordinate:
        the body runs only where all operands are present (an intersection), and each
        iterates the positions of an ordered, unique level whose every position holds
        a coordinate (a search over empty slots may step past a match)."""
        if len(self.iterated) < 2 or len(self.lattice.points) != 1:
            return False
        for it in self.iterated:
            state = self.states[it]
            level = None if it.is_universe else self.kc.level_type(it)
            if level is None or state.kind != "position" or not level.ordered \
                    or not level.unique or (state.parent is not None
                                            and state.parent.seg_end is not None) \
                    or not level.definition.always_found("pos_access"):
                return False
        return True

    def skewed(self) -> ir.Value:
        """Whether one iterator's range is over GALLOP_SKEW times another's: stepping
        through the long one would cost more than searching it. On comparable ranges
        the branch-free one-step merge is faster (uniform random rows: 23 vs 36 ms)."""
        b = self.b
        lengths = [b.sub(self.states[it].end, b.load(self.states[it].cur))
                   for it in self.iterated]
        shortest, longest = lengths[0], lengths[0]
        for length in lengths[1:]:
            shortest = b.select(b.icmp_signed("<", length, shortest), length, shortest)
            longest = b.select(b.icmp_signed(">", length, longest), length, longest)
        return b.icmp_signed(">", longest, b.mul(shortest, ir.Constant(I64, GALLOP_SKEW)))

    def seek_common(self, coords: dict[Iter, ir.Value], i: ir.Value) -> None:
        """Move every iterator behind the largest current coordinate to its first
        position at or after it. A row of a few entries intersected with one of
        thousands (power-law rows against their transpose's) then costs a search per
        short-row entry instead of a step per long-row entry. Where every iterator is
        at the smallest coordinate ``i`` (no case ran: a located operand missed it),
        none is behind, so each steps past it instead (searching would not move)."""
        b = self.b
        target = None
        for coord in coords.values():
            target = coord if target is None else b.select(
                b.icmp_signed(">", coord, target), coord, target)
        with b.if_else(b.icmp_signed("==", target, i)) as (matched, behind):
            with matched:
                for it in self.iterated:
                    self.advance(it, coords[it], None)
            with behind:
                for it in self.iterated:
                    with b.if_then(b.icmp_signed("<", coords[it], target)):
                        b.store(self.gallop(it, target), self.states[it].cur)

    def gallop(self, it: Iter, target: ir.Value) -> ir.Value:
        """First position of ``it`` whose coordinate is >= target, searching forward
        from its current position (whose coordinate is below target) in steps of
        1, 2, 4, ... and then by bisection, so a short skip costs one probe."""
        b, kc = self.b, self.kc
        state = self.states[it]
        op = kc.operands[it.uid]
        tensor = kc.tensors[op.tensor]
        env = kc.parent_env(op, it.level, self.ctx)
        low, step = kc.alloca(I64, "gallop.low"), kc.alloca(I64, "gallop.step")
        b.store(b.load(state.cur), low)
        b.store(ONE, step)
        head = b.append_basic_block("gallop.head")
        test = b.append_basic_block("gallop.test")
        grow = b.append_basic_block("gallop.grow")
        done = b.append_basic_block("gallop.done")
        b.branch(head)
        b.position_at_end(head)
        probe = b.add(b.load(low), b.load(step))
        b.cbranch(b.icmp_signed("<", probe, state.end), test, done)
        b.position_at_end(test)
        coord, _ = tensor.call(it.level, "pos_access", p=probe, **env)
        b.cbranch(b.icmp_signed("<", coord, target), grow, done)
        b.position_at_end(grow)
        b.store(probe, low)
        b.store(b.shl(b.load(step), ONE), step)
        b.branch(head)
        b.position_at_end(done)
        lowest = b.load(low)
        probe = b.add(lowest, b.load(step))
        high = b.select(b.icmp_signed("<", probe, state.end), probe, state.end)
        return kc.lower_bound(tensor, it.level, env, b.add(lowest, ONE), high, target)

    def advance(self, it: Iter, coord: ir.Value, i: ir.Value | None) -> None:
        """Step past coordinate ``i`` (None: the iterator is known to be at it)."""
        b = self.b
        st = self.states[it]
        cur = b.load(st.cur)
        nxt = self.seg_ends[it] if it in self.seg_ends else b.add(cur, ONE)
        if len(self.iterated) == 1 or i is None:
            b.store(nxt, st.cur)
        else:
            b.store(b.select(b.icmp_signed("==", coord, i), nxt, cur), st.cur)


def _linear_in(expr: Expr, uid: int) -> bool:
    """Whether expr is linear in operand uid (so duplicates may be summed after the fact)."""
    count = [o.uid for o in uses(expr)].count(uid)
    if count != 1:
        return False

    def walk(e: Expr) -> bool:
        if isinstance(e, Operand):
            return e.uid == uid
        if isinstance(e, Sum):
            return walk(e.body)
        if isinstance(e, Apply):
            inside = [walk(a) for a in e.args]
            if not any(inside):
                return False
            if e.op.kind in ("add", "sub", "neg", "mul"):
                return True
            return e.op.kind == "div" and inside[0] and not inside[1]
        return False
    return walk(expr)


from .assembly import OutputAssembler
