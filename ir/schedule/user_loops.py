"""How a schedule's loops run, checked before any IR is built: the loop order it keeps
(and the tiles of positions it may put other loops inside), the loops it unrolls, and
the parallel loop with its chunks and race strategy."""

from __future__ import annotations

from dataclasses import replace

from ..errors import ScheduleError
from ..notation.operators import Operator
from .resolved import Chunks, KernelIndices, ParallelLoop, SchedulePlan


def unroll(plan: SchedulePlan, index: str, factor: int, text: str) -> None:
    """The original loop an ``unroll`` applies to: the index itself, or the one a split's
    inner index (or a bound) derives from, whose loop then steps ``factor`` at a time."""
    covered = plan.covered(index)
    origin = plan.origins.get(index)
    if len(covered) != 1 or (origin is not None and origin.kind in ("pos", "fuse")):
        raise ScheduleError(f"{text}: {index} walks {origin.kind if origin else 'several'} "
                            "indices' positions; unroll an original index or a split's inner "
                            "one")
    if origin is not None and origin.kind.endswith("_outer"):
        raise ScheduleError(f"{text}: {index} is the outer loop of a split (unrolling it would "
                            f"jam {plan.inner_of(index)} into it, which is not lowered); "
                            f"unroll {plan.inner_of(index)}")
    if factor < 2:
        raise ScheduleError(f"{text}: the factor must be at least 2")
    root = covered[0]
    if root in dict(plan.unrolls):
        raise ScheduleError(f"{text}: the loop over {root} is unrolled twice")
    plan.unrolls = (*plan.unrolls, (root, factor))


def original_order(plan: SchedulePlan, live: list[str]) -> tuple[str, ...]:
    """The original indices in the order their (derived) loops now run; a split's two
    loops must stay together (tiling moves another loop between them, which is not
    lowered yet)."""
    for outer, origin in plan.origins.items():
        if not origin.kind.endswith("_outer"):
            continue
        inner = plan.inner_of(outer)
        if outer in live and inner in live and live.index(inner) < live.index(outer):
            raise ScheduleError(f"the schedule runs {inner} outside {outer}, the inner loop of "
                                "a split outside its outer one: that is not lowered yet")
    order: list[str] = []
    last: tuple[str, ...] = ()
    for name in live:
        roots = plan.covered(name)
        for root in roots:
            if root in order and root not in last and not _position_tile(plan, live, name):
                raise ScheduleError(f"the schedule puts another loop between the loops "
                                    f"derived from {root} (tiling); only a tile of an "
                                    "index's positions, its inner loop innermost, is lowered")
            if root not in order:
                order.append(root)
        last = roots
    return tuple(order)


MAX_TILE = 16  # positions per step of a tiled (jammed) loop: each keeps a sum in a register


def _position_tile(plan: SchedulePlan, live: list[str], inner: str) -> bool:
    """Whether ``inner``, placed after other loops than its split's outer one, tiles an
    index's positions (paper 001's SpMM: ``pos(j, jp, A(i,j)); split(jp, jp0, jp1, 8);
    reorder(jp0, k, jp1)``): the inner index of a split of a ``pos`` index, innermost,
    with only original indices between. Recorded in ``plan.tiles``; lowering runs such a
    loop jammed, that many positions per step with the loops between inside (each
    position's sums kept in their own order)."""
    origin = plan.origins.get(inner)
    if origin is None or origin.kind != "split_inner" or live[-1] != inner:
        return False
    through = plan.origins.get(origin.parents[0])
    if through is None or through.kind != "pos" or len(plan.covered(inner)) != 1:
        return False
    outer = next(n for n, o in plan.origins.items()
                 if o.kind == "split_outer" and o.parents == origin.parents)
    between = live[live.index(outer) + 1:-1]
    if outer not in live or not between or any(n in plan.origins for n in between):
        return False
    factor = int(origin.param)
    if not 2 <= factor <= MAX_TILE:
        raise ScheduleError(f"a tile of {factor} positions of {through.parents[0]}: tiles of "
                            f"2 to {MAX_TILE} positions are lowered (a sum in a register "
                            "each)")
    plan.tiles = (*plan.tiles, (plan.covered(inner)[0], factor))
    return True


def check_parallel(plan: SchedulePlan, kernel: KernelIndices, live: list[str]) -> None:
    """The CPU parallel loop: outermost, over the output's first index (threads then
    own their rows: no two write one entry), cut into chunks by the directives that
    derived it."""
    loop = plan.parallel
    if loop is None:
        return
    text = f"parallelize({loop.index}, {loop.unit}, {loop.races})"
    covered = plan.covered(loop.index)
    root = covered[0]
    operator = None
    if root not in kernel.out_vars:
        kind, operator = "reduced", _check_reduced(kernel, loop, covered, text)
    elif root == kernel.out_vars[0] and (not plan.order or plan.order[0] == root):
        kind = "rows"
    else:
        kind = "nested"
    chunks = _chunks(plan, loop.index, text)
    if chunks.by == "entries" and loop.races == "atomics" and kind == "rows" \
            and len(covered) > 1:  # positions of a fusion: threads share coordinates
        chunks = replace(chunks, within=True)
    plan.parallel = ParallelLoop(root, loop.unit, loop.races, chunks, loop.index, kind,
                                 operator)


def _check_reduced(kernel: KernelIndices, loop: ParallelLoop, covered: tuple[str, ...],
                   text: str) -> Operator:
    """Threads over a reduced index each reduce into a private output, combined after
    (temporaries, parallel_reduction); the right-hand side must be linear in the sum
    over the index, so that private outputs starting as 0 add up to the result."""
    reduced = ", ".join(covered)
    if loop.races == "no_races":
        raise ScheduleError(
            f"{text}: threads over {reduced} would reduce into the same entries of "
            f"{kernel.output} (it is not {kernel.output}'s first index): that races; "
            "choose temporaries or parallel_reduction")
    if loop.races == "atomics":
        raise ScheduleError(f"{text}: CPU threads do not add atomically; choose temporaries "
                            "or parallel_reduction (each thread its own output, combined)")
    operators = dict(kernel.reductions)
    if covered[0] not in operators:
        raise ScheduleError(f"{text}: the right-hand side is not a sum over {covered[0]} "
                            "(through products only), so partial results over ranges of "
                            f"{covered[0]} do not add up to it")
    return operators[covered[0]]


def _chunks(plan: SchedulePlan, index: str, text: str) -> Chunks:
    """How the directives that derived the parallel index cut its coordinates."""
    origin = plan.origins.get(index)
    if origin is None:
        return Chunks()
    if origin.kind in ("split_inner", "divide_inner"):
        raise ScheduleError(f"{text}: {index} is the inner loop of a split; parallelize "
                            "its outer loop")
    if origin.kind == "pos":
        return Chunks("entries", 0, str(origin.param).split("(")[0])
    parent = origin.parents[0]
    size = int(origin.param)
    if origin.kind in ("split_outer", "divide_outer"):
        through = plan.origins.get(parent)
        if through is not None and through.kind == "pos":
            tensor = str(through.param).split("(")[0]
            return Chunks("entries", size, tensor, parts=origin.kind == "divide_outer")
        if through is not None and through.kind not in ("bound",):
            raise ScheduleError(f"{text}: chunks of a {through.kind} index are not lowered "
                                "yet")
        return Chunks("coordinates" if origin.kind == "split_outer" else "parts", size)
    raise ScheduleError(f"{text}: a parallel {origin.kind} index is not lowered yet")
