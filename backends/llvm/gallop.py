"""Intersections that skip: a merge whose iterators may gallop past each other's
mismatches by search, and, where two ranges hold the same coordinates, step in lockstep
without comparing (parts of PointEmitter, kept in a module of their own)."""

from __future__ import annotations

from llvmlite import ir

from ...ir.concrete.expressions import Iter
from .bodies import I1, I64, TRUE, is_true
from .emit_base import ONE, ZERO, emit_counted_loop


class GallopEmitter:
    """PointEmitter's galloping and lockstep methods."""

    def may_step_together(self) -> bool:
        """Whether the iterators may be checked for holding the same coordinates, to be
        stepped together (a union's merge already branches on a match first, predicted
        where patterns coincide: A + Aᵀ on the stencil ran 8.9 ms as a merge, 9.9 with
        the check): where the gallop pass chose it (ir/opt/passes.py: gallop)."""
        return self.forms.lockstep

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

    def skewed(self, skew: int) -> ir.Value:
        """Whether one iterator's range is over ``skew`` times another's (the gallop
        pass's threshold): stepping through the long one would cost more than searching
        it."""
        b = self.b
        lengths = [b.sub(self.states[it].end, b.load(self.states[it].cur))
                   for it in self.iterated]
        shortest, longest = lengths[0], lengths[0]
        for length in lengths[1:]:
            shortest = b.select(b.icmp_signed("<", length, shortest), length, shortest)
            longest = b.select(b.icmp_signed(">", length, longest), length, longest)
        return b.icmp_signed(">", longest, b.mul(shortest, ir.Constant(I64, skew)))

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
