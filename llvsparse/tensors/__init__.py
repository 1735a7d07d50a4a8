"""The tensor's storage: Format and its levels, StoredTensor and its arrays, their O(1)
and O(nnz) checks, conversions to and from numpy and scipy, views' windows, files
(Matrix Market, FROSTT) and DLPack. Built on abi/, notation/ and formats/.

What computes through the layers above (numpy's operators, index notation and item
assignment, a conversion by a compiled copy kernel) is the public Tensor's, a subclass
in frontend/tensor.py; every tensor is made as it (made_as.py names the class)."""

from .. import _submodule_getattr

__getattr__ = _submodule_getattr(__name__)
