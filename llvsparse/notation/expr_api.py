"""Python operator API: ``y[i] = A[i, j] * x[j]`` builds the same AST as ``parse``.

Tensor objects are bound into expressions by identity, and receive their names only when
an expression is finished (``ExprNode.expr``, ``make_assignment``): a tensor's ``.name``
if it has one, otherwise ``T0``, ``T1``... in order of first appearance. Deferring the
naming keeps auto names small and deterministic per expression.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Mapping

from llvsparse.ir.notation.operators import (
    ADD,
    BINARY_BY_SYMBOL,
    BUILTINS,
    DIV,
    EQ,
    GE,
    GT,
    LE,
    LT,
    MUL,
    NE,
    REDUCTION_ALIASES,
    SUB,
    Operator,
    lookup,
)
from llvsparse.ir.notation.operators import semiring as _semiring
from llvsparse.ir.notation.subscripts import is_valid_name
from llvsparse.ir.notation.syntax import (
    REDUCTION_PREFIX,
    Access,
    AffineIndex,
    Assignment,
    Call,
    Expr,
    IndexVar,
    Literal,
    NotationError,
    Reduction,
    index_vars,
    iter_accesses,
    negate,
    place_reductions,
    rename_tensors,
    validate,
)

__all__ = [
    "ExprNode",
    "IndexVar",
    "TensorAccess",
    "access",
    "index_vars",
    "make_assignment",
]

_KEY_PREFIX = "#"  # never a valid tensor name, so keys cannot collide with real names


def _key(obj: object) -> str:
    """Placeholder tensor name for ``obj``; stable while an expression holds ``obj``."""
    return f"{_KEY_PREFIX}{id(obj)}"


class ExprNode:
    """An index-notation expression under construction; combine with ``+ - * /``."""

    __slots__ = ("_objects", "_raw")
    __array_ufunc__ = None  # make numpy scalars/arrays defer to our reflected operators

    def __init__(self, expr: Expr):
        self._raw: Expr = expr
        self._objects: dict[str, object] = {}

    @classmethod
    def _bound(cls, raw: Expr, objects: Mapping[str, object]) -> ExprNode:
        node = cls.__new__(cls)
        node._raw = raw
        node._objects = dict(objects)
        return node

    @property
    def expr(self) -> Expr:
        """The AST, with bound tensors under their final names (reductions not placed)."""
        return rename_tensors(self._raw, _resolve_names(self._objects, self._raw))

    @property
    def operands(self) -> dict[str, object]:
        """Name -> tensor object for every access taken from a Python object."""
        names = _resolve_names(self._objects, self._raw)
        return {names[key]: obj for key, obj in self._objects.items()}

    def _combine(self, op: Operator, other: object, reflected: bool = False) -> ExprNode:
        rhs = _coerce(other)
        if rhs is None:
            return NotImplemented
        left, right = (rhs, self) if reflected else (self, rhs)
        objects = {**left._objects, **right._objects}
        return ExprNode._bound(Call(op, (left._raw, right._raw)), objects)

    def __add__(self, other: object) -> ExprNode:
        return self._combine(ADD, other)

    def __radd__(self, other: object) -> ExprNode:
        return self._combine(ADD, other, reflected=True)

    def __sub__(self, other: object) -> ExprNode:
        return self._combine(SUB, other)

    def __rsub__(self, other: object) -> ExprNode:
        return self._combine(SUB, other, reflected=True)

    def __mul__(self, other: object) -> ExprNode:
        return self._combine(MUL, other)

    def __rmul__(self, other: object) -> ExprNode:
        return self._combine(MUL, other, reflected=True)

    def __truediv__(self, other: object) -> ExprNode:
        return self._combine(DIV, other)

    def __rtruediv__(self, other: object) -> ExprNode:
        return self._combine(DIV, other, reflected=True)

    def __neg__(self) -> ExprNode:
        return ExprNode._bound(negate(self._raw), self._objects)

    # Comparisons build expressions (1 where true, else 0), as numpy's do arrays; so an
    # expression is not hashable.
    def __lt__(self, other: object) -> ExprNode:
        return self._combine(LT, other)

    def __le__(self, other: object) -> ExprNode:
        return self._combine(LE, other)

    def __gt__(self, other: object) -> ExprNode:
        return self._combine(GT, other)

    def __ge__(self, other: object) -> ExprNode:
        return self._combine(GE, other)

    def __eq__(self, other: object) -> ExprNode:  # type: ignore[override]
        return self._combine(EQ, other)

    def __ne__(self, other: object) -> ExprNode:  # type: ignore[override]
        return self._combine(NE, other)

    __hash__ = None  # type: ignore[assignment]

    def __pos__(self) -> ExprNode:
        return self

    def __bool__(self) -> bool:
        raise TypeError("an index expression has no truth value; compare results, not ASTs")

    def __repr__(self) -> str:
        try:
            return f"{type(self).__name__}({self.expr})"
        except NotationError as err:
            return f"<{type(self).__name__}: {err.message}>"


class TensorAccess(ExprNode):
    """``tensor[i, j]``: an access together with the tensor object it reads."""

    __slots__ = ("indices", "obj")

    def __init__(self, obj: object, indices: tuple[IndexVar, ...]):
        super().__init__(Access(_key(obj), indices))
        self._objects = {_key(obj): obj}
        self.obj = obj
        self.indices = indices

    @property
    def access(self) -> Access:
        """The AST node, under the tensor's resolved name."""
        result = self.expr
        assert isinstance(result, Access)
        return result

    def __invert__(self) -> ExprNode:
        """``~B[i, j]``: the complement, ``!B(i,j)`` in notation (see ``complement``)."""
        return complement(self)


def complement(node: object) -> ExprNode:
    """``!B(i,j)``: 1 where B stores nothing and absent where it stores an entry, so
    ``A[i, j] * ls.complement(B[i, j])`` keeps the entries of A where B has none."""
    if not isinstance(node, TensorAccess):
        raise TypeError("a complement is of one tensor access, as in ~B[i, j], not "
                        f"{type(node).__name__}")
    raw = node._raw
    assert isinstance(raw, Access)
    return ExprNode._bound(Access(raw.tensor, raw.indices, not raw.complement), node._objects)


def access(obj: object, indices: object) -> TensorAccess:
    """``obj[indices]`` for a tensor class's ``__getitem__``; checks against ``obj.order``."""
    return TensorAccess(obj, _check_indices(obj, indices))


def make_assignment(
    lhs_obj: object, indices: object, value: object
) -> tuple[Assignment, dict[str, object]]:
    """``lhs_obj[indices] = value``: the validated assignment and its name -> object map.

    The left-hand side comes first in the map, then inputs in order of appearance.
    """
    lhs_indices = _check_indices(lhs_obj, indices)
    node = _coerce(value)
    if node is None:
        raise TypeError(
            "the right-hand side must be an index expression or a number, "
            f"not {type(value).__name__}"
        )
    objects = {_key(lhs_obj): lhs_obj, **node._objects}
    names = _resolve_names(objects, node._raw)
    lhs = Access(names[_key(lhs_obj)], lhs_indices)
    rhs = rename_tensors(node._raw, names)
    assignment = Assignment(lhs, place_reductions(lhs, rhs))
    validate(assignment)
    return assignment, {names[key]: obj for key, obj in objects.items()}


def _coerce(value: object) -> ExprNode | None:
    """Expression nodes pass through, numbers become literals, anything else is refused."""
    if isinstance(value, ExprNode):
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return ExprNode(Literal(value))
    return None


def _check_indices(obj: object, indices: object) -> tuple[IndexVar, ...]:
    """Normalize ``t[i]``/``t[i, j]``/``t[()]`` to a tuple; catch misuse early."""
    result = (indices,) if isinstance(indices, (IndexVar, AffineIndex)) else indices
    if not isinstance(result, tuple):
        raise TypeError(_index_type_message(indices))
    for var in result:
        if not isinstance(var, (IndexVar, AffineIndex)):
            raise TypeError(_index_type_message(var))
    order = getattr(obj, "order", None)
    if isinstance(order, int) and not isinstance(order, bool) and order != len(result):
        raise NotationError(
            f"tensor {_label(obj)} has order {order} but is indexed with {len(result)} "
            f"index variable{'' if len(result) == 1 else 's'}"
        )
    return result


def _index_type_message(bad: object) -> str:
    return (
        "tensors are indexed with IndexVar objects "
        "(i, j = index_vars('i j'); then A[i, j], or affine sums such as A[i + 1, 2*j]), "
        f"not {type(bad).__name__} {bad!r}"
    )


def _label(obj: object) -> str:
    name = _given_name(obj)
    return repr(name) if name else f"of type {type(obj).__name__}"


def _given_name(obj: object) -> str | None:
    """The object's own ``.name``, if it has a usable one."""
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not name:
        return None
    if not is_valid_name(name) or name.startswith(REDUCTION_PREFIX):
        raise NotationError(
            f"tensor name {name!r} cannot be used in index notation: names are "
            f"identifiers ([A-Za-z_][A-Za-z0-9_]*) not starting with '{REDUCTION_PREFIX}'"
        )
    return name


def _resolve_names(objects: Mapping[str, object], raw: Expr) -> dict[str, str]:
    """Placeholder key -> final name: given names first, then ``T<n>`` for the rest."""
    names: dict[str, str] = {}
    for key, obj in objects.items():
        name = _given_name(obj)
        if name is None:
            continue
        if name in names.values():
            raise NotationError(f"two different tensors are both named {name!r}")
        names[key] = name
    taken = set(names.values()) | {a.tensor for a in iter_accesses(raw)}
    auto = (f"T{n}" for n in itertools.count() if f"T{n}" not in taken)
    for key in objects:
        if key not in names:
            names[key] = next(auto)
    return names


# ----------------------------------------------------------------------------- functions


def apply(op: Operator, *args: object) -> ExprNode:
    """``op`` applied to expressions or numbers; with an index variable and one
    expression, ``op`` reduced over that variable (``min(j, A[i, j] + x[j])``)."""
    if len(args) == 2 and isinstance(args[0], IndexVar):
        var, body = args
        node = _coerce(body)
        if node is None:
            raise TypeError(f"{op.name}({var}, ...) reduces an index expression, not "
                            f"{type(body).__name__}")
        if not op.is_monoid:
            raise NotationError(f"{op.name} cannot reduce over '{var}': a reduction needs a "
                                "two-argument operator that is associative and commutative, "
                                "has an identity, and gives 0 from 0 and 0 (a monoid)")
        return ExprNode._bound(Reduction(op, var, node._raw), node._objects)
    nodes = [_coerce(a) for a in args]
    for arg, node in zip(args, nodes):
        if node is None:
            raise TypeError(f"{op.name}() takes index expressions or numbers, not "
                            f"{type(arg).__name__}")
    if len(nodes) != op.arity:
        raise TypeError(f"{op.name}() takes {op.arity} argument(s), got {len(nodes)}")
    objects = {k: v for n in nodes for k, v in n._objects.items()}  # type: ignore[union-attr]
    return ExprNode._bound(Call(op, tuple(n._raw for n in nodes)), objects)  # type: ignore[union-attr]


def _builtin(name: str):
    op = BUILTINS[name]

    def function(*args: object) -> ExprNode:
        return apply(op, *args)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``{name}(...)`` of index notation (see README, Operators)."
    return function


min = _builtin("min")
max = _builtin("max")
abs = _builtin("abs")
pow = _builtin("pow")
exp, log, sqrt, where = (_builtin(n) for n in ("exp", "log", "sqrt", "where"))
logical_and, logical_or, logical_xor, logical_not = (_builtin(n) for n in (
    "and", "or", "xor", "not"))


def semiring(plus: str | Operator, times: str | Operator) -> tuple[Operator, Operator]:
    """The reduction and product operators of a semiring, by name or operator:
    ``semiring("min", "+")`` for shortest paths; see ``operators.semiring``."""
    return _semiring(_operator(plus), _operator(times))


def _operator(spec: str | Operator) -> Operator:
    if isinstance(spec, Operator):
        return spec
    op = BINARY_BY_SYMBOL.get(spec) or REDUCTION_ALIASES.get(spec) or lookup(spec)
    if op is None:
        raise ValueError(f"unknown operator {spec!r}")
    return op
