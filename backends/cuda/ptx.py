"""PTX of planned kernels through LLVM's NVPTX target, and ptxas to check it.

The device kernel (device_ir) is the shared translator's range function entered by a
grid of threads; this module needs no GPU. Launching is driver.py's.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import llvmlite.binding as llvm

from ..cpu import link_runtime, optimize
from ..targets import check_cpu
from .device_ir import DEVICE_RUNTIME_IR, NvvmHooks, device_kernel, linked

TRIPLE = "nvptx64-nvidia-cuda"
DATA_LAYOUT = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
_LOCK = threading.Lock()
_READY: list[bool] = []


class PtxError(RuntimeError):
    """ptxas rejected generated PTX."""


def _initialize() -> None:
    with _LOCK:
        if not _READY:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _READY.append(True)


def assemble(ptx: str, sm: str = "sm_80") -> bytes:
    """The cubin of PTX, assembled by ptxas (on PATH) for ``sm``; PtxError with its
    diagnostics where it rejects the PTX."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        raise FileNotFoundError("ptxas is not on PATH (it comes with the CUDA toolkit)")
    with tempfile.TemporaryDirectory() as folder:
        source, cubin = Path(folder) / "kernel.ptx", Path(folder) / "kernel.cubin"
        source.write_text(ptx)
        done = subprocess.run([ptxas, f"-arch={sm}", str(source), "-o", str(cubin)],
                              capture_output=True, text=True, check=False,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise PtxError(done.stderr.strip() or done.stdout.strip())
        return cubin.read_bytes()


def check_ptx(ptx: str, sm: str = "sm_80") -> None:
    """Assemble PTX with ptxas; raise PtxError with its diagnostics on failure."""
    assemble(ptx, sm)


def emit_ptx(host_ir: str, name: str, sm: str = "sm_80",
             phases: tuple[str, ...] = ("whole",), lanes: int = 1,
             windows: bool = False) -> str:
    """PTX of the planned kernel's device entries for ``phases`` (see device_ir): the
    translator's functions entered by a grid of threads (``lanes`` to a range: 32 for a
    warp schedule; ``windows``: an entry split's windows), special registers and
    shuffles read by NVVM."""
    if not isinstance(sm, str) or not re.fullmatch(r"sm_\d+[a-z]?", sm):
        raise ValueError(f"GPU architecture {sm!r} is not of the form sm_NN (e.g. sm_80)")
    check_cpu(TRIPLE, sm)
    _initialize()
    device = device_kernel(name, NvvmHooks(), TRIPLE, DATA_LAYOUT, nvvm_kernel=True,
                           phases=phases, lanes=lanes, windows=windows)
    module = linked(host_ir, device)
    link_runtime(module, DEVICE_RUNTIME_IR)
    module.verify()
    machine = llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=sm, opt=3)
    optimize(module, machine)  # the host's O3 pipeline, tuned by NVPTX's cost model
    return machine.emit_assembly(module)
