"""How threads may assemble a kernel's sparse output, decided from its loop IR.

A whole kernel assembles its output alone. Threads that split the output's first
index assemble it together in phases, when the program allows:

- split: ``setup`` sizes the output's fixed arrays, ``count(lo, hi)`` counts the
  entries rows [lo, hi) append, ``fill(lo, hi, offset)`` appends them from ``offset``
  into arrays sized exactly, and ``finish(total)`` runs the levels' finalize functions;
- gather: ``setup`` as above, ``append(lo, hi)`` appends rows [lo, hi) into the
  thread's own buffers from position 0 (the row cells it owns stay shared), the caller
  concatenates the buffers in row order, and ``finish(total)`` as above.

The choice is made here, on the program and the output's level declarations, and
recorded in ``Program.phases``; the backend builds the phases it is given.
"""

from __future__ import annotations

import ast

from ..concrete.expressions import operands
from ..types import LevelType, TensorType, unordered_append_output
from .legality import block_suffix, inserted_prefix
from .nodes import Program, loops_of
from .relocatable import appends_relocatably

SPLIT_PHASES = ("setup", "count", "fill", "finish")
GATHER_PHASES = ("setup", "append", "finish")


def assembly_phases(program: Program, types: dict[str, TensorType]) -> tuple[str, ...]:
    """The phase entries threads assemble ``program``'s output through (SPLIT_PHASES,
    GATHER_PHASES), or () where only the whole kernel may."""
    if not _rows_outermost(program) or not _splittable(program):
        return ()
    if _counting_pays(program, types):
        return SPLIT_PHASES
    return GATHER_PHASES if _gatherable(program.output_levels) else ()


def can_count_and_fill(program: Program) -> bool:
    """Whether threads may count, then fill, the output's rows whether or not counting
    pays on a CPU (a GPU's assembly: it has no private buffers to gather into)."""
    return _rows_outermost(program) and _splittable(program)


def _rows_outermost(program: Program) -> bool:
    """One loop nest whose outermost loop is the output's first index (no index of
    it derived from blocked levels)."""
    loops = loops_of(program.root)
    if program.nests != 1 or not loops:
        return False
    site = loops[0].site
    return bool(site.out_vars) and not site.derived and bool(site.order) \
        and site.order[0] == site.out_vars[0]


def _counting_pays(program: Program, types: dict[str, TensorType]) -> bool:
    """Counting walks the same sparse loops as filling; it is cheaper only by the dense
    loops inside the output's indices (a dot product per entry, as in SDDMM), which it
    drops. Without them two passes on two threads measured no faster than one pass
    (SpAdd 0.82-1.35x, Hadamard 0.66-1.22x, TTV into CSR 0.83-1.17x over four runs):
    such kernels gather instead. An operand read from a temporary (a precomputed
    copy) is not taken to be full."""
    loops = loops_of(program.root)
    site = loops[0].site
    inner = {v for v in site.order if v not in site.out_vars}
    read = {op for loop in loops if loop.expr is not None for op in operands(loop.expr)}
    return bool(inner) and all(op.tensor in types and types[op.tensor].levels[k].full
                               for op in read for k, v in enumerate(op.vars) if v in inner)


def _splittable(program: Program) -> bool:
    """Rows that threads own (full, array-free insert levels) above one append group,
    none of whose initialized arrays grows with its entries, and no block levels below
    it (ir/legality.block_suffix)."""
    levels = program.output_levels
    prefix = inserted_prefix(levels)
    heads = [k for k in range(prefix, len(levels)) if k == prefix or not levels[k].branchless]
    if _unordered(levels) or prefix == 0 or heads != [prefix] \
            or block_suffix(levels) < len(levels):
        return False
    if not all(lv.full and not lv.definition.arrays for lv in levels[:prefix]):
        return False
    appended = [adef for lv in levels[prefix:] for adef in lv.definition.arrays.values()]
    return all(adef.length is not None for adef in appended) and not any(
        adef.init is not None and grows_with_entries(adef.length) for adef in appended)


def _gatherable(levels: tuple[LevelType, ...]) -> bool:
    """One appended level whose append functions are relocatable (ir/loops/relocatable.py) and
    whose arrays without an initial value hold one element per entry: threads may then
    append their rows into private buffers from position 0."""
    prefix = inserted_prefix(levels)
    if prefix != len(levels) - 1:
        return False
    level = levels[prefix].definition
    return not any(a.shared for a in level.arrays.values()) and all(
        a.init is not None or _is_size(a.length) for a in level.arrays.values()) \
        and appends_relocatably(level)


def _unordered(levels: tuple[LevelType, ...]) -> bool:
    return unordered_append_output(levels)


def _is_size(length: ast.expr | None) -> bool:
    return isinstance(length, ast.Name) and length.id == "size"


def grows_with_entries(length: ast.expr | None) -> bool:
    """Whether an array's length follows its level's entry count (``size``), as opposed
    to its parent's (a positions array) or nothing."""
    return length is not None and any(isinstance(node, ast.Name) and node.id == "size"
                                      for node in ast.walk(length))
