"""The GPU mapping of a kernel: which loop the grid splits, and the block size.

A planning rule over the loop IR, so the backend only translates what it is told: the
loop the ``thread rows`` pass marked (the output's first index, where each coordinate
writes only its own rows of a dense-like output) is tagged ``gpu_block`` and
``gpu_thread``: a global thread index (blockIdx * blockDim + threadIdx) takes one
coordinate of it. Anything else is refused with a ``GpuMappingError`` naming the
construct, never compiled into a kernel that races.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .loops import Block, Case, If, Loop, LoopNode, Merge, Node, Program, loops_of, tag
from .opt.passes import THREAD_ROWS
from .parallel import dense_like
from .types import TensorType

GPU_BLOCK = "gpu_block"  # the loop's range is split over the grid's blocks
GPU_THREAD = "gpu_thread"  # ... and over each block's threads: one coordinate a thread
BLOCK_SIZE = 128  # threads per block: four warps, a full occupancy unit on sm_70..sm_90


class GpuMappingError(ValueError):
    """A kernel (or one of its constructs) has no GPU mapping yet."""


@dataclass(frozen=True)
class GpuPlan:
    """How a kernel maps onto the grid: ``program`` with the split loop tagged, its
    ``index``, and the threads per block."""

    program: Program
    index: str
    block: int = BLOCK_SIZE

    def grid(self, extent: int) -> int:
        """Blocks that cover ``extent`` coordinates of the split loop, one per thread."""
        if extent < 0:
            raise ValueError(f"a loop extent cannot be negative, not {extent}")
        return max(1, -(-extent // self.block))


def _retag(node: Node, target: LoopNode) -> Node:
    """``node`` with the loop ``target`` (by identity) tagged for the grid."""
    if node is target:
        return tag(tag(node, GPU_BLOCK), GPU_THREAD)
    if isinstance(node, Block):
        return Block(tuple(_retag(item, target) for item in node.items))
    if isinstance(node, If):
        return If(node.condition, _retag(node.then, target))
    if isinstance(node, Loop):
        return replace(node, body=_retag(node.body, target))
    if isinstance(node, Merge):
        return replace(node, cases=tuple(Case(c.present, _retag(c.body, target))
                                         for c in node.cases))
    return node


def plan_gpu(program: Program, splittable: bool, block: int = BLOCK_SIZE) -> GpuPlan:
    """The GPU mapping of ``program``: a thread per coordinate of the loop over the
    output's first index, where CPU threads may split it too (``splittable``: the
    kernel's parallel mode, ir/parallel.py, so no loop outside it walks an operand's
    modes, which every thread would then walk whole)."""
    if not isinstance(block, int) or not 1 <= block <= 1024 or block % 32:
        raise ValueError(f"a GPU block holds a multiple of 32 threads, at most 1024, "
                         f"not {block!r}")
    if program.nests != 1:
        raise GpuMappingError(f"a kernel of {program.nests} loop nests (an additive "
                              "statement split) has no GPU mapping yet")
    if not dense_like(TensorType(program.output_levels, 0, program.dtype, "int32")):
        raise GpuMappingError("an assembled (sparse) output has no GPU mapping yet: it needs "
                              "a count pass sizing it on the host before the launch")
    split = [loop for loop in loops_of(program.root) if THREAD_ROWS in loop.tags]
    if not split or not splittable:
        raise GpuMappingError("no loop of this kernel has a GPU thread mapping yet: none "
                              "runs over the output's first index with each coordinate "
                              "writing only its own rows and no loop outside it walking "
                              "an operand's modes")
    first = split[0]
    return GpuPlan(replace(program, root=_retag(program.root, first)), first.index, block)
