"""Code generation dispatched on the kinds of a nest's loop-IR nodes.

A block runs its items in order; a loop (one node per lattice point, the siblings built
from one lattice emitted together) is emitted by PointEmitter, whose cases run their
bodies here again; a temporary is allocated, cleared and accumulated into as its nodes
say; a write goes to a temporary, an operand workspace (precompute_lower) or the
output's levels (assembly.py); an ``if`` tests its condition. A ``let`` binds a derived
index where it stands, and a ``locate`` of a level not yet resolved calls the level's
locate there; one of a level the loop reached was resolved by the loop
(PointEmitter.resolve_iterated and resolve_located, which fold a locate that may miss
into the case's condition).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir.concrete.expressions import Operand
from ...ir.errors import InternalCompilerError
from ...ir.loops.nodes import (
    Accumulate,
    Allocate,
    Append,
    Bind,
    Block,
    Clear,
    Entries,
    Found,
    If,
    InRange,
    Insert,
    Locate,
    Loop,
    LoopNode,
    Merge,
    Missed,
    Node,
    Nonempty,
    Touched,
    show,
)
from ...ir.notation.operators import ADD
from . import jam, pairs, precompute_lower, scalars, scatter_reduce
from .bodies import I1, I64, is_true
from .emit_base import ONE, ZERO, Ctx, LevelPos

if TYPE_CHECKING:
    from .codegen import KernelCompiler

Write = Accumulate | Insert | Append


@dataclass
class Temp:
    """A scalar temporary: its slot, and where its nodes ask for them, a flag set by
    every accumulation (``if name touched``) and a count of the values folded in
    (``if name missed some i``)."""

    slot: ir.Value
    touched: ir.Value | None = None
    count: ir.Value | None = None


class NodeEmitter:
    """KernelCompiler's walk over a nest's loop IR (a part of it, in a module of its own)."""

    def emit_node(self: KernelCompiler, node: Node, ctx: Ctx) -> None:
        if isinstance(node, Block):
            self.emit_block(node.items, ctx)
        elif isinstance(node, (Loop, Merge)):
            self.emit_loops([node], ctx)
        elif isinstance(node, (Locate, Bind)):  # what they bind is for the nodes after them
            raise InternalCompilerError(f"a {type(node).__name__} outside a block binds nothing")
        elif isinstance(node, If):
            self.emit_if(node, ctx)
        elif isinstance(node, Clear):
            self.clear(node, ctx)
        elif isinstance(node, (Accumulate, Insert, Append)):
            self.emit_write(node, self.value(node.value, ctx), ctx)
        else:  # an Allocate is taken by its block (emit_block), which sees its uses
            raise InternalCompilerError(f"no code generation for {type(node).__name__} here")

    def emit_block(self: KernelCompiler, items: tuple[Node, ...], ctx: Ctx) -> None:
        if (run := self.running_write_point(items)) is not None:
            self.run_state = replace(self.run_state, write=items[-1])
            self.continue_run(self.run_state, ctx.bound[self.run_state.var])
            self.temps[run.name] = Temp(self.run_state.total)
            for item in items[2:-1]:  # its sum goes on; the run's end writes it
                self.emit_node(item, ctx)
            return
        if any(isinstance(item, Entries) for item in items):  # a workspace's producers
            self.workspace.produce_consume(items, ctx)           # and its consumer
            return
        names = [item.name for item in items if isinstance(item, Allocate)]
        if len(set(names)) < len(names):  # one would overwrite the other's value
            raise InternalCompilerError(f"temporaries of one name in a block: {names}")
        k = 0
        while k < len(items):
            item = items[k]
            if isinstance(item, (Loop, Merge)):
                group = [item]
                while k + len(group) < len(items) and _resumes(items[k + len(group)]):
                    group.append(items[k + len(group)])
                self.emit_loops(group, ctx)
                k += len(group)
                continue
            if isinstance(item, Allocate):
                self.allocate(item, items)
            elif isinstance(item, Bind):
                ctx = self.emit_bind(item, ctx)
            elif isinstance(item, Locate):
                ctx = self.emit_locate(item, ctx)
            else:
                self.emit_node(item, ctx)
            k += 1

    def emit_bind(self: KernelCompiler, node: Bind, ctx: Ctx) -> Ctx:
        """``ctx`` with a derived index bound to its affine value (-1 where a stride's
        division is inexact: no level holds it, and its guard fails)."""
        b, value = self.b, node.value
        total: ir.Value = ir.Constant(I64, value.offset)
        for term, multiplier in value.terms:
            scaled = b.mul(_bound(ctx, str(term), node), ir.Constant(I64, multiplier))
            total = b.add(total, scaled)
        if value.divisor != 1:
            divisor = ir.Constant(I64, value.divisor)
            exact = b.icmp_signed("==", b.srem(total, divisor), ZERO)
            total = b.select(exact, b.sdiv(total, divisor), ir.Constant(I64, -1))
        return ctx.bind(node.index, total)

    def emit_locate(self: KernelCompiler, node: Locate, ctx: Ctx) -> Ctx:
        """``ctx`` with ``node``'s level located at its index: a level the loop reached
        is resolved already (a case's locate); one a derived index reaches is located
        here, its found flag kept for the ``if ... found`` that tests it."""
        ref = node.ref
        resolved = len(ctx.levels.get(ref.uid, ()))
        if resolved > ref.level:
            return ctx
        if resolved < ref.level:
            raise InternalCompilerError(f"locate {ref} before the level above it")
        op = self.operands[ref.uid]
        i = _bound(ctx, node.index, node)
        pos, found = self.tensors[op.tensor].call(ref.level, "locate", i=i,
                                                  **self.parent_env(op, ref.level, ctx))
        ctx = ctx.resolve(ref.uid, LevelPos(pos, i))
        if is_true(found):
            return ctx
        previous = ctx.found.get(ref.uid)
        found = found if previous is None else self.b.and_(previous, found)
        return replace(ctx, found={**ctx.found, ref.uid: found})

    def running_write_point(self: KernelCompiler, items: tuple[Node, ...]) -> Allocate | None:
        """The accumulator of the block ``allocate; clear; loops; write it``, where the
        loop around it sums runs of duplicates as they come (the running-sums pass): the
        run's sum then takes its place."""
        if self.run_state is None or len(items) < 4 or not isinstance(items[0], Allocate) \
                or not isinstance(items[1], Clear) or not isinstance(items[-1], (Insert, Append)):
            return None
        name = items[0].name
        return items[0] if items[-1].value == Operand(name, (), -1) else None

    def allocate(self: KernelCompiler, node: Allocate, block: tuple[Node, ...]) -> None:
        """A scalar temporary (with the flag or count its block's conditions read), or an
        operand workspace, which precompute_lower.allocate made before the nest."""
        if node.layout and self.workspace is not None and self.workspace.names(node.name):
            self.workspace.allocate()
            return
        if node.layout:
            if not any(p.temporary.name == node.name for p in self.statement.precomputes):
                raise InternalCompilerError(f"no storage for the workspace {node.name}")
            return
        conditions = [n.condition for n in block if isinstance(n, If)]
        name = node.name
        temp = Temp(self.alloca(scalars.compute_type(self.dtype), name))
        if Touched(node.name) in conditions:
            temp.touched = self.alloca(I1, "touched")
        if any(isinstance(c, Missed) and c.name == node.name for c in conditions):
            temp.count = self.alloca(I64, f"{name}.count")
        self.temps[node.name] = temp

    def clear(self: KernelCompiler, node: Clear, ctx: Ctx) -> None:
        b = self.b
        if (temp := self.temps.get(node.name)) is not None:
            b.store(scalars.constant(self.dtype, node.value), temp.slot)
            if temp.touched is not None:
                b.store(ir.Constant(I1, 0), temp.touched)
            if temp.count is not None:
                b.store(ZERO, temp.count)
        elif (plan := self.precompute_target(node.name)) is not None:
            precompute_lower.clear_mark(self, plan, ctx)
        else:  # the output, before a reduction other than + scatters into it
            scatter_reduce.initialize(self, node.value)

    def emit_write(self: KernelCompiler, node: Write, value: ir.Value, ctx: Ctx) -> None:
        """``value`` into a temporary, an operand workspace, or the output."""
        b = self.b
        if (temp := self.temps.get(node.target)) is not None:
            if not isinstance(node, Accumulate):
                raise InternalCompilerError(f"{node.target}: a temporary is only reduced into")
            fastmath = self.fastmath and node.operator is ADD
            old = b.load(temp.slot)
            b.store(scalars.apply_op(b, node.operator, [old, value], self.dtype, fastmath),
                    temp.slot)
            if temp.touched is not None:
                b.store(ir.Constant(I1, 1), temp.touched)
            if temp.count is not None:
                b.store(b.add(b.load(temp.count), ONE), temp.count)
        elif (plan := self.precompute_target(node.target)) is not None:
            precompute_lower.scatter(self, plan, value, ctx)
        elif self.workspace is not None and self.workspace.names(node.target):
            self.workspace.add(node, value, ctx)
        else:
            self.output.write(value, ctx, self.adds(node))

    def precompute_target(self: KernelCompiler, target: object):
        """The operand-workspace plan whose temporary ``target`` names, or None."""
        return next((p for p in self.statement.precomputes
                     if str(target) == f"{p.temporary.name}({p.var})"), None)

    def emit_if(self: KernelCompiler, node: If, ctx: Ctx) -> None:
        b, cond = self.b, node.condition
        if isinstance(cond, Found):
            # A derived locate's flag (emit_locate); a level the loop located was tested
            # by its case (PointEmitter.dispatch).
            flags = [ctx.found[uid] for uid in dict.fromkeys(r.uid for r in cond.refs)
                     if uid in ctx.found]
            if not flags:
                self.emit_node(node.then, ctx)
                return
            tested = {r.uid for r in cond.refs}
            inner = replace(ctx, found={u: f for u, f in ctx.found.items() if u not in tested})
            found = flags[0]
            for flag in flags[1:]:
                found = b.and_(found, flag)
            with b.if_then(found):
                self.emit_node(node.then, inner)
        elif isinstance(cond, Touched):
            with b.if_then(b.load(self.temps[cond.name].touched)):
                self.emit_node(node.then, ctx)
        elif isinstance(cond, Nonempty):
            with b.if_then(jam.all_nonempty(self, cond.indices)):
                self.emit_node(node.then, ctx)
        elif isinstance(cond, InRange):  # an affine subscript's guard (ir/concrete/affine.py)
            with b.if_then(self.in_range(cond, _bound(ctx, cond.index, node))):
                self.emit_node(node.then, ctx)
        elif isinstance(cond, Missed) and isinstance(node.then, Accumulate):
            temp = self.temps[cond.name]  # folded by a select: no branch
            total = b.load(temp.slot)
            folded = scalars.apply_op(b, node.then.operator,
                                      [total, self.value(node.then.value, ctx)], self.dtype)
            missed = b.icmp_signed("<", b.load(temp.count), self.extent(cond.index))
            b.store(b.select(missed, folded, total), temp.slot)
        else:
            raise InternalCompilerError(f"no code generation for the condition {cond}")

    # -- loops ---------------------------------------------------------------------------
    def emit_loops(self: KernelCompiler, nodes: list[LoopNode], ctx: Ctx) -> None:
        """One loop of the nest, a node per lattice point, with the forms it was given."""
        node = nodes[0]
        site = node.site
        var = node.index
        self.statement = self.program.statements[site.nest]
        # A loop of the output's nest: not a sum's, nor a workspace producer's.
        in_output = site.depth >= 0 and not (self.workspace and self.workspace.producing)
        hooks = self.output.hooks_for(var) if in_output else None
        order = site.order
        appends = self.output.appends and in_output and (
            site.depth + 1 == len(order) or (not site.scatter and site.depth + 1 == site.out_depth))
        jam_body = pair_body = None
        if node.jam:
            jam_body = lambda lanes: jam.emit(self, node.body, lanes)
        if node.forms.pairs:
            pair_body = lambda lanes: pairs.emit(self, node, lanes)
        self.emit_point_loops(nodes, ctx, self.emit_node,
                              hooks, jam_body, appends, pair_body)

    def leaf_of(self: KernelCompiler, node: Merge) -> Callable[[ir.Value, Ctx], None]:
        """The write every case of a merge ends in, as a consumer of the value a selected
        case computed (the case-selection pass chooses only such merges)."""
        writes = [_final_write(case.body) for case in node.cases]
        if any(w is None or type(w) is not type(writes[0]) or w.target != writes[0].target
               for w in writes):
            raise InternalCompilerError("selected cases that do not end in one write")
        return lambda value, ctx: self.emit_write(writes[0], value, ctx)


def _bound(ctx: Ctx, index: str, node: Node) -> ir.Value:
    """The value ``index`` is bound to where ``node`` reads it (a program that reads an
    index before its loop or ``let`` is refused by name)."""
    if index not in ctx.bound:
        raise InternalCompilerError(f"{show(node).splitlines()[0].strip()}: {index} is not "
                                    "bound there")
    return ctx.bound[index]


def _resumes(item: Node) -> bool:
    """Whether ``item`` is a tail of the loop before it (another point of its lattice,
    going on where it stopped): emitted with it, over the same iterator states."""
    return isinstance(item, (Loop, Merge)) and item.resumes


def _final_write(body: Node) -> Write | None:
    """A case body's write, after the locates that reach it."""
    items = body.items if isinstance(body, Block) else (body,)
    rest = [n for n in items if not isinstance(n, Locate)]
    return rest[0] if len(rest) == 1 and isinstance(rest[0], (Accumulate, Insert, Append)) \
        else None
