"""The text form of index notation: tokenizer and recursive-descent parser.

``parse`` reads ``y(i) = A(i,j) * x(j)`` into the AST of ``llvsparse.ir.notation.syntax``, places
reductions and validates; ``format_expr`` there prints every AST this reads back.
Functions are the operator table's (``min(a, b)``, ``where(c, a, b)``, user functions
from ``ls.function``); ``min(j, body)`` with an index variable first reduces over it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from llvsparse.ir.notation.operators import (
    ADD,
    BINARY_BY_SYMBOL,
    BUILTINS,
    COMPARISONS,
    REDUCTION_ALIASES,
    Operator,
    lookup,
)
from llvsparse.ir.notation.subscripts import is_valid_name
from llvsparse.ir.notation.syntax import (
    REDUCTION_PREFIX,
    Access,
    AffineIndex,
    Assignment,
    Call,
    Expr,
    Index,
    IndexVar,
    Literal,
    NotationSyntaxError,
    Reduction,
    _Locator,
    free_vars,
    negate,
    place_reductions,
    validate,
)

# ----------------------------------------------------------------------------- tokenizer


@dataclass(frozen=True)
class _Token:
    kind: str  # "name", "number", "op" or "end"
    text: str
    column: int

    def describe(self) -> str:
        return "end of input" if self.kind == "end" else f"'{self.text}'"


_TOKEN_RE = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<number>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op><=|>=|==|!=|[<>()=,+\-*/]|!)"
)
_NUMBER_TAIL_RE = re.compile(r"[A-Za-z0-9_.]")


# Python operators users reach for that index notation does not have, and what to say.
_UNSUPPORTED_RE = re.compile(r"\*\*|%|@|&|\||~")
_SPELLED = {"**": "pow(x, y)", "&": "and(a, b)", "|": "or(a, b)", "~": "not(a)"}


def _unsupported(symbol: str) -> str:
    if symbol in _SPELLED:
        return f"the operator {symbol} is not supported; write {_SPELLED[symbol]}"
    return (f"the operator {symbol} is not supported; index notation has + - * /, "
            "comparisons and functions such as min(a, b)")


def _tokenize(text: str) -> list[_Token]:
    """Split ``text`` into tokens, ending with an ``end`` token at ``len(text)``."""
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        unsupported = _UNSUPPORTED_RE.match(text, pos)
        if unsupported is not None:
            raise NotationSyntaxError(_unsupported(unsupported.group()), text, pos)
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            raise NotationSyntaxError(f"unexpected character {text[pos]!r}", text, pos)
        kind = match.lastgroup or ""
        if kind == "number" and _NUMBER_TAIL_RE.match(text, match.end()):
            raise NotationSyntaxError("malformed number", text, pos)
        if kind != "ws":
            tokens.append(_Token(kind, match.group(), pos))
        pos = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


def _number(text: str) -> int | float:
    return int(text) if text.isdigit() else float(text)


# ----------------------------------------------------------------------------- parser


class _Parser:
    """Recursive descent over the grammar in ``parse``'s docstring."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0
        self.where = _Locator(text)

    # -- token helpers

    def peek(self) -> _Token:
        return self.tokens[self.pos]

    def advance(self) -> _Token:
        token = self.tokens[self.pos]
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return token

    def at(self, op: str) -> bool:
        token = self.peek()
        return token.kind == "op" and token.text == op

    def error(self, expected: str, token: _Token | None = None) -> NotationSyntaxError:
        token = token or self.peek()
        message = f"expected {expected}, found {token.describe()}"
        return NotationSyntaxError(message, self.text, token.column)

    def fail(self, message: str, token: _Token) -> NotationSyntaxError:
        return NotationSyntaxError(message, self.text, token.column)

    def expect(self, op: str) -> _Token:
        if not self.at(op):
            raise self.error(f"'{op}'")
        return self.advance()

    def expect_name(self, what: str) -> _Token:
        if self.peek().kind != "name":
            raise self.error(what)
        return self.advance()

    # -- grammar

    def assignment(self) -> tuple[Access, Expr]:
        if self.peek().kind == "end":
            raise NotationSyntaxError("empty input", self.text, 0)
        name = self.expect_name("a tensor name")
        if name.text.startswith(REDUCTION_PREFIX):
            raise self.error("a tensor name", name)
        lhs = self.access(name, lhs=True)
        self.expect("=")
        rhs = self.comparison()
        self.finish()
        return lhs, rhs

    def finish(self) -> None:
        if self.peek().kind != "end":
            raise self.error("an operator or end of input")

    def comparison(self) -> Expr:
        result = self.expr()
        token = self.peek()
        if token.kind == "op" and token.text in COMPARISONS:
            self.advance()
            result = Call(COMPARISONS[token.text], (result, self.expr()))
            after = self.peek()
            if after.kind == "op" and after.text in COMPARISONS:
                raise self.fail("chained comparisons are not supported; write "
                                "and(a < b, b < c)", after)
        return result

    def expr(self) -> Expr:
        result = self.term()
        while self.at("+") or self.at("-"):
            op = BINARY_BY_SYMBOL[self.advance().text]
            result = Call(op, (result, self.term()))
        return result

    def term(self) -> Expr:
        result = self.unary()
        while self.at("*") or self.at("/"):
            op = BINARY_BY_SYMBOL[self.advance().text]
            result = Call(op, (result, self.unary()))
        return result

    def unary(self) -> Expr:
        if self.at("-"):
            self.advance()
            return negate(self.unary())
        if self.at("!"):
            self.advance()
            name = self.expect_name("a tensor to complement, as in !B(i,j) (logical "
                                    "not is not(a))")
            if name.text.startswith(REDUCTION_PREFIX) or self.at("(") and (
                    lookup(name.text) or name.text in REDUCTION_ALIASES):
                raise self.error("a tensor to complement, as in !B(i,j) (logical not is "
                                 "not(a))", name)
            access = self.access(name)
            return Access(access.tensor, access.indices, complement=True)
        return self.primary()

    def primary(self) -> Expr:
        token = self.peek()
        if token.kind == "number":
            value = _number(self.advance().text)
            if isinstance(value, float) and not math.isfinite(value):
                raise NotationSyntaxError(f"literal {token.text} is too large for a float",
                                          self.text, token.column)
            return Literal(value)
        if self.at("("):
            self.advance()
            inner = self.comparison()
            self.expect(")")
            return inner
        if token.kind == "name":
            self.advance()
            if token.text.startswith(REDUCTION_PREFIX):
                return self.reduction(token)
            if self.at("(") and (token.text in REDUCTION_ALIASES or lookup(token.text)):
                return self.call(token)
            return self.access(token)
        raise self.error("an expression")

    def reduction(self, token: _Token) -> Reduction:
        var = token.text[len(REDUCTION_PREFIX):]
        if not is_valid_name(var):
            message = f"'{token.text}' does not name a reduction variable"
            raise NotationSyntaxError(message, self.text, token.column)
        self.expect("(")
        body = self.comparison()
        self.expect(")")
        node = Reduction(ADD, IndexVar(var), body)
        self.where.nodes[id(node)] = token.column
        return node

    def call(self, name: _Token) -> Expr:
        """``f(a, b, ...)``, or ``f(j, body)``: ``f`` reduced over index variable ``j``."""
        self.expect("(")
        args = [self.comparison()]
        while self.at(","):
            self.advance()
            args.append(self.comparison())
        self.expect(")")
        op = REDUCTION_ALIASES.get(name.text) or lookup(name.text)
        assert op is not None
        first = args[0]
        if len(args) == 2 and isinstance(first, Access) and not first.indices \
                and IndexVar(first.tensor) in free_vars(args[1]):
            return self.reduce(name, op, IndexVar(first.tensor), args[1])
        if name.text in REDUCTION_ALIASES:
            raise self.fail(f"{name.text}(j, ...) reduces over an index variable: write "
                            f"{name.text}(VAR, expression), VAR used in the expression", name)
        if len(args) != op.arity:
            raise self.fail(f"{name.text} takes {_arguments(op.arity)}, got {len(args)}", name)
        node = Call(op, tuple(args))
        self.where.nodes[id(node)] = name.column
        return node

    def reduce(self, name: _Token, op: Operator, var: IndexVar, body: Expr) -> Reduction:
        if not op.is_monoid:
            raise self.fail(f"{name.text} cannot reduce over '{var}': a reduction needs a "
                            "two-argument operator that is associative and commutative, has "
                            "an identity, and gives 0 from 0 and 0 (a monoid)", name)
        node = Reduction(op, var, body)
        self.where.nodes[id(node)] = name.column
        return node

    def access(self, name: _Token, lhs: bool = False) -> Access:
        subscripts: list[tuple[Index, int]] = []
        if self.at("("):
            self.advance()
            start = self.pos
            try:
                subscripts = self.index_list(lhs)
            except NotationSyntaxError:
                if not lhs:
                    self.pos = start
                    self.refuse_call(name)
                raise
        node = Access(name.text, tuple(ix for ix, _ in subscripts))
        self.where.nodes[id(node)] = name.column
        self.where.indices[id(node)] = tuple(column for _, column in subscripts)
        return node

    def refuse_call(self, name: _Token) -> None:
        """``name(`` whose subscripts do not parse and hold a call (``f(x(i))``, ``f(-x)``)
        is a call of a function that does not exist: name it, rather than what token
        was expected."""
        pos = self.pos
        while True:
            token, after = self.tokens[pos], self.tokens[pos + 1]
            if token.kind == "name" and after.kind == "op" and after.text == ",":
                pos += 2
                continue
            if token.kind == "op" and token.text == "-":  # a negated argument: f(-x(i))
                pos += 1
                continue
            if token.kind == "op" and token.text == "(" \
                    or token.kind == "name" and after.text == "(":
                break
            return  # subscripts with a syntax error index_list reports
        known = ", ".join(sorted(BUILTINS))
        raise NotationSyntaxError(f"unknown function '{name.text}' (the functions are "
                                  f"{known}, and those defined with ls.function)",
                                  self.text, name.column)

    def index_list(self, lhs: bool = False) -> list[tuple[Index, int]]:
        """Subscripts (with their columns) up to and including ``)``; on the left-hand
        side, index variables only."""
        if self.at(")"):
            self.advance()
            return []
        subscripts: list[tuple[Index, int]] = []
        while True:
            column = self.peek().column
            subscripts.append((IndexVar(self.expect_name("an index variable").text) if lhs
                                else self.subscript(), column))
            if self.at(")"):
                self.advance()
                return subscripts
            if not self.at(","):
                raise self.error("',' or ')'")
            self.advance()

    def subscript(self) -> Index:
        """``i``, an affine sum such as ``h+r``, ``2*i+r``, ``i-1`` (paper 000), or a
        constant (``2``: it fixes a mode)."""
        negative = self.at("-") and self.advance() is not None
        total: Index = self.index_term(negative)
        while self.at("+") or self.at("-"):
            total = total + self.index_term(negative=self.advance().text == "-")
        return total

    def index_term(self, negative: bool) -> Index:
        """``i``, ``3``, ``2*i`` or ``i*2``: one term of an affine subscript."""
        token = self.peek()
        if token.kind == "number":
            self.advance()
            if not token.text.isdigit():
                raise self.fail(f"subscripts take integers, not {token.text}", token)
            factor = int(token.text)
            if self.at("*"):
                self.advance()
                var = IndexVar(self.expect_name("an index variable").text)
                return var * (-factor if negative else factor)
            return AffineIndex((), -factor if negative else factor)
        name = self.expect_name("an index variable")
        var = IndexVar(name.text)
        after = self.tokens[min(self.pos + 1, len(self.tokens) - 1)]
        call = after.kind == "name" and self.tokens[self.pos + 2].text == "("
        if self.at("*") and not call:
            self.advance()  # (``A(i,j * x(j)`` misses a parenthesis: reported by index_list)
            factor_token = self.peek()
            if factor_token.kind != "number" or not factor_token.text.isdigit():
                raise self.fail("a subscript is affine: a variable is multiplied only "
                                "by an integer (not by another variable)", factor_token)
            self.advance()
            return var * (-int(factor_token.text) if negative else int(factor_token.text))
        if self.at("/"):
            raise self.fail("a subscript is affine: division is not supported", self.peek())
        return -var if negative else var


def _arguments(count: int) -> str:
    return "1 argument" if count == 1 else f"{count} arguments"


# Bounds on what one expression may hold: the compiler walks expressions recursively
# (a 300-factor product exhausted Python's stack), and LLVM refuses names past about a
# thousand characters.
MAX_NESTING = 64
MAX_OPERATORS = 256
MAX_NAME = 256


def _check_size(text: str) -> None:
    """Raise for input that is not a string, or too large to compile, pointing at the
    first character past the limit."""
    if not isinstance(text, str):
        raise TypeError(f"index notation must be a string, not {type(text).__name__}")
    depth = operators = 0
    for column, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        operators += char in "+-*/<>"
        if depth > MAX_NESTING:
            raise NotationSyntaxError(f"parentheses nested more than {MAX_NESTING} deep",
                                      text, column)
        if operators > MAX_OPERATORS:
            raise NotationSyntaxError(f"more than {MAX_OPERATORS} operators in one "
                                      "expression", text, column)
    for name in re.finditer(r"[A-Za-z_]\w*", text):
        if len(name[0]) > MAX_NAME:
            raise NotationSyntaxError(f"a name longer than {MAX_NAME} characters", text,
                                      name.start())


def parse(text: str) -> Assignment:
    """Parse ``NAME(i,...) = expr`` (or ``NAME = expr``), place reductions and validate.

    Grammar::

        assignment := access '=' compare
        compare    := expr [('<' | '<=' | '==' | '!=' | '>' | '>=') expr]
        expr       := term (('+' | '-') term)*
        term       := unary (('*' | '/') unary)*
        unary      := '-' unary | '!' access | primary
        primary    := NUMBER | '(' compare ')' | 'sum_'VAR '(' compare ')' | call | access
        call       := FUNCTION '(' compare (',' compare)* ')'    (a reduction when the
                      first of two arguments is an index variable the second uses)
        access     := NAME ['(' [VAR (',' VAR)*] ')']
    """
    _check_size(text)
    parser = _Parser(text)
    lhs, rhs = parser.assignment()
    validate(Assignment(lhs, rhs), parser.where)  # as written, so errors point at the text
    assignment = Assignment(lhs, place_reductions(lhs, rhs))
    validate(assignment, parser.where)  # placement can nest a sum in one over the same var
    return assignment


def parse_expr(text: str) -> Expr:
    """Parse a bare right-hand side as written: no reduction placement, no validation."""
    _check_size(text)
    parser = _Parser(text)
    if parser.peek().kind == "end":
        raise NotationSyntaxError("empty input", text, 0)
    expr = parser.comparison()
    parser.finish()
    return expr

