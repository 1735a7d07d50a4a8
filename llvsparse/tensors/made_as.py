"""The class every tensor is made as. The layers beneath the front end hold tensors by
their storage (``StoredTensor``, tensor.py) but must hand users the public ``Tensor``
(frontend/tensor.py: operators, item assignment, compiled conversions), which sits above
them. The package (llvsparse/__init__.py) says where it is, once, when it is first
imported, and the class names itself here when it is defined, so that no layer beneath
has to import upwards to build a result."""

from __future__ import annotations

from collections.abc import Callable

# The public class once it is defined (None before): hot paths test ``type(x) is made``.
made: type | None = None
_loader: list[Callable[[], type]] = []


def make_tensors_as(loader: Callable[[], type]) -> None:
    """Have tensors made as the class ``loader()`` returns, loaded when the first tensor
    is made (so that naming it here imports nothing)."""
    _loader[:] = [loader]


def tensors_are(cls: type) -> None:
    """``cls`` is the class tensors are made as (its module says so when it defines it)."""
    global made
    made = cls


def tensor_class() -> type:
    """The class tensors are made as (a subclass of StoredTensor)."""
    if made is None:
        if not _loader:
            raise RuntimeError("no tensor class was named: import llvsparse first")
        tensors_are(_loader[0]())
    return made
