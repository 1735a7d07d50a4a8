"""DLPack in and out of tensors (a mixin of Tensor): dense host tensors through numpy's
DLPack support, without copies; a CUDA array as a device tensor borrowing its memory
(gpu_resident.py; the capsules are read by dlpack.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..backends.cuda.driver import device
from . import dlpack
from .format import named_format
from .gpu_resident import DeviceTensor

if TYPE_CHECKING:
    from .tensor import StoredTensor


class DLPackOps:
    """Tensor's DLPack methods."""

    @classmethod
    def from_dlpack(cls, array: Any, format="dense") -> StoredTensor | DeviceTensor:
        """A tensor of a DLPack array (numpy, cupy, torch...): a host array through
        numpy, without a copy where ``format`` is dense; a CUDA array as a device tensor
        borrowing its memory (target="cuda" kernels read it there; cuda-python needed)."""
        kind, ordinal = array.__dlpack_device__() if hasattr(array, "__dlpack_device__") \
            else (dlpack.CPU, 0)
        if kind == dlpack.CPU:
            return cls.from_numpy(np.from_dlpack(array), format)
        if kind != dlpack.CUDA:
            raise ValueError(f"a DLPack array on device type {kind} (only CPU {dlpack.CPU} "
                             f"and CUDA {dlpack.CUDA} are taken)")
        if format != "dense":
            raise ValueError(f"a CUDA array comes in as a dense device tensor, not {format}")
        gpu = device(int(ordinal))
        taken = dlpack.consume(array.__dlpack__())
        placeholder = np.empty(taken.shape, taken.dtype)  # never read by kernels
        return DeviceTensor.borrowing(cls.from_numpy(placeholder), taken.pointer, gpu,
                                      taken.release)

    @property
    def is_dense_layout(self) -> bool:
        """Whether the values are the whole tensor in row-major order (no index arrays)."""
        return self.format.layout_key() == named_format("dense", self.order).layout_key()

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> object:
        """The dense values as a DLPack capsule (no copy), through numpy."""
        if not self.is_dense_layout:
            raise TypeError(f"DLPack describes strided dense arrays; a "
                            f"{self.format.name or 'sparse'} tensor has none (to_numpy() "
                            "copies it into one)")
        return self.values.reshape(self.shape).__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (dlpack.CPU, 0)
