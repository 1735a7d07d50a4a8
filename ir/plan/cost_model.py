"""Cheap operand statistics and a cost model over the ways a kernel may run today.

The autoscheduler (ir/plan/autoschedule.py) picks among choices that exist without a user's
schedule: a scattered output's workspace policy, a loop's other form, and how threads
share the first output index. Each pick compares estimated costs. The asymptotic terms
come first (iterations of each loop from the operands' statistics); machine constants
second, calibrated once from measurements written down beside each constant. Pure: no
backend import, no timing, so a pick never depends on the machine's load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..schedule.workspace_policies import DENSE, HASH, SORT


@dataclass(frozen=True)
class OperandStats:
    """What the model knows of one operand: its shape, its stored entries and how they
    spread over its first level's coordinates ("rows"). ``skew`` is max / mean entries
    per row (1.0 for an empty or dense operand)."""

    shape: tuple[int, ...]
    stored: int
    rows: int
    nonempty_rows: int
    mean_per_row: float
    max_per_row: int
    skew: float
    itemsize: int = 8

    @classmethod
    def from_row_counts(cls, shape: tuple[int, ...], counts: np.ndarray,
                        itemsize: int = 8) -> OperandStats:
        """Statistics from the entries under each first coordinate (what evens out
        threads' work, walk.entries_per_coordinate): O(rows)."""
        counts = np.asarray(counts)
        if counts.ndim != 1:
            raise ValueError(f"row counts must be one-dimensional, not shape {counts.shape}")
        if counts.size and int(counts.min()) < 0:
            raise ValueError("row counts must be non-negative (a pos array that decreases?)")
        rows = int(counts.size)
        stored = int(counts.sum()) if rows else 0
        biggest = int(counts.max()) if rows else 0
        mean = stored / rows if rows else 0.0
        return cls(tuple(int(n) for n in shape), stored, rows, int(np.count_nonzero(counts)),
                   mean, biggest, biggest / mean if mean else 1.0, itemsize)

    @classmethod
    def dense(cls, shape: tuple[int, ...], itemsize: int = 8) -> OperandStats:
        """A dense operand: every coordinate stored."""
        rows = int(shape[0]) if shape else 1
        stored = math.prod(shape)
        per_row = stored // rows if rows else 0
        return cls(tuple(int(n) for n in shape), stored, rows, rows if per_row else 0,
                   float(per_row), per_row, 1.0, itemsize)

    @property
    def bytes(self) -> int:
        """Bytes of its values and coordinates (an int32 coordinate per entry)."""
        return self.stored * (self.itemsize + 4)


@dataclass(frozen=True)
class Machine:
    """Machine constants, calibrated on the shared 2-core AMD EPYC (1 MB L2 per core,
    32 MB L3) this project measures on. ns per unit of the asymptotic term they scale.

    Gustavson SpGEMM (CSR x CSR -> CSR, one thread, medians of 7 interleaved calls, A*A^T
    and A*A on 10 real matrices, load average about 3, 2026-11-29, autosched branch;
    table in tools/BENCHMARKS.md "Autoscheduler"): a dense workspace costs about 6 ns per
    product while its accumulator (24 bytes per column) stays in L2 (crack A*A 8, cage10
    10, Trefethen_500 3.5) and about 12-16 once it does not (delaunay_n16 16), plus about
    80 ns per row for its drain (luxembourg_osm: 114k rows of 4.5 products, 13 ms), and
    3.5 ns per column for its accumulator, allocated and cleared on every call (fresh pages:
    1,000 rows of 2 products into 1M columns took 3.9 ms dense, 0.15 sorted, 0.13 hashed;
    at 100k columns 0.15, 0.10 and 0.12);
    a hash table 25 ns per product plus 60 per row; sorting 8 ns per product and per
    level of its sort (log2 of a row's products, at most 4 passes of the radix sort on long
    rows: rajat01 30 ns, mbeacxc 6 ns per product), plus 40 per row.
    """

    l2_bytes: int = 1 << 20
    llc_bytes: int = 32 << 20
    dense_product_ns: float = 6.0
    dense_product_missing_ns: float = 14.0
    dense_row_ns: float = 80.0
    dense_column_ns: float = 3.5
    hash_product_ns: float = 25.0
    hash_row_ns: float = 60.0
    sort_product_ns: float = 8.0
    sort_row_ns: float = 40.0
    sort_max_levels: float = 4.0
    accumulator_bytes_per_column: int = 24  # value, marker, list slot


MACHINE = Machine()

# A pick among costs within this factor of each other is a tie the model does not decide:
# the constants are good to about that much (the calibration runs moved 1.2-1.5x with load).
TIE = 1.25


@dataclass(frozen=True)
class Estimate:
    """One candidate's estimated cost (ns) and the terms it came from, in words."""

    name: str
    ns: float
    terms: str


def products(a: OperandStats, b: OperandStats) -> float:
    """Expected multiplications of A(i,k)*B(k,j) by rows: each stored A(i,k) meets
    B's row k, of mean length (independent rows)."""
    return a.stored * b.mean_per_row


def spgemm_estimates(a: OperandStats, b: OperandStats, columns: int,
                     policies: tuple[str, ...], machine: Machine = MACHINE) -> list[Estimate]:
    """Gustavson's row-by-row product through each workspace policy named in
    ``policies`` (of dense, hash, sort): per row of A, its products into the workspace,
    then the row drained in column order. Policies the model has no terms for are
    left out (bucket counts and places every product first: measured 1.03-1.57x dense on
    CSR x CSR and never ahead, so it is the search's, not the model's)."""
    work = products(a, b)
    rows = a.rows
    per_row = work / rows if rows else 0.0
    out: list[Estimate] = []
    for name in policies:
        if name == DENSE.name:
            fits = columns * machine.accumulator_bytes_per_column <= machine.l2_bytes
            each = machine.dense_product_ns if fits else machine.dense_product_missing_ns
            out.append(Estimate(name, rows * machine.dense_row_ns + work * each
                                + columns * machine.dense_column_ns,
                                f"{rows} rows x {machine.dense_row_ns:g} ns + {work:.3g} "
                                f"products x {each:g} ns + {columns} columns x "
                                f"{machine.dense_column_ns:g} ns (its accumulator, "
                                f"{'in' if fits else 'past'} L2)"))
        elif name == HASH.name:
            out.append(Estimate(name, rows * machine.hash_row_ns + work * machine.hash_product_ns,
                                f"{rows} rows x {machine.hash_row_ns:g} ns + {work:.3g} "
                                f"products x {machine.hash_product_ns:g} ns"))
        elif name == SORT.name:
            levels = min(max(math.log2(per_row + 1.0), 1.0), machine.sort_max_levels)
            out.append(Estimate(name, rows * machine.sort_row_ns
                                + work * machine.sort_product_ns * levels,
                                f"{rows} rows x {machine.sort_row_ns:g} ns + {work:.3g} "
                                f"products x {machine.sort_product_ns:g} ns x {levels:.2g} "
                                "sort levels"))
    return out


def cheapest(estimates: list[Estimate], default: str) -> tuple[Estimate | None, bool]:
    """The cheapest estimate, and whether it beats ``default``'s (the rule's pick) by
    more than ``TIE``: only then does the model overrule the rule."""
    if not estimates:
        return None, False
    best = min(estimates, key=lambda e: e.ns)
    rule = next((e for e in estimates if e.name == default), None)
    return best, rule is not None and rule.ns > best.ns * TIE


# The "two rows" form of a row-wise sum (backends/llvm/pairs.py) against one row at a
# time: CSR SpMV, one thread, medians of 15 interleaved rounds, 2026-11-29 at load ~3
# (other / first): bcsstk16 (mean 60 entries per row, skew 1.4) 0.79, f855_mat9_I (70,
# 2.7) 0.90, cage10 (13, 1.9) 0.93, Trefethen_500 (17, 1.1) 0.99, uniform (10, 2.5) 1.01,
# stencil5 (5, 1.0) 0.98, delaunay_n16 (6, 2.8) 1.15, luxembourg_osm (2.1, 2.9) 1.24.
# Skewed rows go both ways (memplus, skew 81: 0.41; powerlaw 0.86; wiki-Vote, skew 72:
# 1.16; rajat01 1.08; cit-HepTh 1.10): the pairs' lanes finish unevenly and the stats do
# not say how, so those stay with the probe.
PAIRS_LONG_ROWS = 12.0  # mean entries per row from which two chains of adds pay off
PAIRS_REGULAR_SKEW = 4.0  # max / mean rows up to which the two lanes stay even

# Prefetching the next rows of B in Gustavson's loop (BENCHMARKS.md, "Prefetching the
# next rows of B"): 0.77-0.84x where B is far past L2 (uniform-100k, 12 MB), 1.00-1.05x
# where it stays in cache (cage10, 1.8 MB); a mostly empty B (powerlaw A*A) level.
PREFETCH_FAR_BYTES = 8 << 20
PREFETCH_NEAR_BYTES = 2 << 20
PREFETCH_MIN_ROW = 2.0  # mean entries per row of B below which rows are mostly empty


def pairs_form(rows: OperandStats) -> tuple[str | None, str]:
    """The form of a row-wise sum over ``rows``' entries: "other" (two rows side by
    side), "first", or None where the model cannot tell; and why, in a sentence."""
    mean, skew = rows.mean_per_row, rows.skew
    if skew > PAIRS_REGULAR_SKEW:
        return None, (f"rows are skewed (max/mean {skew:.3g} > {PAIRS_REGULAR_SKEW:g}): two "
                      "rows side by side finish unevenly, timed on the first calls")
    if mean >= PAIRS_LONG_ROWS:
        return "other", (f"regular rows of {mean:.3g} entries on average (>= "
                         f"{PAIRS_LONG_ROWS:g}): two rows' chains of adds side by side")
    return "first", (f"short regular rows ({mean:.3g} entries on average < "
                     f"{PAIRS_LONG_ROWS:g}): one row at a time")


# Case selection (ir/opt/passes.py's select_cases) against a branch per coordinate in a
# union such as A + B: branches are predicted where the two operands store the same
# coordinates (every step then takes the "both" case) and mispredict where their
# patterns interleave. CSR + CSR -> CSR A + A^T, one thread, CPU time, medians of 7
# interleaved calls, 2026-11-29 (spgemm6 branch, load 8-10), branch / select form:
# structurally symmetric inputs, whose two operands store equally many entries in every
# row, 0.77-0.82 (stencil5 300x300, bcsstk33, cage11, ca-GrQc, add32); unsymmetric ones
# 1.17-1.53 (uniform-100k, soc-sign-bitcoin-otc, p2p-Gnutella04, wiki-Vote) but 0.83 on
# powerlaw-100k, whose long rows take one case in long runs. Equal counts in a row are
# necessary for equal patterns, not sufficient: the model picks branches only where
# nearly every row matches, and leaves the rest to the probe.
SELECT_SAME_ROWS = 0.95  # share of rows with equal entry counts from which branches win


def select_form(matching_rows: float) -> tuple[str | None, str]:
    """The form of a union's co-iteration: "first" (a branch per coordinate) where the
    two operands store equally many entries in at least SELECT_SAME_ROWS of the rows
    (``matching_rows``, a share), else None (timed on the first calls); and why."""
    if matching_rows >= SELECT_SAME_ROWS:
        return "first", (f"the merged operands store equally many entries in "
                         f"{matching_rows:.0%} of rows (>= {SELECT_SAME_ROWS:.0%}): "
                         "likely the same pattern, whose cases branches predict")
    return None, (f"the merged operands' rows match in {matching_rows:.0%} of rows: "
                  "branches or selects, timed on the first calls")


def prefetch_form(located: OperandStats) -> tuple[str | None, str]:
    """Whether Gustavson's loop prefetches the next rows of the operand it locates rows
    of ("other") or not ("first"); None where the model cannot tell."""
    size = located.bytes
    if located.mean_per_row < PREFETCH_MIN_ROW:
        return "first", (f"the located operand's rows are mostly empty ({located.mean_per_row:.2g} "
                         "entries on average): no prefetch")
    if size >= PREFETCH_FAR_BYTES:
        return "other", (f"the located operand ({size / 2**20:.3g} MiB) is far past L2: "
                         "prefetch its next rows")
    if size <= PREFETCH_NEAR_BYTES:
        return "first", (f"the located operand ({size / 2**20:.3g} MiB) stays in cache: "
                         "no prefetch")
    return None, (f"the located operand ({size / 2**20:.3g} MiB) is between cache sizes: "
                  "timed on the first calls")


# Threads share the first output index in chunks of equal stored entries (runtime.split
# with weights) where rows are skewed; equal row ranges otherwise (the weights' prefix sum
# costs O(rows) per binding and buys nothing on even rows).
SPLIT_SKEW = 2.0


def split_kind(rows: OperandStats | None, threads: int = 2) -> tuple[str, str]:
    """'windows', 'entries' or 'rows' for the operand whose rows ``threads`` share, and
    why. Chunks of whole rows take at least the heaviest row's time, so where one row
    holds more than a thread's share, threads take windows of entries that cut rows
    (an entry split, ir/loops/entry_split.py, where the kernel has one)."""
    if rows is None:
        return "rows", "no sparse operand stores the split index: equal row ranges"
    if rows.stored and rows.max_per_row * threads > rows.stored:
        return "windows", (f"one row holds {rows.max_per_row} of {rows.stored} entries, more "
                           f"than each of {threads} threads' share: threads take windows of "
                           "entries that cut rows")
    if rows.skew >= SPLIT_SKEW:
        return "entries", (f"rows are skewed (max/mean {rows.skew:.3g} >= {SPLIT_SKEW:g}): "
                           "threads take ranges of equal stored entries")
    return "rows", (f"rows are even (max/mean {rows.skew:.3g} < {SPLIT_SKEW:g}): equal row "
                    "ranges")
