"""CUDA backend, code generation half: the same kernel IR emitted as PTX via NVPTX.

Kernels run as a single CUDA thread for now (GPU schedules come with the scheduling
language); this module makes PTX for any compiled expression, with no GPU present.
Launching through cuda-python lives beside it once a device is available.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import llvmlite.binding as llvm

from .cpu import link_runtime
from .targets import check_cpu

TRIPLE = "nvptx64-nvidia-cuda"
DEVICE_RUNTIME_IR = """
declare ptr @malloc(i64)
declare void @free(ptr)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
define linkonce_odr ptr @llvsparse_alloc(i64 %bytes) {
  %p = call ptr @malloc(i64 %bytes)
  ret ptr %p
}
define linkonce_odr ptr @llvsparse_realloc(ptr %old, i64 %old_bytes, i64 %bytes) {
entry:
  %p = call ptr @malloc(i64 %bytes)
  %null = icmp eq ptr %p, null
  br i1 %null, label %done, label %copy
copy:
  call void @llvm.memcpy.p0.p0.i64(ptr %p, ptr %old, i64 %old_bytes, i1 false)
  call void @free(ptr %old)
  br label %done
done:
  ret ptr %p
}
"""
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


def _as_kernel(ir_text: str, name: str) -> str:
    """Retarget host-neutral kernel IR to NVPTX.

    A CUDA entry returns nothing, so the kernel becomes an internal function and a void
    entry ``name(tensors, status)`` stores its status word.
    """
    body = ir_text.replace(f'@"{name}"(', f'@"{name}_impl"(')
    lines = [line for line in body.splitlines()
             if not line.startswith(("target triple", "target datalayout"))]
    lines.insert(1, f'target triple = "{TRIPLE}"')
    lines.insert(2, f'target datalayout = "{DATA_LAYOUT}"')
    lines += [
        f'define void @"{name}"(ptr %tensors, ptr %status) {{',
        f'  %result = call i32 @"{name}_impl"(ptr %tensors)',
        "  store i32 %result, ptr %status",
        "  ret void",
        "}",
        "!nvvm.annotations = !{!9000}",
        f'!9000 = !{{ptr @"{name}", !"kernel", i32 1}}',
    ]
    return "\n".join(lines)


def emit_ptx(ir_text: str, name: str, sm: str = "sm_80") -> str:
    """PTX for the kernel function ``name`` of ``ir_text`` (llvmlite IR text), in the
    oldest PTX version that ``sm`` accepts (LLVM's choice: a fixed one made LLVM abort
    the process for newer targets)."""
    if not isinstance(sm, str) or not re.fullmatch(r"sm_\d+[a-z]?", sm):
        raise ValueError(f"GPU architecture {sm!r} is not of the form sm_NN (e.g. sm_80)")
    check_cpu(TRIPLE, sm)
    _initialize()
    module = llvm.parse_assembly(_as_kernel(ir_text, name))
    link_runtime(module, DEVICE_RUNTIME_IR)
    module.verify()
    target = llvm.Target.from_triple(TRIPLE)
    tm = target.create_target_machine(cpu=sm, opt=3)
    return tm.emit_assembly(module)


def check_ptx(ptx: str, sm: str = "sm_80") -> None:
    """Assemble PTX with ptxas (on PATH); raise PtxError with its diagnostics on failure."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        raise FileNotFoundError("ptxas is not on PATH")
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(ptx)
        done = subprocess.run([ptxas, f"-arch={sm}", str(source), "-o",
                               str(Path(folder) / "kernel.cubin")],
                              capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PtxError(done.stderr.strip() or done.stdout.strip())
