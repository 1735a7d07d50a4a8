"""Lazy NumPy-style expressions over tensors, fused into one index-notation kernel.

``ls.lazy(A)`` wraps a tensor; operators, ``.T``, ``sum`` and ``@`` on it build an
index-notation expression instead of computing (its node: lazy_nodes.py, lazy_ops.py),
and ``ls.compute(expr)`` compiles the whole chain as one assignment (lazy_compute.py).
An eager operation on a Tensor is the same thing computed at once.

Chains are built as recipes and computed by the plan of their structure, so that
``ls.lazy`` is never slower than eager operations (issue 33). Building a lazy chain's
nodes (fresh index variables, broadcasting, fills, dtypes), then naming the whole
assignment canonically and finding its kernel by its text cost 0.7 ms on a 10 x 10
matrix, every call: more than the eager chain, whose operations replay plans. Here an
operation on a lazy operand only records its recipe (the operation and its operands)
and its shape (so a shape mismatch is still refused where it is written); its node is
built when something asks for it. ``compute`` names the chain by its structure (the
operations, each leaf by its position) and its leaves, and runs it as one eager
operation of that structure (eager_plans): the node, assignment, output format and
kernel are made once per structure and signature of the leaves, and a chain repeated on
the same tensors goes to a fast call (fast_calls.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from ..ir.notation import syntax as nt
from ..tensors.deferred import Deferred
from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor
from . import eager_plans
from .lazy_compute import compute_node
from .lazy_nodes import Node, NodeHolder, as_node, broadcast_shape, canonical, node_dtype
from .lazy_ops import apply, reduce
from .numpy_dispatch import NumpyArray


class LazyTensor(NumpyArray, NodeHolder, Deferred):
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

    @staticmethod
    def chained(operation: object, operands: tuple, node: Node | Callable[[], Node]
                ) -> LazyTensor:
        """The lazy result of an operation on lazy ``operands`` (numpy_protocols.finish
        asks a lazy operand's class): a recipe of the ``operation`` named, else ``node``."""
        if operation is not None:
            return deferred(operation, operands, node)
        return LazyTensor(node() if callable(node) else node)


# What a recipe takes (anything else, a list or a scipy matrix, is built at once).
_OPERANDS = (LazyTensor, StoredTensor, np.ndarray, int, float)


_DTYPES: dict[tuple, np.dtype] = {}  # a recipe's dtype by its operation and operands'
DTYPES_KEPT = 1024


class LazyRecipe(LazyTensor):
    """A lazy operation whose node is built on first use: ``recipe`` is the operation
    and its operands (which eager_plans keys by), ``make`` builds the node."""

    __slots__ = ("_built", "_dtype", "_shape", "make", "recipe")

    def __init__(self, operation: object, operands: tuple, make: Callable[[], Node],
                 shape: tuple[int, ...]):
        self.recipe, self.make, self._shape, self._built = (operation, operands), make, \
            shape, None
        self._dtype = None

    @property
    def node(self) -> Node:
        if self._built is None:
            self._built = self.make()
        return self._built

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        """numpy's dtype of the result, kept per operation and operands' dtypes (and
        numbers' values): the front end asks it of every operand (is it complex?)."""
        if self._dtype is None:
            operation, operands = self.recipe
            key = (operation, *[(type(x), x) if type(x) in (int, float) else x.dtype
                                for x in operands])
            known = _DTYPES.get(key)
            if known is None:
                known = node_dtype(self.node)
                if len(_DTYPES) >= DTYPES_KEPT:
                    del _DTYPES[next(iter(_DTYPES))]
                _DTYPES[key] = known
            self._dtype = known
        return self._dtype

    def compute(self, format: object = None):
        """The chain as one kernel: by the plan of its structure and leaves' signatures
        (a fast call where they are the same tensors as before), else as a node; or
        its operations one by one where that was timed faster (``Choice``)."""
        if format is None:
            leaves: list = []
            structure = _structure(self, leaves)
            if structure is not None:
                operation, operands = ("lazy", structure), tuple(leaves)
                return _CHOICES.run(operation, operands, self)
        return compute_node(self.node, format)


def deferred(operation: object, operands: tuple, make: Callable[[], Node]) -> LazyTensor:
    """``operation`` (an elementwise function's name, or a reduction's (name, axes)) on
    ``operands`` as a recipe; its shape worked out now (numpy's broadcasting, refused
    here as before), its node when asked for. Other operations build their node now."""
    if not all(isinstance(x, _OPERANDS) and not isinstance(x, bool) for x in operands):
        return LazyTensor(make())
    if isinstance(operation, str) and operation != "matmul":
        shape = _broadcast(tuple(_shape(x) for x in operands))
    elif isinstance(operation, tuple) and len(operands) == 1:
        axes = operation[1]
        shape = tuple(n for k, n in enumerate(_shape(operands[0])) if k not in axes)
    else:
        return LazyTensor(make())
    return LazyRecipe(operation, operands, make, shape)


def _shape(value: object) -> tuple[int, ...]:
    shape = getattr(value, "shape", None)
    return () if shape is None else tuple(shape)


@lru_cache(maxsize=1024)
def _broadcast(shapes: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    return broadcast_shape(*shapes)


def lazy(value: object) -> LazyTensor:
    """``value`` (a Tensor, numpy array, scipy or pydata sparse array) as the start of
    a lazy chain: a real-valued Tensor or ndarray as a recipe of its own (its node, a
    leaf, built when asked for); anything else (refused there) as a node."""
    if type(value) in (tensor_class(), np.ndarray) and value.ndim and value.dtype.kind in "biuf":
        return LazyRecipe(None, (value,), functools.partial(as_node, value), value.shape)
    return _lazy_node(value)


def _structure(value: object, leaves: list) -> object:
    """``value``'s structure, its leaves (tensors, arrays, numbers) appended to
    ``leaves`` and named by position; None where a part has no recipe (a lazy node
    built otherwise: a transposed or reshaped one)."""
    if isinstance(value, LazyRecipe):
        operation, operands = value.recipe
        if operation is None:  # ls.lazy(A)
            return _structure(operands[0], leaves)
        parts = []
        for operand in operands:
            part = _structure(operand, leaves)
            if part is None:
                return None
            parts.append(part)
        return (operation, *parts)
    if isinstance(value, LazyTensor):  # ls.lazy(A): the tensor, read at its own axes
        node = value.node
        expr = node.expr
        if not isinstance(expr, nt.Access) or expr.indices != node.vars:
            return None
        value = node.leaves[expr.tensor]
    leaves.append(value)
    return len(leaves) - 1


def _fused(operation: tuple, operands: tuple, chain: LazyRecipe) -> object:
    """The chain as one kernel, by its plan (eager_plans)."""
    done = eager_plans.replayed(operation, operands)
    if done is not None:
        return done
    return eager_plans.run(operation, operands, lambda: chain.node)


def _eager(value: object) -> object:
    """The chain's operations one by one, each an eager operation (its plan, its fast
    call: eager_plans)."""
    if not isinstance(value, LazyRecipe):
        return value
    operation, operands = value.recipe
    if operation is None:
        return operands[0]
    args = tuple(_eager(x) for x in operands)
    done = eager_plans.replayed(operation, args)
    if done is not None:
        return done
    if isinstance(operation, str):
        return eager_plans.run(operation, args,
                               lambda: apply(operation, *args))
    name, axes = operation
    return eager_plans.run(operation, args,
                           lambda: reduce(as_node(args[0]), axes, name))


class Choice:
    """Fused or eager, per chain structure and leaves' signatures: one kernel for the
    whole chain reads every operand once, but its merge of many sparse operands can
    cost more per entry than the chain's operations one by one (``A * B + C`` at 10^6
    entries: the fused union of an intersection with C took 1.5x the two eager
    kernels). Each way's first ``WARM`` calls (compiling, binding, timing its kernels'
    forms: probe.py's 6 calls, then a fast call made: fast_calls.py) are not counted,
    then ``SAMPLES`` calls of each are, alternately; the faster by its best time serves
    every later call."""

    WARM = 10
    SAMPLES = 3
    KEPT = 256

    def __init__(self):
        self.ways: dict[str, Callable[[tuple, tuple, LazyRecipe], object]] = {
            "fused": _fused, "eager": lambda operation, operands, chain: _eager(chain)}
        self.chosen: dict[tuple, str] = {}
        self.timing: dict[tuple, dict[str, list[float]]] = {}

    def run(self, operation: tuple, operands: tuple, chain: LazyRecipe) -> object:
        key = eager_plans.key(operation, operands)
        way = "fused" if key is None else self.chosen.get(key)
        if way is not None:
            return self.ways[way](operation, operands, chain)
        times = self.timing.get(key)
        if times is None:
            if len(self.timing) >= self.KEPT:
                del self.timing[next(iter(self.timing))]
            times = self.timing[key] = {"fused": [], "eager": []}
        way = min(times, key=lambda w: len(times[w]))  # fused first, then alternately
        start = time.perf_counter()
        result = self.ways[way](operation, operands, chain)
        times[way].append(time.perf_counter() - start)
        if all(len(t) >= self.WARM + self.SAMPLES for t in times.values()):
            del self.timing[key]
            if len(self.chosen) >= self.KEPT:
                del self.chosen[next(iter(self.chosen))]
            self.chosen[key] = min(times, key=lambda w: min(times[w][self.WARM:]))
        return result


_CHOICES = Choice()


def _lazy_node(value: object) -> LazyTensor:
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
