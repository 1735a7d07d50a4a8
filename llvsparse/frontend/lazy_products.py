"""Sums of products of lazy nodes: numpy's ``@``, ``np.dot``, ``np.tensordot`` and
``np.einsum`` as one index-notation node each (lazy_nodes.py has the nodes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ir.notation import syntax as nt
from ..ir.notation.operators import ADD, MUL, OR
from ..notation.einsum_forms import expanded
from .lazy_compute import compute_node
from .lazy_nodes import Node, fresh, merged, node_dtype, node_of, normalize_axis
from .lazy_ops import apply


def _summed(product: nt.Expr, summed: Sequence[nt.IndexVar], nodes: Sequence[Node],
            out_vars: Sequence[nt.IndexVar], shape: Sequence[int], fill: object) -> Node:
    """``product`` (of ``nodes``) summed over ``summed`` as numpy sums products: an or
    where all are bools (``@``, dot, tensordot and einsum of bools are an or of ands;
    a sum in notation counts bools, as np.sum does). A sparse result's reduction may be
    scattered (CSR @ CSR), which the compiler assembles through a workspace that sums
    only: such a bool result is counted first (a kernel of its own), then compared
    with 0."""
    logical = bool(summed) and all(node_dtype(n) == np.bool_ for n in nodes)
    counted = logical and fill is not None and len(shape) >= 2  # stored sparse
    expr = product
    for var in summed:
        expr = nt.Reduction(OR if logical and not counted else ADD, var, expr)
    node = Node(expr, tuple(out_vars), tuple(shape), merged(nodes), fill)
    return apply("not_equal", compute_node(node), 0) if counted else node


def contract(a: Node, b: Node, a_axes: Sequence[int], b_axes: Sequence[int],
             batch: int = 0) -> Node:
    """Sum of products over paired axes; the first ``batch`` axes of both are shared
    and lead the result (matmul's stacks); the rest follow, ``a``'s first (tensordot)."""
    for p, q in zip(a_axes, b_axes):
        if a.shape[p] != b.shape[q]:
            raise ValueError(f"shapes {a.shape} and {b.shape} not aligned: axis {p} (dim "
                             f"{a.shape[p]}) != axis {q} (dim {b.shape[q]})")
    if a.shape[:batch] != b.shape[:batch]:
        raise ValueError(f"stacked shapes {a.shape[:batch]} and {b.shape[:batch]} differ "
                         "(broadcast stacks are not supported)")
    a_vars = [fresh() for _ in a.shape]
    b_vars = [fresh() for _ in b.shape]
    b_vars[:batch] = a_vars[:batch]
    for p, q in zip(a_axes, b_axes):
        b_vars[q] = a_vars[p]
    product = nt.Call(MUL, (a.at(a_vars), b.at(b_vars)))
    free_a = [k for k in range(batch, len(a.shape)) if k not in a_axes]
    free_b = [k for k in range(batch, len(b.shape)) if k not in b_axes]
    out_vars = [*a_vars[:batch], *(a_vars[k] for k in free_a), *(b_vars[k] for k in free_b)]
    shape = (*a.shape[:batch], *(a.shape[k] for k in free_a), *(b.shape[k] for k in free_b))
    dense = a.reads_dense or b.reads_dense
    fill = 0 if 0 in (a.fill, b.fill) and not (dense and a_axes) else None
    return _summed(product, [a_vars[p] for p in a_axes], (a, b), out_vars, shape, fill)


def matmul(a: Node, b: Node) -> Node:
    """numpy's ``@``: vectors are promoted and demoted, stacks are shared."""
    if not a.shape or not b.shape:
        raise ValueError("matmul: an operand is a scalar (0-d); use * instead")
    if len(a.shape) == 1 or len(b.shape) == 1:
        return contract(a, b, [len(a.shape) - 1], [max(len(b.shape) - 2, 0)])
    if len(a.shape) != len(b.shape):
        raise ValueError(f"matmul of shapes {a.shape} and {b.shape}: stacks of different "
                         "depth are not supported")
    last = len(a.shape) - 1
    return contract(a, b, [last], [last - 1], batch=last - 1)


def dot(a: Node, b: Node) -> Node:
    """``np.dot``: a product with a scalar, else a sum over a's last axis and b's
    second-to-last (its only one for a vector)."""
    if not a.shape or not b.shape:
        return apply("multiply", a, b)
    return contract(a, b, [len(a.shape) - 1], [max(len(b.shape) - 2, 0)])


def tensordot(a: Node, b: Node, axes: object = 2) -> Node:
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        a_axes, b_axes = list(range(len(a.shape) - n, len(a.shape))), list(range(n))
    else:
        a_axes, b_axes = ([x] if isinstance(x, (int, np.integer)) else list(x) for x in axes)
    a_axes = [normalize_axis(k, len(a.shape)) for k in a_axes]
    b_axes = [normalize_axis(k, len(b.shape)) for k in b_axes]
    if len(a_axes) != len(b_axes):
        raise ValueError("tensordot: the two lists of axes have different lengths")
    return contract(a, b, a_axes, b_axes)


def einsum(subscripts: str, *operands: object) -> Node:
    """numpy's einsum (``...`` and an implicit output spelled out by einsum_forms) as
    one node."""
    nodes = [node_of(x, "einsum") for x in operands]
    terms, output = expanded(subscripts, [n.shape for n in nodes])
    letters = {c: fresh() for c in "".join(terms)}
    extents: dict[str, int] = {}
    factors = []
    for term, node in zip(terms, nodes):
        if len(term) != len(node.shape):
            raise ValueError(f"einsum: subscripts {term!r} for an operand of shape "
                             f"{node.shape}")
        for c, extent in zip(term, node.shape):
            if extents.setdefault(c, extent) != extent:
                raise ValueError(f"einsum: index {c!r} has extents {extents[c]} and {extent}")
        factors.append(node.at([letters[c] for c in term]))
    if set(output) - set(letters) or len(set(output)) != len(output):
        raise ValueError(f"einsum output {output!r} must name distinct input indices")
    expr = factors[0]
    for factor in factors[1:]:
        expr = nt.Call(MUL, (expr, factor))
    fill = 0 if any(n.fill == 0 for n in nodes) and not any(n.reads_dense for n in nodes) \
        else None
    return _summed(expr, [var for c, var in letters.items() if c not in output], nodes,
                   [letters[c] for c in output], [extents[c] for c in output], fill)
