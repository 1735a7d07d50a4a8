"""Value dtypes in IR: element types, conversions and arithmetic per operator kind."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

_ELEMENT = {
    "float64": ir.DoubleType(), "float32": ir.FloatType(), "int64": ir.IntType(64),
    "int32": ir.IntType(32), "int16": ir.IntType(16), "int8": ir.IntType(8),
    "bool": ir.IntType(8),
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
        return builder.uitofp(value, target) if sk == "b" else builder.sitofp(value, target)
    if sk == "f":
        return builder.fptosi(value, target)
    if value.type.width < target.width:
        return builder.zext(value, target) if sk == "b" else builder.sext(value, target)
    return builder.trunc(value, target) if value.type.width > target.width else value


def store_value(builder: ir.IRBuilder, value: ir.Value, dtype: str) -> ir.Value:
    """Register value of ``dtype`` to its memory element form."""
    return builder.zext(value, element_type(dtype)) if dtype == "bool" else value


def constant(dtype: str, value: float) -> ir.Constant:
    if dtype == "bool":
        return ir.Constant(ir.IntType(1), int(bool(value)))
    if _kind(dtype) == "f":
        return ir.Constant(compute_type(dtype), float(value))
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
