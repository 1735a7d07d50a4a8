"""Iterators in generated kernels: where a loop over a level (or an index's universe)
starts and ends, clamped to a thread's range of the output's first index, and the
binary search that finds a coordinate's first position."""

from __future__ import annotations

from llvmlite import ir

from ...ir.concrete.expressions import Iter
from ...ir.errors import InternalCompilerError
from ...ir.loops.gpu_plan import WARP_SIZE
from . import gpu_hooks
from .bodies import I64
from .emit_base import ONE, ZERO, Ctx, IterState, emit_lower_bound
from .tensor_ir import TensorIR


class IteratorEmitter:
    """KernelCompiler's iterator methods (a part of it, kept in a module of its own)."""

    def clamp(self, begin: ir.Value, end: ir.Value,
              bounds: tuple[ir.Value, ir.Value] | None = None) -> tuple[ir.Value, ir.Value]:
        """[begin, end) within the thread's range [lo, hi) (or ``bounds``)."""
        b = self.b
        lo, hi = bounds or (self.lo, self.hi)
        begin = b.select(b.icmp_signed(">", lo, begin), lo, begin)
        end = b.select(b.icmp_signed("<", hi, end), hi, end)
        return begin, end

    def iterator_state(self, it: Iter, var: str, ctx: Ctx, thread_rows: bool,
                       positions: bool = False, lanes: bool = False,
                       window: bool = False) -> IterState:
        """The iterator's cursor and end; ``thread_rows``: the loop runs a thread's range
        [lo, hi) of its coordinates (the loop IR's tag), so the range is clamped;
        ``positions``: the range is of the level's positions instead (a position split
        tag: threads share coordinates, and the output's writes add atomically);
        ``lanes``: a warp's lanes share the loop, lane k taking its k-th, k+32-th, ...
        position or coordinate (the warp lanes tag); ``window``: its positions are
        bounded by the thread's window (a GPU entry split's inner loop, the entry
        window tag: a row's entries may fall to several threads)."""
        b = self.b
        step = ir.Constant(I64, WARP_SIZE) if lanes else None
        if it.is_universe:
            cur = self.alloca(I64, f"{var}.u")
            begin, end = ZERO, self.extent(var)
            clamped = thread_rows
            if clamped:
                begin, end = self.clamp(begin, end)
            if lanes:
                begin, clamped = b.add(begin, gpu_hooks.lane(b)), True
            b.store(begin, cur)
            return IterState(it, "coordinate", cur, end, None, clamped, step)
        op = self.operands[it.uid]
        tensor = self.tensors[op.tensor]
        level = tensor.type.levels[it.level]
        parent = ctx.levels.get(op.uid, ())[-1] if it.level > 0 else None
        env = self.parent_env(op, it.level, ctx)
        if level.definition.iterate == "coordinate":
            if parent is not None and parent.seg_end is not None:
                raise InternalCompilerError(f"{op.tensor}: level {it.level} iterates coordinates under "
                                    "a non-unique parent, which cannot be merged")
            begin, end = tensor.call(it.level, "coord_bounds", **env)
            clamped = thread_rows
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
        if positions and (kind != "position" or not thread_rows):
            raise InternalCompilerError(f"{op.tensor}: a position split of level {it.level}, "
                                        "which the loop does not step over by position")
        if window and (kind != "position" or self.window is None):
            raise InternalCompilerError(f"{op.tensor}: an entry window over level {it.level}, "
                                        "which the loop does not step over by position")
        if positions or window:
            begin, end = self.clamp(begin, end, self.window if window else None)
            clamped = True
        elif lanes:
            begin, clamped = b.add(begin, gpu_hooks.lane(b)), True
        elif kind == "position":
            clamped = thread_rows and level.ordered
            if clamped:  # a thread's coordinates [lo, hi) are a run of sorted positions
                begin, end = (self.lower_bound(tensor, it.level, env, begin, end, bound)
                              for bound in (self.lo, self.hi))
        cur = self.alloca(I64, f"{op.tensor}{it.level}.cur")
        b.store(begin, cur)
        return IterState(it, kind, cur, end, parent, clamped, step)

    def lower_bound(self, tensor: TensorIR, level: int, env: dict[str, ir.Value],
                    begin: ir.Value, end: ir.Value, target: ir.Value) -> ir.Value:
        """First position in [begin, end) whose coordinate is >= target (binary search
        through the level's own pos_access)."""
        return emit_lower_bound(
            self, begin, end, target,
            lambda mid: tensor.call(level, "pos_access", p=mid, **env)[0], "bs")
