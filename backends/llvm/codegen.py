"""Format-agnostic lowering of scheduled statements to an llvmlite module.

The kernel walks each nest's loop IR (emit_nodes.py): every loop node carries its
lattice, the levels it iterates and locates, its cases and the fast forms the passes
chose; co-iteration and locates call only the level functions declared in the operands'
YAML definitions (inlined via ``bodies``). Outputs are assembled through their levels'
insert or append functions (assembly.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from llvmlite import ir

from ...ir.concrete.expressions import Expr, Iter, Operand
from ...ir.errors import InternalCompilerError
from ...ir.loops.entry_split import ATOMIC_TAG, windowed
from ...ir.loops.gpu_plan import WARP_SUMS_TAG
from ...ir.loops.nodes import (
    Accumulate,
    Append,
    Block,
    CallingConvention,
    InRange,
    Insert,
    Node,
    Program,
    Statement,
    loops_of,
)
from . import jam, precompute_lower, scalars
from .assembly import OutputAssembler
from .bodies import I1, I64, is_true
from .emit_base import (
    DESCRIPTOR,
    I8P,
    I32,
    ONE,
    PHASE_ARGUMENTS,
    STATUS_OK,
    ZERO,
    Ctx,
    LevelPos,
    RunState,
    emit_counted_loop,
)
from .emit_nodes import NodeEmitter, Temp
from .iterators import IteratorEmitter
from .memory import MemoryEmitter
from .tensor_ir import TensorIR
from .values import ValueEmitter
from .workspace_lower import WorkspaceEmitter, lower_with_workspace


class KernelCompiler(NodeEmitter, MemoryEmitter, ValueEmitter, IteratorEmitter):
    """Builds one kernel function from a program of the loop IR and its calling
    convention, which are all it is given."""

    def __init__(self, program: Program, abi: CallingConvention, name: str = "llvsparse_kernel",
                 phase: str = "whole", module: ir.Module | None = None):
        self.program = program  # the loop IR of this phase (ir/opt.loop_ir), with its forms
        self.types = dict(abi.types)
        self.arg_order = list(abi.arg_order)
        self.dtype = abi.dtype
        self.fastmath = abi.fastmath
        self.phase = phase
        self.module = module or ir.Module(name="llvsparse")
        self.entry_name, self.range_name = name, f"{name}_range"
        table = DESCRIPTOR.as_pointer().as_pointer()
        everything = ir.Constant(I64, 2**63 - 1)
        # An entry split (ir/loops/entry_split.py) also bounds the positions of the loop tagged
        # ``entry window``: two more arguments [window_lo, window_hi).
        windows = windowed(program)
        self.window: tuple[ir.Value, ir.Value] | None = None
        if phase == "whole":
            # The body takes a range [lo, hi) of the outermost loop's coordinates, so
            # threads can split it; ``name`` runs the whole range (the documented C entry).
            self.function = ir.Function(self.module, ir.FunctionType(
                I32, [table, I64, I64] + [I64, I64] * windows), name=f"{name}_range")
            self.lo, self.hi = self.function.args[1], self.function.args[2]
            if windows:
                self.window = (self.function.args[3], self.function.args[4])
            whole = ir.Function(self.module, ir.FunctionType(I32, [table]), name=name)
            wb = ir.IRBuilder(whole.append_basic_block("entry"))
            wb.ret(wb.call(self.function, [whole.args[0], ZERO, everything]
                           + [ZERO, everything] * windows))
        else:
            self.function = ir.Function(self.module, ir.FunctionType(
                I32, [table, *PHASE_ARGUMENTS[phase]]), name=f"{name}_{phase}")
            ranged = phase in ("count", "fill", "append")
            self.lo = self.function.args[1] if ranged else ZERO
            self.hi = self.function.args[2] if ranged else everything
        self.function.args[0].add_attribute("noalias")
        entry = self.function.append_basic_block("entry")
        self.b = ir.IRBuilder(entry)
        # malloc/free (not realloc) so the same IR also runs as a CUDA kernel.
        # The allocator is defined per target when the module is linked (backends): large
        # host buffers get transparent huge pages, device code calls plain malloc.
        self.malloc = self.declare("llvsparse_alloc", ir.FunctionType(I8P, [I64]))
        self.free = self.declare("free", ir.FunctionType(ir.VoidType(), [I8P]))
        self.memset = self.module.declare_intrinsic("llvm.memset", [I8P, I64])
        self.fail_blocks: dict[int, ir.Block] = {}
        self.releases: list[Callable[[], None]] = []  # frees a failing call must do
        self.tensors = {name: TensorIR(self, k, self.types[name], k == 0)
                        for k, name in enumerate(self.arg_order)}
        self.out_name = self.arg_order[0]
        self.operands: dict[int, Operand] = {}
        self.temps: dict[str, Temp] = {}  # the scalar temporaries of the nest (emit_nodes)
        self.workspace: WorkspaceEmitter | None = None  # a workspace kernel's (workspace_lower)

    def declare(self, name: str, signature: ir.FunctionType) -> ir.Function:
        """A function of the module (phases share one module), declared once."""
        existing = self.module.globals.get(name)
        return existing if existing is not None else ir.Function(self.module, signature, name)

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
        """Emit this compiler's function: the whole kernel, or one phase of a threaded
        assembly (ir/loops/assembly_phases.py)."""
        # The loop IR, with the fast forms its passes chose, walked node by node.
        program = self.program
        out_type = self.types[self.out_name]
        args = self.function.args
        start = args[-1] if self.phase in ("fill", "finish") else None
        tags = {t for loop in loops_of(program.root) for t in loop.tags}
        statements = program.statements
        self.output = OutputAssembler(self, self.tensors[self.out_name], out_type,
                                      statements[0].out_vars, self.phase, start,
                                      ATOMIC_TAG in tags, WARP_SUMS_TAG in tags)
        self.output.prologue()
        if self.output.all_insert:
            self.tensors[self.out_name].freeze()
        if self.phase in ("whole", "count", "fill", "append") and statements[0].workspace:
            lower_with_workspace(self, statements, program.root)
        elif self.phase in ("whole", "count", "fill", "append"):
            for index, statement in enumerate(statements):
                for op in statement.operands:
                    self.operands[op.uid] = op
                several = len(statements) > 1 and isinstance(program.root, Block)
                self.lower_nest(statement, program.root.items[index] if several
                                else program.root)  # (several nests: a block of them)
        if self.phase in ("count", "append"):
            self.b.store(self.output.entries(), args[-1])
        if self.phase in ("whole", "finish"):
            self.output.epilogue()
        if self.phase in ("whole", "setup", "append", "finish"):
            self.tensors[self.out_name].write_back(self.b)
        self.b.ret(ir.Constant(I32, STATUS_OK))
        return self.module

    def enter(self, statement: Statement) -> None:
        """Make ``statement`` the one whose loops are emitted."""
        self.statement = statement

    def lower_nest(self, statement: Statement, root: Node) -> None:
        """Emit one statement from its loop IR ``root``."""
        self.enter(statement)
        # Whether a reduction loop runs outside one of the output's indices (scattering
        # into it), as lowering decided (ir/loops/lower.py).
        site = next((node.site for node in loops_of(root) if not node.site.copies), None)
        self.scatter = site.scatter if site else False
        self.run_state: RunState | None = None  # see running_sums
        free = precompute_lower.allocate(self)  # operand workspaces (precompute.py)
        for plan in statement.precomputes:
            self.operands[plan.replacement.uid] = plan.replacement
        looped = {node.index for node in loops_of(root)}
        if missing := [v for v in statement.order if v not in looped]:
            raise InternalCompilerError(f"the loop IR has no loop over {missing[0]} in the "
                                        f"nest {' '.join(statement.order)}")
        self.temps = {}
        self.emit_node(root, Ctx())
        free()

    def adds(self, write: Accumulate | Insert | Append) -> bool:
        """Whether ``write`` adds its value to the output entry rather than storing it:
        the loop IR's accumulate does (a loop visiting an output coordinate once per
        duplicate, a scattered reduction), and so does every write of a statement that
        scatters or adds to its output (``+=``; a workspace's entries)."""
        return isinstance(write, Accumulate) or self.scatter or self.statement.accumulate

    def write_sum(self, total: ir.Value, ctx: Ctx, write: Insert | Append) -> None:
        """Write a finished run's sum through its write node; where it is stored rather
        than added, + 0 turns an empty sum's -0.0 into 0.0."""
        adds = self.adds(write)
        if not adds:
            total = scalars.apply(self.b, "add", [total, scalars.constant(self.dtype, 0)],
                                  self.dtype)
        self.output.write(total, ctx, adds)

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
        """Write the open run's sum, if a run is open. Where the loop's body never reached
        its sum (every case computes the fill: a structurally empty operand), no run was
        ever opened and nothing is written."""
        if run.write is None:
            return
        b = self.b
        coord = b.load(run.coord)
        with b.if_then(b.icmp_signed(">=", coord, ZERO)):
            self.write_sum(b.load(run.total), self.bind(run.outer, run.var, coord), run.write)

    def accumulate(self, value: ir.Value, acc: ir.Value) -> None:
        total = scalars.apply(self.b, "add", [self.b.load(acc), value], self.dtype,
                              self.fastmath)
        self.b.store(total, acc)

    def bind(self, ctx: Ctx, var: str, value: ir.Value) -> Ctx:
        """Bind a loop variable (an index derived from it is bound where the loop IR's
        ``let`` says: emit_nodes.emit_bind)."""
        return ctx.bind(var, value)

    def in_range(self, guard: InRange, value: ir.Value) -> ir.Value:
        """Whether an affine subscript's ``value`` lies within its guard's level."""
        extent = self.tensors[guard.tensor].extents[guard.level]
        return self.b.and_(self.b.icmp_signed(">=", value, ZERO),
                           self.b.icmp_signed("<", value, extent))

    # -- one loop variable ---------------------------------------------------------------
    def fill_of(self, op: Operand) -> float:
        """The value of ``op``'s entries that are not stored."""
        return self.types[op.tensor].fill

    def extent(self, var: str) -> ir.Value:
        candidates = [(op.tensor, k) for op in self.operands.values()
                      for k, v in enumerate(op.vars) if v == var]
        candidates += [(self.out_name, k) for k, v in enumerate(self.statement.out_vars)
                       if v == var]
        if not candidates:
            raise InternalCompilerError(f"no operand gives the extent of index {var}")
        tensor, level = candidates[0]
        return self.tensors[tensor].extents[level]

    def clearing_rows(self, body: Callable[[Node, Ctx], None]) -> Callable[[Node, Ctx], None]:
        """``body``, after zeroing the output's row at the loop's coordinate."""
        out, tensor, b = self.output, self.tensors[self.out_name], self.b
        itemsize = np.dtype(tensor.type.dtype).itemsize

        def clear_then_body(node: Node, ctx: Ctx) -> None:
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
            body(node, ctx)
        return clear_then_body

    def cascade(self, op: Operand, level: int, ok: ir.Value, ctx: Ctx):
        """Locate the following levels whose indices are already bound."""
        b = self.b
        tensor = self.tensors[op.tensor]
        deeper: list[LevelPos] = []
        while level < len(op.vars) and op.vars[level] in ctx.bound:
            kind = tensor.type.levels[level]
            if not (kind.can_locate or kind.can_subsection):
                raise InternalCompilerError(f"{op.tensor}: level {level} must be iterated but its index "
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


def emit_kernel(program: Program, abi: CallingConvention) -> tuple[KernelCompiler, ir.Module]:
    """The emitter lowering takes (``ir/plan/lowering.Request.emit``): the kernel
    compiler emitting ``program`` (whole phase) for the calling convention ``abi``, and
    its module."""
    builder = KernelCompiler(program, abi)
    return builder, builder.compile()
