"""Eager operations replayed by their operands' signatures: the operator path's fixed cost.

An eager ``A @ x`` builds a lazy node, names it canonically, judges the result's fill and
format, and finds its kernel by the assignment's text: 100-200 us of Python on a 10 x 10
matrix, against a few us for the kernel call (issue 33). All of that depends only on
the operation and its operands' signatures: a Tensor's format (with its fill value),
dtypes and shape, a numpy array's dtype and shape, a Python number's value (a literal
of the kernel). So it is done once per signature, and the plan kept: the kernel and
where each of its operands comes from (an operand of the call, or a constant the node
built, such as the 0-d one that widens a dtype). A later call of that signature calls
the kernel at once; its binding, validation and checks are the kernel's, as before.

A plan is made only where the node's kernel reads the call's own operands or constants:
an operand converted, squeezed or broadcast into a new tensor first, a view, a result
the compiler could not schedule in order, or operands without a signature (lazy chains,
0-d and foreign arrays, complex values, numpy scalars, bools) take the full path.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..ir.errors import ScheduleError
from ..ir.notation import syntax as nt
from ..tensors import made_as
from ..tensors.coerce import natural_format
from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor
from . import fast_calls
from .lazy_compute import compute_node, output_format
from .lazy_nodes import Node, canonical

if TYPE_CHECKING:
    from ..kernel.api import Kernel

# Plans by (operation, operand signatures); None marks a signature the full path serves.
_PLANS: dict[tuple, Plan | None] = {}
PLANS_KEPT = 256  # each plan keeps its kernel (and its compiled code) alive


class Plan:
    """A kernel and, per kernel operand, the index of the call's operand it reads (or
    None, and the constant it reads); ``pointwise`` where the result keeps its one
    sparse operand's pattern (see ``Pointwise``)."""

    __slots__ = ("kernel", "pointwise", "sources")

    def __init__(self, kernel: Kernel, sources: tuple[tuple[str, int | None, object], ...]):
        self.kernel, self.sources = kernel, sources
        self.pointwise: Pointwise | None = None

    def __call__(self, operands: tuple) -> StoredTensor:
        if self.pointwise is not None:
            result = self.pointwise(operands)
            if result is not None:
                return result
        return self.kernel(**{name: constant if k is None else operands[k]
                              for name, k, constant in self.sources})


class Pointwise:
    """numpy's ufunc of a sparse Tensor and a number, where the kernel's first result
    had the tensor's own levels, index arrays and (on every stored position) numpy's
    values: later calls share the tensor's read-only index arrays and compute the
    values with numpy, as scipy's ``A * 2.0`` does (the kernel assembled a new CSR: 4x
    scipy's time at 10^6 entries). The result has the kernel's format, fill and dtype."""

    __slots__ = ("dtype", "format", "number", "position", "ufunc")

    def __init__(self, ufunc: np.ufunc, position: int, number: object, result: StoredTensor):
        self.ufunc, self.position, self.number = ufunc, position, number
        self.format, self.dtype = result.format, result.dtype

    def values(self, tensor: StoredTensor) -> np.ndarray:
        pair = (tensor.values, self.number) if self.position == 0 else \
            (self.number, tensor.values)
        with np.errstate(all="ignore"):  # the kernel's IEEE results, without warnings
            return np.asarray(self.ufunc(*pair))

    def __call__(self, operands: tuple) -> StoredTensor | None:
        """The result, None where the tensor's index arrays may be written (not sealed)."""
        tensor = operands[self.position]
        state = tensor._sealed_state()
        if state is None:
            return None
        tensor.validate()  # as the kernel call would (remembered for sealed tensors)
        return self.unchecked(operands)

    def unchecked(self, operands: tuple) -> StoredTensor | None:
        """The result for a sealed, validated tensor (None where numpy's dtype is not the
        kernel's): its index arrays shared, its values numpy's."""
        tensor = operands[self.position]
        values = self.values(tensor)
        if values.dtype != self.dtype:
            return None
        made = tensor_class()
        result = made.__new__(made)
        result.__dict__.update(
            shape=tensor.shape, format=self.format, dtype=self.dtype,
            index_dtype=tensor.index_dtype, level_extents=list(tensor.level_extents),
            level_arrays=[dict(a) for a in tensor.level_arrays],
            params=[dict(p) for p in tensor.params], values=values, name=None,
            generation=tensor.generation, _sealed=True)
        result._validated = result._sealed_state()
        return result

    @staticmethod
    def of(operation: object, operands: tuple, result: StoredTensor) -> Pointwise | None:
        """The values path, where ``result`` (the kernel's) shows it holds."""
        ufunc = getattr(np, operation, None) if isinstance(operation, str) else None
        tensors = [k for k, x in enumerate(operands) if type(x) is made_as.made]
        if not isinstance(ufunc, np.ufunc) or ufunc.nin != 2 or len(operands) != 2 or \
                len(tensors) != 1 or type(operands[1 - tensors[0]]) not in (int, float):
            return None
        k = tensors[0]
        tensor = operands[k]
        if tensor._sealed_state() is None or result.format.layout_key() != \
                tensor.format.layout_key() or result.shape != tensor.shape or \
                len(result.values) != len(tensor.values) or \
                any(a.keys() != b.keys() or not all(np.array_equal(a[n], b[n]) for n in a)
                    for a, b in zip(result.level_arrays, tensor.level_arrays)):
            return None
        plan = Pointwise(ufunc, k, operands[1 - k], result)
        try:
            values = plan.values(tensor)
        except (TypeError, ValueError, OverflowError):
            return None
        same = values.dtype == result.dtype and np.array_equal(values, result.values,
                                                               equal_nan=True)
        return plan if same else None


def _signature(value: object) -> tuple | None:
    """What the front end's choices depend on, for the operands a plan can take."""
    kind = type(value)
    if kind is made_as.made:
        if not value.shape or value.dtype.kind == "c":
            return None
        return (kind, value.format.key(), value.dtype, value.index_dtype, value.shape)
    if kind is np.ndarray:
        if not value.ndim or value.dtype.kind not in "biuf":
            return None
        return (np.ndarray, value.dtype, value.shape)
    if kind is float:  # a literal: its value (and the sign of a zero) is the kernel's
        return (float, value, math.copysign(1.0, value)) if math.isfinite(value) else None
    if kind is int:
        return (int, value)
    return None


def key(operation: object, operands: tuple) -> tuple | None:
    """The plan's key, None where an operand has no signature. Which operands are one
    object is part of it: ``A + A`` reads one kernel operand twice, and its plan must
    not serve ``A + B``."""
    signatures = []
    for k, value in enumerate(operands):
        signature = _signature(value)
        if signature is None:
            return None
        first = next(j for j in range(k + 1) if operands[j] is value)
        signatures.append(signature if first == k else first)
    return (operation, *signatures)


def replayed(operation: object, operands: tuple) -> object | None:
    """``operation`` on ``operands`` by a fast call or a plan made before, None where
    there is neither."""
    fast = fast_calls.called(operation, operands)
    if fast is not None:
        return fast
    plan_key = key(operation, operands)
    plan = _PLANS.get(plan_key) if plan_key is not None else None
    return None if plan is None else _ran(plan, operation, operands)


def run(operation: object, operands: tuple, make_node: Callable[[], Node]) -> object:
    """``operation`` on ``operands`` (none of them lazy), whose node ``make_node``
    builds: by the plan of their signatures, made on the first call."""
    plan_key = key(operation, operands)
    plan = _PLANS.get(plan_key, False) if plan_key is not None else None
    if plan:
        return _ran(plan, operation, operands)
    node = make_node()
    if plan is None:
        return as_result(operation, operands, compute_node(node))
    result = None
    try:
        plan = _plan(node, operands)
        if plan is not None:
            result = plan(operands)
            plan.pointwise = Pointwise.of(operation, operands, result)
    except ScheduleError:  # the full path collects the entries unordered
        plan = None
    if len(_PLANS) >= PLANS_KEPT:
        del _PLANS[next(iter(_PLANS))]
    _PLANS[plan_key] = plan
    return as_result(operation, operands, compute_node(node) if result is None else result)


def _ran(plan: Plan, operation: object, operands: tuple) -> object:
    """``plan`` on ``operands``, and a fast call for them where it can serve the next."""
    result = plan(operands)
    dense = dense_result(operation, operands)
    if isinstance(operation, (str, tuple)):  # (a reduction: its name and axes)
        fast_calls.remember(operation, operands, plan.kernel.last_call,
                            plan.pointwise, dense, plan.sources)
    return result.to_numpy() if dense else result


def dense_result(operation: object, operands: tuple) -> bool:
    """Whether the result is an ndarray: a product with an ndarray operand, as
    pydata/sparse (and scipy.sparse) give it."""
    return operation == "matmul" and any(isinstance(x, np.ndarray) for x in operands)


def as_result(operation: object, operands: tuple, result: StoredTensor) -> object:
    """``result`` as the operation gives it (see ``dense_result``)."""
    dense = dense_result(operation, operands) and isinstance(result, StoredTensor)
    return result.to_numpy() if dense else result


def _plan(node: Node, operands: tuple) -> Plan | None:
    """The kernel of ``node`` and its operands' sources, or None (see the docstring)."""
    expr = node.expr
    if isinstance(expr, nt.Access):  # the operand itself, or a view of it
        return None
    assignment, tensors = canonical(node)
    sources = []
    for name, tensor in tensors.items():
        k = next((k for k, x in enumerate(operands) if x is tensor), None)
        if k is None and not (isinstance(tensor, np.ndarray) and tensor.ndim == 0
                              and not tensor.flags.writeable):
            return None  # a tensor made for this call, not a kept constant
        sources.append((name, k, tensor if k is None else None))
    formats = {n: t.format if isinstance(t, StoredTensor) else natural_format(t)
               for n, t in tensors.items()}
    # the compiler, loaded by the first plan made (ls.Tensor needs none)
    from ..kernel.api import Kernel

    kernel = Kernel(assignment, formats, output_format(node, assignment, tensors))
    return Plan(kernel, tuple(sources))


def forget() -> None:
    """Drop every plan (their kernels with them) and every fast call."""
    _PLANS.clear()
    fast_calls.forget()
