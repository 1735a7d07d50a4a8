"""Lowering of a kernel whose output entries pass through a workspace (see
workspace_schedule): ``forall(hoisted, where(consumer, producer))``.

The kernel's loop IR (ir/loops/lower_workspace.py) is walked node by node like any nest's
(emit_nodes): the workspace's ``allocate`` makes its store (its policy's, one per
kernel call, so each thread of a split assembly has its own); the hoisted and producer
loops are the kernel compiler's own (lattices, locate, co-iteration); a producer's write
goes into the store. The store's drain does what the ``sort``, ``for ... in entries``
and ``clear`` nodes after the producers say, in one pass (it empties each entry as it
reads it), writing each entry through the output's insert and append functions. A store
that counts first (workspace_bucket) runs the producers twice, placing entries on the
second pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir.concrete.statements import Access
from ...ir.errors import InternalCompilerError
from ...ir.loops.nodes import (
    Accumulate,
    Append,
    Entries,
    Insert,
    Node,
    Sort,
    Statement,
    Target,
    target_name,
)
from ...ir.schedule.workspace_policies import BUCKET, DENSE, HASH, SORT
from .emit_base import ZERO, Ctx
from .workspace_bucket import BucketStore
from .workspace_dense import DenseStore
from .workspace_store import HashStore, SortStore, Store

# The shipped policies' stores (ir/schedule/workspace_policies.py names none).
SHIPPED_STORES = {DENSE: DenseStore, HASH: HashStore, SORT: SortStore, BUCKET: BucketStore}

if TYPE_CHECKING:
    from ...ir.schedule.workspace_schedule import WorkspacePlan
    from .codegen import KernelCompiler


def lower_with_workspace(kc: KernelCompiler, statements: tuple[Statement, ...],
                         root: Node) -> None:
    """Emit a workspace kernel from its loop IR ``root``."""
    plan = statements[0].workspace
    assert plan is not None
    for statement in statements:
        if statement.workspace != plan:
            raise InternalCompilerError("nests of one kernel with different workspaces")
        for op in statement.operands:
            kc.operands[op.uid] = op
    # The compiler's per-nest state, as for a scattering nest (see lower_nest); each
    # nest's derived indices are bound where its loop IR's ``let`` nodes say.
    kc.enter(statements[0])
    kc.scatter = True
    kc.run_state = None
    kc.workspace = WorkspaceEmitter(kc, plan)
    kc.temps = {}
    kc.emit_node(root, Ctx())
    kc.workspace.release()


class WorkspaceEmitter:
    """The workspace of a kernel as code generation meets its nodes."""

    def __init__(self, kc: KernelCompiler, plan: WorkspacePlan) -> None:
        self.kc, self.b, self.plan = kc, kc.b, plan
        self.extents = [kc.extent(v) for v in plan.vars]
        self.store: Store | None = None
        self.producing = False  # inside the producers: their loops write no output

    def names(self, target: Target) -> bool:
        """Whether the loop IR's access ``target`` (``w(j)``) is this workspace."""
        return target_name(target) == self.plan.temporary.name

    def allocate(self) -> None:
        policy = self.plan.policy
        if policy.store is None:  # a shipped policy: its store is this backend's
            self.store = SHIPPED_STORES[policy].for_plan(self.kc, self.plan, self.extents)
        else:
            self.store = policy.new_store(self.kc, self.plan, self.extents)

    def release(self) -> None:
        if self.store is None:
            raise InternalCompilerError("a workspace kernel whose loop IR allocates none")
        self.store.release()

    def produce_consume(self, items: tuple[Node, ...], ctx: Ctx) -> None:
        """A block of producers then the consumer (``sort``, ``for ... in entries``,
        ``clear``), at one coordinate of the hoisted loops."""
        first = next(k for k, item in enumerate(items) if isinstance(item, (Sort, Entries)))
        producers, consumer = items[:first], items[first:]
        store = self.store
        self.producing = True
        for counting in (True, False) if store.two_pass else (False,):
            self.kc.emit_block(producers, ctx)
            if counting:  # the store's first pass counted: it places entries next
                store.prepare()
        self.producing = False
        self.kc.statement = self.kc.program.statements[0]
        (entries,) = [item for item in consumer if isinstance(item, Entries)]
        if not isinstance(entries.body, (Insert, Append)) \
                or not isinstance(entries.body.value, Access) or not self.names(entries.body.value):
            raise InternalCompilerError("a workspace's entries not copied to the output")
        self.consume(entries, ctx)

    def linear(self, ctx: Ctx) -> ir.Value:
        """The workspace coordinate: the covered indices in the output's level order,
        row-major over their extents."""
        b = self.b
        at = ZERO
        for var, extent in zip(self.plan.vars, self.extents):
            at = b.add(b.mul(at, extent), ctx.bound[var]) if at is not ZERO else ctx.bound[var]
        return at

    def add(self, node: Accumulate | Append, value: ir.Value, ctx: Ctx) -> None:
        """A producer's write: reduced into the entry, or appended (``node`` says which,
        as the policy does)."""
        if isinstance(node, Append) != self.plan.policy.appends:
            raise InternalCompilerError(f"{node.target}: a write its policy does not take")
        self.store.add_at([ctx.bound[v] for v in self.plan.vars], self.linear(ctx), value)

    # -- consumer ----------------------------------------------------------------------
    def reserve(self) -> set[int]:
        """Before a drain, make room in the output's last append group for every entry
        the store can hand out, and return the output slots whose stores then need no
        capacity test: one test per drained run instead of one per entry and array, and
        no grow path inside the drain's loops to spill their registers around (as
        PointLoop.reserve_appends does for a loop that appends an entry an iteration)."""
        kc = self.kc
        most = self.store.most_entries()
        if most is None or not kc.output.appends or kc.phase not in ("whole", "append"):
            return set()
        slots = kc.output.reserve_last_group(most)
        tensor = kc.tensors[kc.out_name]
        slots -= tensor.prechecked  # already reserved by an enclosing loop: theirs to drop
        tensor.prechecked |= slots
        return slots

    def consume(self, entries: Entries, ctx: Ctx) -> None:
        """Write the gathered entries to the output (in its storage order where
        ``entries`` says so), calling the output's segment hooks where a covered index
        other than the last changes."""
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
            kc.emit_write(entries.body, value, entry)

        reserved = self.reserve()
        self.store.drain(entries.ordered, write)
        kc.tensors[kc.out_name].prechecked -= reserved
        for (k, (_, close)), (run, saved) in reversed(list(zip(hooks, opened))):
            last = b.load(run)
            with b.if_then(b.icmp_signed(">=", last, ZERO)):
                close(bound_at(_first_of(b, last, self.extents[k + 1:])), b.load(saved))


def _first_of(b: ir.IRBuilder, key: ir.Value, extents: list[ir.Value]) -> ir.Value:
    """The first linear coordinate of a run whose leading indices are ``key``."""
    for extent in extents:
        key = b.mul(key, extent)
    return key

