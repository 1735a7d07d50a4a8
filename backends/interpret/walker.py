"""Walk a kernel's loop IR in Python over its operands' arrays (``target="interpret"``).

A second backend that proves the loop IR is the whole contract: it reads the program
and the operands' stored arrays and nothing else (no notation, no lattice, no
scheduler state). Where it would need more, the program is incomplete, and it says so
with an InternalCompilerError. It is slow (a Python step per stored entry) and meant
for tests: differential checks against the LLVM backend. A loop's fast forms
(``[jam 8, 4]``, ``Loop.forms``, ``Loop.other``) choose how a backend emits it, not what it
computes, so they are not read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ir.concrete.expressions import Apply, Const, Operand, operands
from ...ir.concrete.statements import Access, Affine, IndexVar
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
    Merge,
    Missed,
    Node,
    Nonempty,
    Program,
    Ref,
    Sort,
    Target,
    Touched,
    named_levels,
    walk,
)
from .levels import LevelReader, Parent

Key = tuple[int, int]  # (operand use, level)


@dataclass
class Stream:
    """A loop's entries at one parent, and how far a loop has walked them: a merge's
    tail goes on where the merge stopped."""

    entries: list[tuple[int, int, int]]  # (coordinate, first position, last position)
    at: int = 0

    @property
    def live(self) -> bool:
        return self.at < len(self.entries)

    @property
    def head(self) -> tuple[int, int, int]:
        return self.entries[self.at]


@dataclass
class Outputs:
    """What the kernel wrote: the output's entries by coordinates (mode order)."""

    entries: dict[tuple[int, ...], Any] = field(default_factory=dict)
    start: float = 0.0  # an output entry's value before anything is reduced into it


class Walker:
    """Runs one program on operands given by name (the kernel's internal names)."""

    def __init__(self, program: Program, operands: dict[str, Any], out_shape: tuple[int, ...]
                 ) -> None:
        self.program, self.operands, self.out_shape = program, operands, out_shape
        self.cast: Callable[[Any], Any] = np.dtype(program.dtype).type
        self.env: dict[str, int] = {}
        self.position: dict[Key, tuple[int, int]] = {}  # first and last of a run
        self.coordinate: dict[Key, int] = {}
        self.found: dict[Key, bool] = {}
        self.scalars: dict[str, Any] = {}
        self.touched: set[str] = set()
        self.folds: dict[str, int] = {}
        self.workspaces: dict[str, dict[tuple[int, ...], Any]] = {}
        self.output = Outputs()
        self.readers: dict[tuple[str, int], LevelReader] = {}
        self.extents = self._extents()

    # -- setup --------------------------------------------------------------------------
    def reader(self, ref: Ref) -> LevelReader:
        key = (ref.tensor, ref.level)
        if key not in self.readers:
            tensor = self.operands.get(ref.tensor)
            if tensor is None:
                raise InternalCompilerError(f"the loop IR reads {ref} but no operand "
                                            f"{ref.tensor!r} was given")
            self.readers[key] = LevelReader(tensor, ref.level)
        return self.readers[key]

    def _extents(self) -> dict[str, int]:
        """Each index's extent, from the levels the program binds it to and the output's
        modes (a loop over an index's universe needs it)."""
        extents: dict[str, int] = {}
        for node in walk(self.program.root):
            refs = named_levels(node) if isinstance(node, (Loop, Merge)) else \
                (node.ref,) if isinstance(node, Locate) else ()
            for ref in refs:
                if not ref.universe and ref.tensor in self.operands:
                    extents.setdefault(node.index, self.reader(ref).extent)
            if isinstance(node, (Loop, Merge)) and node.expr is not None:
                for op in operands(node.expr):  # one the lattice left out of every case
                    for k, var in enumerate(op.vars):
                        if op.tensor in self.operands:
                            extents.setdefault(var, self.reader(Ref(op.tensor, k, op.uid)).extent)
            target = getattr(node, "target", None)
            if isinstance(target, Access) and target.name == self.program.output:
                for ix, level in zip(target.indices, self.program.output_levels):
                    if isinstance(ix, IndexVar) and level.mode is not None:
                        extents.setdefault(ix.name, self.out_shape[level.mode])
        return extents

    def level_extent(self, tensor: str, level: int) -> int:
        """The extent of a level of an operand or of the output (a guard's bound)."""
        if tensor == self.program.output:
            return self.out_shape[self.program.output_levels[level].mode]
        return LevelReader(self.operands[tensor], level).extent

    def extent(self, index: str) -> int:
        if index not in self.extents:
            raise InternalCompilerError(f"the loop IR iterates {index}'s universe but no "
                                        "level or output mode gives its extent")
        return self.extents[index]

    # -- levels -------------------------------------------------------------------------
    def parent(self, ref: Ref) -> Parent:
        if ref.level == 0:
            return Parent()
        above = (ref.uid, ref.level - 1)
        if above not in self.position:
            raise InternalCompilerError(f"{ref} is read before the level above it")
        first, last = self.position[above]
        grand = self.coordinate.get((ref.uid, ref.level - 2), 0)
        return Parent(first, last, self.coordinate[above], grand)

    def stream(self, ref: Ref, index: str) -> Stream:
        if ref.universe:
            return Stream([(i, i, i) for i in range(self.extent(index))])
        if ref.tensor in self.workspaces:  # an operand's precomputed copy, in order
            return Stream([(at[0], at[0], at[0]) for at in sorted(self.workspaces[ref.tensor])])
        parent = self.parent(ref)
        if ref.level > 0 and not self.found.get((ref.uid, ref.level - 1), True):
            return Stream([])
        pairs = self.reader(ref).entries(parent)
        if not ref.facts.runs:
            return Stream([(i, p, p) for i, p in pairs])
        runs: list[tuple[int, int, int]] = []
        for i, p in pairs:
            if runs and runs[-1][0] == i:
                runs[-1] = (i, runs[-1][1], p)
            else:
                runs.append((i, p, p))
        return Stream(runs)

    def bind(self, ref: Ref, index: str, entry: tuple[int, int, int]) -> None:
        coordinate, first, last = entry
        self.env[index] = coordinate
        if not ref.universe:
            key = (ref.uid, ref.level)
            self.position[key] = (first, last)
            self.coordinate[key] = self._base(ref, coordinate)
            self.found[key] = True

    def locate(self, ref: Ref, index: str) -> bool:
        key = (ref.uid, ref.level)
        if ref.tensor in self.workspaces:  # an operand's precomputed copy, by coordinate
            at = self.env[index]
            self.position[key], self.coordinate[key] = (at, at), at
            self.found[key] = (at,) in self.workspaces[ref.tensor]
            return self.found[key]
        if ref.level > 0 and not self.found.get((ref.uid, ref.level - 1), False):
            self.found[key] = False
            return False
        at = self.bound(index)
        p, ok = self.reader(ref).locate(self.parent(ref), at)
        self.position[key], self.found[key] = (p, p), ok
        self.coordinate[key] = self._base(ref, at)
        return ok

    def _base(self, ref: Ref, coordinate: int) -> int:
        """The coordinate a level's functions see below ``ref``: a window's base one."""
        if ref.tensor in self.workspaces:
            return coordinate
        return self.reader(ref).base(coordinate)

    # -- nodes --------------------------------------------------------------------------
    def run(self, node: Node, tails: dict[Key | str, Stream] | None = None) -> None:
        """Run ``node``; ``tails``: the streams the merges before it in its block left
        (a loop or merge outside a block has none to resume)."""
        tails = {} if tails is None else tails
        if isinstance(node, Block):
            block_tails: dict[Key | str, Stream] = {}
            for item in node.items:
                self.run(item, block_tails)
        elif isinstance(node, Loop):
            self.loop(node, tails)
        elif isinstance(node, Merge):
            self.merge(node, tails)
        elif isinstance(node, Bind):
            self.env[node.index] = self.index_value(node.value)
        elif isinstance(node, Locate):
            self.locate(node.ref, node.index)
        elif isinstance(node, If):
            if self.holds(node.condition):
                self.run(node.then)
        elif isinstance(node, (Accumulate, Insert, Append)):
            self.write(node)
        elif isinstance(node, Allocate):
            if node.layout:
                self.workspaces[node.name] = {}
            else:
                self.scalars[node.name] = self.cast(0)
        elif isinstance(node, Clear):
            self.clear(node)
        elif isinstance(node, Entries):
            self.entries(node)
        elif not isinstance(node, Sort):  # entries are read in order where they must be
            raise InternalCompilerError(f"the interpreter has no meaning for {node!r}")

    def _stream(self, ref: Ref, index: str, resumes: bool, tails: dict) -> Stream:
        key = self._key(ref)
        if resumes:
            if key not in tails:
                raise InternalCompilerError(f"a tail over {ref} resumes no merge before it")
            return tails[key]
        return self.stream(ref, index)

    @staticmethod
    def _key(ref: Ref) -> Key | str:
        return f"U{ref.uid}" if ref.universe else (ref.uid, ref.level)

    def loop(self, node: Loop, tails: dict) -> None:
        stream = self._stream(node.iterator, node.index, node.resumes, tails)
        while stream.live:
            self.bind(node.iterator, node.index, stream.head)
            stream.at += 1
            self.run(node.body)

    def merge(self, node: Merge, tails: dict) -> None:
        streams = [self._stream(r, node.index, node.resumes, tails) for r in node.iterators]
        while all(s.live for s in streams):
            at = min(s.head[0] for s in streams)
            present: set[Key | str] = set()
            for ref, stream in zip(node.iterators, streams):
                if stream.head[0] == at:
                    self.bind(ref, node.index, stream.head)
                    present.add(self._key(ref))
                elif not ref.universe:
                    self.found[(ref.uid, ref.level)] = False
            self.env[node.index] = at
            present.update(self._key(r) for r in node.located if self.locate(r, node.index))
            case = next((c for c in node.cases if all(self._key(r) in present for r in c.present)
                         and self.cascade_holds(c.body)), None)
            if case is not None:
                self.run(case.body)
            for stream in streams:
                if stream.head[0] == at:
                    stream.at += 1
        for ref, stream in zip(node.iterators, streams):
            tails[self._key(ref)] = stream

    def cascade_holds(self, body: Node) -> bool:
        """Whether the levels a case locates below its present ones (its leading
        ``locate`` nodes) hold the coordinate: where one may miss, the operand is absent
        and the next case applies, as the native backend does. The loop IR does not yet
        list those levels among the case's present ones (issue 31)."""
        items = body.items if isinstance(body, Block) else (body,)
        for item in items:
            if not isinstance(item, Locate):
                break
            if not self.locate(item.ref, item.index) and \
                    not item.ref.facts.locate_always_found:
                return False
        return True

    def holds(self, condition) -> bool:
        if isinstance(condition, Found):
            return all(self.found.get((r.uid, r.level), False) for r in condition.refs)
        if isinstance(condition, Touched):
            return condition.name in self.touched
        if isinstance(condition, Nonempty):
            return all(self.extent(ix) > 0 for ix in condition.indices)
        if isinstance(condition, InRange):
            return 0 <= self.env[condition.index] < self.level_extent(condition.tensor,
                                                                      condition.level)
        if isinstance(condition, Missed):
            return self.folds.get(condition.name, 0) < self.extent(condition.index)
        raise InternalCompilerError(f"the interpreter has no meaning for {condition!r}")

    # -- values and writes --------------------------------------------------------------
    def coordinates(self, access: Access) -> tuple[int, ...]:
        return tuple(self.index_value(ix) for ix in access.indices)

    def bound(self, index: str) -> int:
        """The value of ``index`` here (a loop's coordinate, or a ``let``'s value)."""
        if index not in self.env:
            raise InternalCompilerError(f"the loop IR reads {index} before a loop or a let "
                                        "binds it")
        return self.env[index]

    def index_value(self, ix) -> int:
        if isinstance(ix, IndexVar):
            return self.bound(ix.name)
        if isinstance(ix, Affine):
            return ix.value({t: self.index_value(t) for t, _ in ix.terms})
        raise InternalCompilerError(f"no binding of the derived index {ix} in the loop IR")

    def value(self, expr) -> Any:
        if isinstance(expr, Const):
            return self.cast(expr.value)
        if isinstance(expr, Apply):
            args = [self.value(a) for a in expr.args]
            with np.errstate(all="ignore"):
                return self.cast(expr.op.evaluate(*args))
        if isinstance(expr, Access):
            return self.workspaces[expr.name].get(self.coordinates(expr), self.cast(0))
        if isinstance(expr, Operand):
            return self.operand(expr)
        raise InternalCompilerError(f"the interpreter has no meaning for {expr!r}")

    def operand(self, op: Operand) -> Any:
        if not op.vars and op.tensor in self.scalars:  # a scalar temporary
            return self.scalars[op.tensor]
        if not op.vars:  # an order-0 operand: its one value
            return self.cast(self.operands[op.tensor].values[0])
        if op.tensor in self.workspaces:
            at = tuple(self.env[v] for v in op.vars)
            return self.workspaces[op.tensor].get(at, self.cast(0))
        key = (op.uid, len(op.vars) - 1)
        stored = self.found.get(key, False)
        if op.complement:
            return self.cast(0 if stored else 1)
        if not stored:
            raise InternalCompilerError(f"the loop IR reads {op} where it is not resolved")
        return self.cast(self.operands[op.tensor].values[self.position[key][0]])

    def write(self, node: Accumulate | Insert | Append) -> None:
        value = self.value(node.value)
        target: Target = node.target
        if isinstance(target, str):
            self.scalars[target] = self.cast(node.operator.evaluate(self.scalars[target], value))
            self.touched.add(target)
            self.folds[target] = self.folds.get(target, 0) + 1
            return
        at = self.coordinates(target)
        if target.name != self.program.output:
            store = self.workspaces[target.name]
            if isinstance(node, Insert):
                store[at] = value
            else:  # a workspace reduces what is appended or accumulated by +
                store[at] = self.cast(store.get(at, self.cast(0)) + value)
            return
        entries = self.output.entries
        if isinstance(node, Accumulate):
            old = entries.get(at, self.cast(self.output.start))
            with np.errstate(all="ignore"):
                entries[at] = self.cast(node.operator.evaluate(old, value))
        elif isinstance(node, Append) and at in entries:
            raise InternalCompilerError(f"the loop IR appends {target} at {at} twice")
        else:
            entries[at] = value

    def clear(self, node: Clear) -> None:
        name = node.name
        if isinstance(name, Access):
            if name.name == self.program.output:  # a reduction's identity everywhere
                self.output.start = node.value
            else:  # one entry of an operand's precomputed copy
                self.workspaces[name.name].pop(self.coordinates(name), None)
        elif name in self.workspaces:
            self.workspaces[name].clear()
        else:
            self.scalars[name] = self.cast(node.value)
            self.touched.discard(name)
            self.folds[name] = 0

    def entries(self, node: Entries) -> None:
        store = self.workspaces[node.name]
        keys = sorted(store) if node.ordered else list(store)
        for at in keys:
            self.env.update(zip(node.indices, at))
            self.run(node.body)
