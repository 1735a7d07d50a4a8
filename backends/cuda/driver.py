"""Loader and launcher on cuda-python's driver API (``cuda.bindings.driver``).

cuda-python is an optional extra (``pip install llvsparse[cuda]``), so the driver module
is imported when a device is first asked for, never by ``import llvsparse``. Every
driver call goes through ``_check``, which turns a failing ``CUresult`` into a
``CudaError`` carrying the error's name (``CUDA_ERROR_INVALID_PTX``...).
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

DRIVER_MODULE = "cuda.bindings.driver"
_LOCK = threading.Lock()
_CONTEXTS: dict[int, Device] = {}


class CudaError(RuntimeError):
    """A CUDA driver call failed; ``name`` is the CUDA error name."""

    def __init__(self, call: str, name: str, code: int):
        super().__init__(f"{call} failed: {name} ({code})")
        self.call, self.name, self.code = call, name, code


class NoDevice(RuntimeError):
    """No CUDA driver or device here (cuda-python missing, no driver library, no GPU)."""


def load_driver() -> ModuleType:
    """cuda-python's driver module; NoDevice, saying how to install it, when missing."""
    try:
        return importlib.import_module(DRIVER_MODULE)
    except ImportError as error:
        raise NoDevice("the GPU target needs cuda-python: pip install 'llvsparse[cuda]' "
                       f"({error})") from error


def _check(driver: ModuleType, call: str, result: tuple | Any) -> tuple:
    """The values a driver call returned after its status; CudaError if it failed."""
    values = result if isinstance(result, tuple) else (result,)
    status, rest = values[0], values[1:]
    if int(status) != int(driver.CUresult.CUDA_SUCCESS):
        named = driver.cuGetErrorName(status)
        text = named[1] if isinstance(named, tuple) and int(named[0]) == 0 else None
        name = text.decode() if isinstance(text, bytes) else str(text or status)
        raise CudaError(call, name, int(status))
    return rest


def call(driver: ModuleType, name: str, *args: object) -> Any:
    """``driver.name(*args)``, checked: its one value, a tuple of several, or None."""
    rest = _check(driver, name, getattr(driver, name)(*args))
    return rest[0] if len(rest) == 1 else (rest or None)


@dataclass
class Device:
    """A context on one GPU, made current where it is used, with one stream."""

    driver: ModuleType
    ordinal: int
    context: Any
    stream: Any
    sm: str  # the GPU's architecture, sm_NN from its compute capability
    modules: dict[str, Any] = field(default_factory=dict)

    def function_module(self, ptx: str) -> Any:
        """The module of ``ptx``, loaded once per PTX text."""
        module = self.modules.get(ptx)
        if module is None:
            self.current()
            image = np.frombuffer(ptx.encode() + b"\0", np.uint8)  # a C string, by address
            module = self.modules[ptx] = call(self.driver, "cuModuleLoadData",
                                              image.ctypes.data)
        return module

    def function(self, ptx: str, name: str) -> Any:
        """The kernel ``name`` of ``ptx``."""
        return call(self.driver, "cuModuleGetFunction", self.function_module(ptx),
                    name.encode())

    def set_global(self, ptx: str, name: str, value: int) -> None:
        """Write the 8-byte global ``name`` of the module of ``ptx`` (loaded first)."""
        self.function_module(ptx)
        pointer, size = call(self.driver, "cuModuleGetGlobal", self.modules[ptx], name.encode())
        if int(size) != 8:
            raise ValueError(f"global {name} holds {int(size)} bytes, not 8")
        word = np.array([value], np.uint64)
        call(self.driver, "cuMemcpyHtoD", pointer, word.ctypes.data, 8)

    def current(self) -> None:
        call(self.driver, "cuCtxSetCurrent", self.context)

    def launch(self, function: Any, grid: int, block: int, args: tuple[int, ...]) -> None:
        """Launch ``function`` on a 1-D grid with pointer-sized arguments, then wait."""
        if grid < 1 or block < 1:
            raise ValueError(f"a launch needs at least one block and thread, not {grid}x{block}")
        self.current()
        params = np.array(args, dtype=np.uint64)
        pointers = np.array([params.ctypes.data + 8 * k for k in range(len(args))],
                            dtype=np.uint64)
        call(self.driver, "cuLaunchKernel", function, grid, 1, 1, block, 1, 1, 0,
             self.stream, pointers.ctypes.data, 0)
        call(self.driver, "cuStreamSynchronize", self.stream)

    def alloc(self, nbytes: int) -> int:
        self.current()
        return int(call(self.driver, "cuMemAlloc", max(int(nbytes), 1)))

    def free(self, pointer: int) -> None:
        self.current()
        call(self.driver, "cuMemFree", pointer)

    def to_device(self, array: np.ndarray) -> int:
        """A device copy of ``array`` (its address)."""
        array = np.ascontiguousarray(array)
        pointer = self.alloc(array.nbytes)
        if array.nbytes:
            call(self.driver, "cuMemcpyHtoD", pointer, array.ctypes.data, array.nbytes)
        return pointer

    def to_host(self, pointer: int, out: np.ndarray) -> np.ndarray:
        """Copy the device array at ``pointer`` into ``out`` (contiguous)."""
        if out.nbytes:
            self.current()
            call(self.driver, "cuMemcpyDtoH", out.ctypes.data, pointer, out.nbytes)
        return out


def device(ordinal: int = 0, driver: ModuleType | None = None) -> Device:
    """The context on GPU ``ordinal`` (made once): cuInit, the device's primary context,
    a stream. NoDevice where there is no driver library or no such GPU."""
    with _LOCK:
        found = _CONTEXTS.get(ordinal)
        if found is not None and (driver is None or found.driver is driver):
            return found
        driver = driver or load_driver()
        try:
            call(driver, "cuInit", 0)
        except CudaError as error:
            raise NoDevice(f"no usable CUDA driver: {error}") from error
        except (OSError, RuntimeError) as error:  # cuda-python finds no libcuda
            raise NoDevice(f"no CUDA driver library here: {error}") from error
        count = int(call(driver, "cuDeviceGetCount"))
        if not 0 <= ordinal < count:
            raise NoDevice(f"GPU {ordinal} asked for, {count} present")
        handle = call(driver, "cuDeviceGet", ordinal)
        context = call(driver, "cuDevicePrimaryCtxRetain", handle)
        call(driver, "cuCtxSetCurrent", context)
        stream = call(driver, "cuStreamCreate", 0)
        attribute = driver.CUdevice_attribute
        major, minor = (int(call(driver, "cuDeviceGetAttribute", getattr(
            attribute, f"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_{part}"), handle))
            for part in ("MAJOR", "MINOR"))
        found = _CONTEXTS[ordinal] = Device(driver, ordinal, context, stream,
                                            f"sm_{major}{minor}")
        return found
