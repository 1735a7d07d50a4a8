"""Tensors resident on a GPU: ``Tensor.to_device()`` copies a tensor's arrays to device
memory once, so ``target="cuda"`` calls read them there instead of copying them on
every call (the dense output still comes back to the host each call).

The device copy is made when ``to_device`` is called: changing the host arrays in place
afterwards does not change it (as with any copy; call ``to_device`` again).

A dense array another library holds on the device comes in through DLPack without a
copy (``Tensor.from_dlpack``): the device tensor borrows its memory, and its host side
is a placeholder of its shape that kernels never read (``to_host`` copies the device's
values into it). Dense device tensors go out through DLPack the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..backends.cuda.driver import CudaError, Device
from . import dlpack


class DeviceTensor:
    """A tensor's arrays in one GPU's memory, beside the host tensor they came from."""

    def __init__(self, host: Any, arrays: list[np.ndarray | None], gpu: Device):
        self.host, self.gpu = host, gpu
        self._arrays = [a for a in arrays if a is not None and a.size]  # kept alive
        self.pointers: dict[int, int] = {}  # id of a host array -> its device copy
        self._release: Callable[[], None] | None = None  # a borrowed array's deleter
        for array in self._arrays:
            self.pointers[id(array)] = gpu.to_device(array)

    @classmethod
    def borrowing(cls, host: Any, pointer: int, gpu: Device,
                  release: Callable[[], None]) -> DeviceTensor:
        """A dense tensor whose values are device memory at ``pointer`` that another
        library owns (``release`` hands it back); ``host``: a placeholder of its shape."""
        tensor = cls(host, [], gpu)
        tensor._arrays = [host.values]
        tensor.pointers[id(host.values)] = pointer
        tensor._release = release
        return tensor

    def __repr__(self) -> str:
        return f"<DeviceTensor on GPU {self.gpu.ordinal} ({self.gpu.sm}) of {self.host!r}>"

    @property
    def shape(self) -> tuple[int, ...]:
        return self.host.shape

    def to_host(self) -> Any:
        """The host tensor (device copies of unchanged host tensors; a borrowed array's
        values copied over now)."""
        if self._release is not None and self.host.values.size:
            self.gpu.to_host(self.pointers[id(self.host.values)],
                             self.host.values.view(np.uint8))
        return self.host

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> object:
        """A DLPack capsule of this dense tensor's device values (no copy)."""
        if not self.host.is_dense_layout:
            raise TypeError(f"DLPack describes strided dense arrays; this "
                            f"{self.host.format.name or 'sparse'} tensor has none")
        values = self.host.values
        pointer = self.pointers.get(id(values), 0)
        return dlpack.export(pointer, dlpack.CUDA, self.gpu.ordinal, self.shape, values.dtype,
                             self)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (dlpack.CUDA, self.gpu.ordinal)

    def free(self) -> None:
        """Release the device copies now (calls then copy the host arrays again); a
        borrowed array goes back to its owner."""
        pointers, self.pointers = self.pointers, {}
        if self._release is not None:
            release, self._release = self._release, None
            release()
            return
        for pointer in pointers.values():
            self.gpu.free(pointer)

    def __del__(self) -> None:
        with contextlib.suppress(CudaError):  # a context torn down at exit: nothing to free
            self.free()
