"""Hash the LLVM IR (both forms) of a catalog of kernels, to prove a refactoring of the
loop IR's passes leaves code generation unchanged: run before and after, diff the output.

    LLVSPARSE_CACHE=0 python tools/ir_hashes.py > before.txt

``--optimized`` hashes the IR after LLVM's optimizer instead (which drops dead code), with
each function's local names renumbered in order of appearance: a change that only stops
emitting unused instructions (which shifts llvmlite's numbered names) leaves it the same.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import sys

import llvsparse as ls

MATRICES = ["dense", "csr", "csc", "coo", "dcsr", "dia", "ell", "hash"]
SPARSE_OUT = ["dense", "csr", "coo", "hash"]


def catalog() -> list[tuple[str, dict, str | None, dict]]:
    """(statement, formats, output format, extra compile options) per kernel."""
    cases: list[tuple[str, dict, str | None, dict]] = []
    for f in [*MATRICES, "bcsr2x2"]:
        cases.append(("y(i) = A(i,j) * x(j)", {"A": f}, None, {}))
        cases.append(("y(j) = A(i,j) * z(i)", {"A": f}, None, {}))
    for f, g in itertools.product(MATRICES, MATRICES):
        cases.append(("C(i,j) = A(i,j) + B(i,j)", {"A": f, "B": g}, "dense", {}))
        cases.append(("C(i,j) = A(i,j) * B(i,j)", {"A": f, "B": g}, "dense", {}))
    for f, o in itertools.product(["csr", "coo", "dcsr", "hash", "csc"], SPARSE_OUT):
        cases.append(("C(i,j) = A(i,j) + B(i,j)", {"A": f, "B": "csr"}, o, {}))
        cases.append(("C(i,j) = A(i,j) * B(i,j)", {"A": f, "B": f}, o, {}))
    for f, w in itertools.product(["csr", "dcsr"], [None, "dense", "hash", "sort", "bucket"]):
        cases.append(("C(i,j) = A(i,k) * M(k,j)", {"A": f, "M": f}, "csr",
                      {"workspace": w} if w else {}))
    cases += [
        ("C(i,j) = A(i,k) * M(k,j)", {"A": "csr"}, "dense", {}),
        ("y(i) = A(i,j) + x(j)", {"A": "csr"}, None, {}),
        ("a = A(i,j) * B(i,j)", {"A": "csr", "B": "coo"}, None, {}),
        ("a = A(i,j) * B(i,j)", {"A": "csr", "B": "csr"}, None, {}),
        ("y(i) = max(j, A(i,j))", {"A": "csr"}, None, {}),
        ("y(i) = min(j, A(i,j))", {"A": "coo"}, None, {}),
        ("C(i,j) = A(i,j) * !B(i,j)", {"A": "csr", "B": "csr"}, "csr", {}),
        ("C(i,j) = A(i,j) < B(i,j)", {"A": "csr", "B": "csr"}, "dense", {}),
        ("Y(i,j,r) = T(i,j,k) * U(r,k)", {"T": "csf"}, "dense", {}),
        ("Y(i,r) = T(i,j,k) * V(j,r) * U(r,k)", {"T": "csf"}, "dense", {}),
        ("Y(i,r) = T(i,j,k) * V(j,r) * U(r,k)", {"T": "coo"}, "dense", {}),
        ("t = S(i,j) * S(j,k) * S(i,k)", {"S": "csr"}, None, {}),
        ("y(i) = S(i,i)", {"S": "csr"}, None, {}),
        ("C(i,j) = A(i,j) * sum_k(M(j,k))", {"A": "csr", "M": "csr"}, "csr", {}),
        ("C(i,j) = A(i,j) + B(i,j) + D(i,j)", {"A": "csr", "B": "csr", "D": "csr"}, "csr", {}),
        ("y(i) = A(i,j) * x(j)", {"A": "csr", "x": "coo"}, None, {}),
        ("y(i) = A(i,j) * x(j)", {"A": "csr"}, None, {"fastmath": True}),
        ("y(i) = A(i,j) * x(j)", {"A": "csr"}, None, {"dtype": "float32"}),
        ("z(i) = x(i) * w(i)", {"x": "coo", "w": "coo"}, "coo", {}),
        ("z(i) = x(i) + w(i)", {"x": "coo", "w": "coo"}, "coo", {}),
    ]
    return cases


_LOCAL = re.compile(r'%("[^"]*"|[-a-zA-Z$._0-9]+)|^("[^"]*"|[-a-zA-Z$._0-9]+):', re.MULTILINE)


def renumbered(text: str) -> str:
    """``text`` with each function's local values and blocks named by first appearance."""
    chunks = text.split("\ndefine ")
    out = [chunks[0]]
    for chunk in chunks[1:]:
        names: dict[str, str] = {}

        def rename(match: re.Match, names: dict[str, str] = names) -> str:
            name = (match.group(1) or match.group(2)).strip('"')
            new = names.setdefault(name, f"v{len(names)}")
            return f"%{new}" if match.group(1) else f"{new}:"

        head, _, body = chunk.partition("{")
        out.append(_LOCAL.sub(rename, head) + "{" + _LOCAL.sub(rename, body))
    return "\ndefine ".join(out)


def main() -> None:
    optimized = "--optimized" in sys.argv[1:]
    total = hashlib.sha256()
    for statement, formats, out, extra in catalog():
        label = f"{statement} {sorted(formats.items())} -> {out} {sorted(extra.items())}"
        try:
            kernel = ls.compile(statement, out_format=out, **formats, **extra)
            text = renumbered(kernel.llvm_ir_optimized) if optimized else kernel.llvm_ir
        except Exception as error:  # noqa: BLE001 (a refusal is part of what is compared)
            text = f"{type(error).__name__}: {error}"
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        total.update(digest.encode())
        print(f"{digest}  {label}", flush=True)
    print(f"{total.hexdigest()[:16]}  (all)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
