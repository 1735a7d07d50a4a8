"""Lowering of a kernel whose output entries pass through a workspace (see
workspace_schedule): ``forall(hoisted, where(consumer, producer))``.

The hoisted loops and the producer's loops are the kernel compiler's own (lattices,
locate, co-iteration); only the innermost write differs: it reduces into the temporary.
The consumer sorts the coordinates the producer touched (where an output level keeps
them ordered) and writes each entry through the output's insert and append functions.
The temporary's storage is a policy (workspace_store): one per kernel call, so each
thread of a split assembly has its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from llvsparse.operators import ADD

from ...ir.cin import Apply, Expr, Operand, operands
from ...ir.lattice import substitute_absent
from ...ir.schedule import InternalCompilerError, Nest
from .emit_base import ZERO, Ctx

if TYPE_CHECKING:
    from ...ir.workspace_schedule import WorkspacePlan
    from .codegen import KernelCompiler


def lower_with_workspace(kc: KernelCompiler, nests: list[Nest]) -> None:
    """Emit every nest of a workspace kernel inside one run of its hoisted loops."""
    plan = nests[0].workspace
    assert plan is not None
    for nest in nests:
        if nest.workspace != plan:
            raise InternalCompilerError("nests of one kernel with different workspaces")
        for op in operands(nest.body):
            kc.operands[op.uid] = op
    # The compiler's per-nest state, as for a scattering nest (see lower_nest).
    kc.nest, kc.derived = nests[0], {}
    kc.out_depth, kc.scatter, kc.insert_output = len(nests[0].order), True, False
    kc.repeats, kc.run_state = False, None
    _Lowering(kc, nests, plan).emit()


class _Lowering:
    def __init__(self, kc: KernelCompiler, nests: list[Nest], plan: WorkspacePlan) -> None:
        self.kc, self.b, self.nests, self.plan = kc, kc.b, nests, plan
        self.hoisted = list(plan.hoisted)
        self.extents = [kc.extent(v) for v in plan.vars]
        self.sorted = any(kc.output.appends_in_order(v) for v in plan.vars)

    def emit(self) -> None:
        self.store = self.plan.policy.new_store(self.kc, self.plan, self.extents)
        combined: Expr = self.nests[0].body
        for nest in self.nests[1:]:
            combined = Apply(ADD, (combined, nest.body))
        self.hoisted_loops(0, combined, Ctx())
        self.store.release()

    def hoisted_loops(self, depth: int, expr: Expr, ctx: Ctx) -> None:
        if depth == len(self.hoisted):
            self.produce_consume(expr, ctx)
            return
        var = self.hoisted[depth]
        self.kc.emit_var(var, expr, ctx, lambda c, e: self.hoisted_loops(depth + 1, e, c),
                         self.kc.output.hooks_for(var))

    # -- producer ----------------------------------------------------------------------
    def produce_consume(self, expr: Expr, ctx: Ctx) -> None:
        """At one coordinate of the hoisted loops (one case of their lattice, ``expr``
        holding the operands present there): each nest's producer, then the consumer."""
        present = {op.uid for op in operands(expr)}
        hoisted = set(self.hoisted)

        def absent(op: Operand) -> bool:
            return op.uid not in present and bool(hoisted & set(op.vars))

        for counting in (True, False) if self.store.two_pass else (False,):
            for nest in self.nests:
                # The nest's body with the operands absent here dropped (a union keeps
                # its other terms; a product of an absent operand drops out).
                body = substitute_absent(nest.body, absent, self.kc.fill_of)
                if body is None:
                    continue
                self.kc.nest = nest
                self.producer(list(nest.order[len(self.hoisted):]), 0, body, ctx)
            if counting:  # the store's first pass counted: it places entries next
                self.store.prepare()
        self.kc.nest = self.nests[0]
        self.consume(ctx)

    def producer(self, order: list[str], depth: int, expr: Expr, ctx: Ctx) -> None:
        kc = self.kc
        if depth == len(order):
            self.accumulate(kc.value(expr, ctx), ctx)
            return
        leaf = self.accumulate if depth + 1 == len(order) else None
        kc.emit_var(order[depth], expr, ctx,
                    lambda c, e: self.producer(order, depth + 1, e, c), None, leaf)

    def linear(self, ctx: Ctx) -> ir.Value:
        """The workspace coordinate: the covered indices in the output's level order,
        row-major over their extents."""
        b = self.b
        at = ZERO
        for var, extent in zip(self.plan.vars, self.extents):
            at = b.add(b.mul(at, extent), ctx.bound[var]) if at is not ZERO else ctx.bound[var]
        return at

    def accumulate(self, value: ir.Value, ctx: Ctx) -> None:
        self.store.add_at([ctx.bound[v] for v in self.plan.vars], self.linear(ctx), value)

    # -- consumer ----------------------------------------------------------------------
    def consume(self, ctx: Ctx) -> None:
        """Write the gathered entries to the output in its storage order, calling the
        output's segment hooks where a covered index other than the last changes."""
        kc, b = self.kc, self.b
        hooks = [(k, kc.output.hooks_for(v)) for k, v in enumerate(self.plan.vars[:-1])]
        hooks = [(k, h) for k, h in hooks if h is not None]
        opened = [(kc.alloca(ir.IntType(64), "ws.run"), kc.alloca(ir.IntType(64), "ws.saved"))
                  for _ in hooks]
        for run, _ in opened:
            b.store(ir.Constant(ir.IntType(64), -1), run)

        # The coordinate's leading indices together (``head``, at // the last extent)
        # and where their run starts (``base``): recomputed, by a division, only when an
        # entry leaves the run (once per output row of a sorted drain, not per entry).
        width = self.extents[-1]
        head_s, base_s = kc.alloca(ir.IntType(64), "ws.head"), kc.alloca(ir.IntType(64), "ws.base")
        b.store(ir.Constant(ir.IntType(64), -2**63), base_s)
        b.store(ZERO, head_s)

        def split(at: ir.Value) -> tuple[ir.Value, ir.Value]:
            left = b.icmp_unsigned(">=", b.sub(at, b.load(base_s)), width)
            with b.if_then(left, likely=False):
                head = b.sdiv(at, width)
                b.store(head, head_s)
                b.store(b.mul(head, width), base_s)
            return b.load(head_s), b.sub(at, b.load(base_s))

        def bound_at(at: ir.Value, head: ir.Value | None = None) -> Ctx:
            """``ctx`` with the covered indices bound to coordinate ``at`` (whose
            leading part is ``head`` where known)."""
            coords, inner = [at], ctx
            if len(self.extents) > 1:
                if head is None:
                    head, rest = b.sdiv(at, width), b.srem(at, width)
                else:
                    rest = b.sub(at, b.mul(head, width))
                coords = [rest]
                for extent in reversed(self.extents[1:-1]):
                    coords.append(b.srem(head, extent))
                    head = b.sdiv(head, extent)
                coords.append(head)
                coords.reverse()
            for var, coord in zip(self.plan.vars, coords):
                inner = kc.bind(inner, var, coord)
            return inner

        def prefix(head: ir.Value, k: int) -> ir.Value:
            """The run of coordinates sharing the covered indices up to k."""
            for extent in self.extents[k + 1:-1]:
                head = b.sdiv(head, extent)
            return head

        def write(at: ir.Value, value: ir.Value) -> None:
            head = split(at)[0] if len(self.extents) > 1 else None
            entry = bound_at(at, head)
            keys = [prefix(head, k) for k, _ in hooks]
            # Innermost segments close first, then each changed run opens anew.
            for (k, (_, close)), (run, saved), key in reversed(list(zip(hooks, opened, keys))):
                last = b.load(run)
                changed = b.and_(b.icmp_signed("!=", key, last), b.icmp_signed(">=", last, ZERO))
                with b.if_then(changed):
                    close(bound_at(_first_of(b, last, self.extents[k + 1:])), b.load(saved))
            for (_, (open_, _)), (run, saved), key in zip(hooks, opened, keys):
                with b.if_then(b.icmp_signed("!=", key, b.load(run))):
                    b.store(open_(entry), saved)
                    b.store(key, run)
            kc.output.write(value, entry)

        self.store.drain(self.sorted, write)
        for (k, (_, close)), (run, saved) in reversed(list(zip(hooks, opened))):
            last = b.load(run)
            with b.if_then(b.icmp_signed(">=", last, ZERO)):
                close(bound_at(_first_of(b, last, self.extents[k + 1:])), b.load(saved))


def _first_of(b: ir.IRBuilder, key: ir.Value, extents: list[ir.Value]) -> ir.Value:
    """The first linear coordinate of a run whose leading indices are ``key``."""
    for extent in extents:
        key = b.mul(key, extent)
    return key

