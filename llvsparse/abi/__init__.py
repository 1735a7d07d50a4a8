"""The kernel ABI on the host, beneath every layer that holds a tensor: descriptors,
calls into native code (serial, threaded, in phases) and the pool that recycles result
memory. Imports nothing of llvsparse above it."""

from .. import _submodule_getattr

__getattr__ = _submodule_getattr(__name__)
