"""The tensor type: Format and its levels, Tensor and its arrays, their O(1) and O(nnz)
checks, conversions to and from numpy and scipy, views, files (Matrix Market, FROSTT) and
DLPack. Built on abi/, notation/ and formats/.

Known upward calls (issue 31 item 6; tests/test_layering.py pins them): a Tensor's NumPy
operators (its mixin frontend/numpy_protocols.ArrayOps), ``asformat``'s compiled copy
kernel (kernel/api) and index assignment (frontend/tensor_assign) compute through the
layers above this one."""

from .. import _submodule_getattr

__getattr__ = _submodule_getattr(__name__)
