"""DLPack capsules read and written with ctypes, for device tensors (host arrays go
through numpy's own DLPack support).

A capsule named ``dltensor`` holds a ``DLManagedTensor``: the data pointer, the device
(type and ordinal), the dtype, shape and strides, and a deleter its consumer calls once
done. A consumer renames the capsule ``used_dltensor``; a capsule dropped unconsumed
calls the deleter itself (its destructor).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

CPU, CUDA = 1, 2  # DLDeviceType: kDLCPU, kDLCUDA
NAME, USED = b"dltensor", b"used_dltensor"
_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}  # kDLInt, kDLUInt, kDLFloat, complex, bool


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", DELETER)]
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _DESTRUCTOR]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_capsule_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))

# What an exported capsule keeps alive until its deleter runs, by DLManagedTensor address.
_EXPORTED: dict[int, tuple] = {}


@dataclass(frozen=True)
class Imported:
    """A consumed capsule's array: where it lies and what it holds; ``release()`` calls
    its producer's deleter (once)."""

    pointer: int
    device_type: int
    device_id: int
    shape: tuple[int, ...]
    dtype: np.dtype
    release: Callable[[], None]


def dtype_of(code: int, bits: int, lanes: int) -> np.dtype:
    kinds = {v: k for k, v in _CODES.items()}
    if lanes != 1 or code not in kinds:
        raise TypeError(f"DLPack dtype (code {code}, {bits} bits, {lanes} lanes) has no "
                        "numpy equivalent here")
    return np.dtype("?" if code == _CODES["b"] else f"{kinds[code]}{bits // 8}")


def _contiguous(shape: tuple[int, ...], strides: tuple[int, ...] | None) -> bool:
    if strides is None:
        return True
    expected = 1
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent > 1 and stride != expected:
            return False
        expected *= extent
    return True


def consume(capsule: object) -> Imported:
    """The array of an unconsumed ``dltensor`` capsule, which this renames as used. Only
    row-major contiguous arrays are taken (a kernel reads them as dense storage)."""
    if not _api.PyCapsule_IsValid(capsule, NAME):
        raise TypeError("not an unconsumed DLPack capsule (named 'dltensor')")
    address = _api.PyCapsule_GetPointer(capsule, NAME)
    managed = DLManagedTensor.from_address(address)
    tensor = managed.dl_tensor
    shape = tuple(tensor.shape[k] for k in range(tensor.ndim))
    strides = tuple(tensor.strides[k] for k in range(tensor.ndim)) if tensor.strides \
        else None
    dtype = dtype_of(tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes)
    if not _contiguous(shape, strides):
        raise ValueError(f"a DLPack array of shape {shape} and strides {strides} is not "
                         "row-major contiguous; copy it first")
    _api.PyCapsule_SetName(capsule, USED)
    released: list[bool] = []

    def release() -> None:
        if not released and managed.deleter:
            released.append(True)
            managed.deleter(ctypes.pointer(managed))
    return Imported((tensor.data or 0) + tensor.byte_offset, tensor.device.device_type,
                    tensor.device.device_id, shape, dtype, release)


def _deleted(managed: ctypes._Pointer) -> None:
    _EXPORTED.pop(ctypes.addressof(managed.contents), None)


_DELETER = DELETER(_deleted)


@_DESTRUCTOR
def _destroy(capsule: int) -> None:
    """A capsule collected unconsumed frees what it exported."""
    if _capsule_valid(capsule, NAME):
        address = _capsule_pointer(capsule, NAME)
        _EXPORTED.pop(address, None)


def export(pointer: int, device_type: int, device_id: int, shape: tuple[int, ...],
           dtype: np.dtype, owner: object) -> object:
    """A ``dltensor`` capsule of the row-major array at ``pointer``; ``owner`` is kept
    alive until the consumer's deleter runs (or the capsule is dropped unconsumed)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in _CODES:
        raise TypeError(f"dtype {dtype} has no DLPack code here")
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    managed = DLManagedTensor()
    managed.dl_tensor = DLTensor(pointer or None, DLDevice(device_type, device_id), len(shape),
                                 DLDataType(_CODES[dtype.kind], dtype.itemsize * 8, 1),
                                 ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64)),
                                 None, 0)
    managed.deleter = _DELETER
    _EXPORTED[ctypes.addressof(managed)] = (managed, dims, owner)
    return _api.PyCapsule_New(ctypes.addressof(managed), NAME, _destroy)
