"""What a value computed on demand is to the layers that take tensors: ``asarray`` and
the kernels' operands compute it, without knowing the front end that built it (the
NumPy front end's LazyTensor is one; it sits above this layer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tensor import StoredTensor


class Deferred:
    """A value that becomes a Tensor when computed (into ``format``, where given)."""

    __slots__ = ()

    def compute(self, format: object = None) -> StoredTensor:
        raise NotImplementedError(f"{type(self).__name__} does not say how it computes")
