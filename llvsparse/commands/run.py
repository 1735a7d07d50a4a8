"""``llvsparse run``: compile an expression, run it on files (or data generated to fit
them), time it and save the result."""

from __future__ import annotations

import argparse
import re
import statistics
import time
from typing import TYPE_CHECKING

import numpy as np

from .. import Tensor
from ..ir.notation.syntax import AffineIndex
from .common import (
    CliError,
    build_kernel,
    format_name,
    input_path,
    lowering_errors,
    pairs,
    parse_notation,
)

if TYPE_CHECKING:
    from ..ir.notation.syntax import Access, Assignment
    from ..kernel.api import Kernel

GENERATED = ("random", "ones", "zeros")
FILE_TYPES = (".mtx.gz", ".tns.gz", ".mtx", ".tns", ".npy", ".npz")
_MATRIX_ONLY = (".mtx", ".mtx.gz", ".npz")


def _generated(source: str) -> tuple[str, tuple[int, ...] | None] | None:
    """``random``, ``ones``, ``zeros``, optionally with a shape (``random:100x50``);
    None for a file path. Anything else (``rand``, ``data.txt``) is a bad request."""
    kind, _, shape = source.partition(":")
    if kind not in GENERATED:
        if not source.lower().endswith(FILE_TYPES):
            raise CliError(f"{source!r} is neither a generator ({', '.join(GENERATED)}) nor "
                           f"a file of a known type ({', '.join(FILE_TYPES)})")
        return None
    if not shape:
        return kind, None
    if not re.fullmatch(r"\d+(x\d+)*", shape):
        raise CliError(f"bad shape {shape!r} in {source!r}; write e.g. {kind}:100x50")
    return kind, tuple(int(s) for s in shape.split("x"))


def _record(extents: dict[str, tuple[int, str]], access: Access, shape: tuple[int, ...],
            name: str) -> None:
    """Note the extent of each index variable of ``access``; disagreements are errors."""
    if len(shape) != len(access.indices):
        raise CliError(f"{name} has shape {shape} but is used as {access}")
    for var, size in zip(access.indices, shape, strict=True):
        known = extents.get(var.name)
        if known is not None and known[0] != size:
            raise CliError(f"index {var.name} has extent {known[0]} in {known[1]} but {size} "
                           f"in {name}")
        extents.setdefault(var.name, (size, name))


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape)) or "scalar"


def _load_inputs(assignment: Assignment, sources: dict[str, str], kernel: Kernel,
                 seed: int) -> tuple[dict[str, Tensor], dict[str, tuple[int, str]], list[str]]:
    """Read file inputs, infer the shapes of generated ones from them, then generate;
    returns the tensors, each index variable's extent (and where it came from), and one
    description line per input."""
    # loaded by the subcommand that runs: `llvsparse --help` loads no compiler
    from ..tensors.io import read

    out = assignment.lhs.tensor
    uses = assignment.accesses()[1:]
    extents: dict[str, tuple[int, str]] = {}
    tensors: dict[str, Tensor] = {}
    notes: dict[str, str] = {}
    for name, source in sources.items():
        generated = _generated(source)
        if generated is None:
            try:
                with input_path(source) as path:
                    tensor = read(path, format=kernel.formats[name])
            except OSError as error:
                raise CliError(f"{source}: {error.strerror or error}", 1) from None
            except ValueError as error:
                raise CliError(str(error), 1) from None
            tensors[name] = tensor
            notes[name] = f"from {source}"
        elif generated[1] is not None:
            notes[name] = generated[0]
        else:
            continue
        shape = tensors[name].shape if name in tensors else generated[1]
        for access in uses:
            if access.tensor == name:
                _record(extents, access, tuple(shape), name)
    rng = np.random.default_rng(seed)
    for name in assignment.tensors():
        if name == out or name in tensors:
            continue
        kind, shape = _generated(sources[name]) or ("", None)
        if shape is None:
            access = next(a for a in uses if a.tensor == name)
            unknown = [v.name for v in access.indices if v.name not in extents]
            if unknown:
                pronoun = "it" if len(unknown) == 1 else "them"
                example = "x".join("N" * len(access.indices))
                raise CliError(f"cannot infer the extent of {', '.join(unknown)} for {name} "
                               f"(no file input is indexed by {pronoun}); give a shape, "
                               f"e.g. -i {name}:{kind}:{example}")
            shape = tuple(extents[v.name][0] for v in access.indices)
            notes[name] = kind
        if kind == "random":
            array = rng.random(shape)
        else:
            array = np.full(shape, 1.0 if kind == "ones" else 0.0)
        try:
            tensors[name] = Tensor.from_numpy(array, format=kernel.formats[name])
        except ValueError as error:
            raise CliError(f"{name}: {error}") from None
    lines = [f"  {name:<6} {_shape_text(tensors[name].shape):>14}  "
             f"{format_name(tensors[name].format):<10} {notes[name]}"
             for name in assignment.tensors() if name in tensors]
    return tensors, extents, lines


def run(args: argparse.Namespace) -> int:
    """Compile an expression, run it on files or generated data, time it, save the result;
    the quickest way to try a format on a real matrix."""
    # loaded by the subcommand that runs: `llvsparse --help` loads no compiler
    from ..tensors.io import write

    assignment = parse_notation(args.expr)
    if any(isinstance(ix, AffineIndex) for a in assignment.accesses() for ix in a.indices):
        raise CliError("llvsparse run does not take affine subscripts (h+r) yet: their "
                       "output extents need a padding; use ls.compile(..., extents=) or "
                       "ls.conv in Python (llvsparse dump shows their stages)")
    out = assignment.lhs.tensor
    names = [n for n in assignment.tensors() if n != out]
    sources = pairs(args.input, "-i")
    missing = [n for n in names if n not in sources]
    if missing:
        raise CliError(f"no input for {', '.join(missing)}: give -i NAME:FILE or "
                       f"-i NAME:random|ones|zeros")
    unknown = [n for n in sources if n not in names]
    if unknown:
        raise CliError(f"-i for {', '.join(unknown)}, which the expression does not read")
    order = {a.tensor: len(a.indices) for a in assignment.accesses()}
    if args.output:
        lower = args.output.lower()
        if not lower.endswith(FILE_TYPES):
            raise CliError(f"-o {args.output}: use one of {', '.join(FILE_TYPES)}")
        if lower.endswith(_MATRIX_ONLY) and order[out] != 2:
            raise CliError(f"-o {args.output}: that file type holds matrices, but {out} has "
                           f"order {order[out]}; use .npy or .tns")
    formats: dict[str, object] = dict(pairs(args.format, "-f"))
    for name in names:
        if name not in formats:
            from_file = _generated(sources[name]) is None
            formats[name] = ("csr" if order[name] == 2 else "coo") if from_file else "dense"
    kernel = build_kernel(assignment, formats, args.out_format)
    tensors, extents, lines = _load_inputs(assignment, sources, kernel, args.seed)
    free = [v.name for v in assignment.lhs.indices if v.name not in extents]
    if free:
        raise CliError(f"index {', '.join(free)} of {out} appears in no input")
    out_shape = tuple(extents[v.name][0] for v in assignment.lhs.indices)
    dtypes = {n: str(t.dtype) for n, t in tensors.items()}
    index_dtypes = {n: str(t.index_dtype) for n, t in tensors.items()}
    index_dtypes[out] = "int64" if max(out_shape, default=0) >= 2**31 - 1 else "int32"
    # loaded by the subcommand that runs: `llvsparse --help` loads no compiler
    from ..abi.runtime import KernelRuntimeError

    try:
        start = time.perf_counter()
        inst = kernel.instance(dtypes, index_dtypes)
        compiled = time.perf_counter() - start
        # the disk cache keeps object code only, so a kernel without IR was loaded from it
        cache_note = "  (from the disk cache)" if inst.jit.llvm_ir is None else ""
        start = time.perf_counter()
        result = kernel(check=not args.no_check, **tensors)
        first = time.perf_counter() - start
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            kernel(check=not args.no_check, **tensors)
            times.append(time.perf_counter() - start)
    except lowering_errors() as error:
        raise CliError(str(error)) from None
    except KernelRuntimeError as error:
        raise CliError(str(error), 1) from None
    print(kernel.assignment)
    print("\n".join(lines))
    print(f"  {out:<6} {_shape_text(result.shape):>14}  {format_name(result.format):<10} "
          f"result, {result.nnz} stored")
    print(f"compile      {compiled * 1e3:10.3f} ms{cache_note}")
    print(f"first call   {first * 1e3:10.3f} ms")
    print(f"median of {args.repeat:<3}{statistics.median(times) * 1e3:10.3f} ms")
    if args.output:
        try:
            write(result, args.output)
        except (OSError, ValueError) as error:
            raise CliError(str(error), 1) from None
        print(f"wrote {args.output}")
    return 0

