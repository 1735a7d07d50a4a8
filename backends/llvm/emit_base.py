"""Shared pieces of the lowering: descriptor and status constants, the emission context,
and small loop helpers used by the kernel compiler, the point emitter and the assembler."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir.concrete.expressions import Iter
from .bodies import I64

if TYPE_CHECKING:
    from .codegen import KernelCompiler

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
    found: dict[int, ir.Value] = field(default_factory=dict)  # a derived locate's, untested

    def bind(self, var: str, value: ir.Value) -> Ctx:
        return replace(self, bound={**self.bound, var: value})

    def resolve(self, uid: int, level: LevelPos) -> Ctx:
        return replace(self, levels={**self.levels, uid: self.levels.get(uid, ()) + (level,)})


@dataclass(frozen=True)
class RunState:
    """A loop's running sum over sorted runs of duplicate coordinates (see running_sums):
    the coordinate of the open run (-1 before the first) and its sum so far, plus the
    context outside the loop, in which a finished run's coordinate is bound to write it,
    and the loop IR's write of the sum (known once the loop's body reaches it)."""

    var: str
    coord: ir.AllocaInstr
    total: ir.AllocaInstr
    outer: Ctx
    write: object = None  # the loops.Insert or loops.Append the run's sum goes through



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
    step: ir.Value | None = None  # positions a step moves (None: one; a warp's lanes: 32)


Hooks = tuple[Callable[[Ctx], object], Callable[[Ctx, object], None]]


def emit_lower_bound(kc: KernelCompiler, begin: ir.Value, end: ir.Value, target: ir.Value,
                     coord_at: Callable[[ir.Value], ir.Value], name: str) -> ir.Value:
    """First position in [begin, end) whose coordinate (``coord_at``) is >= target: the
    binary search that galloping and windowed levels share. Blocks are named ``name``.*."""
    b = kc.b
    low, high = kc.alloca(I64, f"{name}.lo"), kc.alloca(I64, f"{name}.hi")
    b.store(begin, low)
    b.store(end, high)
    head = b.append_basic_block(f"{name}.head")
    body = b.append_basic_block(f"{name}.body")
    done = b.append_basic_block(f"{name}.done")
    b.branch(head)
    b.position_at_end(head)
    b.cbranch(b.icmp_signed("<", b.load(low), b.load(high)), body, done)
    b.position_at_end(body)
    lo_value, hi_value = b.load(low), b.load(high)
    mid = b.add(lo_value, b.ashr(b.sub(hi_value, lo_value), ONE))
    below = b.icmp_signed("<", coord_at(mid), target)
    b.store(b.select(below, b.add(mid, ONE), lo_value), low)
    b.store(b.select(below, hi_value, mid), high)
    b.branch(head)
    b.position_at_end(done)
    return b.load(low)
