"""Target CPU names checked before LLVM sees them.

LLVM treats an unknown processor name in one of two ways, neither a Python error: it
warns on stderr and emits code for a generic CPU (``.target garbage`` in PTX, which
ptxas then rejects), or, for x86-64, aborts the whole process ("64-bit code requested
on a subtarget that doesn't support it"). So each (triple, CPU) pair is first tried
once in a child process, which may die in our place, and remembered.
"""

from __future__ import annotations

import subprocess
import sys
import threading

_PROBE = """
import sys
import llvmlite.binding as llvm
llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
triple, cpu = sys.argv[1], sys.argv[2]
module = llvm.parse_assembly('target triple = "%s"\\ndefine void @probe() {\\n  ret void\\n}\\n'
                             % triple)
llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, opt=0).emit_assembly(module)
"""
_VERDICTS: dict[tuple[str, str], str] = {}  # (triple, cpu) -> "" if known, else why not
_LOCK = threading.Lock()


def check_cpu(triple: str, cpu: str) -> None:
    """Raise ValueError unless LLVM knows the processor ``cpu`` for ``triple``."""
    key = (triple, cpu)
    with _LOCK:
        if key not in _VERDICTS:
            _VERDICTS[key] = _try(triple, cpu)
    if _VERDICTS[key]:
        raise ValueError(f"LLVM does not know the processor {cpu!r} for {triple}: "
                         f"{_VERDICTS[key]}")


def _try(triple: str, cpu: str) -> str:
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, triple, cpu],
                              capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"could not try it ({error})"
    said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    unknown = [line for line in said if "not a recognized processor" in line]
    if unknown:
        return unknown[0]
    if done.returncode != 0:
        return said[-1] if said else f"LLVM stopped with exit status {done.returncode}"
    return ""
