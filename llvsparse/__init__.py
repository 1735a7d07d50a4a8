"""llvsparse: a sparse tensor algebra compiler with YAML level formats and LLVM codegen.

Names are imported on first use (module ``__getattr__``): ``import llvsparse`` took
0.4-0.6 s when it loaded the compiler, llvmlite and YAML up front; now it loads nothing
until a name is asked for, and LLVM is initialised by the first compile.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# Each public name and the module that defines it.
_HOMES = {
    "Kernel": "api", "ShapeError": "binding", "compile": "api", "einsum": "einsums",
    "evaluate": "api",
    "asarray": "coerce", "conv": "conv", "pool": "conv",
    "complement": "expr_api",
    "Format": "format", "FormatError": "format", "Level": "format", "named_format": "format",
    "FormatFileError": "formats.loader",
    "level_formats": "formats.registry", "register_level_format": "formats.registry",
    "unregister_level_format": "formats.registry",
    "CorruptTensorError": "formats.interpret",
    "read": "io", "write": "io",
    "InternalCompilerError": "ir.errors", "ScheduleError": "ir.errors",
    "GpuMappingError": "ir.gpu_plan",
    "set_kernel_cache_bytes": "kernel_cache",
    "IndexVar": "ir.notation", "NotationError": "ir.notation",
    "NotationSyntaxError": "ir.notation", "index_vars": "ir.notation", "parse": "notation_parse",
    "function": "functions", "semiring": "expr_api",
    **dict.fromkeys(("min", "max", "abs", "exp", "log", "sqrt", "pow", "where",
                     "logical_and", "logical_or", "logical_xor", "logical_not"), "expr_api"),
    "set_result_pool_bytes": "results",
    "KernelRuntimeError": "runtime", "get_num_threads": "runtime",
    "set_num_threads": "runtime",
    "Tensor": "tensor", "sort": "sorting", "tensordot": "numpy_functions",
    "LazyTensor": "lazy_tensor", "compute": "lazy_tensor", "lazy": "lazy_recipes",
    "WorkspacePolicy": "ir.workspace_policy",
    "register_workspace_policy": "policy_registry",
    "unregister_workspace_policy": "policy_registry",
    "workspace_policies": "policy_registry",
}

__all__ = [  # named_format is public but, as before, not starred
    "CorruptTensorError", "Format", "FormatError", "FormatFileError", "GpuMappingError",
    "IndexVar",
    "InternalCompilerError", "Kernel",
    "KernelRuntimeError", "LazyTensor", "Level", "NotationError", "NotationSyntaxError",
    "ScheduleError", "ShapeError", "Tensor", "WorkspacePolicy", "asarray", "compile",
    "complement", "compute", "conv", "einsum", "evaluate", "get_num_threads", "index_vars", "lazy",
    "level_formats", "parse", "pool", "read", "register_level_format", "register_workspace_policy",
    "set_kernel_cache_bytes", "set_num_threads", "set_result_pool_bytes", "sort",
    "tensordot", "unregister_level_format", "unregister_workspace_policy",
    "workspace_policies", "write",
]


def __getattr__(name: str):
    """A public name from its module, or a submodule (``llvsparse.api``), imported now."""
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(f".{home}", __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if not name.startswith("__"):
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


if TYPE_CHECKING:  # what type checkers and IDEs see
    from .api import Kernel, compile, evaluate
    from .binding import ShapeError
    from .coerce import asarray
    from .conv import conv, pool
    from .einsums import einsum
    from .expr_api import complement
    from .format import Format, FormatError, Level
    from .format import named_format as named_format
    from .formats.interpret import CorruptTensorError
    from .formats.loader import FormatFileError
    from .formats.registry import level_formats, register_level_format, unregister_level_format
    from .io import read, write
    from .ir.errors import InternalCompilerError, ScheduleError
    from .ir.gpu_plan import GpuMappingError
    from .ir.notation import IndexVar, NotationError, NotationSyntaxError, index_vars
    from .ir.workspace_policy import WorkspacePolicy
    from .kernel_cache import set_kernel_cache_bytes
    from .lazy_recipes import lazy
    from .lazy_tensor import LazyTensor, compute
    from .notation_parse import parse
    from .numpy_functions import tensordot
    from .policy_registry import (
        register_workspace_policy,
        unregister_workspace_policy,
        workspace_policies,
    )
    from .results import set_result_pool_bytes
    from .runtime import KernelRuntimeError, get_num_threads, set_num_threads
    from .sorting import sort
    from .tensor import Tensor
