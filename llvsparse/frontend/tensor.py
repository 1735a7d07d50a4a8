"""The public Tensor: a StoredTensor (tensors/tensor.py: levels, arrays, checks and the
conversions that need no compiled kernel) with what computes through the layers beneath
it: numpy's operators and protocols (NumpyArray), index notation and slicing, item
assignment, writing files, and conversions by a compiled copy kernel. Every tensor the
package makes is one (tensors/made_as.py); a view of one is a TensorView."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..formats.registry import generation as registry_generation
from ..ir.notation import syntax as nt
from ..notation.expr_api import access
from ..tensors import fancy_index, io
from ..tensors.format import Format
from ..tensors.made_as import tensors_are
from ..tensors.tensor import StoredTensor
from ..tensors.views import WindowStorage, is_window_key, view
from . import tensor_assign
from .numpy_dispatch import NumpyArray

if TYPE_CHECKING:
    from ..kernel.api import Kernel


class Tensor(StoredTensor, NumpyArray):
    """A tensor stored level by level (see StoredTensor), with numpy's operators,
    reductions and protocols (NumpyArray: numpy_protocols.py, numpy_dispatch.py)."""

    def __getitem__(self, indices):
        """Index notation (``A[i, j]`` with index variables), or a slice of the tensor
        without a copy (``A[2:10:2, :]``, ``A[:, 5]``, ``A[1, 2]``; see tensors/views.py)."""
        if is_window_key(indices):
            return view(self, indices, TensorView)
        if fancy_index.is_index_key(indices):
            return fancy_index.getitem(self, indices)
        return access(self, indices)

    def __setitem__(self, indices, value) -> None:
        """Assignment in index notation (``A[i, j] = B[i, j] * 2``), computed into this
        tensor in its dtype, or numpy's item assignment (``A[1, 2] = 3``, ``A[:, 0] =
        x``, ``A[mask] = 0``), in its format, dtype and fill (see tensor_assign.py)."""
        if fancy_index.is_index_key(indices):
            tensor_assign.assign_items(self, indices, value)
        else:
            tensor_assign.assign_notation(self, indices, value)

    def write(self, path) -> None:
        """Write to Matrix Market (.mtx[.gz]), FROSTT (.tns[.gz]), .npy or .npz."""
        io.write(self, path)

    def _kernel_copy(self, fmt: Format, check: bool) -> Tensor:
        """This tensor copied into ``fmt`` by a compiled kernel, kept per pair of
        formats (ScheduleError where none can be scheduled)."""
        kernel = _copy_kernel(self.order, self.format, fmt, str(self.index_dtype))
        return kernel(check=check, A=self)


class TensorView(WindowStorage, Tensor):
    """A window onto a tensor, sharing its arrays (see tensors/views.py); read-only."""

    def __setitem__(self, indices, value) -> None:
        raise TypeError("a view is read-only: write to the tensor it views")


tensors_are(Tensor)

_COPY_KERNELS: dict = {}


def _copy_kernel(order: int, source: Format, target: Format, index_dtype: str) -> Kernel:
    key = (order, source, target, index_dtype, registry_generation())
    if key not in _COPY_KERNELS:
        # the compiler, loaded by the first compiled conversion (ls.Tensor needs none)
        from ..kernel.api import Kernel

        idx = nt.index_vars(" ".join(f"i{k}" for k in range(order)))
        copy = nt.Assignment(nt.Access("B", idx), nt.Access("A", idx))
        _COPY_KERNELS[key] = Kernel(copy, {"A": source}, target, out_index_dtype=index_dtype,
                                    convert=False)
    return _COPY_KERNELS[key]
