"""Binding operands to a compiled kernel and calling it: operand checks and conversions,
outputs the kernel assembles, the threads' split, the GPU (device and emulator) and the
interpreter backend, the autoscheduler's operand statistics and schedule search. Built on
tensors/, caching/ and abi/; it knows nothing of how a kernel is compiled."""

from .. import _submodule_getattr

__getattr__ = _submodule_getattr(__name__)
