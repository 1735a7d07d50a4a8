"""A device module's definitions of what warp schedules ask (backends/llvm/gpu_hooks):
``llvsparse_gpu_lane`` and ``llvsparse_warp_sum_f32``/``_f64``, replacing the translated
module's one-lane definitions when linked.

On the GPU a lane is ``tid.x`` mod 32 (blocks hold whole warps) and a sum is a butterfly
of ``llvm.nvvm.shfl.sync.bfly.i32`` (a double as its two halves), after which every lane
holds the same total. In the emulator, whose lanes are host threads, each is a call
through a function pointer the host sets (emulator.WarpRunner), so lanes meet where a
device's would.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from ..llvm.gpu_hooks import LANE, warp_sum_name

I32, I64 = ir.IntType(32), ir.IntType(64)
WARP = 32
FULL_MASK = ir.Constant(I32, 0xFFFFFFFF)
FLOATS = (ir.FloatType(), ir.DoubleType())


def _define(module: ir.Module, name: str, signature: ir.FunctionType,
            body: Callable[[ir.IRBuilder, ir.Function], ir.Value]) -> None:
    function = ir.Function(module, signature, name)
    b = ir.IRBuilder(function.append_basic_block("entry"))
    b.ret(body(b, function))


def _shuffle(b: ir.IRBuilder, value: ir.Value, offset: int) -> ir.Value:
    """The ``value`` of lane (this lane xor ``offset``)."""
    module = b.module
    name = "llvm.nvvm.shfl.sync.bfly.i32"
    shfl = module.globals.get(name) or ir.Function(
        module, ir.FunctionType(I32, [I32, I32, I32, I32]), name)
    clamp = ir.Constant(I32, 0x1F)
    if isinstance(value.type, ir.FloatType):
        bits = b.call(shfl, [FULL_MASK, b.bitcast(value, I32), ir.Constant(I32, offset), clamp])
        return b.bitcast(bits, value.type)
    whole = b.bitcast(value, I64)
    halves = [b.trunc(whole, I32), b.trunc(b.lshr(whole, ir.Constant(I64, 32)), I32)]
    lo, hi = (b.zext(b.call(shfl, [FULL_MASK, h, ir.Constant(I32, offset), clamp]), I64)
              for h in halves)
    return b.bitcast(b.or_(b.shl(hi, ir.Constant(I64, 32)), lo), value.type)


def define_nvvm(module: ir.Module, special: Callable[[ir.IRBuilder, str], ir.Value]) -> None:
    """The lane from ``tid.x`` and the warp sums by shuffles."""
    _define(module, LANE, ir.FunctionType(I64, []),
            lambda b, f: b.zext(b.and_(special(b, "tid.x"), ir.Constant(I32, WARP - 1)), I64))

    def butterfly(b: ir.IRBuilder, function: ir.Function) -> ir.Value:
        total = function.args[0]
        offset = WARP // 2
        while offset:
            total = b.fadd(total, _shuffle(b, total, offset))
            offset //= 2
        return total
    for kind in FLOATS:
        _define(module, warp_sum_name(kind), ir.FunctionType(kind, [kind]), butterfly)


def pointer_global(module: ir.Module, name: str, signature: ir.FunctionType) -> ir.GlobalVariable:
    """The emulator's global holding a host function's address (set before a launch)."""
    found = module.globals.get(name)
    if found is None:
        found = ir.GlobalVariable(module, signature.as_pointer(), name)
        found.initializer = ir.Constant(signature.as_pointer(), None)
    return found


LANE_POINTER = "llvsparse_emu_lane_fn"


def sum_pointer(kind: ir.Type) -> str:
    return f"llvsparse_emu_{warp_sum_name(kind)}_fn"


def define_emulated(module: ir.Module) -> None:
    """The lane and the warp sums as calls through host-set function pointers."""
    lane_type = ir.FunctionType(I64, [])
    _define(module, LANE, lane_type, lambda b, f: b.call(
        b.load(pointer_global(module, LANE_POINTER, lane_type)), []))
    for kind in FLOATS:
        signature = ir.FunctionType(kind, [kind])
        _define(module, warp_sum_name(kind), signature, lambda b, f, s=signature, k=kind: b.call(
            b.load(pointer_global(module, sum_pointer(k), s)), [f.args[0]]))
