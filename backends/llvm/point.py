"""The loop (or straight-line code) for one lattice point: co-iteration of the iterated
levels, locates, the case dispatch (cases.py) and the fast forms (jam, pairs, running
sums, gallop)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir.concrete.expressions import Iter
from ...ir.errors import InternalCompilerError
from ...ir.loops.legality import unordered_refusal
from ...ir.loops.nodes import Loop, LoopNode
from ...ir.loops.notes import split_by_threads
from . import jam, prefetch, scalars
from .bodies import I64, TRUE, is_true
from .cases import CaseDispatch
from .emit_base import ONE, ZERO, Ctx, LevelPos, RunState, unroll
from .gallop import GallopEmitter

if TYPE_CHECKING:
    from .codegen import KernelCompiler


class PointEmitter(CaseDispatch, GallopEmitter):
    """The loop (or straight-line code) for one lattice point, with its case dispatch."""

    def __init__(self, kc: KernelCompiler, var, expr, ctx, node: LoopNode, states, find,
                 body, hooks, appends=False, jam_body=None, pair_body=None):
        self.kc, self.b = kc, kc.b
        self.jam_body = jam_body
        self.pair_body = pair_body
        self.appends = appends  # an iteration appends at most one entry to the output
        self.var, self.expr, self.ctx = var, expr, ctx
        # What the loop IR chose for this loop (lower_loops): its point, the levels
        # iterated and located, and each case's sub-point, expression and body.
        self.node = node
        chosen = node.chosen
        self.chosen, self.point = chosen, chosen.point
        self.iterated, self.located = list(chosen.iterated), list(chosen.located)
        # The iterated levels whose loop steps over runs of duplicate coordinates, as
        # lowering decided (the loop IR's ``runs of positions``): a segment per run,
        # unless the run is summed as it comes (running sums).
        refs = (node.iterator,) if isinstance(node, Loop) else node.iterators
        self.runs = {it for it, ref in zip(self.iterated, refs, strict=True) if ref.facts.runs}
        self.states, self.find, self.body, self.hooks = states, find, body, hooks
        self.seg_ends: dict[Iter, ir.Value] = {}  # end of each deduplicated segment
        self.running = False  # positions of duplicate coordinates summed as they come
        self.galloping = False  # mismatches skip ahead by search (see seek_common)
        self.lockstep = False  # every iterator holds the same coordinates (same_coordinates)
        self.absent: ir.Block | None = None  # straight-line code: where a miss goes
        # The fast forms the loop-IR passes chose for this loop (ir/opt/passes.py).
        self.forms = node.forms

    def emit(self) -> None:
        b = self.b
        single = len(self.iterated) == 1
        state = self.states[self.iterated[0]]
        # Straight-line code reads the one position of a branchless level without a
        # bound test: not where a thread's range clamped it, which may leave it empty.
        if (single and self.chosen.points == 1 and state.kind == "position"
                and self.kc.level_type(state.it).branchless and not state.clamped
                and (state.parent is None or state.parent.seg_end is None)):
            self.iteration(straight=True)
            return
        for it in self.iterated:
            if it not in self.states:
                raise InternalCompilerError("an iterator without state")
        # Lowering asked the same before (ir/loops/legality.py); a direct compile asks here.
        # (An unordered level may hold its keys in order by chance.)
        reason = unordered_refusal(self.node, self.kc.output.appends_in_order(self.var), False)
        if reason is not None:
            raise InternalCompilerError(reason)
        if self.jam_body is not None and self.node.jam:
            for lanes in self.node.jam:  # the loop below then runs the remaining iterations
                self.jam_loop(lanes)
        if self.pair_body is not None and self.forms.pairs:
            self.pair_loop()  # the loop below then runs the odd last iteration
        reserved = self.reserve_appends()
        self.running = self.forms.running_sums
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
        gallop = self.forms.gallop
        if gallop is not None and not gallop.skew:  # search past every mismatch
            self.galloping = True
            self.emit_loop()
        elif gallop is not None:  # two versions of the loop: galloping pays off on skewed ranges
            with b.if_else(self.skewed(gallop.skew)) as (skewed, balanced):
                with skewed:
                    self.galloping = True
                    self.emit_loop()
                with balanced:
                    self.galloping = False
                    self.emit_loop()
        else:
            self.emit_loop()

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
        prefetch.ahead(self)  # the rows of later positions, where the prefetch pass noted
        self.iteration(straight=False)
        if not b.block.is_terminated:
            back = b.branch(head)
            if self.node.unroll > 1:  # a user's schedule, or running sums (the loop IR says)
                unroll(back, self.node.unroll)
        b.position_at_end(done)

    def pair_loop(self) -> None:
        """The first and the second half of the iterations side by side, one from each
        per step (see pairs); the loop below then runs the odd last one."""
        b, kc = self.b, self.kc
        state = self.states[self.iterated[0]]
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
                    b.store(b.add(cur, st.step or ONE), st.cur)
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
        in_range = None
        clamped = all(self.states[it].clamped for it in self.iterated)
        if split_by_threads(self.node) and not clamped:
            in_range = b.and_(b.icmp_signed("<=", kc.lo, i), b.icmp_signed("<", i, kc.hi))
        if in_range is not None:
            skip_to = b.append_basic_block("out_of_range")
            work = b.append_basic_block("in_range")
            b.cbranch(in_range, work, skip_to)
            b.position_at_end(work)
        saved = self.hooks[0](ctx) if self.hooks else None
        split = None if (straight or in_range is not None or self.hooks or self.lockstep) \
            else (coords, i)
        chosen = None if straight else self.selected_cases(ctx, present)
        if chosen:  # the cases computed and selected (the case-selection pass chose it)
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
        env = kc.parent_env(op, it.level, self.ctx)
        cur = b.load(st.cur)
        if st.kind == "coordinate":
            pos, found = tensor.call(it.level, "coord_access", i=i, **env)
            ok = eq if is_true(found) else b.and_(eq, found)
            entry = LevelPos(pos, i)
        elif it not in self.runs or self.running:  # one position at a time
            ok = eq
            entry = LevelPos(cur, i)
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

    def advance(self, it: Iter, coord: ir.Value, i: ir.Value | None) -> None:
        """Step past coordinate ``i`` (None: the iterator is known to be at it)."""
        b = self.b
        st = self.states[it]
        cur = b.load(st.cur)
        nxt = self.seg_ends[it] if it in self.seg_ends else b.add(cur, st.step or ONE)
        if len(self.iterated) == 1 or i is None:
            b.store(nxt, st.cur)
        else:
            b.store(b.select(b.icmp_signed("==", coord, i), nxt, cur), st.cur)
