"""The hidden diagonal pattern operands of diagonal uses (``A(i,i)``): their format, and
building one from a tensor's stored entries (the rewrite that introduces them is
``ir/notation/diagonals.py``). For the same reason as the rewrite says, a pattern
needs only the (i, i) that A stores: it is built from A's stored entries, O(stored
entries) rather than O(rows) (a trace of a 2**31-row matrix with 3 entries built 2**31
coordinates, and ended in numpy's MemoryError after minutes).
"""

from __future__ import annotations

import numpy as np

from ..ir.notation.diagonals import DiagonalUse
from ..tensors.format import named_format
from ..tensors.made_as import tensor_class

PATTERN_FORMAT = named_format("coo", 2)


def diagonal_pattern(tensor, use: DiagonalUse, size: int, index_dtype: str):
    """The ``size`` x ``size`` diagonal pattern at the coordinates where ``tensor``
    stores an entry whose two modes of ``use`` agree (every one where its fill is not
    0: an entry it does not store is a value then), as a packed tensor; remembered
    while the tensor's index arrays are sealed and the same."""
    state = tensor._sealed_state()
    key = (use.modes, size, index_dtype)
    memo = tensor.__dict__.get("_diagonal_memo")
    if state is not None and memo is not None and memo[0] == state and memo[1] == key:
        return memo[2]
    fill = tensor.fill_value
    if fill != 0:  # an entry not stored reads as a nonzero fill (NaN != 0 too)
        diagonal = np.arange(size)  # so every diagonal coordinate takes part
    else:
        coords, _ = tensor._stored_entries()
        first, second = coords[use.modes[0]], coords[use.modes[1]]
        diagonal = np.unique(first[first == second])
    pattern = tensor_class().from_coo(np.stack([diagonal, diagonal]),
                              np.ones(len(diagonal), dtype=bool), (size, size), PATTERN_FORMAT,
                                      dtype="bool", index_dtype=index_dtype)
    if state is not None:
        tensor._diagonal_memo = (state, key, pattern)
    return pattern
