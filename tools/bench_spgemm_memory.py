"""Peak memory of the bench's SpGEMM section, per input and implementation (issue 34's
8 GB target): each (input, kernel, implementation) runs in a fresh process, as the bench
runs it (the case with its scipy reference, then the implementation prepared, verified,
warmed and called once more), and reports its peak resident set (VmHWM), beside the
same process's peak with no implementation (the inputs and the reference alone) and
with all of them (``run_case`` with one round, as the bench runs a case).

Inputs whose output would exceed ``--max-output`` entries are not run (their peaks are
estimated from the others' bytes per output entry): run on a shared machine, one of them
would hold several GB.

    python -m llvsparse.tools.bench_spgemm_memory [--inputs a,b] [--max-output 32e6] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np

from . import bench_inputs as inputs
from .bench_inputs import canonical_csr
from .bench_kernels import make_case, verify
from .bench_peers import discover
from .bench_timing import run_case

KERNELS = ("spgemm", "spgemm_aa")


def output_bound(matrix, kernel: str) -> int:
    """Products of A(i,k) with B's row k (A·Aᵀ or A·A): an upper bound on the output's
    entries, O(nnz) to count."""
    b = canonical_csr(matrix.T) if kernel == "spgemm" else matrix
    return int(np.diff(b.indptr)[matrix.indices].sum())


def _peak() -> int:
    """This process's peak resident set, bytes."""
    with open("/proc/self/status") as status:
        line = next(x for x in status if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def _load(name: str):
    for item in inputs.generated_matrices("medium"):
        if item.name == name:
            return item
    return inputs.load_real_matrix(name)


def one(name: str, kernel: str, impl_name: str) -> dict:
    """Run one implementation of one case, as ``run_case`` does, and report peaks."""
    impls = {i.name: i for i in discover((1,))[0]}
    case = make_case(kernel, _load(name))
    out_nnz = case.reference.nnz
    row = {"input": name, "kernel": kernel, "impl": impl_name, "out_nnz": int(out_nnz),
           "out_bytes": int(case.reference.data.nbytes + case.reference.indices.nbytes
                            + case.reference.indptr.nbytes)}
    if impl_name == "all":  # as the bench runs a case: every one prepared, then rounds
        records = run_case(case, list(impls.values()), rounds=1)
        row["verified"] = all(r.verified for r in records)
    elif impl_name != "none":
        impl = impls[impl_name]
        impl.configure()
        prepared = impl.kernels[kernel](case)
        problem = verify(prepared.result(prepared.call()), case.reference)
        row["verified"] = problem is None
        prepared.call()  # the warm-up
        prepared.call()  # a timed round
    row["peak_bytes"] = _peak()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", help="comma-separated input names (default: all)")
    parser.add_argument("--max-output", type=float, default=32e6,
                        help="run only cases whose output bound is at most this many entries")
    parser.add_argument("--json", help="write the rows as JSON")
    parser.add_argument("--one", nargs=3, metavar=("INPUT", "KERNEL", "IMPL"),
                        help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(*args.one)))
        return 0
    impls = ["none"] + [i.name for i in discover((1,))[0]
                        if any(k in i.kernels for k in KERNELS)] + ["all"]
    names = [i.name for i in inputs.generated_matrices("medium")] + \
        inputs.real_matrix_names(False)
    if args.inputs:
        names = [n for n in names if n in args.inputs.split(",")]
    rows = []
    for name in names:
        matrix = _load(name).matrix
        for kernel in KERNELS:
            if kernel == "spgemm_aa" and matrix.shape[0] != matrix.shape[1]:
                continue
            bound = output_bound(matrix, kernel)
            if bound > args.max_output:
                rows.append({"input": name, "kernel": kernel, "bound": bound,
                             "skipped": f"output bound {bound:,} entries"})
                print(json.dumps(rows[-1]), flush=True)
                continue
            for impl in impls:
                done = subprocess.run(
                    [sys.executable, "-m", f"{__package__}.bench_spgemm_memory", "--one", name,
                     kernel, impl], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                    check=False)
                row = json.loads(done.stdout.strip().splitlines()[-1]) \
                    if done.returncode == 0 else {"input": name, "kernel": kernel,
                                                  "impl": impl,
                                                  "error": done.stderr.strip()[-300:]}
                row["bound"] = bound
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
