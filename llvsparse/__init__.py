"""llvsparse: a sparse tensor algebra compiler with YAML level formats and LLVM codegen."""

__version__ = "0.1.0"

from .api import Kernel, ShapeError, compile, einsum, evaluate
from .coerce import asarray
from .format import Format, FormatError, Level, named_format
from .formats.loader import FormatFileError
from .formats.registry import level_formats, register_level_format, unregister_level_format
from .interpret import CorruptTensorError
from .io import read, write
from .ir.schedule import ScheduleError
from .kernel_cache import set_kernel_cache_bytes
from .notation import IndexVar, NotationError, NotationSyntaxError, index_vars, parse
from .results import set_result_pool_bytes
from .runtime import KernelRuntimeError, get_num_threads, set_num_threads
from .tensor import Tensor

__all__ = [
    "CorruptTensorError",
    "Format",
    "FormatError",
    "FormatFileError",
    "IndexVar",
    "Kernel",
    "KernelRuntimeError",
    "Level",
    "NotationError",
    "NotationSyntaxError",
    "ScheduleError",
    "ShapeError",
    "Tensor",
    "asarray",
    "compile",
    "einsum",
    "evaluate",
    "get_num_threads",
    "index_vars",
    "level_formats",
    "named_format",
    "parse",
    "read",
    "register_level_format",
    "set_kernel_cache_bytes",
    "set_num_threads",
    "set_result_pool_bytes",
    "unregister_level_format",
    "write",
]
