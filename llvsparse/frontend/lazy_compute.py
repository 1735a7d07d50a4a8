"""A lazy expression's node computed: one kernel for the whole expression (through
``ls.evaluate``, whose kernel cache makes a repeated chain cheap), into the format numpy
users expect of it (dense unless the result keeps a sparse operand's fill), or a
transposed tensor as a view of its arrays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np

from ..ir.errors import ScheduleError
from ..ir.notation import syntax as nt
from ..tensors.format import Format, FormatError, Level, named_format
from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor
from .lazy_nodes import Node, Operand, canonical, is_dense, leaf

_NAMED = ("csr", "csc", "coo", "dcsr", "dcsc", "csf", "hash", "coo-unordered")


def sparse_format(order: int) -> str:
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
        if is_dense(tensor) or set(access.indices) != set(axes) or \
                len(access.indices) != len(axes):
            continue
        mapped = permuted_format(tensor.format, tuple(axes.index(v) for v in access.indices))
        if mapped is not None:
            return mapped
    return sparse_format(len(axes))


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
    # the compiler, loaded by the first computed node (ls.Tensor needs none)
    from ..kernel import api

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


def squeeze(node: Node, axes: Sequence[int]) -> Node:
    """``node`` without its extent-1 ``axes`` (computed first unless it is a tensor)."""
    tensor = compute_node(node)
    shape = tuple(e for k, e in enumerate(tensor.shape) if k not in axes)
    if is_dense(tensor):
        return leaf(tensor_class().from_numpy(tensor.to_numpy().reshape(shape)))
    coords, values = tensor.to_coo()
    keep = [k for k in range(tensor.order) if k not in axes]
    return leaf(tensor_class().from_coo(coords[keep], values, shape, sparse_format(len(shape))))
