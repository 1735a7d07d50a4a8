"""Converted operands of a binding that follow their tensor's current values.

A binding prepares its descriptors once, so an operand it converts (the transposed copy
in ``A + A(j,i)``) is a copy made when it was bound. Its values must still be the
tensor's values at each call, as ``kernel(...)`` (which converts on every call) sees
them: a user may change ``A.values`` in place between calls.

Where every stored entry of the copy takes its value from one entry of the tensor (no
entries summed, no padding), the copy keeps those source positions and gathers the
values again per call, in place, so that the binding's descriptor stays valid (2M
entries: about 15 ms, against 250 for a conversion). Otherwise the call converts the
tensor again and copies the values over.

Calls of one binding from several threads share the copy, so its refreshes take turns
(``_one_at_a_time``); a kernel still reading it meanwhile sees the same values written
again, unless the tensor's values were changed in between.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from ..tensors.format import Format
from ..tensors.tensor import StoredTensor

Refresh = Callable[[], None]


def live_copy(tensor: StoredTensor, fmt: Format, name: str) -> tuple[StoredTensor, Refresh]:
    """``tensor`` (the operand ``name``) in ``fmt``, and a refresh that sets the copy's
    values to the tensor's current ones."""
    template, sources = (None, None) if not tensor.order else \
        tensor._remembered_plan(fmt) or tensor._gather_plan(fmt)
    if template is None:
        copy = tensor.asformat(fmt)
        return copy, _one_at_a_time(lambda: _convert_again(tensor, fmt, copy, name))
    copy = tensor._gathered(template, sources)

    def gather() -> None:
        if len(tensor.values) <= sources_end:
            raise _changed(name)
        np.take(tensor.values, sources, out=copy.values)

    sources_end = int(sources.max()) if len(sources) else -1
    return copy, _one_at_a_time(gather)


def _one_at_a_time(refresh: Refresh) -> Refresh:
    """``refresh`` behind a lock of its own. np.take buffers its ``out`` and marks it
    read-only until it writes the buffer back, so eight threads calling one binding
    failed in seven ('WRITEBACKIFCOPY base is read-only')."""
    lock = threading.Lock()

    def locked() -> None:
        with lock:
            refresh()
    return locked


def _convert_again(tensor: StoredTensor, fmt: Format, copy: StoredTensor, name: str) -> None:
    values = tensor._convert(fmt, check=False).values
    if values.shape != copy.values.shape:
        raise _changed(name)
    np.copyto(copy.values, values)


def _changed(name: str) -> ValueError:
    return ValueError(f"operand {name} has other stored entries than when the binding "
                      "was made (its index or values arrays changed size); bind it again")
