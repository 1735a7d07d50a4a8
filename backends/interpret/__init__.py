"""The interpreter backend: a kernel run by walking its loop IR in Python (for tests)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.loops.nodes import Program
from .walker import Walker


def run_program(program: Program, operands: dict[str, Any], out_shape: tuple[int, ...]
                ) -> tuple[np.ndarray, list]:
    """The output entries ``program`` writes on ``operands`` (tensors by the kernel's
    names), computed in the program's dtype: their coordinates ((order, entries), mode
    order) and values, in the order written."""
    walker = Walker(program, operands, out_shape)
    walker.run(program.root)
    entries = walker.output.entries
    by_level = np.array(list(entries), dtype=np.int64).reshape(len(entries), len(out_shape)).T
    coords = np.empty_like(by_level)  # an output access names its indices in level order
    for k, level in enumerate(program.output_levels):
        coords[level.mode] = by_level[k]
    return coords, list(entries.values())
