"""Affine subscripts (``I(h+r, w+s)``, paper 000) as derived indices of concrete notation.

An access at an affine subscript is reached one of two ways, decided here from what its
levels can do (never from a format's name):

- *located*: every level of the operand can locate, so the subscript becomes a fresh
  index bound to the sum once its variables are (``let t = h + r``) and the operand is
  located there; levels that cannot locate but find subsections (the ``subsection``
  level function: an ordered row's positions within [lo, hi)) are located through a
  one-wide one where walking the operand would repeat per output entry (under a mask
  that iterates the output's indices);
- *inverted*: the operand has a level that cannot locate (it stores entries sparsely),
  so the loops walk its stored coordinates ``x`` and one variable of the sum, an output
  index where one can be, is derived from them instead (index inversion, ``h = x - r``;
  ``h = (x - r) / 2`` under a stride, where that divides). The variable's other uses
  (the output, operands indexed by it plainly) are then located at it, so the cost is
  bounded by the stored entries, not by the image's extent.

Each derived index is guarded: where it falls outside the extent of the level it
indexes, the point is skipped, which is reading the fill value (padding) when the
operand multiplies the rest of the expression (``schedule._check_blocked_products``
requires that), or not writing outside the output. An operand added beside the rest
(``B(i) + C(i+j)``, paper 000's disjunctive form) is planned with the operands of its
own additive term only: the scheduler lowers each term as a statement of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ScheduleError
from ..notation import syntax as nt
from ..notation.operators import ADD, MUL, NEG, SUB
from ..types import TensorType

Parts = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Derivation:
    """``index = (sum(c * var for var, c in parts) + offset) / divisor``, valid where the
    division is exact and ``0 <= index < extent of level guard[1] of tensor guard[0]``;
    no guard where the index is in range by construction (blocked levels tile their
    mode: ``j = 2 * jb + ji``)."""

    index: str
    parts: Parts
    offset: int
    guard: tuple[str, int] | None
    divisor: int = 1


@dataclass
class AffinePlan:
    """How one assignment's affine subscripts and blocked levels are reached: per access
    (by id), the name each subscript takes, the fresh coordinates of inverted subscripts
    and blocked levels (to be summed over) and the names of its blocked levels (by level),
    and the derived indices in the order they can be bound."""

    names: dict[int, tuple[str, ...]] = field(default_factory=dict)
    inverted: bool = False  # some operand is walked, an index derived from it
    walked: dict[int, list[str]] = field(default_factory=dict)
    levels: dict[int, dict[int, str]] = field(default_factory=dict)
    derivations: list[Derivation] = field(default_factory=list)


def _random_access(ttype: TensorType) -> bool:
    return all(level.can_locate for level in ttype.levels)


def _by_subsections(access: nt.Access, lhs: nt.Access, accesses: list[nt.Access],
                    types: dict[str, TensorType], folded: set[int]) -> bool:
    """Whether ``access`` is located, its levels that cannot locate through one-wide
    subsections (a binary search in an ordered row), rather than walked: where an output
    index of its affine subscripts is iterated by another operand (a submanifold mask
    M(h,w) stored CSR), walking it would walk all of it inside that operand's loops,
    once per output entry; located, it costs a search per tap. Also where it sits under
    a reduction other than a sum (``folded``: max pooling), whose loops read it at each
    output entry: walked, its entries would scatter through a nested max. And where a
    subscript is a constant (``A(i, 2)``), which has no variable to derive."""
    ttype = types[access.tensor]
    if not all(level.can_locate or level.can_subsection for level in ttype.levels):
        return False
    if id(access) in folded or any(isinstance(ix, nt.AffineIndex) and not ix.terms
                                   for ix in access.indices):
        return True  # under a max, or a constant subscript (no variable to walk)
    variables = {var for ix in access.indices if isinstance(ix, nt.AffineIndex)
                 for var in ix.vars}
    for other in accesses:
        if other is access:
            continue
        for mode, ix in enumerate(other.indices):
            if ix in variables and ix in lhs.indices and not types[other.tensor].levels[
                    _level_of(types[other.tensor], mode)].can_locate:
                return True
    return False


def _terms(expr: nt.Expr) -> list[list[nt.Access]]:
    """The accesses of each additive term of ``expr`` (``B(i) + C(i+j)``: two terms, each
    lowered as a statement of its own): which operand is walked and which index derived
    depends only on what multiplies it, not on operands added beside it."""
    if isinstance(expr, nt.Call) and expr.op in (ADD, SUB):
        return [group for arg in expr.args for group in _terms(arg)]
    if isinstance(expr, nt.Call) and expr.op is NEG:
        return _terms(expr.args[0])
    return [list(nt.iter_accesses(expr))]


def _level_of(ttype: TensorType, mode: int) -> int:
    levels = ttype.levels_of_mode(mode)
    if len(levels) != 1 or ttype.levels[levels[0]].block:
        raise ScheduleError("an affine subscript indexes a mode stored in one unblocked "
                            "level; convert the operand")
    return levels[0]


def _blocked(access: nt.Access, ttype: TensorType, taken: set[str]
             ) -> tuple[dict[int, str], list[Derivation]]:
    """A blocked operand as an inverted one: its blocked levels' coordinates are walked
    (fresh names, by level) and each blocked mode's index derived from them, as ``h``
    is from a walked image's ``x`` (``j = 2 * jb + ji`` for blocks of 2: the storage's
    own affine subscript, read backwards; no guard, the blocks tile the mode)."""
    names: dict[int, str] = {}
    parts: dict[int, list[tuple[str, int]]] = {}
    for k, level in enumerate(ttype.levels):
        if not level.block:
            continue
        index = access.indices[level.mode]
        if isinstance(index, nt.AffineIndex):
            raise ScheduleError(f"{access.tensor} has blocked levels: an affine subscript "
                                "needs its operand in an unblocked format; convert it")
        if access.indices.index(index) != level.mode:
            # B(j,j): one index would be the sum of both modes' block parts
            raise ScheduleError(f"{access.tensor} has blocked levels and index {index} on "
                                "two of its modes (a diagonal); store it in full")
        names[k] = nt.fresh_name(f"{access.tensor}_{k}", taken)
        parts.setdefault(level.mode, []).append((names[k], 1 if level.inner else level.block))
    return names, [Derivation(access.indices[mode].name, tuple(p), 0, None)
                   for mode, p in parts.items()]


def plan(assignment: nt.Assignment, types: dict[str, TensorType]) -> AffinePlan:
    """Decide, for every affine subscript of ``assignment``, whether its operand is
    located or walked (see the module docstring), and derive blocked levels' indices
    from their coordinates; raise ScheduleError where neither can be done."""
    result = AffinePlan()
    accesses = list(nt.iter_accesses(assignment.rhs))
    affine_any = any(isinstance(ix, nt.AffineIndex) for a in accesses for ix in a.indices)
    if not affine_any and not any(level.block for a in accesses
                                  for level in types[a.tensor].levels):
        return result
    if affine_any and not assignment.lhs.indices and not any(
            nt.index_vars_of(ix) for a in accesses for ix in a.indices):
        raise ScheduleError("a constant subscript in a statement without index variables "
                            "(a = x(2)) is not supported: there is no loop to locate it in")
    taken = nt.names_in_use(assignment)
    lhs = assignment.lhs
    folded = {id(a) for r in nt.iter_reductions(assignment.rhs) if r.op is not ADD
              for a in nt.iter_accesses(r.body)}
    groups = _terms(assignment.rhs)
    group_of = {id(a): k for k, group in enumerate(groups) for a in group}
    # per additive term: an index derived there is expanded only in that term's subscripts
    # (the terms are lowered as statements of their own), and derived in one term only
    inverted: list[dict[str, Derivation]] = [{} for _ in groups]
    for access in accesses:  # first blocked operands: their indices are derived
        level_names, blocked = _blocked(access, types[access.tensor], taken)
        if not blocked:
            continue
        for derivation in blocked:
            if any(derivation.index in d for d in inverted):
                raise ScheduleError(f"index {derivation.index} is blocked in two operands; "
                                    "convert one")
            inverted[group_of[id(access)]][derivation.index] = derivation
        result.names[id(access)] = tuple(ix.name for ix in access.indices)
        result.walked[id(access)] = list(level_names.values())
        result.levels[id(access)] = level_names
    for access in accesses:  # then the walked operands: they fix the inverted variables
        if id(access) in result.names:
            continue
        ttype = types[access.tensor]
        beside = groups[group_of[id(access)]]
        affine = [isinstance(ix, nt.AffineIndex) for ix in access.indices]
        if not any(affine) or _random_access(ttype) \
                or _by_subsections(access, lhs, beside, types, folded):
            continue
        if id(access) in folded:
            raise ScheduleError(
                f"{access.tensor} is read at affine subscripts under a reduction other than "
                "a sum (max pooling): it must be located there; store it in a format whose "
                "levels can all locate or find subsections (dense, hash, ordered compressed)")
        if access.complement:
            raise ScheduleError(f"!{access.tensor}: a complement at an affine subscript "
                                "is not supported")
        names, walked = [], []
        mine = inverted[group_of[id(access)]]
        for mode, ix in enumerate(access.indices):
            if not isinstance(ix, nt.AffineIndex):
                names.append(ix.name)
                continue
            x = nt.fresh_name(f"{access.tensor}_{mode}", taken)
            walked.append(x)
            names.append(x)
            taken_anywhere = {name for d in inverted for name in d}
            derivation = _invert(ix, x, lhs, beside, types, mine, taken_anywhere)
            mine[derivation.index] = derivation
        result.names[id(access)] = tuple(names)
        result.walked[id(access)] = walked
    for derivations in inverted:
        result.derivations.extend(derivations.values())
    result.inverted = any(d.guard is not None for d in result.derivations)
    for access in accesses:  # then the located ones, at sums of loop variables
        if id(access) in result.names:
            continue
        names = []
        for mode, ix in enumerate(access.indices):
            if not isinstance(ix, nt.AffineIndex):
                names.append(ix.name)
                continue
            parts, offset = _expand(ix, inverted[group_of[id(access)]])
            if offset == 0 and len(parts) == 1 and parts[0][1] == 1:
                names.append(parts[0][0])  # h + r with h = x - r: just x
                continue
            t = nt.fresh_name(f"{access.tensor}_{mode}", taken)
            guard = (access.tensor, _level_of(types[access.tensor], mode))
            result.derivations.append(Derivation(t, parts, offset, guard))
            names.append(t)
        result.names[id(access)] = tuple(names)
        result.walked[id(access)] = []
    return result


def _invert(ix: nt.AffineIndex, x: str, lhs: nt.Access, accesses: list[nt.Access],
            types: dict[str, TensorType], inverted: dict[str, Derivation],
            taken: set[str]) -> Derivation:
    """``ix = x`` solved for one of its variables (none in ``taken``: derived already),
    preferring an output index and a coefficient +-1: that variable is then derived from
    the walked coordinate ``x`` (divided by a stride, ``h = (x - r) / 2``, where it has
    none). ``accesses`` are the operands multiplied with it, ``inverted`` the indices
    derived among them."""
    def others_can_locate(var: nt.IndexVar) -> bool:
        for access in accesses:
            for mode, sub in enumerate(access.indices):
                if sub == var and not types[access.tensor].levels[
                        _level_of(types[access.tensor], mode)].can_locate:
                    return False
        return True

    candidates = [(var, c) for var, c in ix.terms
                  if var.name not in taken and others_can_locate(var)]
    candidates.sort(key=lambda vc: (vc[0] not in lhs.indices, abs(vc[1]) != 1))
    if not candidates:
        raise ScheduleError(
            f"the subscript {ix} of a sparse operand cannot be walked: each of its "
            "variables is already derived or iterated by another sparse operand; store "
            "the operand in a format whose levels can all locate or find subsections "
            "(dense, hash, ordered compressed)")
    var, c = candidates[0]
    sign = 1 if c > 0 else -1
    rest = [(v, k) for v, k in ix.terms if v != var]
    parts = ((x, sign), *((v.name, -k * sign) for v, k in rest))
    expanded, offset = _expand(nt.AffineIndex(tuple((nt.IndexVar(v), k) for v, k in parts)),
                               inverted)
    return Derivation(var.name, expanded, -ix.offset * sign + offset,
                      _guard_of(var, lhs, accesses, types), abs(c))


def _guard_of(var: nt.IndexVar, lhs: nt.Access, accesses: list[nt.Access],
              types: dict[str, TensorType]) -> tuple[str, int]:
    """The level whose extent bounds a derived ``var``: the output's, else an operand's
    that is indexed by it plainly."""
    for access in [lhs, *accesses]:
        if var in access.indices:
            mode = access.indices.index(var)
            return access.tensor, _level_of(types[access.tensor], mode)
    raise ScheduleError(f"index {var} is derived from a sparse operand's coordinates, "
                        "but no output or operand indexed by it plainly gives its extent")


def _expand(ix: nt.AffineIndex, inverted: dict[str, Derivation]) -> tuple[Parts, int]:
    """``ix`` over loop variables: derived ones replaced by their sums (those divided by
    a stride are kept: they are bound, as derived indices, before ``ix``)."""
    merged: dict[str, int] = {}
    offset = ix.offset
    for var, c in ix.terms:
        d = inverted.get(var.name)
        if d is None or d.divisor != 1:  # a strided one stays a term, bound before
            merged[var.name] = merged.get(var.name, 0) + c
            continue
        offset += c * d.offset
        for part, k in d.parts:
            merged[part] = merged.get(part, 0) + c * k
    return tuple((v, c) for v, c in merged.items() if c), offset


def valid_extent(var: nt.IndexVar, accesses: list[nt.Access], extents: dict[str, int],
                 shapes: dict[str, tuple[int, ...]]) -> int | None:
    """The extent of an index seen only in affine subscripts ('valid' padding): the
    largest for which each of its subscripts stays inside its operand for every value
    of the other variables; None where it is in none. Other paddings are given."""
    best: int | None = None
    for access in accesses:
        for mode, ix in enumerate(access.indices):
            if not isinstance(ix, nt.AffineIndex) or var not in ix.vars:
                continue
            c = dict(ix.terms)[var]
            low = ix.offset + sum(k * (extents.get(v.name, 1) - 1)
                                  for v, k in ix.terms if v != var and k < 0)
            high = ix.offset + sum(k * (extents.get(v.name, 1) - 1)
                                   for v, k in ix.terms if v != var and k > 0)
            size = shapes[access.tensor][mode]
            # c * i + [low, high] within [0, size) for i in [0, n)
            n = (size - 1 - high) // c + 1 if c > 0 else low // -c + 1
            if (low < 0 if c > 0 else high > size - 1):
                n = 0
            best = max(n, 0) if best is None else min(best, max(n, 0))
    return best


def hoist_sums(expr: nt.Expr) -> nt.Expr:
    """``expr`` with sums out of the products that hold them (``sum_j(B*F) * G`` as
    ``sum_j(B*F*G)``, a sum of products distributing over +): an index derived from a
    walked operand's coordinates and another sum's variable are then bound in one loop
    nest, not split by a temporary. Sums of one variable on both sides stay."""
    if isinstance(expr, nt.Reduction):
        return nt.Reduction(expr.op, expr.var, hoist_sums(expr.body), expr.hidden)
    if not isinstance(expr, nt.Call):
        return expr
    args = [hoist_sums(a) for a in expr.args]
    if expr.op is not MUL:
        return nt.Call(expr.op, tuple(args))
    for k, arg in enumerate(args):
        other = args[1 - k]
        if isinstance(arg, nt.Reduction) and arg.op is ADD and not arg.hidden \
                and arg.var not in nt.free_vars(other) \
                and arg.var not in {r.var for r in nt.iter_reductions(other)}:
            rest = [*args[:k], arg.body, *args[k + 1:]]
            return nt.Reduction(ADD, arg.var, hoist_sums(nt.Call(MUL, tuple(rest))))
    return nt.Call(MUL, tuple(args))
