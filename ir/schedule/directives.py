"""The scheduling language (paper 001): directives a user writes, as values and as text.

A schedule is a sequence of directives, each a rewrite of the kernel's iteration space
that names index variables: ``reorder(i, j)``, ``split(i, i0, i1, 32)``,
``divide(i, i0, i1, 4)``, ``fuse(i, j, f)``, ``pos(i, ip, A(i,j))``, ``coord(ip, i)``,
``bound(i, ib, 64, max_exact)``, ``precompute(A(i,k)*B(k,j), j, jw, hash)``,
``unroll(i1, 4)``, ``parallelize(i0, cpu_thread, no_races)``. Its text is the same
directives separated by ``;``, so the CLI takes ``--schedule "..."``. Parsing checks
each directive's own arguments (names, counts, units, race strategies); whether it fits
a kernel is ir/schedule_check.py's question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ScheduleError
from ..notation.subscripts import is_valid_name

UNITS = ("cpu_thread", "gpu_block", "gpu_warp", "gpu_thread")
RACES = ("no_races", "atomics", "temporaries", "parallel_reduction")
BOUND_KINDS = ("max_exact", "max_constraint", "min_exact", "min_constraint")


@dataclass(frozen=True)
class Reorder:
    """The loops over ``indices`` run in this order (outermost first)."""

    indices: tuple[str, ...]


@dataclass(frozen=True)
class Split:
    """``index`` becomes ``outer`` over chunks of ``factor`` coordinates and ``inner``
    within one: ``index = outer * factor + inner``."""

    index: str
    outer: str
    inner: str
    factor: int


@dataclass(frozen=True)
class Divide:
    """``index`` becomes ``outer`` over ``parts`` equal chunks and ``inner`` within one."""

    index: str
    outer: str
    inner: str
    parts: int


@dataclass(frozen=True)
class Fuse:
    """Two nested loops become one over their product: ``outer = fused / n_inner``."""

    outer: str
    inner: str
    fused: str


@dataclass(frozen=True)
class Pos:
    """``index`` walked in ``tensor``'s position space: ``pos_index`` counts the entries
    ``tensor(indices)`` stores along it, so splitting it splits stored entries evenly."""

    index: str
    pos_index: str
    tensor: str
    indices: tuple[str, ...]


@dataclass(frozen=True)
class Coord:
    """A position index back in coordinate space (undoes ``pos``)."""

    pos_index: str
    index: str


@dataclass(frozen=True)
class Bound:
    """A promise about ``index``'s extent (``kind``: max_exact, ...), checked per call."""

    index: str
    bound_index: str
    value: int
    kind: str


@dataclass(frozen=True)
class Precompute:
    """``expr`` computed into a temporary over ``index`` (renamed ``workspace_index``)
    whose storage is the workspace policy ``workspace``."""

    expr: str
    index: str
    workspace_index: str
    workspace: str


@dataclass(frozen=True)
class Unroll:
    """The loop over ``index`` runs ``factor`` iterations per step."""

    index: str
    factor: int


@dataclass(frozen=True)
class Parallelize:
    """The loop over ``index`` runs on ``unit``s in parallel; ``races``: how writes that
    several units may make to one output entry are kept correct."""

    index: str
    unit: str
    races: str


Directive = (Reorder | Split | Divide | Fuse | Pos | Coord | Bound | Precompute | Unroll
             | Parallelize)


def directive_text(d: Directive) -> str:
    """One directive as the scheduling language writes it."""
    match d:
        case Reorder(indices):
            return f"reorder({', '.join(indices)})"
        case Split(index, outer, inner, factor):
            return f"split({index}, {outer}, {inner}, {factor})"
        case Divide(index, outer, inner, parts):
            return f"divide({index}, {outer}, {inner}, {parts})"
        case Fuse(outer, inner, fused):
            return f"fuse({outer}, {inner}, {fused})"
        case Pos(index, pos_index, tensor, indices):
            return f"pos({index}, {pos_index}, {tensor}({','.join(indices)}))"
        case Coord(pos_index, index):
            return f"coord({pos_index}, {index})"
        case Bound(index, bound_index, value, kind):
            return f"bound({index}, {bound_index}, {value}, {kind})"
        case Precompute(expr, index, workspace_index, workspace):
            return f"precompute({expr}, {index}, {workspace_index}, {workspace})"
        case Unroll(index, factor):
            return f"unroll({index}, {factor})"
        case Parallelize(index, unit, races):
            return f"parallelize({index}, {unit}, {races})"
    raise TypeError(f"not a scheduling directive: {d!r}")


@dataclass(frozen=True)
class Schedule:
    """Directives applied in order; immutable, so a kernel's schedule can key caches."""

    directives: tuple[Directive, ...] = ()

    def then(self, directive: Directive) -> Schedule:
        return Schedule((*self.directives, directive))

    def __str__(self) -> str:
        return "; ".join(directive_text(d) for d in self.directives)

    def __bool__(self) -> bool:
        return bool(self.directives)


_CALL = re.compile(r"\s*([A-Za-z_]\w*)\s*\((.*)\)\s*\Z", re.DOTALL)


def _split_args(text: str, sep: str = ",") -> list[str]:
    """``text`` split at top-level ``sep`` characters (those inside parentheses stay),
    each part stripped; an empty text has no parts."""
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            raise ScheduleError(f"unbalanced ')' in {text!r}")
        if ch == sep and depth == 0:
            parts.append(text[start:k].strip())
            start = k + 1
    if depth:
        raise ScheduleError(f"unbalanced '(' in {text!r}")
    last = text[start:].strip()
    return [*parts, last] if last or parts else []


def _name(value: str, what: str, directive: str) -> str:
    if not is_valid_name(value):
        raise ScheduleError(f"{directive}: {what} must be an index variable name, not "
                            f"{value!r}")
    return value


def _count(value: str, what: str, directive: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ScheduleError(f"{directive}: {what} must be a positive integer, not "
                            f"{value!r}") from None
    if number < 1:
        raise ScheduleError(f"{directive}: {what} must be a positive integer, not {number}")
    return number


def _choice(value: str, allowed: tuple[str, ...], what: str, directive: str) -> str:
    if value not in allowed:
        raise ScheduleError(f"{directive}: {what} must be one of {', '.join(allowed)}, "
                            f"not {value!r}")
    return value


_ARITY = {"reorder": None, "split": 4, "divide": 4, "fuse": 3, "pos": 3, "coord": 2,
          "bound": 4, "precompute": 4, "unroll": 2, "parallelize": 3}


def parse_directive(text: str) -> Directive:
    """One directive from its text; ScheduleError naming what is wrong."""
    match = _CALL.match(text)
    if not match:
        raise ScheduleError(f"expected a directive such as split(i, i0, i1, 32), not "
                            f"{text.strip()!r}")
    head, args = match.group(1), _split_args(match.group(2))
    if head not in _ARITY:
        raise ScheduleError(f"unknown scheduling directive {head!r} (known: "
                            f"{', '.join(_ARITY)})")
    arity = _ARITY[head]
    if arity is not None and len(args) != arity:
        raise ScheduleError(f"{head} takes {arity} arguments, got {len(args)}: {text.strip()}")
    def n(value: str, what: str) -> str:
        return _name(value, what, head)

    match head:
        case "reorder":
            if len(args) < 2:
                raise ScheduleError("reorder needs at least two index variables")
            names = tuple(n(a, "each index") for a in args)
            if len(set(names)) != len(names):
                raise ScheduleError(f"reorder names an index twice: {', '.join(names)}")
            return Reorder(names)
        case "split":
            return Split(n(args[0], "the index"), n(args[1], "the outer index"),
                         n(args[2], "the inner index"), _count(args[3], "the factor", head))
        case "divide":
            return Divide(n(args[0], "the index"), n(args[1], "the outer index"),
                          n(args[2], "the inner index"), _count(args[3], "the parts", head))
        case "fuse":
            return Fuse(n(args[0], "the outer index"), n(args[1], "the inner index"),
                        n(args[2], "the fused index"))
        case "pos":
            access = _CALL.match(args[2])
            if not access:
                raise ScheduleError(f"pos: the third argument must be an access such as "
                                    f"A(i,j), not {args[2]!r}")
            indices = tuple(n(a, "an access's index") for a in _split_args(access.group(2)))
            return Pos(n(args[0], "the index"), n(args[1], "the position index"),
                       n(access.group(1), "the tensor"), indices)
        case "coord":
            return Coord(n(args[0], "the position index"), n(args[1], "the index"))
        case "bound":
            return Bound(n(args[0], "the index"), n(args[1], "the bound index"),
                         _count(args[2], "the bound", head),
                         _choice(args[3], BOUND_KINDS, "the kind", head))
        case "precompute":
            return Precompute(args[0], n(args[1], "the index"),
                              n(args[2], "the workspace index"),
                              n(args[3], "the workspace"))
        case "unroll":
            return Unroll(n(args[0], "the index"), _count(args[1], "the factor", head))
        case _:
            return Parallelize(n(args[0], "the index"),
                               _choice(args[1], UNITS, "the unit", head),
                               _choice(args[2], RACES, "the race strategy", head))


def parse_schedule(text: str) -> Schedule:
    """A schedule from its text: directives separated by ';' (empty parts ignored)."""
    if not isinstance(text, str):
        raise TypeError(f"a schedule's text must be a str, not {type(text).__name__}")
    parts = [p for p in _split_args(text, ";") if p]
    return Schedule(tuple(parse_directive(p) for p in parts))


def as_schedule(value: object) -> Schedule:
    """A Schedule from what ``compile(schedule=...)`` takes: a Schedule, its text, or a
    sequence of directives."""
    if isinstance(value, Schedule):
        return value
    if isinstance(value, str):
        return parse_schedule(value)
    if isinstance(value, (list, tuple)):
        for d in value:
            directive_text(d)  # TypeError for anything else
        return Schedule(tuple(value))
    raise TypeError(f"schedule must be a Schedule, its text or a list of directives, not "
                    f"{type(value).__name__}")
