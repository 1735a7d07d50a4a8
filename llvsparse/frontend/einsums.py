"""numpy-style ``einsum`` over tensors: subscripts written as index notation and run
through ``evaluate``, over (+, *) or a semiring."""

from __future__ import annotations

import re

import numpy as np

from ..kernel.api import evaluate
from ..notation.parse import parse
from ..notation.semirings import semiring_assignment


def einsum(subscripts: str, *operands, out_format: object = "dense",
           semiring: tuple[str, str] | None = None):
    """numpy-style einsum over tensors, e.g. ``einsum("ij,j->i", A, x)``.

    ``semiring=(plus, times)`` computes over that semiring instead of (+, *):
    ``semiring=("min", "+")`` gives min-plus products (shortest paths),
    ``("or", "and")`` reachability. An entry a tensor does not store is then the
    semiring's zero (``plus``'s identity): it annihilates ``times`` and takes no part in
    ``plus``, so only stored entries count, and an output entry nothing reaches is
    ``plus``'s identity (inf for min-plus)."""
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum subscripts must be a string, not {type(subscripts).__name__}")
    compact = subscripts.replace(" ", "")
    if not re.fullmatch(r"[A-Za-z]*(,[A-Za-z]*)*->[A-Za-z]*", compact):
        raise ValueError(f"einsum subscripts are letters, one per mode, with one explicit "
                         f"output, as in 'ij,j->i' (no '...' or digits), not {subscripts!r}")
    inputs, output = compact.split("->")
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum: {len(terms)} operand subscripts but {len(operands)} operands")
    names = [f"T{k}" for k in range(len(terms))]
    rhs = " * ".join(f"{n}({','.join(t)})" for n, t in zip(names, terms))
    text = f"OUT({','.join(output)}) = {rhs}" if output else f"OUT = {rhs}"
    tensors = dict(zip(names, operands))
    if semiring is None and operands and all(_is_bool(x) for x in operands):
        semiring = ("or", "and")  # np.einsum over bools (a sum in notation counts them)
    if semiring is None:
        return evaluate(text, out_format=out_format, **tensors)
    return evaluate(semiring_assignment(parse(text), *semiring), out_format=out_format,
                    **tensors)


def _is_bool(operand: object) -> bool:
    dtype = getattr(operand, "dtype", None)
    return np.dtype(dtype if dtype is not None else np.asarray(operand).dtype) == np.bool_
