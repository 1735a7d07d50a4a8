"""What a kernel translated under a warp schedule asks of its target: its lane in the
warp, and the sum of a value over the warp's lanes.

The translated module defines each for a warp of one lane (``linkonce_odr``: lane 0, the
value itself), so host code and the CPU's JIT of a GPU build run as they are; a device
module links in its target's own definitions, which replace these
(backends/cuda/device_ir: NVVM special registers and shuffles, or the emulator's).
"""

from __future__ import annotations

from llvmlite import ir

I64 = ir.IntType(64)
LANE = "llvsparse_gpu_lane"


def warp_sum_name(value_type: ir.Type) -> str:
    """The warp-sum function of a float type (f32 or f64)."""
    return f"llvsparse_warp_sum_{'f64' if isinstance(value_type, ir.DoubleType) else 'f32'}"


def _one_lane(module: ir.Module, name: str, signature: ir.FunctionType) -> ir.Function:
    """``name`` in ``module``, defined (once) as a warp of one lane would run it."""
    found = module.globals.get(name)
    if found is not None:
        return found
    function = ir.Function(module, signature, name)
    function.linkage = "linkonce_odr"
    b = ir.IRBuilder(function.append_basic_block("entry"))
    b.ret(function.args[0] if function.args else ir.Constant(I64, 0))
    return function


def lane(builder: ir.IRBuilder) -> ir.Value:
    """This thread's lane in its warp (i64)."""
    return builder.call(_one_lane(builder.module, LANE, ir.FunctionType(I64, [])), [])


def warp_sum(builder: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """``value`` summed over the warp's lanes (every lane gets the sum)."""
    if not isinstance(value.type, (ir.FloatType, ir.DoubleType)):
        raise TypeError(f"a warp sum adds floats, not {value.type}")
    function = _one_lane(builder.module, warp_sum_name(value.type),
                         ir.FunctionType(value.type, [value.type]))
    return builder.call(function, [value])
