"""Lower concrete notation (``ir/concrete/statements.py``) and iteration lattices to the loop IR.

Each ``forall`` becomes, per lattice point, a loop over one range or a merge of several,
with the levels located at each coordinate and one case per sub-point (the expression
with the absent operands' fill values folded in). A sum inside the output's indices
becomes a scalar temporary, allocated, cleared, accumulated into and written in the form
its output needs (``write_point``); a sum inside an expression becomes one too, and a
fold by another operator than + says where it adds the fill of missed coordinates.
Passes over the result (``ir/opt/``) note their fast forms on it, and code generation
walks it node by node (emit_nodes.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..concrete.expressions import (
    Const,
    Operand,
    indexed_operands,
    linear_in,
    reduction_loops,
    replaced_in,
    sum_operator,
    summed_vars,
    sums_in,
)
from ..concrete.expressions import Expr as CinExpr
from ..concrete.lattice import Iter, build_lattice, choose_iterated, substitute_absent
from ..concrete.producers import assign_of, full_expr
from ..concrete.statements import Affine, IndexVar, Stmt, loop_nest, sequence_parts
from ..errors import ScheduleError
from ..notation.operators import ADD
from ..schedule.scheduler import Nest, order_loops
from ..types import LevelType, TensorType
from .from_schedule import statement_facts
from .nodes import (
    Accumulate,
    Allocate,
    Append,
    Bind,
    Block,
    Case,
    Chosen,
    Clear,
    Facts,
    Found,
    If,
    InRange,
    Insert,
    Locate,
    Loop,
    Merge,
    Missed,
    Node,
    Nonempty,
    Program,
    Ref,
    Site,
    Touched,
)
from .result_fill import NestSums, absent_adds, body_fill


@dataclass(frozen=True)
class State:
    bound: tuple[str, ...] = ()
    resolved: tuple[tuple[int, int], ...] = ()  # (uid, levels resolved)
    segmented: frozenset[int] = frozenset()  # uids whose last level is a duplicate run
    repeats: bool = False  # a loop over an output index visits duplicates one by one

    def levels(self, uid: int) -> int:
        return dict(self.resolved).get(uid, 0)

    def resolve(self, uid: int, count: int, segmented: bool = False) -> State:
        seg = self.segmented | {uid} if segmented else self.segmented - {uid}
        return replace(self, resolved=tuple({**dict(self.resolved), uid: count}.items()),
                       segmented=seg)


class NestLowering:
    """Lowers loop nests one at a time (workspace_loops extends it to a workspace kernel)."""

    def __init__(self, types: dict[str, TensorType], output: str, nests: list[Nest]) -> None:
        self.types = types
        self.nests = nests
        self.out = types[output]
        self.all_insert = all(lv.can_insert for lv in self.out.levels)
        self.operands: dict[int, Operand] = {}
        self.taken = 0
        self.temps: dict[str, CinExpr] = {}  # concrete notation's temporaries, by name
        self.feeding = ADD  # the operator what the loops being built compute is reduced by

    def level(self, uid: int, k: int) -> LevelType:
        return self.types[self.operands[uid].tensor].levels[k]

    def ref(self, it: Iter, state: State, runs: bool = False) -> Ref:
        """``it`` as the loop IR names it, with the facts passes ask of it (``runs``: its
        loop steps over runs of duplicate coordinates)."""
        if it.is_universe:
            return Ref("", 0, it.uid, Facts(can_locate=False))
        lv = self.level(it.uid, it.level)
        access = "coord_access" if lv.definition.iterate == "coordinate" else "pos_access"
        segmented = it.level > 0 and it.uid in state.segmented
        facts = Facts(lv.full, lv.ordered, lv.unique, lv.branchless, lv.can_locate,
                      lv.definition.always_found(access),
                      lv.can_locate and lv.definition.always_found("locate"), segmented,
                      all(self.level(it.uid, k).unique for k in range(it.level)),
                      lv.definition.iterate != "coordinate", runs)
        return Ref(self.operands[it.uid].tensor, it.level, it.uid, facts)

    # -- statements ---------------------------------------------------------------------
    def nest(self, number: int, stmt: Stmt, body: CinExpr | None) -> Node:
        loops, inner = loop_nest(stmt)
        order = tuple(f.index.name for f in loops)
        assign = assign_of(inner)
        expr, temps = full_expr(inner)
        expr = expr if body is None else body
        for op in indexed_operands(expr):
            self.operands[op.uid] = op
        idx = assign.access.indices
        derived = any(not isinstance(ix, IndexVar) for ix in idx)
        out_vars = tuple(str(ix) for ix in idx)  # an affine index: its expression
        if derived:
            out_depth, scatter = len(order), True
        else:
            out_depth = max((order.index(v) + 1 for v in out_vars), default=0)
            scatter = any(order.index(v) < out_depth for v in order if v not in out_vars)
        self.site = Site(number, order, 0, out_vars, out_depth, scatter,
                         assign.reduce_op is not None and not _peeled(order, idx),
                         derived, bool(temps), 0)
        self.temps = {name: full for name, (full, _) in temps.items()}
        self.target = assign.access
        self.sums = NestSums.of(self.nests[number], self.nests, self.out)
        op = assign.reduce_op
        self.reduce_op = ADD if op is None else op
        self.reduce_symbol = self.reduce_op.symbol
        self.feeding = self.reduce_op  # the operator what the loops compute is reduced by
        root = self.loops(order, 0, expr, State())
        if op is None or op.symbol == "+" or not scatter:
            return root
        return Block((Clear(self.target, op.identity), root))  # scatter_reduce.initialize

    def loops(self, order: tuple[str, ...], depth: int, expr: CinExpr, state: State) -> Node:
        site = self.site
        if depth == site.out_depth and not site.scatter and depth < len(order):
            return self.write_point(order[depth:], expr, state)
        if depth == len(order):
            return self.derived_leaf(expr, state, lambda value, s: self.write(value, s))
        return self.var(order[depth], expr, state, depth,
                        lambda e, s: self.loops(order, depth + 1, e, s))

    def derived_leaf(self, expr: CinExpr, state: State,
                     finish: Callable[[CinExpr, State], Node]) -> Node:
        """The leaf, under the indices it derives that no loop completed (a workspace
        producer's, bound where its nest is entered)."""
        return self.derive(expr, state, lambda inner: self.leaf(
            expr, inner, lambda value: finish(value, inner)))

    def derive(self, expr: CinExpr, state: State, body: Callable[[State], Node]) -> Node:
        """``body`` under the indices derived from blocked levels or affine subscripts
        whose parts ``state`` has just bound all of (at the loop that completes them):
        bound, then within their ranges the levels they index located, then, where a
        locate may miss, only where found. Outside a range or at a miss the operand is
        its fill, which multiplies the rest (schedule._check_blocked_products), so the
        loops below are skipped: they would compute nothing."""
        binds, locates, state, ranges, misses = self.bind_derived(expr, state)
        inner = body(state)
        if misses:
            inner = If(Found(tuple(misses)), inner)
        if locates:
            inner = Block((*locates, inner))
        for guard in reversed(ranges):
            inner = If(guard, inner)
        return Block((*binds, inner)) if binds else inner

    def bind_derived(self, expr: CinExpr, state: State
                     ) -> tuple[list[Node], list[Node], State, list[InRange], list[Ref]]:
        """Indices derived from blocked levels' or affine subscripts' indices that
        operands of ``expr`` or the output read (``x(j)`` under BCSR's loops, ``I(t)``
        with ``t = h + r``), not bound yet and whose parts are, bound, with the guards
        that keep them in range, and the levels they index located."""
        nodes: list[Node] = []
        locates: list[Node] = []
        assign = self.nests[self.site.nest].assign
        offsets, divisors = dict(assign.offsets), dict(assign.divisors)
        guards: list[InRange] = []
        misses: list[Ref] = []
        for index, parts in assign.derived:
            readers = [op for op in indexed_operands(expr) if index in op.vars]
            if not readers and index not in assign.vars:  # the output's: its write's
                continue
            if index in state.bound or any(p not in state.bound for p, _ in parts):
                continue  # bound at the loop completing it (a nested sum's, too)
            state = replace(state, bound=(*state.bound, index))
            nodes.append(Bind(index, Affine(tuple((IndexVar(p), m) for p, m in parts),
                                            offsets.get(index, 0), divisors.get(index, 1))))
            guards += [InRange(index, t, k) for i, t, k in assign.guards if i == index]
            for op in readers:
                k = state.levels(op.uid)
                while k < len(op.vars) and op.vars[k] in state.bound:
                    ref = self.ref(Iter(op.uid, k), state)
                    # Located by a subsection (a search of an ordered level) only where
                    # the coordinate has one position: a non-unique level's is a run,
                    # which one located position would cut to its first entry.
                    if self.level(op.uid, k).can_subsection and ref.facts.unique:
                        ref = replace(ref, facts=replace(ref.facts, can_locate=True))
                    locates.append(Locate(ref, op.vars[k]))
                    if not ref.facts.locate_always_found:  # a hashed image: it may miss
                        misses.append(ref)
                    state = state.resolve(op.uid, k + 1)
                    k += 1
        return nodes, locates, state, guards, misses

    def write_point(self, order: tuple[str, ...], expr: CinExpr, state: State) -> Node:
        """The sum over the loops ``order`` inside the output's indices, then its write.

        Into full storage that takes inserts the sum is written unconditionally:
        storing an empty sum into zero-filled storage changes nothing, and it saves a
        branch per row. A stored sum then starts at 0.0, as the output's zero would
        (a -0.0 start would need a + 0 per row to store an empty sum as 0.0: row-wise
        SpMV on the stencil spent 8% on it). Elsewhere the sum starts at -0.0, the
        exact identity of +, and is written only where something was added: where
        the loops only locate, whenever they run at all (a flag set inside them
        would keep LLVM from deleting loops whose values are unused, such as the
        dot products of a count phase); otherwise where a flag says so."""
        acc = self.fresh("acc")
        feeding, self.feeding = self.feeding, ADD
        reduce = self.reduce(order, expr, state, acc)
        self.feeding = feeding
        write = self.write(Operand(acc, (), -1), state)
        if self.all_insert and all(lv.full for lv in self.out.levels):
            start = 0.0 if isinstance(write, Insert) else -0.0
            return Block((Allocate(acc, self.out.dtype), Clear(acc, start), reduce, write))
        condition = Nonempty(order) if self.only_locate(order, expr) else Touched(acc)
        return Block((Allocate(acc, self.out.dtype), Clear(acc, -0.0), reduce,
                      If(condition, write)))

    def only_locate(self, loop_vars: tuple[str, ...], expr: CinExpr) -> bool:
        """Whether loops over ``loop_vars`` visit every coordinate of their extents and
        resolve every operand level they reach by a locate that always finds it: each
        level one of them indexes, and every level below it, which they resolve too
        even where an outer loop binds its index (B(k,j,l) with l outside a loop over
        j: l's level is located inside the j loop, after j's)."""
        for op in indexed_operands(expr):
            inside = False
            for k, var in enumerate(op.vars):
                inside = inside or var in loop_vars
                lv = self.level(op.uid, k)
                if inside and not (lv.full and lv.definition.always_found("locate")):
                    return False
        return True

    def reduce(self, order: tuple[str, ...], expr: CinExpr, state: State, acc: str) -> Node:
        if not order:
            return self.derived_leaf(expr, state,
                                     lambda value, _: Accumulate(acc, "+", value, ADD))
        return self.var(order[0], expr, state, -1,
                        lambda e, s: self.reduce(order[1:], e, s, acc))

    def leaf(self, expr: CinExpr, state: State, finish: Callable[[CinExpr], Node]) -> Node:
        """``finish(value)``, after filling a temporary for each sum left in ``expr``
        (named as concrete notation's ``where`` names it)."""
        items: list[Node] = []
        value = expr
        for sub in sums_in(expr):
            vars_, body, op = reduction_loops(sub)
            if op.symbol == "+":  # the order code generation gives a sum's loops
                try:
                    vars_ = order_loops(vars_, indexed_operands(body), self.types, set(state.bound))
                except ScheduleError:  # it binds more there (blocked parts): as written
                    pass
            # Named as concrete notation's ``where`` names the temporary filled with this
            # sum; each name once per expression (two sums over j are two temporaries).
            taken = {n.name for n in items if isinstance(n, Allocate)}
            name = next((n for n, full in self.temps.items() if n not in taken
                         and summed_vars(full) == frozenset(vars_)
                         and sum_operator(full) is op), None) or self.fresh("t")
            identity = op.identity if op.identity is not None else 0.0
            feeding, self.feeding = self.feeding, op
            loops = self.sum_loops(tuple(vars_), body, state, name, op)
            self.feeding = feeding
            items += [Allocate(name, self.out.dtype), Clear(name, identity), loops]
            fill = body_fill(body, self.types)
            if op is not ADD and not (op.skips_absent or op.identity == fill):
                # A coordinate outside the body's region holds its fill (0, or -inf
                # where a max pool's image has it): folded in once if any was missed
                # (a monoid keeps f from f and f).
                items.append(If(Missed(name, vars_[0]), Accumulate(name, op.symbol,
                                                                   Const(fill), op)))
            value = replaced_in(value, sub, Operand(name, (), -1))
        items.append(finish(value))
        return items[0] if len(items) == 1 else Block(tuple(items))

    def sum_loops(self, vars_: tuple[str, ...], body: CinExpr, state: State, name: str,
                  op) -> Node:
        if not vars_:
            return self.derived_leaf(body, state,
                                     lambda value, _: Accumulate(name, op.symbol, value, op))
        return self.var(vars_[0], body, state, -1,
                        lambda e, s: self.sum_loops(vars_[1:], e, s, name, op))

    def write(self, value: CinExpr, state: State) -> Node:
        """The output's write: appended, added to what is there (a scatter, a ``+=``, a
        loop that visits an output coordinate once per duplicate), or stored."""
        site = self.site
        if not self.all_insert:
            return Append(self.target, value)
        if site.scatter or site.accumulate or state.repeats:
            return Accumulate(self.target, self.reduce_symbol, value, self.reduce_op)
        return Insert(self.target, value)

    def fresh(self, stem: str) -> str:
        while True:  # never a name concrete notation gave a temporary
            self.taken += 1
            name = stem if self.taken == 1 and stem == "acc" else f"{stem}{self.taken}"
            if name not in self.temps:
                return name

    # -- one index ----------------------------------------------------------------------
    def var(self, var: str, expr: CinExpr, state: State, depth: int,
            body: Callable[[CinExpr, State], Node]) -> Node:

        def find(op: Operand) -> Iter | None:
            k = state.levels(op.uid)
            return Iter(op.uid, k) if k < len(op.vars) and op.vars[k] == var else None

        def cascade_full(it: Iter) -> bool:
            if it.is_universe:
                return True
            op = self.operands[it.uid]
            k = it.level + 1
            while k < len(op.vars) and (op.vars[k] in state.bound or op.vars[k] == var):
                if not self.level(it.uid, k).full:
                    return False
                k += 1
            return True

        def is_full(it: Iter) -> bool:
            full = it.is_universe or self.level(it.uid, it.level).full
            return full and cascade_full(it)

        def can_locate(it: Iter) -> bool:
            return not it.is_universe and self.level(it.uid, it.level).can_locate

        def fill_of(op: Operand) -> float:
            return self.types[op.tensor].fill

        adds = absent_adds(self.sums, var, expr, fill_of)
        lattice = build_lattice(expr, find, is_full, fill_of, adds)
        bound = (*state.bound, var)
        nodes: list[Node] = []
        for number, point in enumerate(lattice.points):
            iterated, located = choose_iterated(lattice, point, can_locate, is_full)
            single, points = len(iterated) == 1, len(lattice.points)
            stored = [it for it in iterated if not it.is_universe]
            segmented = {it for it in stored if self.segments(it, var, expr, single, points)}
            runs = segmented | {it for it in stored if self.sums_runs(it, var)}
            point_uids = {it.uid for it in point}
            cases: list[Case] = []
            case_exprs: list[CinExpr | None] = []
            for sub in lattice.subpoints(point):
                sub_uids = {it.uid for it in sub}
                def finished(op: Operand, sub=sub) -> bool:
                    it = find(op)
                    return it is not None and it in sub and it.level == len(op.vars) - 1

                case_expr = substitute_absent(expr, lambda op, s=sub_uids, p=point_uids: (
                    find(op) is not None and (op.uid not in s or op.uid not in p)), fill_of,
                    finished)
                if case_expr is None and adds is not None:
                    case_expr = Const(adds)  # the fill of a term absent here is added up
                case_exprs.append(case_expr)
                present = tuple(self.ref(it, state) for it in sorted(sub, key=str))
                if case_expr is None:  # the fill value: the case computes nothing
                    cases.append(Case(present, Block(())))
                    continue
                inner = replace(state, bound=bound)
                locates: list[Node] = []
                for it in [*iterated, *located]:
                    if it.is_universe or it.uid not in sub_uids:
                        continue
                    if it in located:
                        locates.append(Locate(self.ref(it, state), var))
                    segments = it in segmented
                    if it in iterated and self.repeats(it, var, expr, len(iterated) == 1,
                                                       segments):
                        inner = replace(inner, repeats=True)
                    inner, more = self.cascade(it, inner, segments)
                    locates += more
                inside = self.derive(case_expr, inner,
                                     lambda s, e=case_expr: body(e, s))
                misses = tuple(n.ref for n in locates if not n.ref.facts.locate_always_found)
                if misses and len(iterated) == 1:  # a loop of one case tests its locates
                    inside = If(Found(misses), inside)
                cases.append(Case(present, Block((*locates, inside)) if locates else inside))
            refs = tuple(self.ref(it, state, it in runs) for it in iterated)
            site = replace(self.site, depth=depth, lattice_points=len(lattice.points),
                           additive=self.feeding is ADD)
            chosen = Chosen(lattice, point, tuple(iterated), tuple(located), tuple(case_exprs),
                            tuple(lattice.subpoints(point)), lattice.points[0],
                            len(lattice.points))
            if len(iterated) == 1 and len(cases) == 1:
                ref = refs[0]
                over = "coordinates" if ref.universe or \
                    self.level(ref.uid, ref.level).definition.iterate == "coordinate" \
                    else "positions"
                node: Node = Loop(var, over, ref, cases[0].body, site=site, expr=expr,
                                  chosen=chosen, resumes=number > 0)
            else:
                node = Merge(var, refs, tuple(self.ref(it, state) for it in located),
                             tuple(cases), site=site, expr=expr, chosen=chosen,
                             resumes=number > 0)
            nodes.append(node)
        return nodes[0] if len(nodes) == 1 else Block(tuple(nodes))

    def segments(self, it: Iter, var: str, expr: CinExpr, single: bool, points: int) -> bool:
        """Whether iterating ``it`` walks runs of duplicate coordinates as segments (the
        levels below then see a run, not a position): a non-unique level iterated by
        position, unless each duplicate may be visited on its own (one iterator, an
        output that only accumulates what it is linear in, by +: a max of each duplicate
        is not the max of their sum) without a sum kept in a register, or the run is
        summed as it comes (running sums)."""
        lv = self.level(it.uid, it.level)
        if lv.unique or lv.definition.iterate == "coordinate":
            return False
        site = self.site
        if not (single and self.all_insert and linear_in(expr, it.uid)
                and self.feeding is ADD):
            return True
        in_register = self.in_register(lv, var)
        running = points == 1 and not site.accumulate and all(lv.full for lv in self.out.levels)
        return in_register and not running

    def sums_runs(self, it: Iter, var: str) -> bool:
        """Whether a run of duplicates of a non-unique level is summed in a register
        before one write (running sums): the write sees each coordinate once, as in
        segments, though the levels below see one position at a time."""
        lv = self.level(it.uid, it.level)
        return not lv.unique and lv.definition.iterate != "coordinate" \
            and self.in_register(lv, var)

    def repeats(self, it: Iter, var: str, expr: CinExpr, single: bool, segments: bool) -> bool:
        """Whether iterating ``it`` visits an output coordinate once per duplicate, so
        that the output's write adds to what an earlier duplicate wrote: a non-unique
        level iterated by position, not in segments, its duplicates not summed in a
        register (running sums need the output's last index, see segments)."""
        lv = self.level(it.uid, it.level)
        if lv.unique or lv.definition.iterate == "coordinate" or segments \
                or var not in self.site.out_vars:
            return False
        return single and self.all_insert and linear_in(expr, it.uid) \
            and not self.in_register(lv, var) and self.feeding is ADD

    def in_register(self, lv: LevelType, var: str) -> bool:
        """Whether a run of duplicates of ``var`` (sorted, so adjacent) is summed in a
        register before one write: the loop completes the output's indices."""
        site = self.site
        return lv.ordered and not site.scatter and var in site.order \
            and site.order.index(var) + 1 == site.out_depth

    def cascade(self, it: Iter, state: State, segments: bool) -> tuple[State, list[Node]]:
        """The levels below ``it`` whose indices are bound, located in turn."""
        op = self.operands[it.uid]
        state = state.resolve(it.uid, it.level + 1, segments)
        nodes: list[Node] = []
        k = it.level + 1
        while k < len(op.vars) and op.vars[k] in state.bound:
            nodes.append(Locate(self.ref(Iter(it.uid, k), state), op.vars[k]))
            state = state.resolve(it.uid, k + 1)
            k += 1
        return state, nodes


def _peeled(order: tuple[str, ...], indices) -> bool:
    """Whether the nest loops over indices the output lacks (sums peeled into it)."""
    names = {str(ix) for ix in indices}
    return any(v not in names for v in order)


def lower(stmt: Stmt, types: dict[str, TensorType], output: str, nests: list[Nest]
          ) -> Program:
    """The loop IR of a kernel's statement (``statement_of(nests)``, a sequence of loop
    nests), with each nest's expression as the scheduler left it (sums in the order they
    were written), so that the loop IR's expressions are the ones code generation sees."""
    lowering = NestLowering(types, output, nests)
    parts = sequence_parts(stmt)
    roots = tuple(lowering.nest(k, part, nests[k].body) for k, part in enumerate(parts))
    root = roots[0] if len(roots) == 1 else Block(roots)
    return Program(root, output, types[output].levels, len(roots), types[output].fill,
                   statements=statement_facts(nests))

