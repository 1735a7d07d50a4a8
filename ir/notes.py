"""The loop IR's annotations: the fast forms a pass may note on a loop (``Loop.notes``)
and the tags that say how threads split it (``Loop.tags``). Passes (ir/opt/passes.py)
choose them; a backend translates a loop by them and never decides them itself, so
they live here, below both."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .loops import LoopNode

JAM_LANES = (8, 4)  # positions per step of a jammed loop, in the order they run
JAM = "jam 8, 4"  # how the loop IR prints those lanes (Loop.jam)
PAIRS = "pairs (other form)"
GALLOP = "gallop when skewed, always (other form)"
LOCKSTEP = "lockstep when equal"
RUNNING_SUMS = "running sums"
SELECT = "select cases"
SELECT_OTHER = "select cases (other form)"
CLEAR_ROWS = "clear rows"
PREFETCH = "prefetch next rows (other form)"
THREAD_ROWS = "thread rows"  # a tag: threads split this loop's range [lo, hi)
# A tag: threads split this loop's range, over an index the output does not have (a
# user's schedule), each into a private output: no rows of the output are theirs.
THREAD_RANGE = "thread range"
OTHER_FORMS = frozenset({PAIRS, GALLOP, SELECT_OTHER, PREFETCH})  # timed against the first


def jam_text(lanes: tuple[int, ...]) -> str:
    """How the loop IR prints a jammed loop's lanes (``jam 8, 4``)."""
    return "jam " + ", ".join(str(n) for n in lanes)


def split_by_threads(node: LoopNode) -> bool:
    """Whether threads split the loop's coordinates, each running its range [lo, hi)."""
    return THREAD_ROWS in node.tags or THREAD_RANGE in node.tags
