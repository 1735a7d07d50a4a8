"""What a backend cannot emit, decided before it is asked: a reason, or None.

Lowering (transforms/lowering.py) tries nests as written, split, and with operands
converted; it asks these checks first, so that the choice is made over values. The
output's assembler and the loop emitter keep the same checks (they are called directly
too), where they raise.
"""

from __future__ import annotations

from .loops import Loop, LoopNode, Ref, loops_of
from .lower_loops import Program
from .types import TensorType


def inserted_prefix(out: TensorType) -> int:
    """How many of ``out``'s levels, from the top, take inserts (the rest append)."""
    levels = out.levels
    prefix = 0
    while prefix < len(levels) and levels[prefix].can_insert:
        prefix += 1
    return prefix


def output_refusal(out: TensorType) -> str | None:
    """Why ``out``'s format cannot be assembled as an output, or None."""
    levels = out.levels
    prefix = inserted_prefix(out)
    for k, level in enumerate(levels):
        if level.mode is None:
            return (f"output level {k} ({level.kind}) stores no tensor mode; "
                    "such formats cannot be assembled")
        if k >= prefix and not level.can_append:
            what = "takes neither inserts nor appends" if not level.can_insert else \
                "takes inserts but sits below an appended level"
            return f"output level {k} ({level.kind}) {what}: this format cannot be an output"
        if k and level.branchless and levels[k - 1].unique:
            # One child per position of a level that keeps one position per coordinate:
            # one entry per coordinate there, whatever the result holds.
            return (f"output level {k} ({level.kind}) holds one child per position of "
                    f"level {k - 1} ({levels[k - 1].kind}), which keeps one position per "
                    "coordinate: this format stores at most one entry per coordinate there "
                    "and cannot be an output (a non-unique level above it can)")
    unordered = [k for k in range(prefix) if not levels[k].ordered]
    if unordered and prefix < len(levels):
        # Appended children land in visit order while their parents' edges are kept by
        # position: under a parent whose positions do not follow its coordinates
        # (buckets of a hash), the two orders differ and entries would swap values.
        k = unordered[0]
        return (f"output level {prefix} ({levels[prefix].kind}) appends below level {k} "
                f"({levels[k].kind}), whose positions do not follow its coordinates: "
                "appended children would not line up with their parents; make the lower "
                f"levels insert too, or order level {k}")
    return None


def appends_in_order(out: TensorType, out_vars: tuple[str, ...], var: str) -> bool:
    """Whether ``var``'s coordinates are appended to an output level that keeps them
    ordered (``out_vars``: the output's indices in level order)."""
    prefix = inserted_prefix(out)
    return any(v == var and k >= prefix and out.levels[k].ordered
               for k, v in enumerate(out_vars))


def _refs(node: LoopNode) -> tuple[Ref, ...]:
    return (node.iterator,) if isinstance(node, Loop) else node.iterators


def straight(node: LoopNode) -> bool:
    """Whether ``node`` runs as straight-line code per position: one branchless level
    iterated by position, nothing merged, no run of duplicates open above it."""
    refs = _refs(node)
    facts = refs[0].facts
    return len(refs) == 1 and node.site.lattice_points == 1 and not refs[0].universe \
        and facts.by_position and facts.branchless and not facts.segmented


def unordered_refusal(node: LoopNode, appended_in_order: bool, straight: bool) -> str | None:
    """Why ``node`` cannot iterate an unordered level, or None: co-iterated with another
    (a merge needs both in coordinate order), or alone where the output appends its
    index in order. A straight loop visits the level as it stores it and is exempt."""
    refs = _refs(node)
    single = len(refs) == 1
    if straight:
        return None
    for ref in refs:
        if ref.universe or ref.facts.ordered:
            continue
        if not single:
            return (f"{ref.tensor}: level {ref.level} is unordered and cannot be "
                    "co-iterated with another operand")
        if appended_in_order:
            return (f"{ref.tensor}: level {ref.level} is unordered, but the output "
                    f"appends index {node.index} in order")
    return None


def loop_refusal(program: Program, out: TensorType, out_vars: tuple[str, ...]) -> str | None:
    """Why a loop of ``program`` cannot be emitted, or None."""
    for node in loops_of(program.root):
        reason = unordered_refusal(node, appends_in_order(out, out_vars, node.index),
                                   straight(node))
        if reason is not None:
            return reason
    return None
