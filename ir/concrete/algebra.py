"""How operators act on fill values (paper 004 section 3): which arguments' absence
decides an operator's value, the value an expression has where it is absent, and the
iteration algebra written out for the dump.

Everything here follows from an operator's declared properties (annihilator, identity,
``absent_annihilates``, ``skips_absent``) and from evaluating it on the operands' fill
values and on probe values, never from its name.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable

from .expressions import Apply, Const, Expr, Operand, Sum

# Values a stored operand is tried with, to learn where an operator keeps one value:
# finite (an absent exact zero annihilates a product even against inf), small and huge
# ones (a > 10).
_PROBES = (1.0, -2.5, 3.0, 0.5, -0.75, 1e300, -1e300)
_NON_FINITE = (math.inf, -math.inf, math.nan)
# Several arguments absent at once are probed jointly, over every combination of probes
# for the present ones, up to this many evaluations (then one probe for all at a time).
_MAX_JOINT = 4096

FillOf = Callable[[Operand], float | None]  # None: never absent (stores every entry)


def zero_fill(_op: Operand) -> float:
    """Every operand's fill value is 0 (what a caller that knows no types assumes)."""
    return 0.0


def is_zero(value: float) -> bool:
    return not math.isnan(value) and value == 0


def same_value(a: float, b: float) -> bool:
    """Equal, NaN equal to NaN: fill values are compared as values a tensor holds."""
    return a == b or (math.isnan(a) and math.isnan(b))


def evaluate(op, args: list[float]) -> float:
    try:
        return float(op.evaluate(*args))
    except (ArithmeticError, ValueError):
        return math.nan


def is_complement(op: Operand) -> bool:
    """``!B``: present exactly where B stores nothing (value 1 there)."""
    return getattr(op, "complement", False)


@functools.cache  # operators are immutable values; one lattice asks many times
def annihilated_value(op, fills: tuple[float | None, ...], k: int) -> float | None:
    """The value ``op`` takes whatever its other arguments are, when argument ``k`` is
    absent (at its fill ``fills[k]``), or None. Declared first: a semiring's product
    (``absent_annihilates``) is absent where an argument is (its sum skips it; alone it
    has fill 0), and a binary operator's declared annihilator decides when it is the
    fill. Otherwise probed: an absent 0 is an exact zero that annihilates even against
    a stored inf or NaN (0 * inf is 0 where the 0 is not stored, as in scipy.sparse), so
    stored values are probed finite; any other fill is a plain value, probed against inf
    and NaN too (inf - inf is NaN). Stored zeros are probed with either: ``or(0, y)`` is
    not 1, nor ``and(1, y)`` 1, for every y, and an absent 0 over a stored 0 is 0 / 0 =
    NaN, no annihilation. Where the other arguments are absent too, the value is ``op``
    on the fills, whatever they are (an undeclared annihilation is IEEE's): 0 / NaN is
    no annihilation either, so A / (A / B) where neither stores an entry is NaN, not 0.
    A fill of None is one that depends on extents (``expr_fill``)."""
    fill = fills[k]
    if fill is None:
        return None
    if op.absent_annihilates:
        return 0.0
    if op.arity == 2 and op.annihilator is not None and same_value(fill, op.annihilator):
        return float(op.annihilator)  # declared: f(a, y) = f(x, a) = a
    # A stored 0 is a value too: and(1, 0) is 0, or(0, 0) is 0, where(0, a, b) is b,
    # and an absent 0 over it is 0 / 0 = NaN, as over a dense operand's 0.
    probes = (0.0, *_PROBES) if is_zero(fill) else (0.0, *_PROBES, *_NON_FINITE)
    others = _rows(probes + _fill_probes(fills), fills, (k,))
    if all(f is not None for f in fills):
        others.append(list(fills))
    values = [evaluate(op, args) for args in others]
    return values[0] if all(same_value(v, values[0]) for v in values) else None


def _fill_probes(fills: tuple[float | None, ...]) -> tuple[float, ...]:
    """The fills themselves as probe values: ``B != A`` with A's fill -1 is 1 for every
    generic probe of B, but not for a stored -1 (comparisons turn on equal values)."""
    return tuple(dict.fromkeys(f for f in fills if f is not None and not math.isnan(f)
                               and f not in _PROBES and f != 0.0))


def _rows(probes: tuple[float, ...], fills: tuple[float | None, ...],
          absent: tuple[int, ...]) -> list[list[float | None]]:
    """Arguments to probe an operator with: the ``absent`` ones at their fills, the
    others over every combination of ``probes`` (one probe for all at a time past
    _MAX_JOINT combinations)."""
    free = len(fills) - len(absent)
    if len(probes) ** free > _MAX_JOINT:
        return [[fills[k] if k in absent else y for k in range(len(fills))] for y in probes]
    choices = [(fills[k],) if k in absent else probes for k in range(len(fills))]
    return [list(row) for row in itertools.product(*choices)]


@functools.cache
def productive(op, fills: tuple[float | None, ...], present: tuple[bool, ...]) -> bool:
    """Whether ``op`` can take a value other than its fill where only the arguments
    marked ``present`` are stored (the others at their fills): not where one absent
    argument annihilates, nor where the absent ones together leave a value the present
    ones cannot change (``where(c, a, b)`` with only ``a`` stored and fill 0 picks the
    absent ``b``). An argument whose fill is None is never absent."""
    absent = [k for k, p in enumerate(present) if not p and fills[k] is not None]
    if not absent:
        return True
    if len(absent) == len(fills):
        return False  # every argument at its fill: the fill itself
    whole = apply_fill(op, fills)
    if whole is None:
        return True
    if any(annihilates(op, fills, k, whole) for k in absent):
        return False
    if len(absent) == 1:
        return True  # not annihilated: the present arguments change the value
    exact = any(is_zero(fills[k]) for k in absent)
    probes = (0.0, *_PROBES) if exact else (0.0, *_PROBES, *_NON_FINITE)
    rows = _rows(probes + _fill_probes(fills), fills, tuple(absent))
    values = [evaluate(op, row) for row in rows]
    return not all(same_value(v, whole) for v in values)


def annihilates(op, fills: tuple[float | None, ...], k: int, whole: float | None) -> bool:
    """Whether argument ``k`` absent gives ``op`` its fill ``whole`` whatever the others
    are: a NaN-fill argument forces NaN, but beside an absent exact zero (fill 0 * NaN
    is 0) the coordinates where only it is absent are NaN, not the fill."""
    forced = annihilated_value(op, fills, k)
    return forced is not None and whole is not None and same_value(forced, whole)


def apply_fill(op, fills: tuple[float | None, ...]) -> float | None:
    """``op``'s value where every argument is absent at ``fills``: an annihilating
    absent argument decides alone, an absent exact zero before any other (it
    annihilates even NaN); None where an argument's fill is None and none decides."""
    forced = [(not is_zero(f), value) for k, f in enumerate(fills)
              if f is not None and (value := annihilated_value(op, fills, k)) is not None]
    if forced:
        return min(forced, key=lambda pair: pair[0])[1]
    if all(f is not None for f in fills):
        return evaluate(op, list(fills))
    return None


@functools.cache
def acts_as_identity(op, k: int, identity: float) -> bool:
    """Whether ``identity`` at argument ``k`` of a binary ``op`` leaves the other
    argument as it is (or's declared identity 0 does not: or(0, 2.5) is 1)."""
    return all(same_value(evaluate(op, [identity, y] if k == 0 else [y, identity]), y)
               for y in _PROBES)


def expr_fill(expr: Expr, fill_of: FillOf, memo: dict[int, float | None] | None = None
              ) -> float | None:
    """The value of ``expr`` where it is absent: its operands at their fill values, an
    annihilating absent argument deciding alone (see ``annihilated_value``), a sum over
    no stored entry its operator's identity, a complement 0 (its operand is present).
    None where it depends on extents: a sum of a term absent at 2 is 2 * n."""
    memo = {} if memo is None else memo
    key = id(expr)
    if key in memo:
        return memo[key]
    value: float | None
    if isinstance(expr, Operand):
        fill = fill_of(expr)
        value = 0.0 if is_complement(expr) else None if fill is None else float(fill)
    elif isinstance(expr, Const):
        value = float(expr.value)
    elif isinstance(expr, Sum):
        value = sum_fill(expr, expr_fill(expr.body, fill_of, memo))
    else:
        assert isinstance(expr, Apply)
        value = apply_fill(expr.op, tuple(expr_fill(a, fill_of, memo) for a in expr.args))
    memo[key] = value
    return value


def sum_fill(expr: Sum, body: float | None) -> float | None:
    """A sum's value where its body is absent at ``body``: the identity over nothing (a
    semiring's sum skips absent entries, whatever they hold), ``body`` itself where
    folding it changes nothing (inf + inf, min(0, 0)), else None (n * body)."""
    identity = expr.op.identity
    if identity is not None and expr.op.skips_absent:
        return float(identity)
    if body is None:
        return None
    if identity is not None and same_value(body, float(identity)):
        return float(identity)
    return body if same_value(evaluate(expr.op, [body, body]), body) else None


def region(op, fills: tuple[float, ...] | float = 0.0) -> str:
    """'intersection', 'union', 'left' (first argument's region), 'right', 'same'
    (unary) or, for three or more arguments, 'general' (see ``productive``): from
    which arguments' absence annihilates at these fill values."""
    fills = (float(fills),) * op.arity if isinstance(fills, (int, float)) else tuple(fills)
    if op.arity == 1:
        return "same"
    if op.arity > 2:
        return "general"
    whole = apply_fill(op, fills)
    left, right = (annihilates(op, fills, k, whole) for k in (0, 1))
    return {(True, True): "intersection", (True, False): "left",
            (False, True): "right"}.get((left, right), "union")


def region_text(expr: Expr, fill_of: FillOf, name: Callable[[Operand], str] = str) -> str:
    """The iteration algebra of ``expr`` (paper 004 section 3): arguments whose absence
    annihilates intersect, the rest unite, a complement is written with ¬ and a literal
    is the universe U (left out of a union with anything else)."""
    memo: dict[int, float | None] = {}

    def walk(node: Expr) -> str:
        if isinstance(node, Operand):
            return f"¬{name(node)}" if is_complement(node) else name(node)
        if isinstance(node, Const):
            return "U"
        if isinstance(node, Sum):
            return walk(node.body)
        fills = tuple(expr_fill(a, fill_of, memo) for a in node.args)
        parts = [walk(a) for a in node.args]
        whole = apply_fill(node.op, fills)
        meet = [p for k, p in enumerate(parts) if annihilates(node.op, fills, k, whole)]
        if meet:
            return " ∩ ".join(_grouped(p) for p in dict.fromkeys(meet)) \
                if len(set(meet)) > 1 else meet[0]
        joined = [p for p in dict.fromkeys(parts) if p != "U"] or ["U"]
        return " ∪ ".join(_grouped(p) for p in joined) if len(joined) > 1 else joined[0]

    return walk(expr)


def _grouped(text: str) -> str:
    return f"({text})" if " " in text else text
