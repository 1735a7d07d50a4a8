"""Terms broadcast along an output index, paid for only where they store something
(issue 32).

In ``Z(i,j) = A(j,i) + A(j,j)`` the term ``A(j,j)`` lacks ``i``: Z may hold an entry at
every ``(i, j)`` whose diagonal entry A stores, so the exact kernel walks i's whole extent
(a union with the universe), and for each i merges j against the diagonal again: O(n)
per call at least, O(n x rows of A) where A's upper level is a list, even where A's
diagonal holds nothing. No loop order avoids that for a row-major output.

So the terms are evaluated alone before each call, each by a kernel of its own into a
sparse result (bounded by its operands' entries). Where none stores an entry, every
term is its fill value everywhere, and the statement with each term replaced by that
fill (``A(j,i) + 0``) gives the same result while walking only what is stored; that
kernel then runs. Where a term stores an entry, the result holds it at every coordinate
of the missing index, so the exact kernel's walk is paid by the result's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..ir.errors import ScheduleError
from ..ir.notation import syntax as nt
from ..ir.notation.operators import Operator
from ..ir.notation.subscripts import IndexVar, NotationError
from ..tensors.format import Format, FormatError, as_format

# What a kernel factory is asked for: a statement, its inputs' formats, the output's,
# and whether the kernel is to bind as it is (not looking for broadcast terms itself).
Make = Callable[[nt.Assignment, dict[str, Format], Format, bool], Any]
_REFUSALS = (ScheduleError, FormatError, NotationError)


def broadcast_terms(assignment: nt.Assignment) -> list[nt.Expr]:
    """The largest sub-expressions of the right-hand side, reached through operators
    that read an absent entry as its plain value (``_by_value``), that read a tensor and
    use some, but not all, of the output's indices, each index plainly (no affine
    subscript): ``A(j,j)`` in ``A(j,i) + A(j,j)``, ``A(k,k,i)`` in ``A(i,j,k) /
    A(k,k,i)``. A term used twice (``A(i) / (A(i) / B(i,j))``) is listed once."""
    lhs = assignment.lhs.indices
    if not all(isinstance(ix, IndexVar) for ix in lhs):
        return []
    return list(dict.fromkeys(_broadcast(assignment.rhs, set(lhs))))  # each once


def _broadcast(expr: nt.Expr, lhs: set) -> Iterable[nt.Expr]:
    accesses = list(nt.iter_accesses(expr))
    free = nt.free_vars(expr)
    if accesses and free and free < lhs:
        if all(isinstance(ix, IndexVar) for a in accesses for ix in a.indices):
            yield expr
    elif isinstance(expr, nt.Call) and _by_value(expr.op):
        for arg in expr.args:
            yield from _broadcast(arg, lhs)


def _by_value(op: Operator) -> bool:
    """Whether ``op`` computes on its arguments' values alone, an absent entry read as
    its fill (no declared annihilator, no semiring's reading of absence): only then is
    a sub-expression under it the same as its fill wherever it stores nothing (under a
    product, an absent 0 annihilates even a NaN, where a literal 0 would not)."""
    return op.annihilator is None and not op.absent_annihilates and not op.skips_absent


def _substituted(expr: nt.Expr, new: dict[nt.Expr, nt.Expr]) -> nt.Expr:
    """``expr`` with each broadcast term in ``new`` replaced by its value there."""
    if expr in new:
        return new[expr]
    if isinstance(expr, nt.Call) and _by_value(expr.op):
        return nt.Call(expr.op, tuple(_substituted(arg, new) for arg in expr.args))
    return expr


def _literal(fill: object) -> nt.Literal | None:
    """A fill as a literal of its own type (an int stays an int: ``A(i) + 0`` keeps A's
    dtype), or None where no literal writes it (inf, NaN, complex, bool)."""
    value = fill.item() if isinstance(fill, np.generic) else fill
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return nt.Literal(value)
    except ValueError:  # not finite
        return None


def _summary(result: Any) -> tuple:
    """What a term's result is, to compare calls by: its fill where it stores nothing,
    else its coordinates and values (a term that stores entries is passed as one)."""
    fill = result.dtype.type(result.fill_value)  # (a float for ints)
    if not len(result.values):
        return (fill,)
    coords, values = result.to_coo()
    return fill, coords, values


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y, equal_nan=True)
                                    for x, y in zip(a, b))


class SameTerms:
    """A guard: whether the broadcast terms evaluate as when the binding was made (they
    are computed again on every call: the operands' values may have changed in place).
    ``loop_count``: the loop heads its term kernels ran (counting builds), part of the
    call's work."""

    def __init__(self, kernels: list[tuple[Any, list[str]]], tensors: dict,
                 expected: list[tuple] | None = None):
        self.kernels, self.tensors, self.expected = kernels, tensors, expected
        self.loop_count: int | None = None

    def evaluate(self) -> list[Any]:
        """Each term's result."""
        results, count = [], None
        for kernel, names in self.kernels:
            results.append(kernel(check=False, **{n: self.tensors[n] for n in names}))
            if kernel.loop_count is not None:
                count = (count or 0) + kernel.loop_count
        self.loop_count = count
        return results

    def __call__(self) -> bool:
        return all(_same(_summary(r), e) for r, e in zip(self.evaluate(), self.expected))


class BroadcastTerms:
    """A kernel's broadcast terms, the kernels that evaluate them, and the statements
    with them replaced by their fills (one per set of fills) or read as operands, made
    on first use."""

    def __init__(self, assignment: nt.Assignment, formats: dict[str, Format], make: Make,
                 terms: bool = True):
        self.assignment, self.formats, self.make = assignment, formats, make
        # A term over a dense operand stores every coordinate: never empty.
        self.terms = [] if not terms else [t for t in broadcast_terms(assignment) if not any(
            all(lv.full for lv in formats[a.tensor].tensor_type("float64", "int64").levels)
            for a in nt.iter_accesses(t))]
        self._kernels: list[tuple[Any, list[str]]] | None = None
        self._uses: list[nt.Access] = []  # each term read as an operand
        self._variants: dict[tuple, Any] = {}

    def bind(self, exact: Any, threads: int | None, tensors: dict) -> Any:
        """``exact`` (a binding of the kernel as written), or a binding of the statement
        with the terms replaced: by their fills where none stores an entry, else by
        their results, read as operands (whose entries the result repeats along the
        missing index: the walk is then paid by the result's size, where the kernel as
        written merged every term's operands again per coordinate). The terms are
        evaluated again before every call; ``exact`` runs where they changed."""
        if not self.terms:
            return exact
        kernels = self._term_kernels()
        if kernels is None:
            return exact
        results = SameTerms(kernels, tensors).evaluate()
        summaries = [_summary(r) for r in results]
        empty = all(len(s) == 1 for s in summaries)
        key = self._key(tuple(s[0] for s in summaries)) if empty else ("operands",)
        if key not in self._variants:
            self._variants[key] = self._filled([s[0] for s in summaries]) if empty \
                else self._read()
        variant = self._variants[key]
        if variant is None:
            return exact
        given = {n: tensors[n] for n in variant.assignment.tensors() if n in tensors}
        if not empty:
            given.update({use.tensor: r for use, r in zip(self._uses, results)})
        try:
            fast = variant.bind(check=False, threads=threads, **given)
        except _REFUSALS:
            self._variants[key] = None
            return exact
        fast.guards.insert(0, (SameTerms(kernels, tensors, summaries), exact))
        return fast

    def _term_kernels(self) -> list[tuple[Any, list[str]]] | None:
        """A kernel per term, into a sparse result over the term's indices in the
        output's order, with the names it reads; None where one is refused."""
        if self._kernels is None:
            taken = nt.names_in_use(self.assignment)
            kernels = []
            for term in self.terms:
                free = nt.free_vars(term)
                use = nt.Access(nt.fresh_name("term", taken), tuple(
                    v for v in self.assignment.lhs.indices if v in free))
                names = list(dict.fromkeys(a.tensor for a in nt.iter_accesses(term)))
                try:
                    kernel = self.make(nt.Assignment(use, term),
                                       {n: self.formats[n] for n in names},
                                       as_format("coo", use.order), False)
                except _REFUSALS:
                    kernels = None
                    break
                kernels.append((kernel, names))
                self._uses.append(use)
            self._kernels = kernels if kernels is not None else []
        return self._kernels or None

    @staticmethod
    def _key(fills: tuple[object, ...]) -> tuple:
        return tuple((type(f).__name__, repr(f)) for f in fills)

    def _filled(self, fills: list[object]) -> Any:
        """The kernel of the statement with each term replaced by its fill, or None
        where a fill has no literal or the statement is refused (an output index that
        only the replaced terms used)."""
        literals = [_literal(f) for f in fills]
        if any(lit is None for lit in literals):
            return None
        return self._replaced(literals, {}, plain=False)

    def _read(self) -> Any:
        """The kernel of the statement with each term read as an operand (a sorted
        coordinate list), or None where it is refused."""
        return self._replaced(self._uses, {
            use.tensor: as_format("coo", use.order) for use in self._uses}, plain=True)

    def _replaced(self, new: list[nt.Expr], formats: dict[str, Format], plain: bool) -> Any:
        rhs = _substituted(self.assignment.rhs, dict(zip(self.terms, new)))
        statement = nt.Assignment(self.assignment.lhs, rhs)
        out = self.assignment.lhs.tensor
        try:
            nt.validate(statement)
            return self.make(statement, {**{n: self.formats[n] for n in statement.tensors()
                                            if n in self.formats and n != out}, **formats},
                             self.formats[out], plain)
        except _REFUSALS:
            return None
