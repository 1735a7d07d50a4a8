"""The NumPy front end: operators and numpy's protocols on tensors, lazy expressions fused
into one kernel, the eager fast paths and numpy's functions (reductions, shapes, sorting,
einsum, conv). The top of the library's layers: built on kernel/ and all beneath it."""

from .. import _submodule_getattr

__getattr__ = _submodule_getattr(__name__)
