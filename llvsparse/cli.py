"""The ``llvsparse`` command line: ``demo`` (the tour) and ``formats`` (level formats)."""

from __future__ import annotations

import argparse
import sys
import time
from importlib import resources

import numpy as np
import scipy.io

from . import Tensor, evaluate
from .formats.registry import level_formats


def _bundled(name: str):
    with resources.as_file(resources.files("llvsparse") / "data" / name) as path:
        return scipy.io.mmread(str(path)).tocsr()


def demo(_args: argparse.Namespace) -> int:
    """Compile and run a small tour on bundled real matrices; check each against scipy."""
    rows = []
    ok = True
    for matrix_name in ("olm1000.mtx.gz", "gr_30_30.mtx.gz"):
        matrix = _bundled(matrix_name)
        x = np.random.default_rng(0).random(matrix.shape[1])
        reference = matrix @ x
        for fmt in ("csr", "coo", "dia", "ell", "hash"):
            A = Tensor.from_scipy(matrix, format=fmt)
            start = time.perf_counter()
            y = evaluate("y(i) = A(i,j) * x(j)", A=A, x=x)
            elapsed = time.perf_counter() - start
            good = np.allclose(y.to_numpy(), reference)
            ok &= good
            rows.append((f"SpMV {matrix_name.split('.')[0]}", fmt, elapsed, good))
        B = Tensor.from_scipy(matrix, format="csr")
        C = Tensor.from_scipy(matrix.T.tocsr(), format="csr")
        start = time.perf_counter()
        S = evaluate("S(i,j) = B(i,j) + C(i,j)", out_format="csr", B=B, C=C)
        elapsed = time.perf_counter() - start
        good = abs(S.to_scipy() - (matrix + matrix.T)).max() < 1e-12
        ok &= bool(good)
        rows.append((f"SpAdd {matrix_name.split('.')[0]}", "csr+csr->csr", elapsed, good))
    print(f"{'kernel':<20} {'format':<14} {'compile+run':>12}  check")
    for name, fmt, elapsed, good in rows:
        print(f"{name:<20} {fmt:<14} {elapsed * 1e3:>9.1f} ms  {'ok' if good else 'WRONG'}")
    from .api import compile as compile_kernel

    kernel = compile_kernel("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    print("\nOptimized LLVM IR of CSR SpMV (first 25 lines):")
    print("\n".join(kernel.llvm_ir_optimized.splitlines()[:25]))
    return 0 if ok else 1


def formats(_args: argparse.Namespace) -> int:
    """List level formats with capabilities and properties."""
    for name, level in sorted(level_formats().items()):
        caps = [level.iterate + " iteration"]
        caps += [c for c, ok in (("locate", level.can_locate), ("insert", level.can_insert),
                                 ("append", level.can_append)) if ok]
        props = ", ".join(f"{p}={'configurable' if d.configurable else d.default}"
                          for p, d in level.properties.items())
        print(f"{name:<12} {'; '.join(caps)}\n{'':<12} {props}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llvsparse", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the built-in tour").set_defaults(run=demo)
    sub.add_parser("formats", help="list level formats").set_defaults(run=formats)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
