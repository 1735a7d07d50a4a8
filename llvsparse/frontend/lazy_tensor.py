"""Lazy NumPy-style expressions over tensors, fused into one index-notation kernel.

``ls.lazy(A)`` wraps a tensor; operators, ``.T``, ``sum`` and ``@`` on it build an
index-notation expression instead of computing, and ``ls.compute(expr)`` compiles the
whole chain as one assignment through ``ls.evaluate`` (whose kernel cache makes a
repeated chain cheap). An eager operation on a Tensor is the same thing computed at
once. Each node keeps its expression over its own fresh index variables, one per axis;
using it inside a larger expression renames them (and its summed variables, so that two
uses of one node never share a reduction variable).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import numbers
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

from ..ir import notation as nt
from ..ir.errors import ScheduleError
from ..ir.operators import ADD, AND, MAX, MIN, MUL, OR
from ..ir.result_type import result_dtype
from ..kernel import api
from ..notation import elementwise as ew
from ..tensors.coerce import asarray, is_foreign_sparse
from ..tensors.deferred import Deferred
from ..tensors.format import Format, FormatError, Level, named_format
from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor
from ..tensors.value_types import checked_value_dtype
from .numpy_protocols import ArrayOps

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
        return any(_is_dense(t) and t.ndim for t in self.leaves.values())


def substitute(expr: nt.Expr, mapping: Mapping[nt.IndexVar, nt.IndexVar]) -> nt.Expr:
    """``expr`` with index variables renamed per ``mapping``."""
    if isinstance(expr, nt.Access):
        return nt.Access(expr.tensor, tuple(mapping.get(v, v) for v in expr.indices))
    kids = tuple(substitute(c, mapping) for c in nt.children(expr))
    if isinstance(expr, nt.Reduction):
        return nt.Reduction(expr.op, mapping.get(expr.var, expr.var), kids[0], expr.hidden)
    return nt.with_children(expr, kids) if kids else expr


def _is_dense(tensor: Operand) -> bool:
    return isinstance(tensor, np.ndarray) or \
        all(level.full for level in tensor.tensor_type.levels)


def _tensor_fill(tensor: Operand) -> object:
    """What a tensor holds where it stores nothing: a 0-d tensor's value, None for a
    dense one (it varies)."""
    if tensor.ndim == 0:
        return (tensor.item() if isinstance(tensor, np.ndarray) else
                tensor.to_numpy().item())
    if _is_dense(tensor):
        return None
    fill = getattr(tensor, "fill_value", None)
    return tensor.fill if fill is None else fill


def leaf(tensor: Operand) -> Node:
    axes = tuple(fresh() for _ in tensor.shape)
    name = f"L{id(tensor)}"
    return Node(nt.Access(name, axes), axes, tensor.shape, {name: tensor},
                _tensor_fill(tensor))


def as_node(value: object) -> Node | None:
    """``value`` as a node: a lazy expression, a tensor, anything ``ls.asarray`` reads,
    a number; None for other objects. A Python number is a literal of the kernel (a weak
    dtype, as numpy's NEP 50 has it; each value its own kernel); a numpy scalar, which
    keeps its dtype, a 0-d operand (one kernel for every value; ``apply`` makes it a
    literal where its value matters), and so are numbers a literal cannot print (inf,
    NaN, bools)."""
    if isinstance(value, LazyTensor):
        return value.node
    if isinstance(value, StoredTensor):
        return leaf(value)
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.generic)) \
            and math.isfinite(value):
        return _literal(value)
    if is_foreign_sparse(value):
        return leaf(asarray(value))
    if isinstance(value, (np.ndarray, np.generic, list, tuple, bool, float)):
        array = np.asarray(value)
        if array.dtype == object:
            raise TypeError(f"cannot use a {type(value).__name__} of objects as a tensor")
        checked_value_dtype(array.dtype)
        return leaf(array)
    return None


def _literal(value: float) -> Node:
    return Node(nt.Literal(value), (), (), {}, value)


def _numpy_scalar(value: object) -> bool:
    """A numpy scalar or 0-d array a literal can hold (a finite integer or float)."""
    return isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0 and \
        value.dtype.kind in "iuf" and math.isfinite(value.item())


def _reads_sparse(node: Node) -> bool:
    return not all(_is_dense(t) for t in node.leaves.values())


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError("operands could not be broadcast together with shapes "
                         + " ".join(str(s) for s in shapes)) from None


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


def merged(nodes: Sequence[Node]) -> dict[str, Operand]:
    """Every tensor the nodes read, by name."""
    return {name: t for n in nodes for name, t in n.leaves.items()}


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
    scalars = [k for k, x in enumerate(operands) if _numpy_scalar(x)]
    # The operands whose dtypes promote (where's condition is read for its truth only).
    typed = [k for k in range(len(nodes)) if (name, k) != ("where", 0)]
    tensors = [k for k in typed if k not in scalars]
    if not scalars or not tensors or not any(_reads_sparse(n) for n in nodes):
        return nodes
    target = np.result_type(*(node_dtype(nodes[k]) for k in typed))
    for k in scalars:
        nodes[k] = _literal(operands[k].item())
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
    dtype = np.result_type(node_dtype(node), exponent.dtype if _numpy_scalar(exponent)
                           else whole)
    if whole == 0 and dtype.kind == "f":
        return apply("power", base, exponent)  # nan ** 0 is 1, and nan * 0 + 1 is not
    first = LazyTensor(widened(node, dtype))
    if whole == 0:
        return apply("add", LazyTensor(apply("multiply", first, 0)), 1)
    result = first.node
    for _ in range(whole - 1):
        result = apply("multiply", LazyTensor(result), LazyTensor(node))
    return result


def _whole(value: object) -> int | None:
    """A Python int or numpy integer scalar (or 0-d array) as an int, else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value.item()) if _numpy_scalar(value) and value.dtype.kind in "iu" else None


def node_of(value: object, what: str) -> Node:
    node = as_node(value)
    if node is None:
        raise TypeError(f"{what}: cannot use a {type(value).__name__} as a tensor operand")
    return node


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


def squeeze(node: Node, axes: Sequence[int]) -> Node:
    """``node`` without its extent-1 ``axes`` (computed first unless it is a tensor)."""
    tensor = compute_node(node)
    shape = tuple(e for k, e in enumerate(tensor.shape) if k not in axes)
    if _is_dense(tensor):
        return leaf(tensor_class().from_numpy(tensor.to_numpy().reshape(shape)))
    coords, values = tensor.to_coo()
    keep = [k for k in range(tensor.order) if k not in axes]
    return leaf(tensor_class().from_coo(coords[keep], values, shape, _sparse_format(len(shape))))


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
    return apply("multiply", LazyTensor(node), LazyTensor(leaf(_one(np.dtype(dtype)))))


def _unblocked(node: Node) -> Node:
    """The node with blocked operands (BCSR) converted: their loops only sum (a max over
    their index is refused, see ir/frontend.py)."""
    leaves = {name: tensor.asformat(_sparse_format(tensor.ndim))
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


# ----------------------------------------------------------------------------- compute

_NAMED = ("csr", "csc", "coo", "dcsr", "dcsc", "csf", "hash", "coo-unordered")


def _sparse_format(order: int) -> str:
    return {1: "coo", 2: "csr"}.get(order, "csf")


def output_format(node: Node, assignment: nt.Assignment, operands: Mapping[str, Operand]
                  ) -> Format | str:
    """Dense unless the result has one value wherever its sparse operands store nothing
    (its fill: 0 for A * 2, 1 for A + 1 or exp(A)) and two axes or more; then the
    format of the first sparse operand read at every output axis, its levels following
    how it is read (a transposed CSR gives CSC), else CSR for matrices and CSF above."""
    if node.fill is None or len(node.shape) < 2:
        return "dense"
    axes = assignment.lhs.indices
    for access in nt.iter_accesses(assignment.rhs):
        tensor = operands[access.tensor]
        if _is_dense(tensor) or set(access.indices) != set(axes) or \
                len(access.indices) != len(axes):
            continue
        mapped = permuted_format(tensor.format, tuple(axes.index(v) for v in access.indices))
        if mapped is not None:
            return mapped
    return _sparse_format(len(axes))


@lru_cache(maxsize=256)
def permuted_format(fmt: Format, new_modes: tuple[int, ...]) -> Format | None:
    """``fmt`` with mode m stored as mode ``new_modes[m]`` (a named format where one
    matches, so CSR transposed reads as CSC); None for formats with hidden levels.
    Remembered: a transposed view is taken on every eager ``A.T``."""
    if fmt.has_hidden_levels:
        return None
    mapped = Format([Level(lv.kind, new_modes[lv.mode], lv.properties, lv.params)
                     for lv in fmt.levels])
    for name in _NAMED:
        try:
            named = named_format(name, len(new_modes))
        except FormatError:  # a name for another order
            continue
        if named == mapped:
            return named
    return mapped


def _view(tensor: StoredTensor, perm: Sequence[int]) -> StoredTensor | None:
    """``tensor`` with axes reordered (axis k of the view is ``perm[k]`` of the tensor),
    sharing its arrays: only the levels' modes change."""
    new_modes = tuple(perm.index(m) for m in range(tensor.order))
    fmt = permuted_format(tensor.format, new_modes)
    if fmt is None:
        return None
    view = tensor_class()(tuple(tensor.shape[k] for k in perm), fmt, tensor.dtype,
                  tensor.index_dtype, tensor.level_extents, tensor.level_arrays,
                  tensor.params, tensor.values, fill=tensor.fill, name=tensor.name)
    return view._seal()._mark_valid() if tensor.__dict__.get("_sealed") else view


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


def compute_node(node: Node, format: object = None) -> StoredTensor:
    """The node's value as a Tensor: one kernel for the whole expression."""
    expr = node.expr
    if isinstance(expr, nt.Access) and set(expr.indices) == set(node.vars) and \
            len(set(expr.indices)) == len(expr.indices):
        tensor = node.leaves[expr.tensor]  # the tensor itself, or a transposed view
        perm = [expr.indices.index(v) for v in node.vars]
        if isinstance(tensor, np.ndarray):
            tensor = tensor_class().from_numpy(np.transpose(tensor, perm))
        elif expr.indices != node.vars:
            view = _view(tensor, perm)
            tensor = view if view is not None else _run(node, None)
        return tensor if format is None else tensor.asformat(format)
    return _run(node, format)


def _run(node: Node, format: object) -> StoredTensor:
    """One kernel for the node's assignment, into ``format`` or the one chosen."""
    assignment, operands = canonical(node)
    chosen = format if format is not None else \
        output_format(node, assignment, operands)
    try:
        return api.evaluate(assignment, out_format=chosen, **operands)
    except ScheduleError:
        if chosen == "dense" or len(node.shape) == 0:
            raise
    # The compiler refused to produce the chosen format in order (no workspace or
    # conversion applies): collect the entries unordered, then sort once.
    unordered = api.evaluate(assignment, out_format="coo-unordered", **operands)
    return unordered.asformat(chosen)


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


class LazyTensor(ArrayOps, Deferred):
    """A deferred expression over tensors; ``ls.compute`` (or ``.compute()``) runs it."""

    __slots__ = ("node",)

    def __init__(self, node: Node):
        self.node = node

    @property
    def shape(self) -> tuple[int, ...]:
        return self.node.shape

    @property
    def dtype(self) -> np.dtype:
        return node_dtype(self.node)

    @property
    def assignment(self) -> nt.Assignment:
        """The fused index notation ``compute`` compiles."""
        return canonical(self.node)[0]

    def compute(self, format: object = None) -> StoredTensor:
        return compute_node(self.node, format)

    def __repr__(self) -> str:
        return f"<LazyTensor: shape={self.shape}, {self.assignment}>"


def lazy(value: object) -> LazyTensor:
    """``value`` (a Tensor, numpy array, scipy or pydata sparse array) as the start of
    a lazy chain."""
    if isinstance(value, LazyTensor):
        return value
    node = as_node(value)
    if node is None or not node.leaves:
        raise TypeError(f"ls.lazy needs a tensor or an array, not {type(value).__name__}")
    return LazyTensor(node)


def compute(value: object, format: object = None) -> StoredTensor:
    """Run a lazy chain as one kernel (a Tensor is returned as it is, or converted to
    ``format``)."""
    if isinstance(value, LazyTensor):
        return value.compute(format)
    if isinstance(value, StoredTensor):
        return value if format is None else value.asformat(format)
    raise TypeError(f"ls.compute needs a lazy expression or a Tensor, not "
                    f"{type(value).__name__}")
