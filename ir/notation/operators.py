"""Operators of index notation, described by their algebraic properties.

Nothing in the compiler special-cases ``+`` or ``*``: the iteration algebra is derived
from how an operator behaves on fill values (see ``llvsparse.ir.concrete.lattice``), and code is
emitted from ``kind`` (``llvsparse.backends.llvm.scalars``). A user-defined function supplies the
same description, with ``template`` (its body over builtin operators) in place of a kind.
"""

from __future__ import annotations

import math
import operator as _op
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


def _true_divide(a: float, b: float) -> float:
    """Python division with numpy's IEEE results for a zero divisor."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


@dataclass(frozen=True)
class Param:
    """The ``index``-th argument of a user function's body."""

    index: int


@dataclass(frozen=True)
class Node:
    """A builtin operator applied inside a user function's body."""

    op: Operator
    args: tuple[Template, ...]


Template = Param | float | Node


@dataclass(frozen=True)
class Operator:
    """An n-ary scalar operator.

    ``kind`` selects the code emitted for it (``template``, when set, is emitted instead:
    a user function's body); ``evaluate`` computes it in Python so the compiler can reason
    about fill values; ``identity``/``annihilator``/``commutative``/``associative``/
    ``idempotent`` are its declared algebra (a reduction needs a commutative, associative
    operator with an identity). ``float_result``: integer operands give a float result,
    as numpy's. ``bool_result``: it gives a truth value, a bool result as numpy's
    comparisons and logical functions give (the kernel computes it as 1 or 0 in its
    own dtype and stores it as bool); ``truth_args``: arguments read only for their
    truth (``where``'s condition), which take no part in the result's dtype.
    ``absent_annihilates`` (a semiring's product) and ``skips_absent`` (its
    sum) read an entry a tensor does not store as the semiring's zero rather than 0.
    """

    name: str
    symbol: str
    arity: int
    kind: str
    evaluate: Callable[..., float] = field(compare=False)
    identity: float | None = None
    annihilator: float | None = None
    commutative: bool = False
    associative: bool = False
    idempotent: bool = False
    float_result: bool = False
    template: Template | None = None
    absent_annihilates: bool = False
    skips_absent: bool = False
    bool_result: bool = False
    truth_args: tuple[int, ...] = ()

    def __repr__(self) -> str:
        return f"Operator({self.name})"

    @property
    def is_monoid(self) -> bool:
        """Whether the operator can reduce: binary, associative, commutative, with an
        identity, and mapping two fill values (0) to the fill value, so a slice that
        stores nothing reduces to nothing."""
        return (self.arity == 2 and self.associative and self.commutative
                and self.identity is not None and _fill_preserved(self))


def _fill_preserved(op: Operator) -> bool:
    value = op.evaluate(0.0, 0.0)
    return not math.isnan(value) and value == 0


def _numpy(function: Callable[..., object]) -> Callable[..., float]:
    """A numpy ufunc on Python floats, with numpy's inf/NaN results and no warnings."""
    def evaluate(*args: float) -> float:
        with np.errstate(all="ignore"):
            return float(function(*(np.float64(a) for a in args)))
    return evaluate


def _where(c: float, a: float, b: float) -> float:
    return float(np.where(c, a, b))


ADD = Operator("add", "+", 2, "add", _op.add, identity=0, commutative=True, associative=True)
SUB = Operator("sub", "-", 2, "sub", _op.sub)
MUL = Operator("mul", "*", 2, "mul", _op.mul, identity=1, annihilator=0,
               commutative=True, associative=True)
DIV = Operator("div", "/", 2, "div", _true_divide, float_result=True)
NEG = Operator("neg", "-", 1, "neg", _op.neg)

# No annihilator: min(-inf, NaN) is NaN in numpy, so an absent -inf decides nothing
# where a stored value may be NaN (the probes of ir/concrete/algebra.py find that out).
MIN = Operator("min", "min", 2, "min", _numpy(np.minimum), identity=math.inf,
               commutative=True, associative=True, idempotent=True)
MAX = Operator("max", "max", 2, "max", _numpy(np.maximum), identity=-math.inf,
               commutative=True, associative=True, idempotent=True)
LT = Operator("lt", "<", 2, "lt", _numpy(np.less), bool_result=True)
LE = Operator("le", "<=", 2, "le", _numpy(np.less_equal), bool_result=True)
EQ = Operator("eq", "==", 2, "eq", _numpy(np.equal), bool_result=True, commutative=True)
NE = Operator("ne", "!=", 2, "ne", _numpy(np.not_equal), bool_result=True, commutative=True)
GT = Operator("gt", ">", 2, "gt", _numpy(np.greater), bool_result=True)
GE = Operator("ge", ">=", 2, "ge", _numpy(np.greater_equal), bool_result=True)
AND = Operator("and", "and", 2, "and", _numpy(np.logical_and), identity=1, annihilator=0,
               commutative=True, associative=True, bool_result=True)
OR = Operator("or", "or", 2, "or", _numpy(np.logical_or), identity=0, annihilator=1,
              commutative=True, associative=True, bool_result=True)
XOR = Operator("xor", "xor", 2, "xor", _numpy(np.logical_xor), identity=0,
               commutative=True, associative=True, bool_result=True)
NOT = Operator("not", "not", 1, "not", _numpy(np.logical_not), bool_result=True)
ABS = Operator("abs", "abs", 1, "abs", _numpy(np.abs))
EXP = Operator("exp", "exp", 1, "exp", _numpy(np.exp), float_result=True)
LOG = Operator("log", "log", 1, "log", _numpy(np.log), float_result=True)
SQRT = Operator("sqrt", "sqrt", 1, "sqrt", _numpy(np.sqrt), float_result=True)
POW = Operator("pow", "pow", 2, "pow", _numpy(np.power), float_result=True)
WHERE = Operator("where", "where", 3, "where", _where, truth_args=(0,))

BINARY_BY_SYMBOL: dict[str, Operator] = {"+": ADD, "-": SUB, "*": MUL, "/": DIV}
COMPARISONS: dict[str, Operator] = {op.symbol: op for op in (LT, LE, EQ, NE, GT, GE)}
BUILTINS: dict[str, Operator] = {op.name: op for op in (
    ADD, SUB, MUL, DIV, NEG, MIN, MAX, LT, LE, EQ, NE, GT, GE, AND, OR, XOR, NOT, ABS, EXP,
    LOG, SQRT, POW, WHERE)}
"""Every builtin operator by the name a call uses: ``min(a, b)``, ``lt(a, b)``, ..."""

REDUCTION_ALIASES: dict[str, Operator] = {"sum": ADD, "prod": MUL}
"""Names that only reduce: ``sum(j, ...)`` is ``sum_j(...)``, ``prod(j, ...)`` a product."""

_USER: dict[str, Operator] = {}


def lookup(name: str) -> Operator | None:
    """The builtin or user-defined operator called ``name``, if any."""
    return BUILTINS.get(name) or _USER.get(name)


def register(op: Operator) -> Operator:
    """Make a user function callable by name; a builtin name, or a user name already
    defined differently, is refused (kernels are cached by the expression's text)."""
    if op.name in BUILTINS or op.name in REDUCTION_ALIASES:
        raise ValueError(f"'{op.name}' is a builtin operator and cannot be redefined; "
                         "choose another name")
    old = _USER.get(op.name)
    if old is not None and old != op:
        raise ValueError(f"function '{op.name}' is already defined with another body or "
                         "properties; choose another name")
    return _USER.setdefault(op.name, op)


def user_operators(ops: list[Operator]) -> str:
    """The definitions of the user functions among ``ops``, for cache keys: a name is
    defined once per process, but a disk cache outlives the process."""
    return ";".join(sorted({repr((op.name, op.template, op.identity, op.annihilator,
                                   op.commutative, op.associative, op.idempotent))
                            for op in ops if op.template is not None}))


def evaluate_template(template: Template, args: tuple[float, ...]) -> float:
    """A user function's body on Python floats, through the builtins' ``evaluate``."""
    if isinstance(template, Param):
        return float(args[template.index])
    if isinstance(template, Node):
        return template.op.evaluate(*(evaluate_template(t, args) for t in template.args))
    return float(template)


def semiring(plus: Operator, times: Operator) -> tuple[Operator, Operator]:
    """The reduction and product of the semiring (``plus``, ``times``): an entry a tensor
    does not store is the semiring's zero (``plus``'s identity), which ``times`` must
    annihilate and ``plus`` skips, so only stored entries take part (min-plus
    shortest paths, or-and reachability)."""
    if not plus.is_monoid:
        raise ValueError(f"{plus.name} cannot be a semiring's sum: it needs two arguments, "
                         "an identity, commutativity and associativity")
    if times.arity != 2:
        raise ValueError(f"{times.name} cannot be a semiring's product: it needs two "
                         "arguments")
    name = f"{plus.name}.{times.name}"
    return (Operator(f"{name}.sum", plus.symbol, 2, plus.kind, plus.evaluate, plus.identity,
                     plus.annihilator, True, True, plus.idempotent, plus.float_result,
                     plus.template, skips_absent=True),
            Operator(name, times.symbol, 2, times.kind, times.evaluate,
                     float_result=times.float_result, template=times.template,
                     absent_annihilates=True))
