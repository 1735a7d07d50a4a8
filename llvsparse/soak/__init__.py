"""The soaks: random cases checked against numpy, each reproducible from (seed, index),
and the complexity soak. Applications of the public API (``import llvsparse as ls``)."""

from .. import _submodule_getattr

__getattr__ = _submodule_getattr(__name__)
