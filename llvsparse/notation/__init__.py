"""Index notation as users write it: the text parser, the Python operator API, user
functions, semirings, numpy's einsum spellings and elementwise names. Built on ir/ only
(it makes ir.notation trees); beneath the tensor type, whose ``A[i, j]`` makes accesses."""

from .. import _submodule_getattr

__getattr__ = _submodule_getattr(__name__)
