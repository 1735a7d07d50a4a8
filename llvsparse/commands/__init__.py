"""The ``llvsparse`` command line: a module per subcommand, on top of the library."""

from .. import _submodule_getattr

__getattr__ = _submodule_getattr(__name__)
