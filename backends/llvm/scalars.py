"""Value dtypes in IR: element types, conversions and arithmetic per operator kind."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from llvmlite import ir

from ...ir.notation.operators import Node, Operator, Param, Template

_ELEMENT = {
    "float64": ir.DoubleType(), "float32": ir.FloatType(), "int64": ir.IntType(64),
    "int32": ir.IntType(32), "int16": ir.IntType(16), "int8": ir.IntType(8),
    "uint64": ir.IntType(64), "uint32": ir.IntType(32), "uint16": ir.IntType(16),
    "uint8": ir.IntType(8), "float16": ir.HalfType(), "bool": ir.IntType(8),
}


def element_type(dtype: str) -> ir.Type:
    """How a numpy dtype is stored in memory."""
    try:
        return _ELEMENT[dtype]
    except KeyError:
        raise TypeError(f"unsupported value dtype {dtype}") from None


def compute_type(dtype: str) -> ir.Type:
    """How a dtype is held in registers (bool as i1)."""
    return ir.IntType(1) if dtype == "bool" else element_type(dtype)


def _kind(dtype: str) -> str:
    return "b" if dtype == "bool" else np.dtype(dtype).kind


def load_value(builder: ir.IRBuilder, stored: ir.Value, src: str, dst: str) -> ir.Value:
    """Convert a loaded element of dtype ``src`` to a register value of dtype ``dst``."""
    if src == "bool":
        stored = builder.icmp_unsigned("!=", stored, ir.Constant(stored.type, 0))
    return convert(builder, stored, src, dst)


def convert(builder: ir.IRBuilder, value: ir.Value, src: str, dst: str) -> ir.Value:
    if src == dst:
        return value
    target = compute_type(dst)
    sk, dk = _kind(src), _kind(dst)
    if dk == "b":
        zero = ir.Constant(value.type, 0)
        return builder.fcmp_unordered("!=", value, zero) if sk == "f" else builder.icmp_unsigned(
            "!=", value, zero)
    if dk == "f":
        if sk == "f":
            wider = np.dtype(dst).itemsize > np.dtype(src).itemsize
            return builder.fpext(value, target) if wider else builder.fptrunc(value, target)
        return builder.uitofp(value, target) if sk in "bu" else builder.sitofp(value, target)
    if sk == "f":
        return builder.fptoui(value, target) if dk == "u" else builder.fptosi(value, target)
    if value.type.width < target.width:
        return builder.zext(value, target) if sk in "bu" else builder.sext(value, target)
    return builder.trunc(value, target) if value.type.width > target.width else value


def store_value(builder: ir.IRBuilder, value: ir.Value, dtype: str) -> ir.Value:
    """Register value of ``dtype`` to its memory element form."""
    return builder.zext(value, element_type(dtype)) if dtype == "bool" else value


def constant(dtype: str, value: float) -> ir.Constant:
    """``value`` in registers of ``dtype``; an infinity (a min or max's identity) is the
    largest or smallest value for integer and bool dtypes (-inf is False)."""
    if dtype == "bool":
        return ir.Constant(ir.IntType(1), int(value > 0 if math.isinf(value) else bool(value)))
    if _kind(dtype) == "f":
        return ir.Constant(compute_type(dtype), float(value))
    if math.isinf(value):
        limits = np.iinfo(dtype)
        return ir.Constant(compute_type(dtype), limits.max if value > 0 else limits.min)
    return ir.Constant(compute_type(dtype), int(value))


def sum_start(dtype: str) -> ir.Constant:
    """Where a running sum starts: -0.0 for floats, the exact additive identity
    (-0.0 + x is x for every x, so LLVM folds the first addition away; 0.0 + -0.0 is
    not -0.0, so it cannot)."""
    return constant(dtype, -0.0 if _kind(dtype) == "f" else 0)


def apply(builder: ir.IRBuilder, kind: str, args: list[ir.Value], dtype: str,
          fastmath: bool = False) -> ir.Value:
    """Emit one operator application on register values of ``dtype``."""
    k = _kind(dtype)
    flags = ("fast",) if fastmath else ()
    if kind in _FUNCTIONS:
        return _FUNCTIONS[kind](builder, args, dtype)
    if kind == "neg":
        (x,) = args
        if k == "f":
            return builder.fneg(x, flags=flags)
        return x if k == "b" else builder.neg(x)
    a, b = args
    if k == "f":
        table = {"add": builder.fadd, "sub": builder.fsub, "mul": builder.fmul,
                 "div": builder.fdiv}
        return table[kind](a, b, flags=flags)
    if k == "b":
        table = {"add": builder.or_, "mul": builder.and_, "sub": builder.xor}
        if kind not in table:
            raise TypeError(f"operator {kind} is not defined on bool values")
        return table[kind](a, b)
    table = {"add": builder.add, "sub": builder.sub, "mul": builder.mul}
    if kind not in table:
        raise TypeError(f"operator {kind} needs a floating-point result dtype")
    return table[kind](a, b)


def apply_op(builder: ir.IRBuilder, op: Operator, args: list[ir.Value], dtype: str,
             fastmath: bool = False) -> ir.Value:
    """Emit ``op`` on ``args``: a user function's body is emitted operator by operator."""
    if op.template is None:
        return apply(builder, op.kind, args, dtype, fastmath)

    def emit(node: Template) -> ir.Value:
        if isinstance(node, Param):
            return args[node.index]
        if isinstance(node, Node):
            return apply_op(builder, node.op, [emit(a) for a in node.args], dtype, fastmath)
        return constant(dtype, node)
    return emit(op.template)


# -- the operators beyond + - * /: results as numpy's ufuncs give them, a truth value as
# 1 or 0 in the value dtype (numpy's bool, converted).

def _truth(builder: ir.IRBuilder, x: ir.Value, dtype: str) -> ir.Value:
    """Whether ``x`` is nonzero (NaN is: numpy's logical_and(nan, 1) is True)."""
    zero = ir.Constant(x.type, 0)
    if _kind(dtype) == "f":
        return builder.fcmp_unordered("!=", x, zero)
    return x if _kind(dtype) == "b" else builder.icmp_signed("!=", x, zero)


def _from_truth(builder: ir.IRBuilder, t: ir.Value, dtype: str) -> ir.Value:
    k = _kind(dtype)
    if k == "b":
        return t
    return builder.uitofp(t, compute_type(dtype)) if k == "f" else builder.zext(
        t, compute_type(dtype))


def _compare(symbol: str) -> Callable[[ir.IRBuilder, list[ir.Value], str], ir.Value]:
    """``symbol`` as numpy compares: ordered (False with a NaN) except ``!=``."""
    def emit(builder: ir.IRBuilder, args: list[ir.Value], dtype: str) -> ir.Value:
        a, b = args
        k = _kind(dtype)
        if k == "f":
            test = builder.fcmp_unordered if symbol == "!=" else builder.fcmp_ordered
            truth = test(symbol, a, b)
        elif k in "bu":
            truth = builder.icmp_unsigned(symbol, a, b)
        else:
            truth = builder.icmp_signed(symbol, a, b)
        return _from_truth(builder, truth, dtype)
    return emit


def _logic(combine: str) -> Callable[[ir.IRBuilder, list[ir.Value], str], ir.Value]:
    def emit(builder: ir.IRBuilder, args: list[ir.Value], dtype: str) -> ir.Value:
        a, b = (_truth(builder, x, dtype) for x in args)
        return _from_truth(builder, getattr(builder, combine)(a, b), dtype)
    return emit


def _extreme(symbol: str) -> Callable[[ir.IRBuilder, list[ir.Value], str], ir.Value]:
    """numpy's minimum/maximum: a NaN operand gives NaN, and of two equal values
    (0.0 and -0.0) the second."""
    def emit(builder: ir.IRBuilder, args: list[ir.Value], dtype: str) -> ir.Value:
        a, b = args
        k = _kind(dtype)
        if k == "f":
            first = builder.or_(builder.fcmp_ordered(symbol, a, b),
                                builder.fcmp_unordered("uno", a, a))
        elif k in "bu":
            first = builder.icmp_unsigned(symbol, a, b)
        else:
            first = builder.icmp_signed(symbol, a, b)
        return builder.select(first, a, b)
    return emit


def _not(builder: ir.IRBuilder, args: list[ir.Value], dtype: str) -> ir.Value:
    return _from_truth(builder, builder.not_(_truth(builder, args[0], dtype)), dtype)


def _where(builder: ir.IRBuilder, args: list[ir.Value], dtype: str) -> ir.Value:
    c, a, b = args
    return builder.select(_truth(builder, c, dtype), a, b)


def _abs(builder: ir.IRBuilder, args: list[ir.Value], dtype: str) -> ir.Value:
    (x,) = args
    k = _kind(dtype)
    if k == "f":
        return _intrinsic(builder, "llvm.fabs", [x])
    if k in "bu":
        return x
    return builder.select(builder.icmp_signed("<", x, ir.Constant(x.type, 0)),
                          builder.neg(x), x)


def _float_only(name: str) -> Callable[[ir.IRBuilder, list[ir.Value], str], ir.Value]:
    def emit(builder: ir.IRBuilder, args: list[ir.Value], dtype: str) -> ir.Value:
        if _kind(dtype) != "f":
            raise TypeError(f"operator {name} needs a floating-point result dtype")
        return _intrinsic(builder, f"llvm.{name}", args)
    return emit


def _intrinsic(builder: ir.IRBuilder, name: str, args: list[ir.Value]) -> ir.Value:
    function = builder.module.declare_intrinsic(name, [args[0].type])
    return builder.call(function, args)


_FUNCTIONS: dict[str, Callable[[ir.IRBuilder, list[ir.Value], str], ir.Value]] = {
    "min": _extreme("<"), "max": _extreme(">"),
    "lt": _compare("<"), "le": _compare("<="), "eq": _compare("=="), "ne": _compare("!="),
    "gt": _compare(">"), "ge": _compare(">="),
    "and": _logic("and_"), "or": _logic("or_"), "xor": _logic("xor"), "not": _not,
    "where": _where, "abs": _abs,
    "exp": _float_only("exp"), "log": _float_only("log"), "sqrt": _float_only("sqrt"),
    "pow": _float_only("pow"),
}
