"""The nodes of lazy NumPy-style expressions: an index-notation expression over fresh
index variables, one per axis, and the tensors it reads (its leaves). Using a node inside
a larger expression renames its variables (and its summed ones, so that two uses of one
node never share a reduction variable). Operations on nodes are lazy_ops.py's; computing
one is lazy_compute.py's."""

from __future__ import annotations

import itertools
import math
import numbers
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..ir.notation import syntax as nt
from ..ir.notation.result_type import result_dtype
from ..tensors.coerce import asarray, is_foreign_sparse
from ..tensors.tensor import StoredTensor
from ..tensors.value_types import checked_value_dtype

# What a leaf reads: a Tensor, or a numpy array the kernel call wraps itself (wrapping
# it here cost more than the call).
Operand = StoredTensor | np.ndarray


_COUNTER = itertools.count()


def fresh() -> nt.IndexVar:
    return nt.IndexVar(f"v{next(_COUNTER)}")


@dataclass(frozen=True, eq=False)
class Node:
    """An expression over ``vars`` (one per axis of ``shape``) reading ``leaves`` by name.
    ``fill`` is its value wherever no sparse leaf stores an entry, None where that varies
    (a dense operand shows through): it decides whether the result is stored sparse."""

    expr: nt.Expr
    vars: tuple[nt.IndexVar, ...]
    shape: tuple[int, ...]
    leaves: Mapping[str, Operand]
    fill: object

    def at(self, new_vars: Sequence[nt.IndexVar]) -> nt.Expr:
        """The expression with its axes read at ``new_vars`` and fresh summed variables."""
        mapping = dict(zip(self.vars, new_vars))
        mapping.update({r.var: fresh() for r in nt.iter_reductions(self.expr)})
        return substitute(self.expr, mapping)

    @property
    def reads_dense(self) -> bool:
        """Whether a dense operand (more than a 0-d one) is read."""
        return any(is_dense(t) and t.ndim for t in self.leaves.values())


def substitute(expr: nt.Expr, mapping: Mapping[nt.IndexVar, nt.IndexVar]) -> nt.Expr:
    """``expr`` with index variables renamed per ``mapping``."""
    if isinstance(expr, nt.Access):
        return nt.Access(expr.tensor, tuple(mapping.get(v, v) for v in expr.indices))
    kids = tuple(substitute(c, mapping) for c in nt.children(expr))
    if isinstance(expr, nt.Reduction):
        return nt.Reduction(expr.op, mapping.get(expr.var, expr.var), kids[0], expr.hidden)
    return nt.with_children(expr, kids) if kids else expr


def is_dense(tensor: Operand) -> bool:
    return isinstance(tensor, np.ndarray) or \
        all(level.full for level in tensor.tensor_type.levels)


def _tensor_fill(tensor: Operand) -> object:
    """What a tensor holds where it stores nothing: a 0-d tensor's value, None for a
    dense one (it varies)."""
    if tensor.ndim == 0:
        return (tensor.item() if isinstance(tensor, np.ndarray) else
                tensor.to_numpy().item())
    if is_dense(tensor):
        return None
    fill = getattr(tensor, "fill_value", None)
    return tensor.fill if fill is None else fill


def leaf(tensor: Operand) -> Node:
    axes = tuple(fresh() for _ in tensor.shape)
    name = f"L{id(tensor)}"
    return Node(nt.Access(name, axes), axes, tensor.shape, {name: tensor},
                _tensor_fill(tensor))


class NodeHolder:
    """A lazy tensor as the node algebra reads it (LazyTensor, lazy_tensor.py, adds
    numpy's operators above): ``as_node`` takes its ``node``."""

    __slots__ = ()
    node: Node


def as_node(value: object) -> Node | None:
    """``value`` as a node: a node, a lazy expression, a tensor, anything ``ls.asarray`` reads,
    a number; None for other objects. A Python number is a literal of the kernel (a weak
    dtype, as numpy's NEP 50 has it; each value its own kernel); a numpy scalar, which
    keeps its dtype, a 0-d operand (one kernel for every value; ``apply`` makes it a
    literal where its value matters), and so are numbers a literal cannot print (inf,
    NaN, bools)."""
    if isinstance(value, NodeHolder):
        return value.node
    if isinstance(value, Node):
        return value
    if isinstance(value, StoredTensor):
        return leaf(value)
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.generic)) \
            and math.isfinite(value):
        return literal(value)
    if is_foreign_sparse(value):
        return leaf(asarray(value))
    if isinstance(value, (np.ndarray, np.generic, list, tuple, bool, float)):
        array = np.asarray(value)
        if array.dtype == object:
            raise TypeError(f"cannot use a {type(value).__name__} of objects as a tensor")
        checked_value_dtype(array.dtype)
        return leaf(array)
    return None


def literal(value: float) -> Node:
    return Node(nt.Literal(value), (), (), {}, value)


def numpy_scalar(value: object) -> bool:
    """A numpy scalar or 0-d array a literal can hold (a finite integer or float)."""
    return isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0 and \
        value.dtype.kind in "iuf" and math.isfinite(value.item())


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError("operands could not be broadcast together with shapes "
                         + " ".join(str(s) for s in shapes)) from None


def merged(nodes: Sequence[Node]) -> dict[str, Operand]:
    """Every tensor the nodes read, by name."""
    return {name: t for n in nodes for name, t in n.leaves.items()}


def node_of(value: object, what: str) -> Node:
    node = as_node(value)
    if node is None:
        raise TypeError(f"{what}: cannot use a {type(value).__name__} as a tensor operand")
    return node


def transpose(node: Node, axes: Sequence[int] | None = None) -> Node:
    """Axes permuted (reversed by default): a renaming, no data moves."""
    order = tuple(range(len(node.shape)))[::-1] if axes is None else \
        tuple(normalize_axis(a, len(node.shape)) for a in axes)
    if sorted(order) != list(range(len(node.shape))):
        raise ValueError(f"axes {tuple(axes or ())} do not permute the {len(node.shape)} "
                         "axes")
    return Node(node.expr, tuple(node.vars[k] for k in order),
                tuple(node.shape[k] for k in order), node.leaves, node.fill)


def normalize_axis(axis: object, ndim: int) -> int:
    try:
        k = operator.index(axis)  # 1.5 is refused, not truncated, as numpy refuses it
    except TypeError:
        raise TypeError(f"an axis must be an integer, not {axis!r}") from None
    if not -ndim <= k < ndim:
        raise np.exceptions.AxisError(k, ndim)
    return k % ndim


def reduce_axes(axis: object, ndim: int) -> tuple[int, ...]:
    """numpy's ``axis=`` (None, an int, a tuple, negatives) as sorted distinct axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    result = tuple(sorted({normalize_axis(a, ndim) for a in axes}))
    if len(result) != len(axes):
        raise ValueError(f"duplicate value in 'axis': {axis!r}")
    return result


def canonical(node: Node) -> tuple[nt.Assignment, dict[str, Operand]]:
    """The node as an assignment with deterministic names (operands ``T0``, ``T1``...,
    indices ``i0``, ``i1``... in order of appearance), so that one chain shape always
    hits the same cached kernel."""
    names: dict[str, str] = {}
    for access in nt.iter_accesses(node.expr):
        names.setdefault(access.tensor, f"T{len(names)}")
    seen: dict[nt.IndexVar, nt.IndexVar] = {}
    for var in (*node.vars, *_vars_in_order(node.expr)):
        seen.setdefault(var, nt.IndexVar(f"i{len(seen)}"))
    rhs = substitute(nt.rename_tensors(node.expr, names), seen)
    lhs = nt.Access("OUT", tuple(seen[v] for v in node.vars))
    return nt.Assignment(lhs, rhs), {names[n]: node.leaves[n] for n in names}


def _vars_in_order(expr: nt.Expr) -> list[nt.IndexVar]:
    found: list[nt.IndexVar] = []
    for sub in nt.subexpressions(expr):
        if isinstance(sub, nt.Reduction):
            found.append(sub.var)
        elif isinstance(sub, nt.Access):
            found.extend(sub.indices)
    return found


def node_dtype(node: Node) -> np.dtype:
    """The dtype of the node's values, numpy's for its expression; worked out once per
    node (a chain's every operation asks its operands': canonicalising the chain each
    time was half the cost of building it)."""
    if isinstance(node.expr, nt.Access):
        return np.dtype(node.leaves[node.expr.tensor].dtype)
    known = node.__dict__.get("_dtype")
    if known is None:
        assignment, operands = canonical(node)
        known = np.dtype(result_dtype(assignment, {n: t.dtype.name
                                                   for n, t in operands.items()}))
        object.__setattr__(node, "_dtype", known)  # (a cache: the node stays as it was)
    return known
