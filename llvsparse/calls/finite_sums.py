"""IEEE results of sums the user placed, paid for only where a value is not finite.

``sum_l(B(i,k,l) * D(l,j)) * C(k,j)`` keeps numpy's result where C holds inf or NaN:
an empty sum is a computed 0, and 0 * inf is NaN. Keeping the sum where it was placed
makes its loops visit every (i, k) that B does not store (MTTKRP's O(I x K x R) cliff,
issue 32). Where every operand value (and fill) is finite, 0 * x is 0, so moving the
factors into the sum (``ir.cin.hoist_sums``) gives the same result with work bounded by the
stored entries. A kernel whose sums would move binds that variant while its operands
are finite, checking them again on every call (O(their stored values)); otherwise the
exact kernel runs.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ..ir.concrete.expressions import Apply, Sum, expr_vars
from ..ir.concrete.from_notation import to_concrete
from ..ir.notation import syntax as nt
from ..ir.notation.operators import ADD, MUL
from ..ir.types import TensorType
from ..tensors.tensor import StoredTensor


def sums_move(assignment: nt.Assignment, types: dict[str, TensorType]) -> bool:
    """Whether a factor outside a sum the user placed would move into it (where
    ``hoist_sums`` differs with and without ``exact``): a product with such a sum as
    one argument whose index no other argument uses. Walked with a stack, not by
    recursion: a chain of 256 operators is an expression 256 deep."""
    stack = [to_concrete(assignment, types).rhs]
    while stack:
        node = stack.pop()
        if isinstance(node, Sum):
            stack.append(node.body)
        elif isinstance(node, Apply):
            stack.extend(node.args)
            if node.op is MUL and any(
                    isinstance(arg, Sum) and arg.op is ADD and not arg.hidden
                    and all(arg.var not in expr_vars(other)
                            for other in node.args if other is not arg)
                    for arg in node.args):
                return True
    return False


def all_finite(operands: dict[str, object]) -> bool:
    """Whether every value the operands store and every fill value is finite (integer
    and bool operands always are)."""
    for operand in operands.values():
        fill = 0.0
        if isinstance(operand, StoredTensor):
            values, fill = operand.values, operand.fill_value
        elif sp.issparse(operand):  # dok and lil have no data array of their own
            values = operand.tocoo().data
        elif not isinstance(operand, np.ndarray) and \
                isinstance(getattr(operand, "data", None), np.ndarray):  # pydata/sparse
            values, fill = operand.data, getattr(operand, "fill_value", 0.0)
        else:
            values = np.asarray(operand)
        if values.dtype.kind in "fc" and not (math.isfinite(complex(fill).real)
                                              and math.isfinite(complex(fill).imag)
                                              and np.isfinite(values).all()):
            return False
    return True
