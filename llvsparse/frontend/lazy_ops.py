"""numpy's operations as lazy nodes: elementwise functions broadcast as numpy
broadcasts (numpy scalars as literals, dtypes promoted as numpy promotes them), powers,
and reductions in numpy's dtype for them."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from functools import cache

import numpy as np

from ..ir.notation import syntax as nt
from ..ir.notation.operators import ADD, AND, MAX, MIN, MUL, OR
from ..notation import elementwise as ew
from ..tensors.tensor import StoredTensor
from .lazy_compute import sparse_format, squeeze
from .lazy_nodes import (
    Node,
    Operand,
    broadcast_shape,
    fresh,
    is_dense,
    leaf,
    literal,
    node_dtype,
    node_of,
    numpy_scalar,
)


def _reads_sparse(node: Node) -> bool:
    return not all(is_dense(t) for t in node.leaves.values())


def _broadcast_args(nodes: Sequence[Node]
                    ) -> tuple[tuple[int, ...], tuple, list[nt.Expr], dict[str, Operand]]:
    """The broadcast shape, its fresh variables, each node read at them (an axis of
    extent 1 against a longer one is dropped first: notation has no broadcasting) and
    the tensors they read."""
    shape = broadcast_shape(*(n.shape for n in nodes))
    axes = tuple(fresh() for _ in shape)
    args = []
    leaves: dict[str, Operand] = {}
    for node in nodes:
        offset = len(shape) - len(node.shape)
        drop = [k for k, e in enumerate(node.shape) if e == 1 and shape[offset + k] != 1]
        if drop:
            node = squeeze(node, drop)
        kept = [offset + k for k in range(len(node.shape) + len(drop)) if k not in drop]
        args.append(node.at([axes[k] for k in kept]))
        leaves.update(node.leaves)
    return shape, axes, args, leaves


def apply(name: str, *operands: object) -> Node:
    """numpy function ``name`` (a ufunc's name) on ``operands``, broadcast as numpy does."""
    nodes = _with_scalars(name, operands)
    shape, axes, args, leaves = _broadcast_args(nodes)
    expr = ew.build(name, tuple(args))
    return Node(expr, axes, shape, leaves, _fill_after(name, [n.fill for n in nodes]))


def _with_scalars(name: str, operands: Sequence[object]) -> list[Node]:
    """The operands' nodes, numpy scalars (and 0-d arrays) taken as literals where a
    sparse operand is read: which entries the result stores then depends on their value
    (A / np.float32(2) keeps A's pattern), which the compiler cannot see in a 0-d
    operand. numpy types them strongly (float32 A * np.float64(2) is float64), so the
    other operands are widened to the dtype all promote to. Without a sparse operand
    (dense vectors in an iteration) they stay 0-d operands: one kernel for every value."""
    nodes = [node_of(x, name) for x in operands]
    scalars = [k for k, x in enumerate(operands) if numpy_scalar(x)]
    # The operands whose dtypes promote (where's condition is read for its truth only).
    typed = [k for k in range(len(nodes)) if (name, k) != ("where", 0)]
    tensors = [k for k in typed if k not in scalars]
    if not scalars or not tensors or not any(_reads_sparse(n) for n in nodes):
        return nodes
    target = np.result_type(*(node_dtype(nodes[k]) for k in typed))
    for k in scalars:
        nodes[k] = literal(operands[k].item())
    for k in tensors:
        nodes[k] = widened(nodes[k], target)
    return nodes


def power(base: object, exponent: object) -> Node:
    """numpy's ``**``: a whole power from 1 to 4 is a product (numpy's x**2 is x*x), the
    power 0 of integers or bools is 1 (in numpy's dtype: ints stay ints); any other is
    pow (float64 for integers, README)."""
    whole = _whole(exponent)
    if whole is None or not 0 <= whole <= 4:
        return apply("power", base, exponent)
    node = node_of(base, "power")
    dtype = np.result_type(node_dtype(node), exponent.dtype if numpy_scalar(exponent)
                           else whole)
    if whole == 0 and dtype.kind == "f":
        return apply("power", base, exponent)  # nan ** 0 is 1, and nan * 0 + 1 is not
    first = widened(node, dtype)
    if whole == 0:
        return apply("add", apply("multiply", first, 0), 1)
    result = first
    for _ in range(whole - 1):
        result = apply("multiply", result, node)
    return result


def _whole(value: object) -> int | None:
    """A Python int or numpy integer scalar (or 0-d array) as an int, else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value.item()) if numpy_scalar(value) and value.dtype.kind in "iu" else None


def _fill_after(name: str, fills: list) -> object:
    """The result's value where no sparse operand stores anything: numpy's own value on
    the operands' fills, or a product's annihilator (README: an entry not stored is an
    exact zero that annihilates), else None."""
    known = [f for f in fills if f is not None]
    if len(known) == len(fills):
        with np.errstate(all="ignore"):
            return np.asarray(ew.numpy_function(name)(*fills)).item()
    op = ew.OPERATORS.get(name)
    if op is not None and op.annihilator is not None and \
            any(f == op.annihilator for f in known):
        return op.annihilator
    return None


# numpy's reductions by name: the notation's monoid, and numpy's ufunc (whose empty
# reduction raises where it has no identity, as max and min).
REDUCTIONS = {"sum": (ADD, np.add), "prod": (MUL, np.multiply), "max": (MAX, np.maximum),
              "min": (MIN, np.minimum), "any": (OR, np.logical_or),
              "all": (AND, np.logical_and)}


def reduce(node: Node, axes: Sequence[int], name: str = "sum") -> Node:
    """numpy's reduction ``name`` over ``axes``: one notation reduction per axis (which
    folds every coordinate, an entry not stored counting as the fill, as numpy's dense
    reduction does), in numpy's dtype for it: a sum or product of bools or int32 values
    accumulates in int64."""
    op, ufunc = REDUCTIONS[name]
    count = math.prod(node.shape[k] for k in axes)
    if count == 0 and ufunc.identity is None:
        raise ValueError(f"zero-size array to reduction operation {ufunc.__name__} which "
                         "has no identity (numpy raises it too)")
    if op is not ADD:
        node = _unblocked(node)
    dtype = node_dtype(node)
    accumulated = ufunc.reduce(np.zeros(1, dtype)).dtype  # any's bool reads, not casts
    if np.promote_types(dtype, accumulated) == accumulated:
        node = widened(node, accumulated)
    inner = [fresh() for _ in node.shape]
    expr = node.at(inner)
    for k in axes:
        expr = nt.Reduction(op, inner[k], expr)
    kept = [k for k in range(len(node.shape)) if k not in axes]
    return Node(expr, tuple(inner[k] for k in kept), tuple(node.shape[k] for k in kept),
                node.leaves, _reduced_fill(node, op, count))


@cache
def _one(dtype: np.dtype) -> np.ndarray:
    one = np.ones((), dtype)
    one.setflags(write=False)
    return one


def widened(node: Node, dtype: np.dtype) -> Node:
    """``node`` in ``dtype``, a wider one numpy promotes it to: times a 0-d one of that
    dtype, since notation has no cast (a factor that changes no value, and where a
    sparse operand stores nothing, 0 still annihilates it)."""
    if node_dtype(node) == dtype:
        return node
    return apply("multiply", node, leaf(_one(np.dtype(dtype))))


def _unblocked(node: Node) -> Node:
    """The node with blocked operands (BCSR) converted: their loops only sum (a max over
    their index is refused, see ir/concrete/from_notation.py)."""
    leaves = {name: tensor.asformat(sparse_format(tensor.ndim))
              if isinstance(tensor, StoredTensor) and any(lv.block for lv in tensor.format.levels)
              else tensor for name, tensor in node.leaves.items()}
    if all(leaves[n] is t for n, t in node.leaves.items()):
        return node
    return dataclasses.replace(node, leaves=leaves)


def _reduced_fill(node: Node, op, count: int) -> object:
    """The reduction's value where no sparse operand stores an entry: the identity of
    an empty one, the fill where folding it leaves it (max's, a sum's 0, a product's 0
    or 1), else None."""
    fill = node.fill
    if count == 0:
        return op.identity
    if fill is None or node.reads_dense:
        return None
    return fill if op.idempotent or fill in (op.identity, op.annihilator) else None
