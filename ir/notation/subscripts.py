"""Subscripts of index notation: index variables and their affine sums (``h + r``,
``2*i + r``, ``i - 1``, paper 000), and the error a meaningless expression raises.

A module of its own, below ``notation``, which re-exports what is defined here: the
arithmetic of IndexVar builds AffineIndex, so the two live together.
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def is_valid_name(name: str) -> bool:
    """Whether ``name`` can be written in index notation (and later in generated code)."""
    return bool(_NAME_RE.match(name))


class NotationError(ValueError):
    """A well-formed but meaningless expression; carries the location when parsed."""

    def __init__(self, message: str, text: str | None = None, column: int | None = None):
        super().__init__(message, text, column)
        self.message = message
        self.text = text
        self.column = column

    def __str__(self) -> str:
        if self.column is None:
            return self.message
        head = f"{self.message} at column {self.column}"
        if self.text is None:
            return head
        shown = re.sub(r"\s", " ", self.text)  # keep the caret aligned under newlines/tabs
        return f"{head}\n    {shown}\n    {' ' * self.column}^"


@dataclass(frozen=True)
class IndexVar:
    """An index variable such as ``i``; also the object users index tensors with."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not is_valid_name(self.name):
            raise ValueError(f"invalid index variable name {self.name!r}")

    def __str__(self) -> str:
        return self.name

    def __array__(self, dtype=None, copy=None):
        """numpy indexing converts an index it does not know with ``__array__``: say what
        to do instead of numpy's IndexError about valid indices."""
        raise TypeError(f"index variable {self.name!r} cannot index a numpy array (or a "
                        "scipy matrix); wrap the array as a tensor first: "
                        f"ls.asarray(x)[{self.name}] (or ls.Tensor.from_numpy(x))")


    # ``i + r``, ``2 * i``, ``i - 1``: affine subscripts (paper 000's convolutions).
    def __add__(self, other: object) -> AffineIndex | IndexVar:
        return affine(self) + other

    __radd__ = __add__

    def __sub__(self, other: object) -> AffineIndex | IndexVar:
        return affine(self) - other

    def __rsub__(self, other: object) -> AffineIndex | IndexVar:
        return -affine(self) + other

    def __neg__(self) -> AffineIndex | IndexVar:
        return -affine(self)

    def __mul__(self, other: object) -> AffineIndex | IndexVar:
        return affine(self) * other

    __rmul__ = __mul__


@dataclass(frozen=True)
class AffineIndex:
    """A subscript ``sum(coefficient * var) + offset`` (``h + r``, ``2*i + r``, ``i - 1``):
    integer coefficients, none zero, each variable once. Built by ``affine`` and the
    arithmetic of IndexVar, which give back a plain IndexVar where the sum is one."""

    terms: tuple[tuple[IndexVar, int], ...]
    offset: int = 0

    @property
    def vars(self) -> tuple[IndexVar, ...]:
        return tuple(var for var, _ in self.terms)

    def __str__(self) -> str:
        text = ""
        for var, c in self.terms:
            sign = "-" if c < 0 else ("+" if text else "")
            text += f"{sign}{'' if abs(c) == 1 else f'{abs(c)}*'}{var}"
        if self.offset or not text:
            text += f"{'+' if text and self.offset >= 0 else ''}{self.offset}"
        return text

    def __add__(self, other: object) -> AffineIndex | IndexVar:
        right = affine(other)
        merged = dict(self.terms)
        for var, c in right.terms:
            merged[var] = merged.get(var, 0) + c
        return _simplest(AffineIndex(tuple((v, c) for v, c in merged.items() if c),
                                     self.offset + right.offset))

    __radd__ = __add__

    def __neg__(self) -> AffineIndex | IndexVar:
        return _simplest(AffineIndex(tuple((v, -c) for v, c in self.terms), -self.offset))

    def __sub__(self, other: object) -> AffineIndex | IndexVar:
        return self + -affine(other)

    def __rsub__(self, other: object) -> AffineIndex | IndexVar:
        return -self + other

    def __mul__(self, other: object) -> AffineIndex | IndexVar:
        if isinstance(other, bool) or not isinstance(other, numbers.Integral):
            raise NotationError(f"a subscript is affine: {self} can only be multiplied by "
                                f"an integer, not {other!r}")
        k = int(other)
        return _simplest(AffineIndex(tuple((v, c * k) for v, c in self.terms if c * k),
                                     self.offset * k))

    __rmul__ = __mul__


def affine(value: object) -> AffineIndex:
    """``value`` (an index variable, an integer or an affine subscript) as an
    AffineIndex; anything else is not affine and raises NotationError."""
    if isinstance(value, AffineIndex):
        return value
    if isinstance(value, IndexVar):
        return AffineIndex(((value, 1),))
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return AffineIndex((), int(value))
    raise NotationError(f"a subscript is affine (index variables times integers, plus an "
                        f"integer): {value!r} cannot be part of one")


def _simplest(index: AffineIndex) -> AffineIndex | IndexVar:
    if index.offset == 0 and len(index.terms) == 1 and index.terms[0][1] == 1:
        return index.terms[0][0]
    return index


Index = IndexVar | AffineIndex


def index_vars_of(index: Index) -> tuple[IndexVar, ...]:
    """The index variables a subscript uses."""
    return index.vars if isinstance(index, AffineIndex) else (index,)
