"""Whether a kernel sets every entry of its dense output itself, read off its loop IR.

Where it does, the caller need not zero the output first (``out=``, a recycled result).
Threads that add into shared entries atomically (an entry split) need it zeroed. Three
ways the program can promise it otherwise:
- a ``clear`` of the output (the start of a reduction other than + scattered into it);
- the row-clearing pass's note on a loop that visits every row, whose body computes
  something (an expression folded to its fill emits no body, so no row is cleared);
- a sum stored (not added) at every coordinate of loops that visit them all, into an
  output whose levels are all full (row-wise SpMV), with nothing scattered.
"""

from __future__ import annotations

from ..concrete.expressions import Operand
from .entry_split import ATOMIC_TAG
from .nodes import Clear, Insert, Loop, LoopNode, Program, leading_locates, loops_of, walk


def initializes_output(program: Program) -> bool:
    """Whether ``program`` (a whole kernel of one nest) sets every output entry."""
    loops = [loop for loop in loops_of(program.root) if not loop.site.copies]
    if program.nests != 1 or not loops or any(ATOMIC_TAG in loop.tags for loop in loops):
        return False  # (threads that add into shared entries need them zeroed first)
    site = loops[0].site
    if any(isinstance(n, Clear) and n.name == program.output for n in walk(program.root)):
        return True
    if any(loop.forms.clear_rows and _computes(loop) for loop in loops):
        return True
    stored = all(lv.full for lv in program.output_levels) and any(
        isinstance(n, Insert) and _is_sum(n.value) for n in walk(program.root))
    return stored and not site.scatter and all(
        _covers_all(loop) for loop in loops if loop.index in site.out_vars)


def _computes(loop: LoopNode) -> bool:
    return loop.chosen is None or any(e is not None for e in loop.chosen.case_exprs)


def _covers_all(loop: LoopNode) -> bool:
    """Every coordinate of the loop's index is visited, with every operand there (a
    loop of one lattice point over full levels, none located that can miss)."""
    if not isinstance(loop, Loop) or loop.site.lattice_points != 1:
        return False
    return (loop.iterator.universe or loop.iterator.facts.full) and \
        all(ref.facts.full for ref in leading_locates(loop))


def _is_sum(value: object) -> bool:
    return isinstance(value, Operand) and value.uid == -1
