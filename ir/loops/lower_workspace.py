"""The loop IR of a kernel whose output entries pass through a workspace.

Concrete notation says ``forall(hoisted, where(consumer, producers))`` (see
schedule/rewrites.py); this says what workspace_lower emits for it: the workspace allocated
once, before the hoisted loops (one per kernel call, so each thread of a split assembly
has its own); per coordinate of the hoisted loops, each producer's loops reducing into
it, its entries brought into the output's order (the sort or scan of its policy), the
consumer appending them to the output, and the workspace cleared for the next
coordinate. The loops themselves are lowered as any nest's (lattices, locates, cases).
The emitter takes no pass's fast forms for these nests, so none are run on them here.
"""

from __future__ import annotations

from ..concrete.expressions import Apply, Operand, operands
from ..concrete.expressions import Expr as CinExpr
from ..concrete.lattice import Iter, substitute_absent
from ..concrete.producers import full_expr
from ..concrete.statements import Access, Assign, Stmt, Where, loop_nest, sequence_parts
from ..notation.operators import ADD
from ..schedule.statement_parts import output_workspace
from ..schedule.workspace_plan import WorkspacePlan
from ..types import TensorType
from .legality import appends_in_order
from .lower import NestLowering, State
from .nodes import (
    Accumulate,
    Allocate,
    Append,
    Block,
    Clear,
    Entries,
    Insert,
    Node,
    Program,
    Site,
    Sort,
)
from .result_fill import NestSums
from .statement_facts import statement_facts


def lower_workspace(stmt: Stmt, types: dict[str, TensorType], output: str) -> Program:
    """The loop IR of a workspace kernel's statement, with each producer's expression
    as its source says (the emitter's expressions)."""
    plan = output_workspace(stmt)
    hoisted, where = loop_nest(stmt)
    if plan is None or not isinstance(where, Where):
        raise ValueError("not a statement through a workspace: expected "
                         "forall(hoisted, where(consumer, producer))")
    lowering = _WorkspaceLowering(types, output, plan, where, stmt)
    bodies = [part.body for part in lowering.parts]
    producers = sequence_parts(where.producer)
    root = lowering.kernel(tuple(f.index.name for f in hoisted), producers, bodies)
    return Program(root, output, types[output].levels, len(bodies),
                   producer_runs=2 if plan.policy.counts else 1,
                   statements=statement_facts(lowering.parts))


class _WorkspaceLowering(NestLowering):
    def __init__(self, types: dict[str, TensorType], output: str, plan: WorkspacePlan,
                 where: Where, stmt: Stmt) -> None:
        super().__init__(types, output, stmt)
        self.plan = plan
        self.hoisted: tuple[str, ...] = ()  # the loops outside the workspace (kernel)
        consumer = loop_nest(where.consumer)[1]
        if not isinstance(consumer, Assign) or not isinstance(consumer.expr, Access):
            raise TypeError("a workspace's consumer copies it: forall(..., out = w(...))")
        self.consumer = consumer
        self.workspace = consumer.expr
        self.out_access = consumer.access
        self.output_inserts = self.all_insert
        self.all_insert = True  # the producers' target, the workspace, takes inserts
        self.ordered = self.appends_in_order()

    def sums_runs(self, it: Iter, var: str) -> bool:
        """A hoisted loop over a non-unique level drains the workspace once per run of
        equal coordinates (its clear marks a new run), so its producers see the run."""
        if var in self.hoisted:
            lv = self.level(it.uid, it.level)
            return not lv.unique and lv.definition.iterate != "coordinate"
        return super().sums_runs(it, var)

    def appends_in_order(self) -> bool:
        """Whether a covered index is appended to an output level that keeps its
        coordinates ordered (the levels below the ones taking inserts), as the emitter
        decides whether to order the workspace's entries."""
        names = tuple(str(ix) for ix in self.consumer.access.indices)  # in level order
        return any(appends_in_order(self.out, names, var) for var in self.plan.vars)

    def kernel(self, hoisted: tuple[str, ...], producers: list[Stmt],
               bodies: list[CinExpr]) -> Node:
        self.hoisted, self.producers, self.bodies = hoisted, producers, bodies
        combined = bodies[0]
        for body in bodies[1:]:
            combined = Apply(ADD, (combined, body))
        for op in operands(combined):
            if op.vars:
                self.operands[op.uid] = op
        self.enter(0)
        plan = self.plan
        layout = plan.policy.layout.format(vars=", ".join(plan.vars))
        allocate = Allocate(plan.temporary.name, plan.temporary.dtype, layout)
        return Block((allocate, self.hoisted_loops(0, combined, State())))

    def enter(self, number: int) -> None:
        """Lower producer ``number`` next: its site (loop order, output) and the names
        of the scalar temporaries its sums fill."""
        producer = self.producers[number]
        loops, inner = loop_nest(producer)
        order = (*self.hoisted, *(f.index.name for f in loops))
        _, temps = full_expr(inner)
        self.target = self.workspace
        self.temps = {name: full for name, (full, _) in temps.items()}
        self.site = _site(number, order, self.consumer, bool(temps))
        # The emitter counts no derived index of a producer's (it scatters).
        part = self.parts[number]
        self.sums = NestSums.of(part.assign, part.order, number == 0, len(self.parts) > 1,
                                self.out, derived=False)
        self.order = order

    def hoisted_loops(self, depth: int, expr: CinExpr, state: State) -> Node:
        if depth == len(self.hoisted):
            return self.produce_consume(expr, state)
        return self.var(self.hoisted[depth], expr, state, depth,
                        lambda e, s: self.hoisted_loops(depth + 1, e, s))

    def produce_consume(self, expr: CinExpr, state: State) -> Node:
        """At one coordinate of the hoisted loops (``expr``: the operands present there):
        each producer whose terms are not all absent, then the consumer."""
        present = {op.uid for op in operands(expr)}
        hoisted = set(self.hoisted)

        def absent(op: Operand) -> bool:
            return op.uid not in present and bool(hoisted & set(op.vars))

        items: list[Node] = []
        for number, body in enumerate(self.bodies):
            body = substitute_absent(body, absent, lambda op: self.types[op.tensor].fill)
            if body is None:
                continue
            self.enter(number)
            items.append(self.produce(len(self.hoisted), body, state))
        self.enter(0)
        items += self.consume()
        return Block(tuple(items))

    def produce(self, depth: int, expr: CinExpr, state: State) -> Node:
        if depth == len(self.order):
            return self.derived_leaf(expr, state, lambda value, _: self.into_workspace(value))
        return self.var(self.order[depth], expr, state, depth,
                        lambda e, s: self.produce(depth + 1, e, s))

    def into_workspace(self, value: CinExpr) -> Node:
        """A policy that appends takes each product; the others reduce into its entry."""
        if self.plan.policy.appends:
            return Append(self.target, value)
        return Accumulate(self.target, "+", value)

    def consume(self) -> list[Node]:
        plan, name, value = self.plan, self.plan.temporary.name, self.workspace
        write: Node = Insert(self.out_access, value) if self.output_inserts \
            else Append(self.out_access, value)
        ordered = self.ordered or plan.policy.always_sorts
        nodes: list[Node] = []
        if ordered:
            nodes.append(Sort(name, plan.policy.order))
        nodes.append(Entries(name, plan.vars, ordered, write))
        if self.hoisted:  # emptied for the next coordinate of the hoisted loops
            nodes.append(Clear(name, 0.0, plan.policy.clear))
        return nodes


def _site(number: int, order: tuple[str, ...], consumer: Assign, contains_sum: bool) -> Site:
    """A producer's loops scatter into the workspace, which they reduce into."""
    out_vars = tuple(str(ix) for ix in consumer.access.indices)
    return Site(number, order, 0, out_vars, len(order), True, True, False, contains_sum, 0)
