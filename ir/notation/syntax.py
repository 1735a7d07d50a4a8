"""Index notation: the AST every front end produces, and a parser for its text form.

The text form is ``y(i) = A(i,j) * x(j)``. Index variables that are not on the left-hand
side are summed; ``place_reductions`` makes those sums explicit so later stages never
have to guess where a reduction belongs. ``format_expr`` prints explicit reductions as
``sum_j(...)`` (``min(j, ...)`` for other operators), which ``notation_parse.parse``
reads back, so every AST the parser produces round-trips.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from .operators import ADD, COMPARISONS, DIV, MUL, NEG, SUB, Operator
from .subscripts import AffineIndex, Index, IndexVar, NotationError, index_vars_of

REDUCTION_PREFIX = "sum_"
"""Names starting with this introduce a reduction, so tensors may not use it."""

class _Formatted:
    """Mixin: ``str()`` of a node is its index-notation text."""

    def __str__(self) -> str:
        return format_expr(self)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Access(_Formatted):
    """A tensor read (or, on the left-hand side, written) at some subscripts: index
    variables, or affine sums of them on the right-hand side."""

    tensor: str
    indices: tuple[Index, ...] = ()
    # ``!B(i,j)``: 1 where B stores nothing, absent (contributing nothing) where it does.
    complement: bool = False

    @property
    def order(self) -> int:
        """Number of indices, i.e. the order the tensor must have."""
        return len(self.indices)


@dataclass(frozen=True)
class Literal(_Formatted):
    """A numeric constant; normalized to a plain finite int or float so it prints back."""

    value: int | float

    def __post_init__(self) -> None:
        value = self.value
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"a literal must be an int or float, not {type(value).__name__}")
        plain = int(value) if isinstance(value, numbers.Integral) else float(value)
        if isinstance(plain, float) and not math.isfinite(plain):
            raise ValueError(f"literal {plain!r} is not finite")
        object.__setattr__(self, "value", plain)


@dataclass(frozen=True)
class Call(_Formatted):
    """An operator applied to sub-expressions."""

    op: Operator
    args: tuple[Expr, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.args, tuple):
            object.__setattr__(self, "args", tuple(self.args))
        if len(self.args) != self.op.arity:
            raise ValueError(f"{self.op!r} takes {self.op.arity} operands, got {len(self.args)}")


@dataclass(frozen=True)
class Reduction(_Formatted):
    """``op`` folded over every value of ``var`` in ``body`` (``ADD`` is a sum).
    ``hidden``: a sum the compiler wrote (a diagonal use's), which, like the sums over
    storage-only levels, joins the enclosing product's loops, so an entry the operand
    does not store still annihilates there (README)."""

    op: Operator
    var: IndexVar
    body: Expr
    hidden: bool = False


Expr = Access | Literal | Call | Reduction


@dataclass(frozen=True)
class Assignment(_Formatted):
    """``lhs = rhs``; the compiler's unit of work."""

    lhs: Access
    rhs: Expr

    def accesses(self) -> list[Access]:
        """Every access, the left-hand side first, then the right-hand side left to right."""
        return [self.lhs, *iter_accesses(self.rhs)]

    def tensors(self) -> list[str]:
        """Tensor names without repeats: the output first, then inputs as they appear."""
        return list(dict.fromkeys(a.tensor for a in self.accesses()))


# ----------------------------------------------------------------------------- errors


class NotationSyntaxError(NotationError):
    """Text that is not index notation; ``column`` is the 0-based offset of the bad token."""

    def __init__(self, message: str, text: str, column: int):
        super().__init__(message, text, column)


# ----------------------------------------------------------------------------- traversal


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``expr``."""
    if isinstance(expr, Call):
        return expr.args
    if isinstance(expr, Reduction):
        return (expr.body,)
    return ()


def with_children(expr: Expr, new: tuple[Expr, ...]) -> Expr:
    """``expr`` with its direct sub-expressions replaced (same order as ``children``)."""
    if isinstance(expr, Call):
        return Call(expr.op, new)
    if isinstance(expr, Reduction):
        return Reduction(expr.op, expr.var, new[0], expr.hidden)
    return expr


def subexpressions(expr: Expr) -> Iterator[Expr]:
    """``expr`` and everything under it, parents first, in textual order; without
    recursion, since a product of 256 factors nests 256 deep."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def iter_accesses(expr: Expr) -> Iterator[Access]:
    """Accesses of ``expr`` in textual (left-to-right) order."""
    return (node for node in subexpressions(expr) if isinstance(node, Access))


def iter_reductions(expr: Expr) -> Iterator[Reduction]:
    """Reductions of ``expr``, outermost first."""
    if isinstance(expr, Reduction):
        yield expr
    for child in children(expr):
        yield from iter_reductions(child)


def free_vars(expr: Expr) -> set[IndexVar]:
    """Index variables used in ``expr`` and not bound by a reduction inside it."""
    if isinstance(expr, Access):
        return {v for ix in expr.indices for v in index_vars_of(ix)}
    if isinstance(expr, Reduction):
        return free_vars(expr.body) - {expr.var}
    result: set[IndexVar] = set()
    for child in children(expr):
        result |= free_vars(child)
    return result


def _free_in_order(expr: Expr) -> list[IndexVar]:
    """Free variables in order of first appearance, so reduction nesting is predictable."""
    free = free_vars(expr)
    seen = dict.fromkeys(v for a in iter_accesses(expr) for ix in a.indices
                         for v in index_vars_of(ix) if v in free)
    return list(seen)


def map_accesses(expr: Expr, replace: Callable[[Access], Expr]) -> Expr:
    """``expr`` with each access replaced by ``replace(access)``."""
    if isinstance(expr, Access):
        return replace(expr)
    kids = children(expr)
    return with_children(expr, tuple(map_accesses(c, replace) for c in kids)) if kids else expr


def rename_tensors(expr: Expr, names: Mapping[str, str]) -> Expr:
    """``expr`` with tensor names replaced per ``names`` (others kept)."""
    return map_accesses(expr, lambda a: Access(names.get(a.tensor, a.tensor), a.indices,
                                               a.complement))


def names_in_use(assignment: Assignment) -> set[str]:
    """Every tensor and index variable name of ``assignment``."""
    return set(assignment.tensors()) | {v.name for a in assignment.accesses()
                                        for ix in a.indices for v in index_vars_of(ix)}


def fresh_name(base: str, taken: set[str]) -> str:
    """``base__1`` (or the first of ``base__2``, ``base__3``, ... not in ``taken``), which
    is added to ``taken``: a name the compiler adds that no user name can clash with."""
    number = 1
    while f"{base}__{number}" in taken:
        number += 1
    taken.add(f"{base}__{number}")
    return f"{base}__{number}"


def negate(expr: Expr) -> Expr:
    """Unary minus; a literal absorbs it so ``-2`` is one constant, not an operation."""
    if isinstance(expr, Literal):
        return Literal(-expr.value)
    return Call(NEG, (expr,))


def index_vars(names: str) -> tuple[IndexVar, ...]:
    """Index variables from ``"i j k"`` or ``"i,j,k"``, for ``i, j, k = index_vars(...)``."""
    return tuple(IndexVar(n) for n in re.split(r"[\s,]+", names.strip()) if n)


# ----------------------------------------------------------------------------- reductions


def place_reductions(lhs: Access, rhs: Expr) -> Expr:
    """Sum each variable missing from ``lhs`` over the smallest subexpression using it.

    Placing the sum as deep as possible keeps ``b(i) - A(i,j)*x(j)`` from summing
    ``b`` too. Variables sharing a placement nest in order of first appearance.
    """
    pending = [v for v in _free_in_order(rhs) if v not in lhs.indices]
    return _place(rhs, pending)


def _place(expr: Expr, pending: list[IndexVar]) -> Expr:
    """Put each pending variable here unless exactly one child uses it, then recurse."""
    if not pending:
        return expr
    kids = children(expr)
    kid_vars = [free_vars(k) for k in kids]
    here = [v for v in pending if sum(v in fv for fv in kid_vars) != 1]
    new_kids = tuple(
        _place(k, [v for v in pending if v not in here and v in fv])
        for k, fv in zip(kids, kid_vars)
    )
    result = with_children(expr, new_kids) if kids else expr
    for var in reversed(here):
        result = Reduction(ADD, var, result)
    return result


# ----------------------------------------------------------------------------- validation


@dataclass
class _Locator:
    """Where the parser saw each node, so semantic errors can point at the text."""

    text: str | None = None
    nodes: dict[int, int] = field(default_factory=dict)
    indices: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def fail(self, message: str, node: object = None, index: int | None = None) -> NotationError:
        """An error located at ``node`` (or at its ``index``-th index), when known."""
        column = self.nodes.get(id(node))
        if index is not None and id(node) in self.indices:
            column = self.indices[id(node)][index]
        return NotationError(message, self.text, column)


def validate(assignment: Assignment, _where: _Locator | None = None) -> None:
    """Reject assignments the compiler cannot give a meaning to; raises NotationError."""
    where = _where or _Locator()
    _check_lhs_indices(assignment.lhs, where)
    _check_lhs_not_read(assignment, where)
    _check_orders(assignment, where)
    _check_name_kinds(assignment, where)
    _check_reductions(assignment, where)
    _check_lhs_covered(assignment, where)


def _check_lhs_indices(lhs: Access, where: _Locator) -> None:
    """Each output index must be distinct: ``A(i,i)`` on the left names no element set."""
    for pos, var in enumerate(lhs.indices):
        if isinstance(var, AffineIndex):
            message = (f"the left-hand side is indexed by variables; subscript '{var}' is "
                       "only allowed on the right-hand side")
            raise where.fail(message, lhs, pos)
        if var in lhs.indices[:pos]:
            message = f"index variable '{var}' is repeated on the left-hand side"
            raise where.fail(message, lhs, pos)


def _check_lhs_not_read(assignment: Assignment, where: _Locator) -> None:
    """Reading the output while writing it would need in-place update semantics."""
    name = assignment.lhs.tensor
    for access in iter_accesses(assignment.rhs):
        if access.tensor == name:
            message = (f"tensor '{name}' is both assigned and read; "
                       "in-place updates are not supported")
            raise where.fail(message, access)


def _check_orders(assignment: Assignment, where: _Locator) -> None:
    """A tensor has one order, so every access to it needs the same index count."""
    first: dict[str, Access] = {}
    for access in assignment.accesses():
        seen = first.setdefault(access.tensor, access)
        if seen.order != access.order:
            message = (f"tensor '{access.tensor}' is used with {_count(seen.order)} "
                       f"and with {_count(access.order)}")
            raise where.fail(message, access)


def _count(order: int) -> str:
    return f"{order} index" if order == 1 else f"{order} indices"


def _check_name_kinds(assignment: Assignment, where: _Locator) -> None:
    """A name is a tensor or an index variable, never both (``b(i) * i`` is ambiguous)."""
    rhs = assignment.rhs
    variables = {v.name for a in assignment.accesses() for ix in a.indices
                 for v in index_vars_of(ix)}
    variables |= {r.var.name for r in iter_reductions(rhs)}
    for access in assignment.accesses():
        if access.tensor.startswith(REDUCTION_PREFIX):
            message = f"tensor name '{access.tensor}' is reserved for reductions"
            raise where.fail(message, access)
        if access.tensor in variables:
            message = f"'{access.tensor}' is used both as a tensor and as an index variable"
            raise where.fail(message, access)


def _check_reductions(assignment: Assignment, where: _Locator) -> None:
    """Explicit sums must bind a variable that is used and not already bound."""
    outputs = set(assignment.lhs.indices)
    for red in iter_reductions(assignment.rhs):
        var = red.var.name
        if red.var in outputs:
            message = f"reduction variable '{var}' is also a left-hand-side index"
            raise where.fail(message, red)
        if red.var not in free_vars(red.body):
            message = f"reduction variable '{var}' is not used in the reduction's body"
            raise where.fail(message, red)
        for inner in iter_reductions(red.body):
            if inner.var == red.var:
                message = f"reduction over '{var}' is nested in another over '{var}'; rename one"
                raise where.fail(message, inner)


def _check_lhs_covered(assignment: Assignment, where: _Locator) -> None:
    """Every output index must be bound by the right-hand side; no broadcasting yet."""
    used = free_vars(assignment.rhs)
    for pos, var in enumerate(assignment.lhs.indices):
        if var not in used:
            message = (f"left-hand-side index '{var}' does not appear on the right-hand side "
                       "(broadcasting is not supported)")
            raise where.fail(message, assignment.lhs, pos)


# ----------------------------------------------------------------------------- printer

_PRECEDENCE = {ADD: 1, SUB: 1, MUL: 2, DIV: 2} | {op: 0 for op in COMPARISONS.values()}
_UNARY = 3
_ATOM = 4


def format_expr(expr: Expr | Assignment) -> str:
    """Index-notation text for ``expr``; ``parse``/``parse_expr`` read it back unchanged."""
    if isinstance(expr, Assignment):
        return f"{format_expr(expr.lhs)} = {format_expr(expr.rhs)}"
    return _format(expr)[0]


def _format(expr: Expr) -> tuple[str, int]:
    """Text and precedence of ``expr``, so parents add only the parentheses they need."""
    if isinstance(expr, Access):
        mark = "!" if expr.complement else ""
        if not expr.indices:
            return mark + expr.tensor, _ATOM
        return f"{mark}{expr.tensor}({','.join(str(v) for v in expr.indices)})", _ATOM
    if isinstance(expr, Literal):
        text = repr(expr.value)
        return text, _UNARY if text.startswith("-") else _ATOM
    if isinstance(expr, Reduction):
        if expr.op == ADD:
            return f"sum_{expr.var.name}({format_expr(expr.body)})", _ATOM
        return f"{expr.op.name}({expr.var.name}, {format_expr(expr.body)})", _ATOM
    return _format_call(expr)


def _format_call(call: Call) -> tuple[str, int]:
    if call.op == NEG:
        inner = _operand(call.args[0], _UNARY)
        return f"-({inner})" if inner.startswith("-") else f"-{inner}", _UNARY
    prec = _PRECEDENCE.get(call.op)
    if prec is None:
        args = ", ".join(format_expr(a) for a in call.args)
        return f"{call.op.name}({args})", _ATOM
    left, left_prec = _format(call.args[0])  # one frame per level: 256 factors nest deep
    right, right_prec = _format(call.args[1])
    left = left if left_prec > prec or left_prec == prec > 0 else f"({left})"
    right = right if right_prec > prec else f"({right})"  # left-associative
    return f"{left} {call.op.symbol} {right}", prec


def _operand(expr: Expr, minimum: int) -> str:
    text, prec = _format(expr)
    return text if prec >= minimum else f"({text})"

