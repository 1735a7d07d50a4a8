"""The loop IR's annotations: the fast forms a pass chose for a loop (``Loop.forms``, and
``Loop.other``: its forms in the kernel's other form) and the tags that say how threads
split it (``Loop.tags``). Passes (ir/opt/passes.py) choose them; a backend translates a
loop by them and never decides them itself, so they live here, below both."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .nodes import LoopNode

JAM_LANES = (8, 4)  # positions per step of a jammed loop, in the order they run
JAM = "jam 8, 4"  # how the loop IR prints those lanes (Loop.jam)
THREAD_ROWS = "thread rows"  # a tag: threads split this loop's range [lo, hi)
# A tag: threads split this loop's range, over an index the output does not have (a
# user's schedule), each into a private output: no rows of the output are theirs.
THREAD_RANGE = "thread range"

# The names of the forms a kernel's other form adds (kept in a kernel's metadata, read by
# ir/plan/autoschedule.py's cost model): paired rows, galloping past every mismatch, selected
# cases and prefetched rows.
PAIRS = "pairs (other form)"
GALLOP = "gallop when skewed, always (other form)"
SELECT_OTHER = "select cases (other form)"
PREFETCH = "prefetch next rows (other form)"


@dataclass(frozen=True)
class Gallop:
    """How a merge's iterators skip past mismatches by a search: where one range is over
    ``skew`` times another's (the loop in two versions, picked per range), or, with
    ``skew`` 0, at every mismatch."""

    skew: int = 0

    def __str__(self) -> str:
        return "gallop always" if not self.skew else f"gallop when skewed {self.skew}x"


@dataclass(frozen=True)
class Forms:
    """The fast forms passes chose for a loop; the backend translates each as given."""

    pairs: bool = False  # two halves of the loop's range side by side (llvm/pairs.py)
    gallop: Gallop | None = None  # a merge's iterators search past mismatches
    lockstep: bool = False  # a merge first tests whether its ranges hold equal coordinates
    running_sums: bool = False  # a sorted run of duplicates summed as it comes
    select: bool = False  # a merge's cases all computed, the value picked by selects
    clear_rows: bool = False  # the kernel zeroes each output row before scattering into it
    prefetch: int = 0  # rows of the position this many ahead prefetched (0: none)


NO_FORMS = Forms()


def forms_text(forms: Forms) -> list[str]:
    """How the loop IR prints ``forms``, in the order the passes choose them."""
    shown = ["pairs"] if forms.pairs else []
    shown += [str(forms.gallop)] if forms.gallop is not None else []
    shown += ["lockstep when equal"] if forms.lockstep else []
    shown += ["running sums"] if forms.running_sums else []
    shown += ["select cases"] if forms.select else []
    shown += ["clear rows"] if forms.clear_rows else []
    return shown + ([f"prefetch {forms.prefetch} ahead"] if forms.prefetch else [])


def changed(first: Forms, other: Forms) -> Forms:
    """The forms of ``other`` that differ from ``first`` (the rest left unset)."""
    return Forms(**{f.name: getattr(other, f.name) for f in fields(Forms)
                    if getattr(other, f.name) != getattr(first, f.name)})


def without_forms(node: LoopNode) -> LoopNode:
    """``node`` with its fast forms (jam included) dropped, in either form: threads (or a
    warp's lanes) share its range, which a jammed, paired or cleared row would cross (a
    running-sum loop's unroll count goes with its form)."""
    unroll = 1 if node.forms.running_sums else node.unroll
    return replace(node, forms=NO_FORMS, other=None, jam=(), unroll=unroll)


def jam_text(lanes: tuple[int, ...]) -> str:
    """How the loop IR prints a jammed loop's lanes (``jam 8, 4``)."""
    return "jam " + ", ".join(str(n) for n in lanes)


def split_by_threads(node: LoopNode) -> bool:
    """Whether threads split the loop's coordinates, each running its range [lo, hi)."""
    return THREAD_ROWS in node.tags or THREAD_RANGE in node.tags
