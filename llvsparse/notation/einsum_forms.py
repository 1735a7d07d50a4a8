"""numpy's einsum spellings reduced to one: letters per mode, an explicit output.

``...`` becomes letters of its own (the broadcast axes, which must have equal extents
here), the sublist form ``einsum(A, [0, 1], B, [1, 2], [0, 2])`` becomes its string, and
an implicit output is numpy's (the ``...`` axes, then the letters used once, sorted).
Operands of more than two become a chain of pairwise contractions where one kernel for
all of them cannot be scheduled (storage orders that conflict).
"""

from __future__ import annotations

import string
from collections.abc import Sequence

_LETTERS = string.ascii_letters


def sublists_to_string(args: Sequence[object]) -> tuple[str, list[object]]:
    """``(op0, sub0, op1, sub1, ..., [out])`` as (subscripts, operands)."""
    operands, terms = list(args[0::2]), list(args[1::2])
    output = None
    if len(operands) > len(terms):  # a trailing output sublist
        output = operands.pop()
    text = ",".join(_sublist(t) for t in terms)
    return (text if output is None else f"{text}->{_sublist(output)}"), operands


def _sublist(items: object) -> str:
    letters = []
    for item in items:  # type: ignore[attr-defined]
        if item is Ellipsis:
            letters.append("...")
        elif isinstance(item, int) and 0 <= item < len(_LETTERS):
            letters.append(_LETTERS[item])
        else:
            raise ValueError(f"einsum sublist item {item!r} is not an integer in "
                             f"[0, {len(_LETTERS)}) or Ellipsis")
    return "".join(letters)


def expanded(subscripts: str, shapes: Sequence[tuple[int, ...]]) -> tuple[list[str], str]:
    """The terms and the output with ``...`` spelled in unused letters and the output
    explicit. A malformed string is a ValueError naming the part that is wrong."""
    text = subscripts.replace(" ", "")
    inputs, arrow, output = text.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum subscripts {subscripts!r} name {len(terms)} operands, "
                         f"given {len(shapes)}")
    spare = iter(c for c in _LETTERS if c not in text)
    broadcast: list[str] = []  # letters of the '...' axes, innermost last
    spelled = []
    for term, shape in zip(terms, shapes):
        head, dots, tail = term.partition("...")
        if not all(part.isalpha() or not part for part in (head, tail)) or "." in tail:
            raise ValueError(f"einsum term {term!r}: letters and at most one '...'")
        named = len(head) + len(tail)
        if not dots:
            spelled.append(term)
            continue
        count = len(shape) - named
        if count < 0:
            raise ValueError(f"einsum term {term!r} has more letters than the {len(shape)} "
                             "axes of its operand")
        while len(broadcast) < count:
            broadcast.insert(0, next(spare))
        spelled.append(head + "".join(broadcast[len(broadcast) - count:]) + tail)
    if "." in output and (output.count("...") != 1 or "." in output.replace("...", "")):
        raise ValueError(f"einsum output {output!r}: letters and at most one '...'")
    if arrow:
        return spelled, output.replace("...", "".join(broadcast))
    counts = {c: "".join(spelled).count(c) for c in "".join(spelled) if c not in broadcast}
    return spelled, "".join(broadcast) + "".join(sorted(c for c, n in counts.items()
                                                        if n == 1))


def pairwise(terms: Sequence[str], output: str) -> list[tuple[int, int, str]]:
    """A left-to-right chain of contractions for terms beyond two: each step (i, j,
    result letters) contracts the running result ``i`` with term ``j``, keeping the
    letters a later term or the output needs. The last step gives ``output``."""
    steps = []
    current = terms[0]
    for k in range(1, len(terms)):
        later = set(output).union(*terms[k + 1:])
        joined = dict.fromkeys(current + terms[k])
        current = output if k == len(terms) - 1 else \
            "".join(c for c in joined if c in later)
        steps.append((k - 1, k, current))
    return steps
