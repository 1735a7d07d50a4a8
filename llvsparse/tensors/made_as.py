"""The class every tensor is made as. The layers beneath the front end hold tensors by
their storage (``StoredTensor``, tensor.py) but must hand users the public ``Tensor``
(frontend/tensor.py: operators, item assignment, compiled conversions), which sits above
them. The class names itself here when it is defined, and where no tensor was made yet
it is asked of the package's facade (``llvsparse.Tensor``, which every layer may name),
so that no layer beneath imports upwards to build a result."""

from __future__ import annotations

import llvsparse

# The public class once it is defined (None before): hot paths test ``type(x) is made``.
made: type | None = None


def tensors_are(cls: type) -> None:
    """``cls`` is the class tensors are made as (its module says so when it defines it)."""
    global made
    made = cls


def tensor_class() -> type:
    """The class tensors are made as (a subclass of StoredTensor)."""
    if made is None:
        tensors_are(llvsparse.Tensor)  # the facade imports frontend/tensor.py
    return made
