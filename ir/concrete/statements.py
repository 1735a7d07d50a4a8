"""Concrete index notation statements as data: loops, temporaries and where/sequence.

``ir/concrete/expressions.py`` holds the expressions; this module holds what surrounds them after
scheduling (TACO-style concrete index notation: ``forall``, ``where``, sequences and
assignments), so that a schedule can be built, rewritten (workspaces), printed and tested
without generating code. Index expressions are trees: plain variables today, with room
for affine terms (``h + r``) and the derived indices of split/fuse/pos.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..notation.operators import Operator
from ..types import TensorType
from .expressions import Apply, Const, Operand, Sum
from .expressions import Expr as CinExpr


@dataclass(frozen=True)
class IndexVar:
    """A loop index variable."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Derived:
    """An index derived from others by a scheduling directive (``kind``: split_outer,
    split_inner, divide_outer, divide_inner, fuse, pos, coord, bound), named so loops can
    bind it; ``params`` holds e.g. the split factor or the operand a pos walks."""

    name: str
    kind: str
    parents: tuple[IndexExpr, ...]
    params: tuple[object, ...] = ()

    def __str__(self) -> str:
        return self.name

    def expression(self) -> str:
        """How the index is derived, back to the original indices (provenance)."""
        parents = [p.expression() if isinstance(p, Derived) else str(p) for p in self.parents]
        return f"{self.kind}({', '.join([*parents, *(str(p) for p in self.params)])})"

    def definition(self) -> str:
        return f"{self.name} = {self.expression()}"


@dataclass(frozen=True)
class Affine:
    """``sum(coefficient * index) + offset``: a blocked level's coordinate (``4*i0 + i1``)
    or a convolution's ``h + r``."""

    terms: tuple[tuple[IndexExpr, int], ...]
    offset: int = 0
    # A stride inverted (``h = (x - r) / 2``): the sum divided where it divides exactly;
    # where it does not, -1, which lies outside every extent (the guards skip it).
    divisor: int = 1

    def value(self, values: dict[IndexExpr, int]) -> int:
        """The index at the given values of its terms."""
        total = sum(c * values[t] for t, c in self.terms) + self.offset
        return -1 if total % self.divisor else total // self.divisor

    def __str__(self) -> str:
        if self.divisor != 1:
            return f"({replace(self, divisor=1)}) / {self.divisor}"
        text = ""
        for ix, c in self.terms:
            sign = " - " if c < 0 else (" + " if text else "")
            text += f"{sign}{'' if abs(c) == 1 else f'{abs(c)}*'}{ix}"
        if self.offset or not text:
            sign = (" - " if self.offset < 0 else " + ") if text else ""
            text += f"{sign}{abs(self.offset) if text else self.offset}"
        return text


IndexExpr = IndexVar | Derived | Affine


@dataclass(frozen=True)
class TensorVar:
    """A temporary introduced by a rewrite (a workspace): its storage and value type."""

    name: str
    type: TensorType
    # How a workspace stores its entries (a WorkspacePolicy's name): the levels
    # say what the producer may do (insert at any coordinate), the policy how it is kept.
    policy: str = ""

    @property
    def dtype(self) -> str:
        return self.type.dtype

    def declaration(self) -> str:
        if not self.type.levels:
            return f"{self.name}: {self.dtype} scalar"
        levels = ", ".join(f"{lv.kind}:{lv.mode}" for lv in self.type.levels)
        kept = f" ({self.policy} workspace)" if self.policy else ""
        return f"{self.name}: {self.dtype} [{levels}]{kept}"


@dataclass(frozen=True)
class Access:
    """``tensor(indices)`` where the tensor is an operand's name or a temporary."""

    tensor: str | TensorVar
    indices: tuple[IndexExpr, ...]

    @property
    def name(self) -> str:
        return self.tensor if isinstance(self.tensor, str) else self.tensor.name

    def __str__(self) -> str:
        comma = "," if all(isinstance(ix, IndexVar) for ix in self.indices) else ", "
        return f"{self.name}({comma.join(str(ix) for ix in self.indices)})"


Expr = CinExpr | Access


@dataclass(frozen=True)
class Assign:
    """``access = expr``, or ``access op= expr`` with a reduction operator (``+=``: the
    output or temporary starts at the operator's identity and is reduced into)."""

    access: Access
    reduce_op: Operator | None
    expr: Expr


@dataclass(frozen=True)
class Forall:
    """``forall(index, body)``: run ``body`` for every value of ``index`` that can
    contribute; ``tags`` carry scheduling marks (e.g. parallel)."""

    index: IndexVar | Derived
    body: Stmt
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Where:
    """``where(consumer, producer)``: the producer fills a temporary that the consumer
    reads (paper 002's workspaces)."""

    consumer: Stmt
    producer: Stmt
    temporaries: tuple[TensorVar, ...] = ()


@dataclass(frozen=True)
class Sequence:
    """``first`` runs to completion, then ``then`` (split additive statements)."""

    first: Stmt
    then: Stmt


Stmt = Assign | Forall | Where | Sequence


def sequence(parts: list[Stmt]) -> Stmt:
    """One statement running ``parts`` in order."""
    if not parts:
        raise ValueError("a sequence needs at least one statement")
    result = parts[-1]
    for part in reversed(parts[:-1]):
        result = Sequence(part, result)
    return result


def sequence_parts(stmt: Stmt) -> list[Stmt]:
    """The statements a (nested) sequence runs, in order."""
    if isinstance(stmt, Sequence):
        return sequence_parts(stmt.first) + sequence_parts(stmt.then)
    return [stmt]


def loop_nest(stmt: Stmt) -> tuple[list[Forall], Stmt]:
    """The perfectly nested foralls around ``stmt``'s innermost statement, outermost first."""
    loops: list[Forall] = []
    while isinstance(stmt, Forall):
        loops.append(stmt)
        stmt = stmt.body
    return loops, stmt


# ---------------------------------------------------------------------------- printing

def show_expr(expr: Expr, top: bool = True) -> str:
    """An expression as text, with parentheses only around nested binary operations."""
    if isinstance(expr, (Operand, Access)):
        return str(expr)
    if isinstance(expr, Const):
        return repr(expr.value)
    if isinstance(expr, Sum):
        return f"sum_{expr.var}({show_expr(expr.body)})" if expr.op.symbol == "+" else \
            f"{expr.op.name}_{expr.var}({show_expr(expr.body)})"
    assert isinstance(expr, Apply)
    if expr.op.symbol[0].isalpha():  # a function: min(a, b), where(c, a, b)
        return f"{expr.op.name}({', '.join(show_expr(a) for a in expr.args)})"
    if expr.op.arity == 1:
        return f"{expr.op.symbol}{show_expr(expr.args[0], False)}"
    text = f" {expr.op.symbol} ".join(show_expr(a, False) for a in expr.args)
    return text if top else f"({text})"


def _show_assign(stmt: Assign) -> str:
    op = "=" if stmt.reduce_op is None else f"{stmt.reduce_op.symbol}="
    return f"{stmt.access} {op} {show_expr(stmt.expr)}"


def _forall_head(stmt: Forall) -> str:
    index = stmt.index.definition() if isinstance(stmt.index, Derived) else str(stmt.index)
    return index + "".join(f":{tag}" for tag in stmt.tags)


def _declarations(stmt: Where) -> str:
    return "".join(f" with {t.declaration()}" for t in stmt.temporaries)


def show(stmt: Stmt) -> str:
    """A statement on one line: ``forall(i, forall(j, y(i) += A(i,j) * x(j)))``."""
    if isinstance(stmt, Assign):
        return _show_assign(stmt)
    if isinstance(stmt, Forall):
        return f"forall({_forall_head(stmt)}, {show(stmt.body)})"
    if isinstance(stmt, Where):
        return f"where({show(stmt.consumer)}, {show(stmt.producer)}){_declarations(stmt)}"
    return f"{show(stmt.first)}; {show(stmt.then)}"


def show_indented(stmt: Stmt, depth: int = 0, step: int = 2) -> str:
    """A statement over several lines, one loop or assignment per line."""
    pad = " " * depth
    if isinstance(stmt, Assign):
        return pad + _show_assign(stmt)
    if isinstance(stmt, Forall):
        return f"{pad}forall {_forall_head(stmt)}:\n{show_indented(stmt.body, depth + step)}"
    if isinstance(stmt, Where):
        inner = depth + step
        return (f"{pad}where{_declarations(stmt)}:\n"
                f"{' ' * inner}consumer:\n{show_indented(stmt.consumer, inner + step)}\n"
                f"{' ' * inner}producer:\n{show_indented(stmt.producer, inner + step)}")
    return "\n".join(show_indented(part, depth, step) for part in sequence_parts(stmt))


def concrete_text(stmt: Stmt) -> str:
    """What ``kernel.concrete`` prints: each statement of a sequence on its own line."""
    return "\n".join(show(part) for part in sequence_parts(stmt))
