"""NumPy's elementwise functions as index-notation expressions: the mapping table.

Each numpy ufunc the front end knows names the notation it becomes, written as notation
text over placeholder operands (``exp(p0(i))``). The text is parsed on first use; an
entry whose notation would not parse raises a TypeError naming both the numpy function
and the notation it needs. ``+ - * /`` and negation use the notation's own
operators, which every version has.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.notation import syntax as nt
from ..ir.notation.operators import ADD, DIV, MUL, SUB
from .parse import parse_expr

# numpy ufunc name -> candidate notation texts over placeholders p0, p1, p2 (the first
# the notation parses into an expression, not a tensor access, is used).
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "exp": ("exp(p0(i))",),
    "log": ("log(p0(i))",),
    "sqrt": ("sqrt(p0(i))",),
    "absolute": ("abs(p0(i))",),
    "minimum": ("min(p0(i), p1(i))",),
    "maximum": ("max(p0(i), p1(i))",),
    "power": ("pow(p0(i), p1(i))", "p0(i) ** p1(i)"),
    "where": ("where(p0(i), p1(i), p2(i))",),
    "logical_and": ("and(p0(i), p1(i))", "p0(i) and p1(i)", "p0(i) & p1(i)"),
    "logical_or": ("or(p0(i), p1(i))", "p0(i) or p1(i)", "p0(i) | p1(i)"),
    "logical_xor": ("xor(p0(i), p1(i))", "p0(i) xor p1(i)", "p0(i) ^ p1(i)"),
    "logical_not": ("not(p0(i))", "not p0(i)", "!p0(i)"),
    "less": ("p0(i) < p1(i)",),
    "less_equal": ("p0(i) <= p1(i)",),
    "equal": ("p0(i) == p1(i)",),
    "not_equal": ("p0(i) != p1(i)",),
    "greater": ("p0(i) > p1(i)",),
    "greater_equal": ("p0(i) >= p1(i)",),
}

# ufuncs that are the notation's own binary operators.
OPERATORS = {"add": ADD, "subtract": SUB, "multiply": MUL, "true_divide": DIV, "divide": DIV}

class UnsupportedFunctionError(TypeError):
    """A numpy function this front end maps to notation that the notation lacks."""


def is_known(name: str) -> bool:
    """Whether numpy function ``name`` maps to notation (possibly not there yet)."""
    return name in FUNCTIONS or name in OPERATORS or name == "negative"


_PARSED: dict[str, nt.Expr] = {}


def _template(name: str) -> nt.Expr | None:
    """The parsed notation of numpy function ``name``; None where the notation has none
    (asked again next time: a function may be registered meanwhile)."""
    if name in _PARSED:
        return _PARSED[name]
    for text in FUNCTIONS[name]:
        try:
            expr = parse_expr(text)
        except nt.NotationError:
            continue
        if not isinstance(expr, nt.Access):  # "exp(p0(i))" is no tensor named exp
            _PARSED[name] = expr
            return expr
    return None


def build(name: str, args: tuple[nt.Expr, ...]) -> nt.Expr:
    """``name`` (a numpy ufunc's name) applied to notation ``args``."""
    if name in OPERATORS:
        return nt.Call(OPERATORS[name], args)
    if name == "negative":
        return nt.negate(args[0])
    template = _template(name)
    if template is None:
        written = FUNCTIONS[name][0].replace("p0(i)", "a").replace("p1(i)", "b") \
            .replace("p2(i)", "c")
        raise UnsupportedFunctionError(
            f"np.{name} maps to the index notation {written!r}, which this version of the "
            "notation does not have yet")
    slots = {f"p{k}": arg for k, arg in enumerate(args)}
    return nt.map_accesses(template, lambda a: slots[a.tensor])


def numpy_function(name: str) -> Callable[..., object]:
    """The numpy function itself, to judge what it gives at fill values."""
    return getattr(np, name)
