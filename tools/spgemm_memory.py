"""Peak memory of one SpGEMM call against the bytes of its inputs and output.

tracemalloc does not see what JIT-compiled kernels allocate, so each measurement runs
in a fresh process and reads the kernel's high-water mark from /proc/self/status
(VmHWM, reset through /proc/self/clear_refs after the inputs are built and the kernel
compiled). The ratio is (inputs + the call's rise above the resident set before it) /
(inputs + output): 1.0 means the call needed nothing beyond the output it returns.

    python tools/spgemm_memory.py [uniform|powerlaw|cage10|...] [--policy dense|sort|hash|bucket]
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import subprocess
import sys
from pathlib import Path


def _status(field: str) -> int:
    """A /proc/self/status field in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _nbytes(matrix) -> int:
    return matrix.data.nbytes + matrix.indices.nbytes + matrix.indptr.nbytes


def measure(name: str, policy: str | None, calls: int) -> dict:
    """In this process: the ratio of each of ``calls`` calls (A * A^T, CSR x CSR -> CSR)."""
    import numpy as np
    import scipy.sparse as sp

    import llvsparse as ls
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tools.bench_inputs import MATRIX_SIZES, load_real_matrix, powerlaw, uniform

    if name in ("uniform", "powerlaw"):
        rows, per_row = MATRIX_SIZES["medium"][name]
        a = (uniform if name == "uniform" else powerlaw)(rows, per_row)
    else:
        a = load_real_matrix(name).matrix
    b = sp.csr_matrix(a.T)  # as the bench's spgemm: B = A^T, sorted, int32 indices
    b.sort_indices()
    b.indices, b.indptr = b.indices.astype(np.int32), b.indptr.astype(np.int32)
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", B="csr", C="csr",
                        workspace=policy)
    tiny = sp.random(8, 8, density=0.3, format="csr", random_state=0)
    for _ in range(2):  # both loop forms compiled before the measurement: a binding's
        kernel(A=tiny, B=tiny, threads=1)  # second call builds the other (probe.py)
    ta, tb = ls.Tensor.from_scipy(a, "csr"), ls.Tensor.from_scipy(b, "csr")
    inputs = _nbytes(a) + _nbytes(b)
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    ratios = []
    for _ in range(calls):
        gc.collect()
        libc.malloc_trim(0)  # freed heap memory back to the system: not counted as room
        before = _status("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # the high-water mark starts here
        c = kernel(A=ta, B=tb, threads=1)
        rise = _status("VmHWM") - before
        output = _nbytes(c.to_scipy())  # the result's own arrays (no copy)
        ratios.append(round((inputs + rise) / (inputs + output), 3))
        del c
    return {"input": name, "policy": policy or "rule", "inputs_MB": round(inputs / 1e6, 1),
            "output_MB": round(output / 1e6, 1), "ratios": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="*", default=["uniform"])
    parser.add_argument("--policy", choices=["dense", "sort", "hash", "bucket"])
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.inputs[0], args.policy, args.calls)))
        return
    for name in args.inputs:  # each in a fresh process: its own high-water mark
        command = [sys.executable, __file__, name, "--child", "--calls", str(args.calls)]
        if args.policy:
            command += ["--policy", args.policy]
        print(subprocess.run(command, check=True, capture_output=True, text=True).stdout,
              end="")


if __name__ == "__main__":
    main()
