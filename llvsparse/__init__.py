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
    "Kernel": "kernel.api", "compile": "kernel.api", "evaluate": "kernel.api",
    "ShapeError": "calls.binding", "einsum": "frontend.einsums",
    "asarray": "tensors.coerce", "conv": "frontend.conv", "pool": "frontend.conv",
    "complement": "notation.expr_api",
    "Format": "tensors.format", "FormatError": "tensors.format", "Level": "tensors.format",
    "named_format": "tensors.format",
    "FormatFileError": "formats.loader",
    "level_formats": "formats.registry", "register_level_format": "tensors.level_check",
    "unregister_level_format": "formats.registry",
    "CorruptTensorError": "formats.interpret",
    "read": "tensors.io", "write": "tensors.io",
    "InternalCompilerError": "ir.errors", "ScheduleError": "ir.errors",
    "GpuMappingError": "ir.loops.gpu_plan",
    "set_kernel_cache_bytes": "caching.memory",
    "IndexVar": "ir.notation.syntax", "NotationError": "ir.notation.syntax",
    "NotationSyntaxError": "ir.notation.syntax", "index_vars": "ir.notation.syntax",
    "parse": "notation.parse",
    "function": "notation.functions", "semiring": "notation.expr_api",
    **dict.fromkeys(("min", "max", "abs", "exp", "log", "sqrt", "pow", "where",
                     "logical_and", "logical_or", "logical_xor", "logical_not"),
                    "notation.expr_api"),
    "set_result_pool_bytes": "abi.results",
    "KernelRuntimeError": "abi.runtime", "get_num_threads": "abi.thread_calls",
    "set_num_threads": "abi.thread_calls",
    "Tensor": "frontend.tensor", "sort": "frontend.sorting",
    "tensordot": "frontend.numpy_functions",
    "LazyTensor": "frontend.lazy_tensor", "compute": "frontend.lazy_tensor",
    "lazy": "frontend.lazy_tensor",
    "WorkspacePolicy": "ir.schedule.workspace_policy",
    "register_workspace_policy": "kernel.policy_registry",
    "unregister_workspace_policy": "kernel.policy_registry",
    "workspace_policies": "kernel.policy_registry",
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
    """A public name from its module, or a submodule (``llvsparse.kernel.api``), imported now."""
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


def _submodule_getattr(package: str):
    """A sub-package's module ``__getattr__``: ``llvsparse.calls.probe`` is imported on
    first access, as ``llvsparse.kernel.api`` was before the modules had folders."""
    def getattr_(name: str):
        if not name.startswith("__"):
            try:
                return importlib.import_module(f".{name}", package)
            except ModuleNotFoundError as error:
                if error.name != f"{package}.{name}":
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr_


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


if TYPE_CHECKING:  # what type checkers and IDEs see
    from .abi.results import set_result_pool_bytes
    from .abi.runtime import KernelRuntimeError
    from .abi.thread_calls import get_num_threads, set_num_threads
    from .caching.memory import set_kernel_cache_bytes
    from .calls.binding import ShapeError
    from .formats.interpret import CorruptTensorError
    from .formats.loader import FormatFileError
    from .formats.registry import level_formats, unregister_level_format
    from .frontend.conv import conv, pool
    from .frontend.einsums import einsum
    from .frontend.lazy_tensor import LazyTensor, compute, lazy
    from .frontend.numpy_functions import tensordot
    from .frontend.sorting import sort
    from .frontend.tensor import Tensor
    from .ir.errors import InternalCompilerError, ScheduleError
    from .ir.loops.gpu_plan import GpuMappingError
    from .ir.notation.syntax import IndexVar, NotationError, NotationSyntaxError, index_vars
    from .ir.schedule.workspace_policy import WorkspacePolicy
    from .kernel.api import Kernel, compile, evaluate
    from .kernel.policy_registry import (
        register_workspace_policy,
        unregister_workspace_policy,
        workspace_policies,
    )
    from .notation.expr_api import complement
    from .notation.parse import parse
    from .tensors.coerce import asarray
    from .tensors.format import Format, FormatError, Level
    from .tensors.format import named_format as named_format
    from .tensors.io import read, write
    from .tensors.level_check import register_level_format
