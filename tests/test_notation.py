"""Tests for the index-notation AST, parser, printer and Python operator API."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llvsparse.ir.notation.operators import (
    ABS,
    ADD,
    AND,
    DIV,
    EQ,
    EXP,
    GE,
    LT,
    MIN,
    MUL,
    NEG,
    NOT,
    OR,
    POW,
    SUB,
    WHERE,
)
from llvsparse.ir.notation.syntax import (
    Access,
    Assignment,
    Call,
    Expr,
    IndexVar,
    Literal,
    NotationError,
    NotationSyntaxError,
    Reduction,
    format_expr,
    free_vars,
    index_vars,
    place_reductions,
)

from llvsparse.notation.expr_api import ExprNode, TensorAccess, access, make_assignment
from llvsparse.notation.parse import parse, parse_expr

i, j, k = index_vars("i j k")


def acc(name: str, *indices: IndexVar) -> Access:
    return Access(name, indices)


def add(a: Expr, b: Expr) -> Call:
    return Call(ADD, (a, b))


def sub(a: Expr, b: Expr) -> Call:
    return Call(SUB, (a, b))


def mul(a: Expr, b: Expr) -> Call:
    return Call(MUL, (a, b))


def div(a: Expr, b: Expr) -> Call:
    return Call(DIV, (a, b))


def neg(a: Expr) -> Call:
    return Call(NEG, (a,))


def sum_(var: IndexVar, body: Expr) -> Reduction:
    return Reduction(ADD, var, body)


# ----------------------------------------------------------------------------- parsing


def test_spmv_sums_over_whole_product() -> None:
    assert parse("y(i) = A(i,j) * x(j)") == Assignment(
        acc("y", i), sum_(j, mul(acc("A", i, j), acc("x", j)))
    )


def test_residual_sum_stays_inside_subtraction() -> None:
    assert parse("r(i) = b(i) - A(i,j)*x(j)").rhs == sub(
        acc("b", i), sum_(j, mul(acc("A", i, j), acc("x", j)))
    )


def test_scalar_lhs_with_two_independent_sums() -> None:
    assert parse("a = b(i)*c(i) + d(j)") == Assignment(
        acc("a"), add(sum_(i, mul(acc("b", i), acc("c", i))), sum_(j, acc("d", j)))
    )


def test_matmul_plus_matrix() -> None:
    assert parse("A(i,j) = B(i,k)*C(k,j) + D(i,j)").rhs == add(
        sum_(k, mul(acc("B", i, k), acc("C", k, j))), acc("D", i, j)
    )


def test_shared_placement_nests_in_first_appearance_order() -> None:
    assert parse("a = B(j,i) * C(i,j)").rhs == sum_(j, sum_(i, mul(acc("B", j, i), acc("C", i, j))))


def test_sum_over_single_access() -> None:
    assert parse("a() = B(i,j)").rhs == sum_(i, sum_(j, acc("B", i, j)))


def test_explicit_reduction_is_kept() -> None:
    assert parse("y(i) = sum_j(A(i,j)) * x(i)").rhs == mul(sum_(j, acc("A", i, j)), acc("x", i))


def test_precedence_and_left_associativity() -> None:
    a, b, c = acc("a"), acc("b"), acc("c")
    assert parse_expr("a - b - c") == sub(sub(a, b), c)
    assert parse_expr("a - (b - c)") == sub(a, sub(b, c))
    assert parse_expr("a + b * c") == add(a, mul(b, c))
    assert parse_expr("a / b * c") == mul(div(a, b), c)
    assert parse_expr("-a * b") == mul(neg(a), b)
    assert parse_expr("--a") == neg(neg(a))


def test_literals_and_folding() -> None:
    assert parse_expr("3") == Literal(3)
    assert isinstance(parse_expr("3").value, int)  # type: ignore[union-attr]
    assert parse_expr("2.5e-3") == Literal(0.0025)
    assert parse_expr("1E+2") == Literal(100.0)
    assert parse_expr(".5") == Literal(0.5)
    assert parse_expr("1.") == Literal(1.0)
    assert parse_expr("-2") == Literal(-2)
    assert parse_expr("-(2)") == Literal(-2)
    assert parse_expr("- -2") == Literal(2)
    assert parse_expr("a * -2") == mul(acc("a"), Literal(-2))


def test_scalars_and_whitespace() -> None:
    expected = Assignment(acc("a"), mul(acc("b"), acc("c")))
    assert parse("a = b * c") == expected
    assert parse("a() = b() * c()") == expected
    assert parse(" \ta\n=\nb*c  ") == expected
    assert parse("y ( i ) = x ( i )") == Assignment(acc("y", i), acc("x", i))


def test_diagonal_access_on_rhs_is_allowed() -> None:
    assert parse("y(i) = A(i,i)").rhs == acc("A", i, i)


def test_assignment_helpers() -> None:
    assignment = parse("y(i) = A(i,j) * x(j) + A(i,j)")
    assert assignment.tensors() == ["y", "A", "x"]
    assert [a.tensor for a in assignment.accesses()] == ["y", "A", "x", "A"]
    assert free_vars(assignment.rhs) == {i}
    assert free_vars(mul(acc("A", i, j), acc("x", j))) == {i, j}


def test_index_vars_accepts_spaces_and_commas() -> None:
    assert index_vars("i j k") == (i, j, k)
    assert index_vars("i,j, k") == (i, j, k)
    with pytest.raises(ValueError):
        index_vars("i 2j")


def test_place_reductions_is_idempotent() -> None:
    assignment = parse("r(i) = b(i) - A(i,j)*x(j)")
    assert place_reductions(assignment.lhs, assignment.rhs) == assignment.rhs


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("", 0, "empty input"),
        ("   ", 0, "empty input"),
        ("y(i) = A(i,j * x(j)", 13, "expected ',' or ')'"),
        ("y(i) = (A(i,j) * x(j)", 21, "expected ')'"),
        ("y(i) = A(i,j) x(j)", 14, "expected an operator or end of input"),
        ("y(i) = x(i))", 11, "expected an operator or end of input"),
        ("y(i) x(i)", 5, "expected '='"),
        ("y(i)", 4, "expected '='"),
        ("y(i) = ", 7, "expected an expression"),
        ("y(i) = x(i) +", 13, "expected an expression"),
        ("y(i,) = x(i)", 4, "expected an index variable"),
        ("y(2) = x(i)", 2, "expected an index variable"),
        ("2 = x", 0, "expected a tensor name"),
        ("sum_i = x(i)", 0, "expected a tensor name"),
        ("a = b $ c", 6, "unexpected character '$'"),
        ("a = 1e", 4, "malformed number"),
        ("a = 2i", 4, "malformed number"),
        ("a = 1.2.3", 4, "malformed number"),
        ("a = sum_(b)", 4, "does not name a reduction variable"),
        ("a = sum_j b(j)", 10, "expected '('"),
    ],
)
def test_syntax_errors_report_column(text: str, column: int, fragment: str) -> None:
    with pytest.raises(NotationSyntaxError) as info:
        parse(text)
    assert info.value.column == column
    assert info.value.text == text
    assert fragment in info.value.message


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("A(i,i) = B(i,i)", 4, "repeated on the left-hand side"),
        ("y(i) = x(i) + x(i,j)", 14, "used with 1 index and with 2 indices"),
        ("y(i,j) = A(i,j) * y(i)", 18, "in-place updates are not supported"),
        ("y(i,j) = x(i)", 4, "does not appear on the right-hand side"),
        ("y(i) = x(i) * i", 14, "both as a tensor and as an index variable"),
        ("y(j) = sum_j(x(j))", 7, "also a left-hand-side index"),
        ("a = sum_j(x(i))", 4, "not used in the reduction's body"),
        ("a = sum_j(b(j)) * c(j) * d(j)", 4, "nested in another"),
    ],
)
def test_semantic_errors_report_column(text: str, column: int, fragment: str) -> None:
    with pytest.raises(NotationError) as info:
        parse(text)
    assert not isinstance(info.value, NotationSyntaxError)
    assert info.value.column == column
    assert fragment in info.value.message


def test_error_str_has_caret_under_column() -> None:
    with pytest.raises(NotationSyntaxError) as info:
        parse("y(i) = A(i,j\n * x(j)")
    lines = str(info.value).splitlines()
    assert lines[0] == "expected ',' or ')', found '*' at column 14"
    assert lines[2].index("^") == lines[1].index("*")


# ----------------------------------------------------------------------------- round trip

_tensor_names = st.sampled_from(["A", "B", "c", "val2"])
_vars = st.sampled_from([i, j, k])
_accesses = st.builds(
    Access, _tensor_names, st.lists(_vars, max_size=3).map(tuple)
)
_literals = st.builds(
    Literal,
    st.integers(-10**20, 10**20) | st.floats(allow_nan=False, allow_infinity=False),
)


def _extend(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    binary = st.builds(
        lambda op, a, b: Call(op, (a, b)), st.sampled_from([ADD, SUB, MUL, DIV]), children, children
    )
    negated = children.filter(lambda e: not isinstance(e, Literal)).map(neg)
    reduced = st.builds(lambda v, body: Reduction(ADD, v, body), _vars, children)
    called = (st.builds(lambda op, a: Call(op, (a,)), st.sampled_from([NOT, EXP, ABS]), children)
              | st.builds(lambda op, a, b: Call(op, (a, b)),
                          st.sampled_from([MIN, LT, EQ, GE, POW, AND]), children, children)
              | st.builds(lambda *abc: Call(WHERE, abc), children, children, children))
    folded = st.builds(lambda op, v, body: Reduction(op, v, body), st.sampled_from([MIN, OR]),
                       _vars, children).filter(lambda r: r.var in free_vars(r.body))
    return binary | negated | reduced | called | folded


_exprs = st.recursive(_accesses | _literals, _extend, max_leaves=12)


@given(_exprs)
@settings(max_examples=300)
def test_format_then_parse_expr_is_identity(expr: Expr) -> None:
    assert parse_expr(format_expr(expr)) == expr


def _consistent(expr: Expr) -> Expr:
    """Rename tensors by order so every tensor has one order, as ``parse`` demands."""
    if isinstance(expr, Access):
        return Access(f"{expr.tensor}{len(expr.indices)}", expr.indices)
    if isinstance(expr, Call):
        return Call(expr.op, tuple(_consistent(a) for a in expr.args))
    if isinstance(expr, Reduction):
        return Reduction(expr.op, expr.var, _consistent(expr.body))
    return expr


_plain_exprs = st.recursive(
    _accesses | _literals,
    lambda c: st.builds(
        lambda op, a, b: Call(op, (a, b)), st.sampled_from([ADD, SUB, MUL, DIV]), c, c
    ) | c.filter(lambda e: not isinstance(e, Literal)).map(neg),
    max_leaves=10,
)


@given(_plain_exprs, st.data())
@settings(max_examples=200)
def test_parsed_assignment_round_trips(expr: Expr, data: st.DataObject) -> None:
    rhs = _consistent(expr)
    order = data.draw(st.permutations(sorted(free_vars(rhs), key=str)))
    keep = data.draw(st.lists(st.booleans(), min_size=len(order), max_size=len(order)))
    out = [v for v, kept in zip(order, keep) if kept]
    text = f"out({','.join(v.name for v in out)}) = {format_expr(rhs)}"
    assignment = parse(text)
    assert parse(format_expr(assignment)) == assignment
    assert free_vars(assignment.rhs) == set(out)


# ----------------------------------------------------------------------------- Python API


class Dummy:
    """The smallest tensor-like object: a name, an order and indexing sugar."""

    def __init__(self, name: str = "", order: int | None = None):
        self.name = name
        self.order = order
        self.assigned: tuple[Assignment, dict[str, object]] | None = None

    def __getitem__(self, indices: object) -> TensorAccess:
        return access(self, indices)

    def __setitem__(self, indices: object, value: object) -> None:
        self.assigned = make_assignment(self, indices, value)


def _assign(lhs: Dummy, indices: object, value: object) -> Assignment:
    lhs[indices] = value
    assert lhs.assigned is not None
    return lhs.assigned[0]


def test_api_spmv_matches_parser() -> None:
    A, x, y = Dummy("A", 2), Dummy("x", 1), Dummy("y", 1)
    assert _assign(y, i, A[i, j] * x[j]) == parse("y(i) = A(i,j) * x(j)")
    assert y.assigned is not None
    assert y.assigned[1] == {"y": y, "A": A, "x": x}


def test_api_residual_matches_parser() -> None:
    A, b, x, r = Dummy("A", 2), Dummy("b", 1), Dummy("x", 1), Dummy("r", 1)
    assert _assign(r, i, b[i] - A[i, j] * x[j]) == parse("r(i) = b(i) - A(i,j)*x(j)")


def test_api_spadd_matches_parser() -> None:
    A, B, C = Dummy("A", 2), Dummy("B", 2), Dummy("C", 2)
    assert _assign(C, (i, j), A[i, j] + B[i, j]) == parse("C(i,j) = A(i,j) + B(i,j)")


def test_api_scaling_and_reflected_operators() -> None:
    B, C = Dummy("B", 2), Dummy("C", 2)
    assert _assign(C, (i, j), 2 * B[i, j]) == parse("C(i,j) = 2 * B(i,j)")
    assert _assign(C, (i, j), 1 - B[i, j] / 4.0) == parse("C(i,j) = 1 - B(i,j) / 4.0")
    assert _assign(C, (i, j), -B[i, j] * -3) == parse("C(i,j) = -B(i,j) * -3")
    assert (-ExprNode(Literal(2))).expr == Literal(-2)


def test_api_scalar_output() -> None:
    a, b = Dummy("a", 0), Dummy("b", 1)
    assert _assign(a, (), b[i] * b[i]) == parse("a = b(i) * b(i)")


def test_api_auto_names() -> None:
    u, v = Dummy(), Dummy()
    node = u[i] * v[i] + u[i]
    assert node.expr == parse_expr("T0(i) * T1(i) + T0(i)")
    assert node.operands == {"T0": u, "T1": v}
    out = Dummy(order=1)
    out[i] = u[i] + Dummy("T0")[i]
    assert out.assigned is not None
    assert out.assigned[1] == {"T1": out, "T2": u, "T0": out.assigned[1]["T0"]}
    assert list(out.assigned[1]) == ["T1", "T2", "T0"]


def test_api_tensor_access_holds_object() -> None:
    A = Dummy("A", 2)
    node = A[i, j]
    assert node.obj is A
    assert node.access == acc("A", i, j)
    assert node.indices == (i, j)


def test_api_errors() -> None:
    A, y = Dummy("A", 2), Dummy("y", 1)
    with pytest.raises(TypeError, match="IndexVar"):
        A[0, 1]
    with pytest.raises(TypeError, match="IndexVar"):
        A["i"]
    with pytest.raises(NotationError, match="order 2"):
        A[i]
    with pytest.raises(NotationError, match="both named 'A'"):
        _ = (A[i, j] + Dummy("A", 2)[i, j]).expr
    with pytest.raises(NotationError, match="in-place"):
        y[i] = y[i] + A[i, j]
    with pytest.raises(NotationError, match="does not appear"):
        y[i] = A[j, k]
    with pytest.raises(TypeError, match="right-hand side"):
        y[i] = "A(i,j)"
    with pytest.raises(TypeError):
        bool(A[i, j])
