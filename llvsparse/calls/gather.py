"""Sparse outputs gathered by threads (see KernelCompiler.can_gather_assembly): each chunk
of rows appends its entries into buffers of its own, counted from position 0, and the
threads then copy the buffers into place.

The copy moves every entry once more, which costs about what a merge that only streams
costs: on two threads here a uniform random SpAdd gathers 1.6x faster than one thread,
but the stencil's A + Aᵀ or a graph's runs 0.8x. Which one a call is depends on its data,
so each binding times its first calls both ways and keeps the faster (probe.py).
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Callable

from ..abi import runtime, thread_calls
from ..abi.runtime import DescriptorHolder
from ..abi.thread_calls import Phase, Split
from ..backends.llvm.emit_base import STATUS_NO_MEMORY


class Scratch:
    """One binding's private descriptors, one per chunk: their buffers (``moved``: slot,
    element size) are kept from call to call, since fresh ones cost their page faults
    on every call. Reserved at first for the stored entries under the chunk's rows, which
    bound most outputs' entries; untouched pages cost nothing."""

    def __init__(self, moved: list[tuple[int, int]], plan: Split):
        self.moved, self.plan = moved, plan
        self.holders: list[DescriptorHolder] = []
        self.lock = threading.Lock()  # one call at a time uses the kept buffers

    def for_output(self, output: DescriptorHolder) -> list[DescriptorHolder]:
        """The descriptors for a call, sharing ``output``'s other arrays (its row cells)."""
        slots = [slot for slot, _ in self.moved]
        if not self.holders:
            self.holders = [output.private_copy(slots) for _ in self.plan.chunks]
            for mine, work in itertools.zip_longest(self.holders, self.plan.work):
                for slot, itemsize in self.moved:
                    mine.reserve(slot, work or 1, itemsize)
        else:
            for mine in self.holders:
                mine.share(output, slots)
        return self.holders

    def __del__(self) -> None:
        for mine in self.holders:
            mine.give_back(self.moved)


def gather_parallel(addresses: dict[str, int], holders: list[DescriptorHolder], plan: Split,
                    scratch: Scratch, reserve: Callable[[int], None]) -> None:
    """Assemble the output in ``holders[0]`` on ``plan``'s threads in one pass: ``setup``;
    each chunk appends into its scratch descriptor; ``reserve(total)`` sizes the output
    exactly; the threads copy each chunk's buffers to its offset; ``finish``."""
    table = runtime.descriptor_table(holders)
    runtime.check_status(thread_calls.SETUP_TYPE(addresses["setup"])(table), holders)
    output = holders[0]
    own = scratch.for_output(output)  # after setup: they share its row cells
    tables = [runtime.descriptor_table([mine, *holders[1:]]) for mine in own]
    counts = [ctypes.c_int64(0) for _ in plan.chunks]
    offsets: list[int] = []
    append = thread_calls.APPEND_TYPE(addresses["append"])

    def size_output() -> None:
        offsets.extend(itertools.accumulate((c.value for c in counts), initial=0))
        reserve(offsets[-1])

    def copy(k: int) -> int:
        entries = counts[k].value
        if not entries:
            return 0
        for slot, itemsize in scratch.moved:
            if not output.pointers[slot]:
                return STATUS_NO_MEMORY  # reserve could not allocate
            ctypes.memmove(output.pointers[slot] + offsets[k] * itemsize,
                           own[k].pointers[slot], entries * itemsize)
        return 0

    thread_calls.run_phases(holders, plan, [
        Phase(lambda k: append(tables[k], *plan.chunks[k], ctypes.byref(counts[k])),
              size_output),
        Phase(copy)])
    runtime.check_status(thread_calls.FINISH_TYPE(addresses["finish"])(table, offsets[-1]), holders)
