"""Operators of index notation, described by their algebraic properties.

Nothing in the compiler special-cases ``+`` or ``*``: the iteration algebra is derived
from how an operator behaves on fill values (see ``llvsparse.ir.algebra``), and code is
emitted from ``kind``. A user-defined operator supplies the same description.
"""

from __future__ import annotations

import math
import operator as _op
from collections.abc import Callable
from dataclasses import dataclass, field


def _true_divide(a: float, b: float) -> float:
    """Python division with numpy's IEEE results for a zero divisor."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


@dataclass(frozen=True)
class Operator:
    """An n-ary scalar operator.

    ``kind`` selects the code emitted for it; ``evaluate`` computes it in Python so the
    compiler can reason about fill values; ``identity``/``annihilator`` feed reductions.
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

    def __repr__(self) -> str:
        return f"Operator({self.name})"


ADD = Operator("add", "+", 2, "add", _op.add, identity=0, commutative=True, associative=True)
SUB = Operator("sub", "-", 2, "sub", _op.sub)
MUL = Operator("mul", "*", 2, "mul", _op.mul, identity=1, annihilator=0,
               commutative=True, associative=True)
DIV = Operator("div", "/", 2, "div", _true_divide)
NEG = Operator("neg", "-", 1, "neg", _op.neg)

BINARY_BY_SYMBOL: dict[str, Operator] = {"+": ADD, "-": SUB, "*": MUL, "/": DIV}
