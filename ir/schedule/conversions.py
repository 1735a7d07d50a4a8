"""Converting operands whose storage orders cannot be reconciled: which to try, in what
mode order, and when a converted kernel would rescan levels instead."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

from ..concrete.expressions import operands
from ..notation import syntax as nt
from ..types import TensorType
from .scheduler import Nest

# Operands of at most this order are tried converted in every mode order (4! = 24 builds
# that may each fail); higher orders only in their natural one.
MAX_PERMUTED_ORDER = 4

Modes = tuple[int, ...]


def conversion_candidates(assignment: nt.Assignment, types: dict[str, TensorType],
                          hidden: Iterable[str],
                          stored_so: Callable[[str, Modes], bool]) -> list[dict[str, Modes]]:
    """Operands to convert to sorted coordinate lists, each with the mode order of its
    list, in the order to try them: one at a time in natural mode order, then one at a
    time in every other mode order (a transposed use), then all at once, in the output's
    order and then in natural order. ``hidden`` operands (the compiler's own) are never
    converted; ``stored_so(name, modes)``: the operand is already stored as that list,
    so converting it would repeat the build that failed."""
    out = assignment.lhs.tensor
    uses = {a.tensor: a.indices for a in assignment.accesses() if a.tensor != out}
    hidden = set(hidden)
    inputs = [n for n in uses if types[n].order > 0 and n not in hidden]
    natural = {n: tuple(range(types[n].order)) for n in inputs}
    # Output indices outermost in its storage order, then the others as they appear.
    lhs = assignment.lhs.indices
    first = [lhs[lv.mode] for lv in types[out].levels if lv.mode is not None]
    rank = {v: k for k, v in enumerate(dict.fromkeys(
        [*first, *(v for n in inputs for v in uses[n])]))}
    along_output = {n: tuple(sorted(natural[n], key=lambda m, n=n: rank[uses[n][m]]))
                    for n in inputs}
    singles = [(n, natural[n]) for n in reversed(inputs)]
    singles += [(n, modes) for n in reversed(inputs)
                if types[n].order <= MAX_PERMUTED_ORDER
                for modes in itertools.permutations(natural[n]) if modes != natural[n]]
    return [{n: modes} for n, modes in singles if not stored_so(n, modes)] \
        + [along_output, natural]


def rescanned(nests: list[Nest], types: dict[str, TensorType],
              converted: Iterable[str], stored_outer: bool = False) -> str | None:
    """With a transposed copy (an operand of ``converted``) in the loops, what would be
    walked whole for every coordinate of an outer loop, or None: a loop that only
    outermost levels drive under a loop over an index they lack. CSR x CSR into CSR (or
    CSC) then becomes an inner product, O(rows x columns), where a workspace (not
    supported yet) would cost O(flops); the caller refuses it so that the statement's
    own error stands instead. ``stored_outer``: a walk under outer loops that only
    levels storing their coordinates drive is let be (it costs stored entries times
    stored entries, not a dimension: the choice where the plan as stored walks an
    extent per entry)."""
    orders = [[level.mode for level in types[n].levels] for n in converted]
    if all(modes == sorted(modes) for modes in orders):
        return None
    for nest in nests:
        # A full output costs every coordinate anyway: there, full levels may drive.
        dense_out = all(level.full for level in types[nest.assign.tensor].levels)
        users = [o for o in operands(nest.body) if o.vars]
        for depth, var in enumerate(nest.order[1:], start=1):
            drivers = [o for o in users if var in o.vars]
            if not drivers or any(o.vars[0] != var for o in drivers):
                continue  # bounded by a level under the outer loops' coordinates
            outside = nest.order[:depth]
            if all(v in o.vars for o in drivers for v in outside):
                continue
            if dense_out and all(types[o.tensor].levels[0].full for o in drivers):
                continue
            if stored_outer and all(_stored_only(v, users, types) for v in outside):
                continue
            names = ", ".join(sorted({o.tensor for o in drivers}))
            return f"{names} would be walked whole for every coordinate of {outside[0]}"
    return None


def _stored_only(var: str, users: list, types: dict[str, TensorType]) -> bool:
    """Whether only levels that store their coordinates hold ``var`` (none walks its
    extent)."""
    levels = [types[o.tensor].levels[k] for o in users if o.tensor in types
              for k, v in enumerate(o.vars) if v == var]
    return bool(levels) and not any(level.full for level in levels)
