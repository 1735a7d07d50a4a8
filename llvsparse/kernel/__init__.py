"""``compile`` / ``evaluate``: the Kernel, built from notation and formats through ir/ and
a backend, inspected (every stage), pickled, and refused with advice. Built on calls/,
caching/, tensors/ and notation/."""

from .. import _submodule_getattr

__getattr__ = _submodule_getattr(__name__)
