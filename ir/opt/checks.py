"""The legality checks of the loop-IR passes, over level facts only.

Each check takes what it needs to know about the levels a loop iterates and locates
(``Facts``), so that the pass (over the loop IR) and the emitter (over the loop it is
generating) ask the same question the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..loops.nodes import Facts


def located_surely(facts: Facts) -> bool:
    """A located level that is full and whose ``locate`` finds every coordinate."""
    return facts.full and facts.locate_always_found


def one_per_position(facts: Facts, universe: bool) -> bool:
    """An iterated level whose every step is one coordinate, found without a test."""
    return universe or (facts.unique and facts.always_found and not facts.segmented)


def jammable(driver: Facts, positions: bool, points: int, hooks: bool,
             range_test: bool, others: Sequence[Facts]) -> bool:
    """Unroll-and-jam (backends/llvm/jam.py): one level iterated by position, each position one
    coordinate, every other level at it located surely, one lattice point, no
    per-coordinate output hooks and no thread-range test."""
    return (points == 1 and not hooks and not range_test and positions
            and one_per_position(driver, False) and all(map(located_surely, others)))


def pairable(driver: Facts | None, points: int, hooks: bool, unclamped_range: bool,
             others: Sequence[Facts]) -> bool:
    """Two halves side by side (backends/llvm/pairs.py), for the outer loop: one iterator (None: a
    universe) visiting each coordinate once without a test, one lattice point, no hooks,
    every other level located surely."""
    return (points == 1 and not hooks and not unclamped_range
            and (driver is None or one_per_position(driver, False))
            and all(map(located_surely, others)))


def pair_driver(driver: Facts, positions: bool, others: Sequence[Facts]) -> bool:
    """The inner loop of a pair: one level by position, unique under unique levels,
    each position found, not branchless; every other level located surely."""
    return (positions and not driver.branchless and driver.unique and driver.always_found
            and driver.above_unique and all(map(located_surely, others)))


def gallops(iterators: Sequence[Facts | None], points: int) -> bool:
    """Galloping intersection: an intersection (one lattice point) of two or more
    levels iterated by position (None: a universe, or by coordinate), each ordered,
    unique, every position a coordinate."""
    return len(iterators) >= 2 and points == 1 and all(
        f is not None and f.ordered and one_per_position(f, False) for f in iterators)


def runs_sums(driver: Facts, positions: bool, points: int, hooks: bool,
              writes_at_next: bool, linear: bool, output_full: bool,
              accumulates: bool, scatter: bool, all_insert: bool) -> bool:
    """Running sums: a sorted run of duplicates summed by one loop over its positions
    (KernelCompiler.continue_run): one branch per position where the coordinate
    changes, instead of a nested loop per run whose two exits (SpMV rows of 1-10
    entries) mispredicted per row; the order of the adds is the run's. It needs an
    output written by coordinate: full, random-access levels that the statement assigns
    rather than adds to, at the index this loop completes."""
    return (points == 1 and not hooks and positions and not driver.unique
            and driver.ordered and not scatter and writes_at_next and linear
            and all_insert and not accumulates and output_full)


def clears_rows(covers_all: bool, outermost_range: bool, single_nest: bool, scatter: bool,
                accumulates: bool, all_insert: bool, output_full: bool) -> bool:
    """Row clearing: the kernel zeroes each row of its output itself, just before adding
    into it, rather than have the caller zero it all first: a full output that one
    statement assigns (not +=) by scattering, in a loop over its first index that
    visits every row. The row is then zeroed in cache, and a pass over the whole output
    in memory is saved (SpMM on a 46 MB result: ~2 of 9 ms)."""
    return (covers_all and outermost_range and single_nest and scatter and not accumulates
            and all_insert and output_full)


def prefetches(driver: Facts, positions: bool, parent: Facts, child_positions: bool) -> bool:
    """Prefetch of the next rows (backends/llvm/prefetch.py): a loop over a level's positions, each
    a coordinate read without a test, at which another operand's level is located
    surely and the level below it is iterated by position, so that a later position's
    coordinate gives a valid parent position for that level's ``pos_bounds`` (the
    rows of B under A(i,k) * B(k,j), read in a random order)."""
    return (positions and driver.always_found and not driver.segmented
            and located_surely(parent) and child_positions)
