"""A counting build: every loop of a kernel's module counts its head's executions.

Complexity is a property of how work grows with the dimensions at a fixed number of
stored entries, which a timing on fast hardware can hide; a count cannot. Each block
that heads a loop (the emitter names them ``*.head``: loops over coordinates and
positions, jammed and paired steps, galloping and binary searches, level functions'
``while``/``for``, workspace scans, sorts) adds one to a global counter each time it
runs, so the total is every iteration plus every entry into a loop. The counter is
added to atomically (threads share it); the runtime reads it after a call.
"""

from __future__ import annotations

from llvmlite import ir

COUNTER = "llvsparse_loop_heads"
_I64 = ir.IntType(64)


def count_loop_heads(module: ir.Module) -> int:
    """Instrument every loop head of ``module``'s functions; the number instrumented."""
    counter = ir.GlobalVariable(module, _I64, COUNTER)
    counter.initializer = ir.Constant(_I64, 0)
    one = ir.Constant(_I64, 1)
    heads = 0
    for function in module.functions:
        for block in function.blocks:
            if not block.name.endswith(".head") and ".head." not in block.name:
                continue
            builder = ir.IRBuilder(block)
            phis = [i for i in block.instructions if isinstance(i, ir.PhiInstr)]
            if phis:
                builder.position_after(phis[-1])
            else:
                builder.position_at_start(block)
            builder.atomic_rmw("add", counter, one, "monotonic")
            heads += 1
    return heads
