"""The ``llvsparse`` command line: ``demo`` (the tour), ``dump`` (every compiler stage),
``run`` (compile and time an expression on files or generated data), ``formats`` (list
level formats, check plugin files) and ``selftest`` (a soak of random cases)."""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import scipy.io

from . import Tensor, evaluate
from .formats.registry import level_formats

if TYPE_CHECKING:
    from .api import Kernel
    from .notation import Access, Assignment


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
        start = time.perf_counter()  # B(j,i) is read through a column-major copy of B
        S = evaluate("S(i,j) = B(i,j) + B(j,i)", out_format="csr", B=B)
        elapsed = time.perf_counter() - start
        good = abs(S.to_scipy() - (matrix + matrix.T)).max() < 1e-12
        ok &= bool(good)
        rows.append((f"SpAdd {matrix_name.split('.')[0]}", "B+B^T->csr", elapsed, good))
        start = time.perf_counter()  # B(i,i) intersects B's rows with the diagonal
        trace = evaluate("t = B(i,i)", B=B).to_numpy()
        elapsed = time.perf_counter() - start
        good = bool(np.isclose(trace, matrix.diagonal().sum()))
        ok &= good
        rows.append((f"trace {matrix_name.split('.')[0]}", "csr", elapsed, good))
    print(f"{'kernel':<20} {'format':<14} {'compile+run':>12}  check")
    for name, fmt, elapsed, good in rows:
        print(f"{name:<20} {fmt:<14} {elapsed * 1e3:>9.1f} ms  {'ok' if good else 'WRONG'}")
    from .api import compile as compile_kernel

    kernel = compile_kernel("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    print("\nOptimized LLVM IR of CSR SpMV (first 25 lines):")
    print("\n".join(kernel.llvm_ir_optimized.splitlines()[:25]))
    return 0 if ok else 1


# -- shared helpers --------------------------------------------------------------------------
class CliError(Exception):
    """A failure reported as one message on stderr; ``code`` 2 means the request was bad."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def _pairs(specs: Sequence[str] | None, option: str) -> dict[str, str]:
    """Parse repeated ``NAME:VALUE`` options (only the first colon splits, so paths keep
    theirs); a name given twice is an error rather than a silent override."""
    found: dict[str, str] = {}
    for spec in specs or ():
        name, sep, value = spec.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise CliError(f"{option} expects NAME:VALUE, not {spec!r}")
        if name in found:
            raise CliError(f"{option} given twice for {name}")
        found[name] = value
    return found


def _parse(text: str) -> Assignment:
    """Parse notation; syntax errors keep the library's caret message (exit code 2)."""
    from .notation import NotationError, parse

    try:
        return parse(text)
    except NotationError as error:
        raise CliError(str(error)) from None


def _compile(assignment: Assignment, formats: dict[str, object],
             out_format: str | None) -> Kernel:
    """Build a Kernel; unknown or mismatched formats become usage errors."""
    from .api import compile as compile_kernel

    try:
        return compile_kernel(assignment, out_format=out_format, **formats)
    except ValueError as error:  # FormatError and tensors not in the expression
        raise CliError(str(error)) from None


def _lowering_errors() -> tuple[type[Exception], ...]:
    """Errors that mean "this expression cannot be compiled for these formats"."""
    from .api import ShapeError
    from .format import FormatError
    from .ir.schedule import ScheduleError

    return (ScheduleError, ShapeError, FormatError)


def _format_name(fmt: object) -> str:
    return getattr(fmt, "name", None) or repr(fmt)


# -- dump ------------------------------------------------------------------------------------
STAGES = ("notation", "concrete", "lattice", "llvm", "llvm-opt", "asm", "obj", "ptx")
_CODE_STAGES = ("llvm", "llvm-opt", "asm", "ptx")
_HEADER = "\033[1;36m"
_COMMENT = "\033[32m"
_LABEL = "\033[33m"
_RESET = "\033[0m"


def _stages(values: Sequence[str]) -> list[str]:
    """Accept ``--emit a --emit b`` and ``--emit a,b``; keep order, drop repeats."""
    stages: list[str] = []
    for value in values:
        for stage in (s.strip() for s in value.split(",")):
            if not stage:
                continue
            if stage not in STAGES:
                raise CliError(f"unknown stage {stage!r}; choose from {', '.join(STAGES)}")
            if stage not in stages:
                stages.append(stage)
    if not stages:
        raise CliError("--emit needs at least one stage")
    return stages


def _colour(stage: str, text: str) -> str:
    """ANSI colour for a terminal: header lines, whole-line comments and labels."""
    lines = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if line.startswith(";; ----"):
            line = f"{_HEADER}{line}{_RESET}"
        elif stage in _CODE_STAGES and stripped.startswith((";", "#", "//")):
            line = f"{_COMMENT}{line}{_RESET}"
        elif stage in _CODE_STAGES and (line.startswith("define ")
                                        or re.match(r'[\w.$"@-]+:', line)):
            line = f"{_LABEL}{line}{_RESET}"
        lines.append(line)
    return "\n".join(lines)


class _Machine:
    """Code for one target: retargeted, renamed IR, optimized once, emitted on demand.

    Without --target/--cpu/--name the kernel's own JIT stages are shown instead, so that the
    dump is the code that actually runs in this process.
    """

    def __init__(self, kernel: Kernel, triple: str | None, cpu: str | None,
                 name: str | None) -> None:
        import llvmlite.binding as llvm

        from .backends.cpu import link_runtime, optimize
        from .backends.targets import check_cpu

        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        ir_text = kernel.llvm_ir  # public property: rebuilds IR for disk-cached kernels
        jit_name = (kernel.last or kernel.instance()).jit.name
        host = triple is None
        triple = triple or llvm.get_process_triple()
        try:
            target = llvm.Target.from_triple(triple)
        except RuntimeError as error:
            raise CliError(f"--target {triple}: {error}") from None
        features = ""
        if cpu is not None:
            try:
                check_cpu(triple, cpu)
            except ValueError as error:
                raise CliError(f"--cpu {cpu}: {error}") from None
        if host and cpu is None:
            cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
        self.tm = target.create_target_machine(cpu=cpu or "", features=features, opt=3,
                                               reloc="pic", codemodel="default")
        self.name = name or jit_name
        # rename helpers sharing the entry's prefix too, so two renamed kernels can link
        text = re.sub(rf'@"{re.escape(jit_name)}(\w*)"', lambda m: f'@"{self.name}{m[1]}"',
                      ir_text)
        text = re.sub(r'(?m)^target triple = ".*"$', f'target triple = "{self.tm.triple}"', text)
        self.llvm_ir = re.sub(r'(?m)^target datalayout = ".*"$',
                              f'target datalayout = "{self.tm.target_data}"', text)
        self.module = llvm.parse_assembly(self.llvm_ir)
        self.module.verify()
        if not self.tm.triple.startswith("nvptx"):
            link_runtime(self.module)  # as in an export: the object defines its allocator
        optimize(self.module, self.tm)

    @property
    def triple(self) -> str:
        return self.tm.triple


def _emit(kernel: Kernel, stage: str, args: argparse.Namespace,
          machine: Callable[[], _Machine]) -> str | bytes:
    """The text (or, for obj, bytes) of one stage."""
    custom = args.target or args.cpu or args.name
    if stage == "notation":
        return str(kernel.assignment)
    if stage == "concrete":
        return kernel.concrete
    if stage == "lattice":
        return kernel.lattices
    if stage == "ptx":
        from .backends.cuda import emit_ptx

        try:
            if not args.name:
                _ = kernel.llvm_ir  # Kernel.ptx needs the IR a disk-cached kernel lacks
                return kernel.ptx(args.sm)
            return emit_ptx(machine().llvm_ir, machine().name, args.sm)
        except ValueError as error:
            raise CliError(f"--sm {args.sm}: {error}") from None
    if stage == "obj":
        return machine().tm.emit_object(machine().module)
    if not custom:
        return {"llvm": kernel.llvm_ir, "llvm-opt": kernel.llvm_ir_optimized,
                "asm": kernel.asm}[stage]
    if stage == "llvm":
        return machine().llvm_ir
    if stage == "llvm-opt":
        return str(machine().module)
    return machine().tm.emit_assembly(machine().module)


def dump(args: argparse.Namespace) -> int:
    """Print chosen compiler stages of one expression, each under a ';; ---- STAGE ----'
    header, so that a kernel can be inspected from the shell without writing Python."""
    stages = _stages(args.emit)
    if "obj" in stages and not args.output:
        raise CliError("--emit obj writes binary code: give the file with -o FILE")
    assignment = _parse(args.expr)
    kernel = _compile(assignment, _pairs(args.format, "-f"), args.out_format)
    try:
        inst = kernel.instance(_pairs(args.dtype, "--dtype"),
                               _pairs(args.index_dtype, "--index-dtype"))
    except (*_lowering_errors(), TypeError, ValueError) as error:
        raise CliError(str(error)) from None
    if args.name:
        from .export import check_name

        try:
            check_name(args.name, kernel.llvm_ir, inst.jit.name)
        except ValueError as error:
            raise CliError(f"--name: {error}") from None
    cached: list[_Machine] = []

    def machine() -> _Machine:
        if not cached:
            cached.append(_Machine(kernel, args.target, args.cpu, args.name))
        return cached[0]

    parts: list[tuple[str, str]] = []
    for stage in stages:
        produced = _emit(kernel, stage, args, machine)
        if isinstance(produced, bytes):
            Path(args.output).write_bytes(produced)
            produced = (f"; wrote {len(produced)} bytes of {machine().triple} object code "
                        f"(function {machine().name}) to {args.output}")
        elif args.output and stages == [stage]:
            # one stage to a file: no header, so the file feeds llc, as or ptxas directly
            Path(args.output).write_text(produced.rstrip() + "\n")
            return 0
        parts.append((stage, f";; ---- {stage} ----\n{produced.rstrip()}\n"))
    text = "".join(part for _, part in parts)
    if args.output and "obj" not in stages:
        Path(args.output).write_text(text)
        return 0
    colour = sys.stdout.isatty() and not args.no_color and "NO_COLOR" not in os.environ
    if colour:
        text = "\n".join(_colour(stage, part) for stage, part in parts) + "\n"
    sys.stdout.write(text)
    return 0


# -- run -------------------------------------------------------------------------------------
GENERATED = ("random", "ones", "zeros")
_MATRIX_ONLY = (".mtx", ".mtx.gz", ".npz")
_WRITABLE = (".mtx.gz", ".tns.gz", ".mtx", ".tns", ".npy", ".npz")


def _generated(source: str) -> tuple[str, tuple[int, ...] | None] | None:
    """``random``, ``ones``, ``zeros``, optionally with a shape (``random:100x50``);
    None for a file path."""
    kind, _, shape = source.partition(":")
    if kind not in GENERATED:
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
    from .io import read

    out = assignment.lhs.tensor
    uses = assignment.accesses()[1:]
    extents: dict[str, tuple[int, str]] = {}
    tensors: dict[str, Tensor] = {}
    notes: dict[str, str] = {}
    for name, source in sources.items():
        generated = _generated(source)
        if generated is None:
            try:
                tensor = read(source, format=kernel.formats[name])
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
             f"{_format_name(tensors[name].format):<10} {notes[name]}"
             for name in assignment.tensors() if name in tensors]
    return tensors, extents, lines


def run(args: argparse.Namespace) -> int:
    """Compile an expression, run it on files or generated data, time it, save the result;
    the quickest way to try a format on a real matrix."""
    from .io import write

    assignment = _parse(args.expr)
    out = assignment.lhs.tensor
    names = [n for n in assignment.tensors() if n != out]
    sources = _pairs(args.input, "-i")
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
        if not lower.endswith(_WRITABLE):
            raise CliError(f"-o {args.output}: use one of {', '.join(_WRITABLE)}")
        if lower.endswith(_MATRIX_ONLY) and order[out] != 2:
            raise CliError(f"-o {args.output}: that file type holds matrices, but {out} has "
                           f"order {order[out]}; use .npy or .tns")
    formats: dict[str, object] = dict(_pairs(args.format, "-f"))
    for name in names:
        if name not in formats:
            from_file = _generated(sources[name]) is None
            formats[name] = ("csr" if order[name] == 2 else "coo") if from_file else "dense"
    kernel = _compile(assignment, formats, args.out_format)
    tensors, extents, lines = _load_inputs(assignment, sources, kernel, args.seed)
    free = [v.name for v in assignment.lhs.indices if v.name not in extents]
    if free:
        raise CliError(f"index {', '.join(free)} of {out} appears in no input")
    out_shape = tuple(extents[v.name][0] for v in assignment.lhs.indices)
    dtypes = {n: str(t.dtype) for n, t in tensors.items()}
    index_dtypes = {n: str(t.index_dtype) for n, t in tensors.items()}
    index_dtypes[out] = "int64" if max(out_shape, default=0) >= 2**31 - 1 else "int32"
    from .runtime import KernelRuntimeError

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
    except _lowering_errors() as error:
        raise CliError(str(error)) from None
    except KernelRuntimeError as error:
        raise CliError(str(error), 1) from None
    print(kernel.assignment)
    print("\n".join(lines))
    print(f"  {out:<6} {_shape_text(result.shape):>14}  {_format_name(result.format):<10} "
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


# -- formats ---------------------------------------------------------------------------------
def _check_format_files(paths: Sequence[str]) -> int:
    """Validate plugin files the way the compiler will load them; 1 if any is bad."""
    from .formats.loader import FormatFileError, load_level_file

    status = 0
    for path in paths:
        try:
            level = load_level_file(path)
        except FormatFileError as error:
            print(error, file=sys.stderr)
            status = 1
        except OSError as error:
            print(f"{path}: {error.strerror or error}", file=sys.stderr)
            status = 1
        else:
            print(f"{path}: ok ({level.name})")
    return status


def formats(args: argparse.Namespace) -> int:
    """List level formats with capabilities and properties, or check plugin files."""
    if getattr(args, "check", None):
        return _check_format_files(args.check)
    for name, level in sorted(level_formats().items()):
        caps = [level.iterate + " iteration"]
        caps += [c for c, ok in (("locate", level.can_locate), ("insert", level.can_insert),
                                 ("append", level.can_append)) if ok]
        props = ", ".join(f"{p}={'configurable' if d.configurable else d.default}"
                          for p, d in level.properties.items())
        print(f"{name:<12} {'; '.join(caps)}\n{'':<12} {props}")
    return 0


# -- selftest --------------------------------------------------------------------------------
def selftest(args: argparse.Namespace) -> int:
    """Run random cases (expressions, formats, shapes, dtypes, inf/NaN, corrupted inputs)
    against numpy, each in a worker subprocess so that crashes and hangs are counted
    against their case; exit 1 if any case failed."""
    from .selftest import show_case, soak

    first, cases, seed = args.first, args.cases, args.seed
    if args.case:
        seed_text, sep, index_text = args.case.partition(":")
        if not sep or not seed_text.strip().lstrip("-").isdigit() or not index_text.isdigit():
            raise CliError(f"--case expects SEED:INDEX, not {args.case!r}")
        seed, first, cases = int(seed_text), int(index_text), 1
        print(show_case(seed, first, args.small))

    def progress(report) -> None:
        """Failures are printed as they come, so a run cut short still names them."""
        done, latest = len(report.results), report.results[-1]
        if latest.failed and not args.case:
            print(report.line(latest), flush=True)
        if not args.case and (done % 50 == 0 or done == cases):
            tallies = report.tallies
            print(f"  {done}/{cases}: " + ", ".join(f"{n} {s}" for s, n in sorted(
                tallies.items())), file=sys.stderr, flush=True)

    report = soak(cases, seed=seed, timeout=args.timeout, jobs=args.jobs, first=first,
                  small=args.small, progress=progress)
    print(report.summary())
    return 1 if report.failures else 0


# -- entry point -----------------------------------------------------------------------------
def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive count, not {text}")
    return value


def _add_format_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("expr", metavar="EXPR", help="index notation, e.g. 'y(i) = A(i,j) * x(j)'")
    parser.add_argument("-f", "--format", action="append", metavar="NAME:FORMAT",
                        help="storage format of a tensor (csr, coo, dense, dia, ell, hash, csc, "
                             "dcsr, csf, bcsr2x2, ...); repeatable")
    parser.add_argument("--out-format", metavar="FORMAT",
                        help="format of the result (default dense)")


def bench(args: argparse.Namespace) -> int:
    """Run the benchmark suite (tools/bench.py); its own --help lists the options."""
    from .tools.bench import main as bench_main

    return bench_main(args.bench_args)


def build_parser() -> argparse.ArgumentParser:
    """All subcommands and their options (separate from main so docs/tests can inspect it)."""
    parser = argparse.ArgumentParser(prog="llvsparse", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    raw = argparse.RawDescriptionHelpFormatter
    sub.add_parser("demo", formatter_class=raw, help="run the built-in tour",
                   description=demo.__doc__).set_defaults(run=demo)

    p = sub.add_parser("dump", formatter_class=raw,
                       help="print compiler stages of an expression",
                       description=dump.__doc__,
                       epilog="example: llvsparse dump 'y(i) = A(i,j) * x(j)' -f A:csr "
                              "--emit concrete,llvm-opt")
    _add_format_options(p)
    p.add_argument("--emit", action="append", required=True, metavar="STAGE",
                   help=f"stage(s) to print: {', '.join(STAGES)}; repeatable or "
                        "comma-separated")
    p.add_argument("--dtype", action="append", metavar="NAME:DTYPE",
                   help="value type of an input (default float64)")
    p.add_argument("--index-dtype", action="append", metavar="NAME:DTYPE",
                   help="index type of a tensor (default int32)")
    p.add_argument("--sm", default="sm_80", help="GPU architecture for ptx (default sm_80)")
    p.add_argument("--target", metavar="TRIPLE",
                   help="LLVM target triple for llvm/llvm-opt/asm/obj (default: this host)")
    p.add_argument("--cpu", help="CPU for --target (default: generic; the host CPU on the "
                                 "host)")
    p.add_argument("--name", help="name of the kernel function (a C identifier)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write to FILE (one stage: without its header); required by obj, "
                        "whose binary goes there while the other stages go to stdout")
    p.add_argument("--no-color", action="store_true", help="no ANSI colours on a terminal")
    p.set_defaults(run=dump)

    p = sub.add_parser("run", formatter_class=raw,
                       help="compile, run and time an expression on data",
                       description=run.__doc__,
                       epilog="example: llvsparse run 'y(i) = A(i,j) * x(j)' "
                              "-i A:matrix.mtx.gz -i x:random -o y.npy")
    _add_format_options(p)
    p.add_argument("-i", "--input", action="append", metavar="NAME:SOURCE",
                   help="a file (.mtx, .mtx.gz, .tns, .npy, .npz) or random, ones, zeros "
                        "(dense, shape inferred from the files, or given as random:100x50); "
                        "files default to csr for matrices and coo otherwise")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="save the result (.mtx, .mtx.gz, .tns, .npy, .npz)")
    p.add_argument("--repeat", type=_positive, default=5, metavar="N",
                   help="timed calls after the first (default 5; the median is shown)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of numpy.random.default_rng for random inputs, drawn in the "
                        "order the tensors appear in the expression (default 0)")
    p.add_argument("--no-check", action="store_true",
                   help="skip the full input validation on each call (trusted data)")
    p.set_defaults(run=run)

    p = sub.add_parser("bench", add_help=False, help="benchmark against installed peers "
                       "(see llvsparse bench --help)")
    p.add_argument("bench_args", nargs=argparse.REMAINDER)
    p.set_defaults(run=bench)

    p = sub.add_parser("formats", formatter_class=raw,
                       help="list level formats, or check plugin files",
                       description=formats.__doc__)
    p.add_argument("--check", nargs="+", action="extend", metavar="FILE.yaml",
                   help="validate level-format files; exit 1 if any is bad")
    p.set_defaults(run=formats)

    p = sub.add_parser("selftest", formatter_class=raw,
                       help="soak: random cases against numpy, crashes and hangs counted",
                       description=selftest.__doc__,
                       epilog="example: nice -n 19 llvsparse selftest --cases 2000 --seed 7")
    p.add_argument("--cases", type=_positive, default=200, help="how many (default 200)")
    p.add_argument("--seed", type=int, default=0, help="which random cases (default 0)")
    p.add_argument("--first", type=int, default=0, metavar="INDEX",
                   help="number of the first case (default 0): a crash that needs the cases "
                        "run before it in the same worker reproduces from there")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="per case, compiling included; a case past it is a hang (default 60)")
    p.add_argument("--jobs", type=_positive, default=1,
                   help="worker processes (default 1)")
    p.add_argument("--case", metavar="SEED:INDEX",
                   help="run only this case (as a failure names it) and show its operands")
    p.add_argument("--small", action="store_true",
                   help="shallower expressions over at most two operands, quicker to compile "
                        "(the cases the test suite runs)")
    p.set_defaults(run=selftest)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:  # the benchmark parses its own options (tools/bench.py)
        return bench(argparse.Namespace(bench_args=argv[1:]))
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except CliError as error:
        print(f"llvsparse {args.command}: error: {error}", file=sys.stderr)
        return error.code
    except BrokenPipeError:  # e.g. `llvsparse dump ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # quiet exit flush
        return 1
    except OSError as error:  # a file that cannot be read or written
        print(f"llvsparse {args.command}: error: {error}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"llvsparse {args.command}: error: out of memory (are the inputs' shapes "
              "what you meant?)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
