"""The llvsparse command line: demo (the tour), dump (every compiler stage), run (compile
and time an expression on files or generated data), bench (time kernels against installed
peers), formats (list the named and level formats, check plugin files) and selftest (a
soak of random cases against numpy)."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import scipy.io

from .. import Tensor, evaluate
from ..backends.cuda import PtxError, assemble, emit_ptx
from ..ir.loops.gpu_plan import NONZERO_SPLIT, THREAD_PER_ROW, GpuMappingError
from ..ir.loops.gpu_plan import SCHEDULES as GPU_SCHEDULES
from ..ir.loops.nodes import show as show_loops
from .common import CliError, build_kernel, bundled_path, lowering_errors, pairs, parse_notation
from .formats import formats
from .run import run
from .selftest_command import add_parser as add_selftest_parser

if TYPE_CHECKING:
    from ..kernel.api import Kernel


def _bundled(name: str):
    with bundled_path(name) as path:
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
        start = time.perf_counter()  # Gustavson's rows through a dense workspace
        P = evaluate("P(i,j) = B(i,k) * C(k,j)", out_format="csr", B=B, C=B)
        elapsed = time.perf_counter() - start
        product = P.to_scipy()
        expected = (matrix @ matrix).tocsr()
        good = product.has_sorted_indices and abs(product - expected).max() <= \
            1e-12 * max(1.0, abs(expected).max())
        ok &= bool(good)
        rows.append((f"SpGEMM {matrix_name.split('.')[0]}", "csr*csr->csr", elapsed, good))
    graph_rows = _graph_rows(_bundled("gr_30_30.mtx.gz"))
    ok &= all(good for *_, good in graph_rows)
    rows += graph_rows
    print(f"{'kernel':<20} {'format':<14} {'compile+run':>12}  check")
    for name, fmt, elapsed, good in rows:
        print(f"{name:<20} {fmt:<14} {elapsed * 1e3:>9.1f} ms  {'ok' if good else 'WRONG'}")
    # loaded by the subcommand that runs: `llvsparse --help` loads no compiler
    from ..kernel.api import compile as compile_kernel

    kernel = compile_kernel("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    print("\nOptimized LLVM IR of CSR SpMV (first 25 lines):")
    print("\n".join(kernel.llvm_ir_optimized.splitlines()[:25]))
    return 0 if ok else 1


def _graph_rows(matrix) -> list[tuple[str, str, float, bool]]:
    """BFS levels and Bellman-Ford distances (llvsparse.graphs) on the grid graph of
    ``matrix`` (its absolute values as weights), each checked against scipy's csgraph."""
    from scipy.sparse import csgraph  # scipy's graph module: only the graph demo reads it

    # loaded by the subcommand that runs: `llvsparse --help` loads no compiler
    from .. import graphs

    weights = abs(matrix)
    start = time.perf_counter()
    levels = graphs.bfs_levels(weights, 0)
    elapsed = time.perf_counter() - start
    hops = csgraph.shortest_path(weights, unweighted=True, indices=0)
    rows = [("BFS gr_30_30", "bool push", elapsed,
             bool(np.array_equal(levels, np.where(np.isinf(hops), -1, hops))))]
    start = time.perf_counter()
    dist = graphs.shortest_paths(weights, 0)
    elapsed = time.perf_counter() - start
    rows.append(("SSSP gr_30_30", "min-plus", elapsed,
                 bool(np.allclose(dist, csgraph.shortest_path(weights, indices=0)))))
    return rows


# -- dump ------------------------------------------------------------------------------------
STAGES = ("notation", "schedule", "concrete", "lattice", "loops", "gpu-loops", "llvm", "llvm-opt", "asm",
          "obj", "ptx", "cubin")
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
        import llvmlite.binding as llvm  # LLVM only for the stages that print its IR

        # loaded by the subcommand that runs: `llvsparse --help` loads no compiler
        from ..backends.cpu import link_runtime, optimize
        from ..backends.targets import check_cpu

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
    if stage == "schedule":
        return kernel.schedule
    if stage == "concrete":
        return kernel.concrete
    if stage == "lattice":
        return kernel.lattices
    if stage == "loops":
        return kernel.loops
    if stage == "gpu-loops":  # the loop IR as the GPU plan tagged it (ir/loops/gpu_plan.py)
        try:
            return show_loops(kernel.gpu_plan().program.root)
        except GpuMappingError as error:
            raise CliError(f"--emit gpu-loops: {error}") from None
    if stage == "cubin":  # the ptx stage's kernel, assembled by ptxas
        try:
            return assemble(str(_emit(kernel, "ptx", args, machine)), args.sm)
        except (FileNotFoundError, PtxError) as error:
            raise CliError(f"--emit cubin: {error}") from None
    if stage == "ptx":
        try:
            plan = kernel.gpu_plan()  # the kernel's GPU mapping, or GpuMappingError
        except GpuMappingError as error:
            raise CliError(f"--emit ptx: {error}") from None
        try:
            if not args.name:
                return kernel.ptx(args.sm)
            if plan.schedule not in (THREAD_PER_ROW, NONZERO_SPLIT):
                raise CliError(f"--name: the {plan.schedule} schedule's kernel is built "
                               "again for the GPU; --name renames thread_per_row and "
                               "nonzero_split kernels only")
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
    binary = [stage for stage in stages if stage in ("obj", "cubin")]
    if binary and not args.output:
        raise CliError(f"--emit {binary[0]} writes binary code: give the file with -o FILE")
    assignment = parse_notation(args.expr)
    gpu_units = args.schedule is not None and "gpu_" in args.schedule
    kernel = build_kernel(assignment, pairs(args.format, "-f"), args.out_format,
                          args.gpu_schedule, args.schedule,
                          "cuda-emulated" if gpu_units else "cpu")
    try:
        inst = kernel.instance(pairs(args.dtype, "--dtype"),
                               pairs(args.index_dtype, "--index-dtype"))
    except (*lowering_errors(), TypeError, ValueError) as error:
        raise CliError(str(error)) from None
    if args.name:
        # loaded by the subcommand that runs: `llvsparse --help` loads no compiler
        from ..caching.export import check_name

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
            produced = (f"; wrote {len(produced)} bytes of {args.sm} cubin to {args.output}"
                        if stage == "cubin" else
                        f"; wrote {len(produced)} bytes of {machine().triple} object code "
                        f"(function {machine().name}) to {args.output}")
        elif args.output and stages == [stage]:
            # one stage to a file: no header, so the file feeds llc, as or ptxas directly
            Path(args.output).write_text(produced.rstrip() + "\n")
            return 0
        parts.append((stage, f";; ---- {stage} ----\n{produced.rstrip()}\n"))
    text = "".join(part for _, part in parts)
    if args.output and not binary:
        Path(args.output).write_text(text)
        return 0
    colour = sys.stdout.isatty() and not args.no_color and "NO_COLOR" not in os.environ
    if colour:
        text = "\n".join(_colour(stage, part) for stage, part in parts) + "\n"
    sys.stdout.write(text)
    return 0


# -- entry point -----------------------------------------------------------------------------
def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive count, not {text}")
    return value


def _seed(text: str) -> int:
    """numpy seeds are non-negative: -1 ended in a traceback after compiling."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, not {text}")
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
    # loaded by the subcommand that runs: `llvsparse --help` loads no compiler
    from ..tools.bench import main as bench_main

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
    p.add_argument("--gpu-schedule", choices=GPU_SCHEDULES,
                   help="how the GPU grid splits the kernel (gpu-loops, ptx, cubin; "
                        "default: the rule of ir/loops/gpu_plan.py)")
    p.add_argument("--schedule", metavar="DIRECTIVES",
                   help="a schedule, e.g. 'split(i,i0,i1,32); parallelize(i0,cpu_thread,"
                        "no_races)' (ir/schedule/directives.py); GPU units select the GPU kernel")
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
                        "files default to csr for matrices and coo otherwise; a file name "
                        "not found from the working directory is looked up in the data "
                        "bundled with llvsparse (olm1000.mtx.gz, gr_30_30.mtx.gz)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="save the result (.mtx, .mtx.gz, .tns, .npy, .npz)")
    p.add_argument("--repeat", type=_positive, default=5, metavar="N",
                   help="timed calls after the first (default 5; the median is shown)")
    p.add_argument("--seed", type=_seed, default=0,
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
    add_selftest_parser(sub, _positive)
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
