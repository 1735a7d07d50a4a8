"""IEEE results of sums the user placed, paid for only where a value is not finite.

``sum_l(B(i,k,l) * D(l,j)) * C(k,j)`` keeps numpy's result where C holds inf or NaN:
an empty sum is a computed 0, and 0 * inf is NaN. Keeping the sum where it was placed
makes its loops visit every (i, k) that B does not store (MTTKRP's O(I x K x R) cliff,
issue 32). Where every operand value (and fill) is finite, 0 * x is 0, so moving the
factors into the sum (``hoist_sums``) gives the same result with work bounded by the
stored entries. A kernel whose sums would move binds that variant while its operands
are finite, checking them again on every call (O(their stored values)); otherwise the
exact kernel runs.
"""

from __future__ import annotations

import math

import numpy as np

from . import notation as nt
from .ir.cin import hoist_sums
from .ir.frontend import to_concrete
from .ir.types import TensorType


def sums_move(assignment: nt.Assignment, types: dict[str, TensorType]) -> bool:
    """Whether a factor outside a sum the user placed would move into it."""
    rhs = to_concrete(assignment, types).rhs
    return hoist_sums(rhs) != hoist_sums(rhs, exact=True)


def all_finite(operands: dict[str, object]) -> bool:
    """Whether every value the operands store and every fill value is finite (integer
    and bool operands always are)."""
    for operand in operands.values():
        values = getattr(operand, "values", None)
        if values is None:  # a numpy array, or a scipy matrix's stored data
            values = getattr(operand, "data", operand)
            if not isinstance(values, np.ndarray):
                values = np.asarray(operand)
        fill = getattr(operand, "fill_value", 0.0)
        if values.dtype.kind in "fc" and not (math.isfinite(complex(fill).real)
                                              and math.isfinite(complex(fill).imag)
                                              and np.isfinite(values).all()):
            return False
    return True
