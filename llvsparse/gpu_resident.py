"""Tensors resident on a GPU: ``Tensor.to_device()`` copies a tensor's arrays to device
memory once, so ``target="cuda"`` calls read them there instead of copying them on
every call (the dense output still comes back to the host each call).

The device copy is made when ``to_device`` is called: changing the host arrays in place
afterwards does not change it (as with any copy; call ``to_device`` again).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from .backends.cuda.driver import CudaError, Device


class DeviceTensor:
    """A tensor's arrays in one GPU's memory, beside the host tensor they came from."""

    def __init__(self, host: Any, arrays: list[np.ndarray | None], gpu: Device):
        self.host, self.gpu = host, gpu
        self._arrays = [a for a in arrays if a is not None and a.size]  # kept alive
        self.pointers: dict[int, int] = {}  # id of a host array -> its device copy
        for array in self._arrays:
            self.pointers[id(array)] = gpu.to_device(array)

    def __repr__(self) -> str:
        return f"<DeviceTensor on GPU {self.gpu.ordinal} ({self.gpu.sm}) of {self.host!r}>"

    @property
    def shape(self) -> tuple[int, ...]:
        return self.host.shape

    def to_host(self) -> Any:
        """The host tensor (device tensors are copies of unchanged host ones)."""
        return self.host

    def free(self) -> None:
        """Release the device copies now (calls then copy the host arrays again)."""
        pointers, self.pointers = self.pointers, {}
        for pointer in pointers.values():
            self.gpu.free(pointer)

    def __del__(self) -> None:
        with contextlib.suppress(CudaError):  # a context torn down at exit: nothing to free
            self.free()
