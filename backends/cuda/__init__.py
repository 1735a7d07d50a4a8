"""CUDA backend: PTX through NVPTX (ptx), device kernels entered by a grid of threads
(device_ir), the cuda-python loader (driver) and a CPU emulator of the grid (emulator)."""

from .ptx import PtxError, assemble, check_ptx, emit_ptx

__all__ = ["PtxError", "assemble", "check_ptx", "emit_ptx"]
