"""The class every tensor is made as. The layers beneath the front end hold tensors by
their storage (``StoredTensor``, tensor.py) but must hand users the public ``Tensor``
(frontend/tensor.py: operators, item assignment, compiled conversions), which sits above
them; the package (llvsparse/__init__.py) names it here once, when it is first imported,
so that no layer beneath has to import upwards to build a result."""

from __future__ import annotations

from collections.abc import Callable

_loader: list[Callable[[], type]] = []
_made: list[type] = []


def make_tensors_as(loader: Callable[[], type]) -> None:
    """Have tensors made as the class ``loader()`` returns (called on the first tensor
    made, so that naming it here imports nothing)."""
    _loader[:] = [loader]
    _made.clear()


def tensor_class() -> type:
    """The class tensors are made as (a subclass of StoredTensor)."""
    if not _made:
        if not _loader:
            raise RuntimeError("no tensor class was named: import llvsparse first")
        _made.append(_loader[0]())
    return _made[0]
