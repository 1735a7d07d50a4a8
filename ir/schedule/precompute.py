"""Operand workspaces: an operand's slice copied into a dense temporary (paper 002's
precompute of an operand).

When an operand's access does not depend on a loop nested between its own loops
(``L(i,j)`` in ``t = L(i,j) * L(i,k) * L(k,j)`` under loops i, k, j), every iteration of
that loop co-iterates the same slice ``L(i,:)`` again, merging it with the other
operand's slice: O(|L(i,:)| + |L(k,:)|) per k. Scattering the slice into a temporary
``T(j)`` once per i (its values and a mark per coordinate) lets the inner loop iterate
the other operand alone and *locate* into T: O(|L(k,:)|) per k; the marks are cleared
through the slice's own coordinates afterwards, O(|L(i,:)|). Concrete notation shows it
as ``where(consumer reading T, T(j) = L(i,j))`` under the loops outside.

The temporary's one level is declared in the level language (``TEMPORARY_LEVEL``), so
the lowering drives it through its capabilities like any operand's level.

When it applies (``plan_precomputes``). Legal where the operand is read directly in
the nest's body (not under a nested sum or as a complement), all its indices are loops
of the nest, and at least one loop runs between the loop binding its slice's parents
and the loop over its last index (the access is invariant there). The rule chooses it
only where it pays, which the operands' capabilities and fill values decide:

* the operand's last level cannot locate (else it is located already, at no merge);
* where the operand stores nothing the body computes nothing (its fill annihilates
  the body), so the temporary is only ever located, never iterated (a scan of its
  extent); an operand whose fill is not an annihilator (fill 1 under a product) is
  left alone;
* another operand that cannot locate and that the body needs as well is indexed by the
  same last index, so the loop iterates it and locates the temporary.

A caller may force it (``True``: wherever legal) or forbid it (``False``).

``True`` also reduces a product's factors that share a summed loop into a dense row
where a nest splits so (precompute_sums.py: MTTKRP's workspace form); the rule does
not choose that yet.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from ...formats.loader import PROPERTY_NAMES, LevelDef, load_level_text
from ..concrete.expressions import Apply, Expr, Operand, Sum, nodes, operands
from ..concrete.lattice import substitute_absent
from ..concrete.statements import TensorVar
from ..errors import ScheduleError
from ..types import LevelType, TensorType
from .precompute_sums import PLACED, SumShape, product, sum_shape
from .scheduler import Nest

# One flag per coordinate: a coordinate is stored when its mark is set.
TEMPORARY_LEVEL = """\
name: operand_workspace
doc: A dense temporary's marks; coordinate i is stored when mark[p_parent * N + i] != 0.
params: {}
arrays:
  mark: {type: crd, length: parent_size * N, init: 0}
properties:
  full: false
  ordered: true
  unique: true
  branchless: false
  compact: false
capabilities:
  iterate: position
  pos_bounds: return p_parent * N, (p_parent + 1) * N
  pos_access: return p - p_parent * N, mark[p] != 0
  locate: return p_parent * N + i, mark[p_parent * N + i] != 0
  insert:
    size: return parent_size * N
    insert_coord: mark[p] = 1
"""

# A sum workspace's row (precompute_sums.py): every coordinate exists, 0 where nothing
# was added (finite values only reach it: 0 * x adds nothing), so it needs no marks.
SUM_ROW_LEVEL = """\
name: sum_workspace
doc: A dense row of sums; positions are p_parent * N + i, 0 where nothing was added.
params: {}
arrays: {}
properties:
  full: true
  ordered: true
  unique: true
  branchless: false
  compact: true
capabilities:
  iterate: coordinate
  coord_bounds: return 0, N
  coord_access: return p_parent * N + i, True
  locate: return p_parent * N + i, True
  insert:
    size: return parent_size * N
    insert_coord: pass
"""

MARK_BYTES = 1  # a mark per coordinate, besides the value


@functools.cache
def temporary_level() -> LevelDef:
    return load_level_text(TEMPORARY_LEVEL, "<operand workspace>")


@functools.cache
def sum_row_level() -> LevelDef:
    return load_level_text(SUM_ROW_LEVEL, "<sum workspace>")


@dataclass(frozen=True)
class Precompute:
    """``operand``'s slice over ``var`` scattered into ``temporary`` before the loop over
    ``at`` (once per coordinate of the loops outside it) and read as ``replacement``
    (``temporary(var)``) inside.

    A sum workspace (precompute_sums.py) reduces ``expr`` over the ``summed`` loops (from
    ``at``) and ``var`` into the temporary instead, and the loop over ``var`` computes
    ``consumer`` from it; ``operand`` is then the factor whose mode sizes the temporary.
    ``adds``: a value may arrive where one is stored already (a duplicate coordinate, a
    sum), and is added to it."""

    operand: Operand
    at: str
    var: str
    temporary: TensorVar
    replacement: Operand
    reason: str
    expr: Expr | None = None
    summed: tuple[str, ...] = ()
    consumer: Expr | None = None
    adds: bool = False


def plan_precomputes(nests: list[Nest], types: dict[str, TensorType], force: bool | None,
                     dtype: str, factors: tuple[str, ...] | None = None) -> list[Nest]:
    """``nests`` with the operand workspaces the rule (or ``force``) chooses; the
    temporaries hold ``dtype``, the kernel's value type (what the operand is read as).
    ``factors``: the operands whose product a schedule reduces into a row (a
    ScheduleError where a product nest splits otherwise)."""
    if force is False:
        return nests
    uids = [op.uid for n in nests for op in operands(n.body)]
    next_uid = max(uids, default=0) + 1
    taken = set(types)
    result = []
    for nest in nests:
        shape = sum_shape(nest, types)
        if factors is not None:
            _check_factors(shape, factors)
        if isinstance(shape, SumShape) and force:  # the rule does not choose it (see there)
            name = _fresh("w", taken)
            plan = _sum_plan(shape, TensorVar(name, _temporary_type(
                dtype, types[shape.sizing.tensor], sum_row_level())), next_uid,
                             "forced by the caller")
            next_uid += 1
            result.append(replace(nest, precomputes=(plan,)))
            continue
        plans = []
        for op in operands(nest.body):
            at = _invariant_loop(nest, op)
            if at is None or types[op.tensor].levels[-1].mode is None:
                continue  # (a storage-only level's extent is no mode of the operand's)
            why = _pays(nest, op, types)
            if why is None and not force:
                continue
            name = _fresh(f"{op.tensor}_ws", taken)
            temp = TensorVar(name, _temporary_type(dtype, types[op.tensor]))
            plans.append(Precompute(op, at, op.vars[-1], temp,
                                    Operand(name, (op.vars[-1],), next_uid),
                                    why or "forced by the caller",
                                    adds=not types[op.tensor].levels[-1].unique))
            next_uid += 1
        result.append(replace(nest, precomputes=tuple(plans)) if plans else nest)
    return result


def _check_factors(shape: SumShape | str, factors: tuple[str, ...]) -> None:
    """A ScheduleError where a product nest does not split into the schedule's
    ``factors`` (a nest with a sum inside runs as placed: non-finite operands)."""
    named = " * ".join(factors)
    if isinstance(shape, str):
        if shape == PLACED:
            return
        raise ScheduleError(f"precompute({named}, ...): no sum workspace here: {shape}")
    inner = sorted(op.tensor for f in shape.inner for op in operands(f))
    if inner != sorted(factors):
        raise ScheduleError(f"precompute({named}, ...): the loops sum over "
                            f"{', '.join(shape.summed)} the product of {', '.join(inner)}")


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _temporary_type(dtype: str, like: TensorType, level: LevelDef | None = None
                    ) -> TensorType:
    """A one-level tensor of ``dtype`` (over the temporary level unless ``level`` is
    given), indexed as ``like``."""
    level = level or temporary_level()
    props = tuple((p, level.properties[p].default) for p in PROPERTY_NAMES)
    return TensorType((LevelType(level, level.name, 0, props),), 1, dtype,
                      like.index_dtype, like.fill_key)


def _sum_plan(shape: SumShape, temp: TensorVar, uid: int, why: str) -> Precompute:
    """The sum workspace ``shape`` describes, into ``temp``."""
    row = Operand(temp.name, (shape.var,), uid)
    return Precompute(shape.sizing, shape.at, shape.var, temp, row, why,
                      product(shape.inner), shape.summed, product((row, *shape.outer)),
                      adds=True)


def _invariant_loop(nest: Nest, op: Operand) -> str | None:
    """The first loop between the one binding ``op``'s slice's parents and the one over
    its last index, where the slice can be scattered once for all of them; None where
    there is none or the operand cannot be copied there."""
    order = nest.order
    if nest.workspace is not None or nest.assign.derived or op.complement or not op.vars:
        return None
    if len(set(op.vars)) != len(op.vars) or not all(v in order for v in op.vars):
        return None
    if any(isinstance(node, Sum) and op in operands(node) for node in nodes(nest.body)):
        return None
    positions = [order.index(v) for v in op.vars]
    if positions != sorted(positions):
        return None
    start = positions[-2] + 1 if len(positions) > 1 else 0
    return order[start] if start < positions[-1] else None


def _pays(nest: Nest, op: Operand, types: dict[str, TensorType]) -> str | None:
    """Why the rule chooses to precompute ``op`` (see the module docstring), or None."""
    var = op.vars[-1]
    if types[op.tensor].levels[-1].can_locate:
        return None

    def needed(other: Operand) -> bool:
        fill_of = lambda o: types[o.tensor].fill
        return substitute_absent(nest.body, lambda o: o.uid == other.uid, fill_of) is None

    if not needed(op):
        return None
    drivers = [o for o in operands(nest.body) if o.uid != op.uid and var in o.vars
               and not types[o.tensor].levels[o.vars.index(var)].can_locate and needed(o)]
    if not drivers:
        return None
    return (f"{op} is invariant in the loop over {_between(nest, op)} and only located "
            f"at {var}, where {drivers[0]} is iterated")


def _between(nest: Nest, op: Operand) -> str:
    order = nest.order
    positions = [order.index(v) for v in op.vars]
    start = positions[-2] + 1 if len(positions) > 1 else 0
    return ", ".join(order[start:positions[-1]])


def replaced(expr: Expr, plan: Precompute) -> Expr:
    """``expr`` reading the temporary where it read the operand (a sum workspace's
    consumer, for the product it splits)."""
    if plan.consumer is not None:
        return plan.consumer
    if isinstance(expr, Operand):
        return plan.replacement if expr.uid == plan.operand.uid else expr
    if isinstance(expr, Apply):
        return Apply(expr.op, tuple(replaced(a, plan) for a in expr.args))
    if isinstance(expr, Sum):
        return Sum(expr.var, replaced(expr.body, plan), expr.op, expr.hidden)
    return expr
