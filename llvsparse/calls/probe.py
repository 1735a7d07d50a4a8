"""A binding's first calls time the ways it may run, and later calls keep the fastest.

Two choices depend on the operands' data more than on anything a count can tell apart
(see BENCHMARKS.md, "Measured and left alone"):

- the form of the loops (the program or its other form, ir/opt/passes.py: other_form):
  the merge of each co-iteration (a union that branches per case wins on regular
  patterns and loses on random ones, where the branch mispredicts every other entry; an
  intersection that searches past every mismatch wins where the unmatched entries come
  in runs), and whether two rows' sums run side by side (backends/llvm/pairs.py: ahead
  on long rows, behind on short or irregular ones);
- whether threads gather a sparse output (gather.py): the copy costs what a merge that
  only streams costs.

The form is timed first, on the binding's direct way; then, where the binding may gather,
both assemblies are timed with the faster form. The ways take turns, three calls each,
and each way's fastest call counts: a binding's first call pays for fresh memory, a way's
first call for its own buffers, and any call may meet another process on a shared machine
(one call each misjudged Franz6's SpAdd between other libraries' calls: 0.26 vs 0.18 ms
the wrong way round, where the two merges take 0.12 and 0.21).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import NamedTuple

FORMS = ("first", "other")
ASSEMBLIES = ("direct", "gathered")

# Dimensions fixed instead of timed, e.g. {"assembly": "gathered"} (tests use it).
FORCED: dict[str, str] = {}
TIMED_CALLS = 3  # per way; the fastest one counts


class Way(NamedTuple):
    form: str  # one of FORMS
    assembly: str  # one of ASSEMBLIES


class Probe:
    """Chooses a binding's way among ``forms`` x ``assemblies`` (each a tuple of the
    names the binding has, first the default)."""

    def __init__(self, forms: tuple[str, ...], assemblies: tuple[str, ...]):
        unknown = set(FORCED) - {"form", "assembly"}
        if unknown:
            raise ValueError(f"probe.FORCED: unknown dimensions {sorted(unknown)}; "
                             "expected 'form' or 'assembly'")
        self.forms = _forced(forms, "form")
        self.assemblies = _forced(assemblies, "assembly")
        self.seconds: dict[Way, float] = {}
        self.choice: Way | None = None
        self._schedule = self._ways()
        self._lock = threading.Lock()  # calls of one binding may come from several threads

    @property
    def probing(self) -> bool:
        return len(self.forms) > 1 or len(self.assemblies) > 1

    def next_way(self) -> Way:
        if self.choice is None:
            with self._lock:
                if self.choice is None:
                    way = next(self._schedule, None)
                    if way is not None:
                        return way
                    self.choice = self._fastest()
        return self.choice

    def record(self, way: Way, seconds: float) -> None:
        with self._lock:
            if self.choice is None:
                self.seconds[way] = min(seconds, self.seconds.get(way, seconds))

    def _ways(self) -> Iterator[Way]:
        direct = self.assemblies[0]
        if len(self.forms) > 1:
            for _ in range(TIMED_CALLS):
                yield from (Way(form, direct) for form in self.forms)
        form = self._fastest().form
        if len(self.assemblies) > 1:
            untimed = self.assemblies if len(self.forms) == 1 else self.assemblies[1:]
            for _ in range(TIMED_CALLS):
                yield from (Way(form, assembly) for assembly in untimed)

    def _fastest(self) -> Way:
        """The fastest way timed so far; the defaults where none was (nothing to choose,
        or the probing calls failed)."""
        if not self.seconds:
            return Way(self.forms[0], self.assemblies[0])
        return min(self.seconds, key=self.seconds.__getitem__)


def _forced(names: tuple[str, ...], dimension: str) -> tuple[str, ...]:
    wanted = FORCED.get(dimension)
    return (wanted,) if wanted in names else names
