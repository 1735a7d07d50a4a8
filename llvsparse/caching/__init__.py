"""Compiled kernels kept: the in-memory cache (bounded by bytes), the disk cache of
object code, and export to object files, shared libraries and C headers. Built on abi/."""

from .. import _submodule_getattr

__getattr__ = _submodule_getattr(__name__)
