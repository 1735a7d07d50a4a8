"""The ``llvsparse`` command line, run as users run it: a subprocess per command."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from llvsparse.backends.cuda import check_ptx

pytestmark = pytest.mark.slow  # see tests/conftest.py

ROOT = Path(__file__).resolve().parents[1]
OLM1000 = Path("/work/shared/data/matrices/olm1000.mtx.gz")
if not OLM1000.exists():  # the same matrix ships with the package
    OLM1000 = ROOT / "llvsparse" / "data" / "olm1000.mtx.gz"
SPMV = "y(i) = A(i,j) * x(j)"

Cli = Callable[..., subprocess.CompletedProcess]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A private kernel cache, so no entry from another checkout or test run is loaded."""
    return {**os.environ, "LLVSPARSE_CACHE_DIR": str(tmp_path_factory.mktemp("cache"))}


@pytest.fixture
def cli(env: dict[str, str], tmp_path: Path) -> Cli:
    def call(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "llvsparse", *args], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=300, check=False)

    return call


def sections(stdout: str) -> dict[str, str]:
    """Split dump output at its ';; ---- STAGE ----' headers."""
    parts = re.split(r"^;; ---- (\S+) ----\n", stdout, flags=re.MULTILINE)
    assert parts[0] == ""
    return dict(zip(parts[1::2], parts[2::2], strict=True))


# -- dump ------------------------------------------------------------------------------------
def test_dump_text_stages(cli: Cli) -> None:
    done = cli("dump", SPMV, "-f", "A:csr", "-f", "x:dense",
               "--emit", "notation,concrete,lattice", "--emit", "llvm", "--emit", "llvm-opt",
               "--emit", "asm")
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stdout  # no colour into a pipe
    found = sections(done.stdout)
    assert list(found) == ["notation", "concrete", "lattice", "llvm", "llvm-opt", "asm"]
    assert found["notation"].strip() == "y(i) = sum_j(A(i,j) * x(j))"
    assert found["concrete"].strip() == "forall(i, forall(j, y(i) += A(i,j) * x(j)))"
    assert "A.0" in found["lattice"] and "x.0" in found["lattice"]
    assert re.search(r'^define .*@"llvsparse_kernel"\(', found["llvm"], re.MULTILINE)
    assert re.search(r"^define .*@llvsparse_kernel\(", found["llvm-opt"], re.MULTILINE)
    assert re.search(r"^llvsparse_kernel:", found["asm"], re.MULTILINE)


def test_dump_other_target_and_name(cli: Cli, tmp_path: Path) -> None:
    done = cli("dump", SPMV, "-f", "A:csr", "--emit", "asm,obj", "--target",
               "aarch64-unknown-linux-gnu", "--cpu", "neoverse-n1", "--name", "spmv",
               "-o", "k.o")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^spmv:", sections(done.stdout)["asm"], re.MULTILINE)
    obj = (tmp_path / "k.o").read_bytes()
    assert obj[:4] == b"\x7fELF"
    assert int.from_bytes(obj[18:20], "little") == 183  # e_machine: AArch64


def test_dump_obj_for_host(cli: Cli, tmp_path: Path, tool: Callable[[str], str]) -> None:
    done = cli("dump", SPMV, "-f", "A:csr", "--emit", "obj", "-o", "k.o")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "k.o").read_bytes()[:4] == b"\x7fELF"
    assert "k.o" in sections(done.stdout)["obj"]
    symbols = subprocess.run([tool("nm"), str(tmp_path / "k.o")], capture_output=True, text=True,
                             check=True).stdout
    assert re.search(r"\b[TW] llvsparse_alloc\b", symbols)  # linkable as is, like an export


def test_dump_obj_needs_output(cli: Cli) -> None:
    done = cli("dump", SPMV, "-f", "A:csr", "--emit", "obj")
    assert done.returncode == 2
    assert "-o" in done.stderr


def test_dump_ptx_passes_ptxas(cli: Cli, tmp_path: Path, tool: Callable[[str], str]) -> None:
    tool("ptxas")
    texts = []
    for _ in range(2):  # the second run finds the kernel in the disk cache, without IR
        done = cli("dump", "C(i,j) = A(i,j) + B(i,j)", "-f", "A:csr", "-f", "B:csr",
                   "--out-format", "dense", "--emit", "ptx", "--sm", "sm_80", "-o", "k.ptx")
        assert done.returncode == 0, done.stderr
        texts.append((tmp_path / "k.ptx").read_text())
    assert texts[0] == texts[1]
    assert ".target sm_80" in texts[0] and ";; ----" not in texts[0]  # one stage: no header
    assert "%tid.x" in texts[0]  # the scheduled kernel: a thread per row
    check_ptx(texts[0], "sm_80")


def test_dump_cubin_through_ptxas(cli: Cli, tmp_path: Path, tool: Callable[[str], str]) -> None:
    tool("ptxas")
    done = cli("dump", SPMV, "-f", "A:csr", "--emit", "cubin", "--sm", "sm_90", "-o", "k.cubin")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "k.cubin").read_bytes()[:4] == b"\x7fELF"  # cubins are ELF files
    assert "bytes of sm_90 cubin" in done.stdout
    done = cli("dump", SPMV, "-f", "A:csr", "--emit", "cubin")
    assert done.returncode == 2 and "-o FILE" in done.stderr


def test_dump_gpu_loops_shows_the_plan(cli: Cli) -> None:
    done = cli("dump", SPMV, "-f", "A:csr", "--emit", "gpu-loops")
    assert done.returncode == 0, done.stderr
    head = done.stdout.splitlines()[1]  # under the stage's header
    assert head.startswith("for i ") and "gpu_block, gpu_thread" in head


def test_dump_ptx_refuses_a_kernel_without_gpu_mapping(cli: Cli) -> None:
    done = cli("dump", "y(j) = A(i,j) * x(i)", "-f", "A:csr", "--emit", "ptx")
    assert done.returncode != 0
    assert "--emit ptx: no loop of this kernel has a GPU thread mapping" in done.stderr


def test_dump_spgemm_ptx_counts_and_fills_with_arena_workspaces(cli: Cli) -> None:
    done = cli("dump", "C(i,j) = A(i,k) * B(k,j)", "-f", "A:csr", "-f", "B:csr",
               "--out-format", "csr", "--emit", "ptx")
    assert done.returncode == 0, done.stderr
    assert ".entry llvsparse_kernel_count_device(" in done.stdout
    assert "llvsparse_arena" in done.stdout and "malloc" not in done.stdout


@pytest.mark.parametrize(("formats", "schedule", "tags", "entries"), [
    (["-f", "A:csr"], "thread_per_row", "gpu_block, gpu_thread}", ["llvsparse_kernel_device"]),
    (["-f", "A:csr"], "nonzero_split", "nonzero split}", ["llvsparse_kernel_device"]),
    (["-f", "A:coo"], "thread_per_nonzero", "position split, atomic adds}",
     ["llvsparse_kernel_device"]),
    (["-f", "A:csr"], "warp_per_row", "gpu_warp, warp sums}", ["llvsparse_kernel_device"]),
    (["-f", "A:csr"], "entry_split", "entry split, atomic adds}", ["llvsparse_kernel_device"]),
])
def test_dump_gpu_schedule_shows_and_assembles(cli: Cli, tmp_path: Path, formats, schedule,
                                               tags, entries,
                                               tool: Callable[[str], str]) -> None:
    """--gpu-schedule picks the mapping that gpu-loops shows and ptx/cubin emit."""
    tool("ptxas")
    done = cli("dump", SPMV, *formats, "--gpu-schedule", schedule, "--emit", "gpu-loops")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].endswith(tags)
    done = cli("dump", SPMV, *formats, "--gpu-schedule", schedule, "--emit", "ptx",
               "-o", "k.ptx")
    assert done.returncode == 0, done.stderr
    assert all(f".entry {e}(" in (tmp_path / "k.ptx").read_text() for e in entries)
    done = cli("dump", SPMV, *formats, "--gpu-schedule", schedule, "--emit", "cubin",
               "-o", "k.cubin")
    assert done.returncode == 0 and (tmp_path / "k.cubin").read_bytes()[:4] == b"\x7fELF"


def test_dump_count_fill_emits_both_grids(cli: Cli) -> None:
    done = cli("dump", "C(i,j) = A(i,j) + B(i,j)", "-f", "A:csr", "-f", "B:csr",
               "--out-format", "csr", "--emit", "gpu-loops,ptx")
    assert done.returncode == 0, done.stderr
    assert "count, fill}" in done.stdout
    assert ".entry llvsparse_kernel_count_device(" in done.stdout
    assert ".entry llvsparse_kernel_fill_device(" in done.stdout
    done = cli("dump", SPMV, "-f", "A:csr", "--gpu-schedule", "warp", "--emit", "ptx")
    assert done.returncode == 2 and "invalid choice: 'warp'" in done.stderr
    done = cli("dump", SPMV, "-f", "A:coo", "--gpu-schedule", "thread_per_nonzero",
               "--emit", "ptx", "--name", "k")
    assert done.returncode != 0 and "--name renames thread_per_row and" in done.stderr


@pytest.mark.parametrize("sm", ["sm_90a", "sm_120"])
def test_dump_ptx_for_newer_targets_picks_their_ptx_version(cli: Cli, tmp_path: Path,
                                                            sm: str,
                                                            tool: Callable[[str], str]) -> None:
    """A fixed PTX version made LLVM abort the process for targets it predates."""
    tool("ptxas")
    done = cli("dump", SPMV, "-f", "A:csr", "--emit", "ptx", "--sm", sm, "-o", "k.ptx")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "k.ptx").read_text()
    assert f".target {sm}" in text
    check_ptx(text, sm)


@pytest.mark.parametrize(("args", "message"), [
    (["--emit", "ptx", "--sm", "sm_999"], "'sm_999' is not a recognized processor"),
    (["--emit", "ptx", "--sm", "garbage"], "not of the form sm_NN"),
    (["--emit", "ptx", "--sm", ""], "not of the form sm_NN"),
    (["--emit", "asm", "--cpu", "nosuchcpu"], "'nosuchcpu' is not a recognized processor"),
    (["--emit", "asm", "--target", "x86_64-unknown-linux-gnu", "--cpu", "nosuchcpu"],
     "'nosuchcpu' is not a recognized processor"),
])
def test_dump_unknown_processor_is_a_usage_error(cli: Cli, args: list[str],
                                                 message: str) -> None:
    """LLVM ignores an unknown processor, or for x86-64 aborts the process."""
    done = cli("dump", SPMV, "-f", "A:csr", *args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("output", ["/nonexistent/k.ll", "."])
def test_dump_unwritable_output_is_one_line(cli: Cli, output: str) -> None:
    done = cli("dump", SPMV, "-f", "A:csr", "--emit", "llvm", "-o", output)
    assert done.returncode == 1
    assert done.stderr.startswith("llvsparse dump: error: ") and "Traceback" not in done.stderr


def test_dump_bad_expression_shows_column(cli: Cli) -> None:
    done = cli("dump", "y(i) = A(i,j) * ", "-f", "A:csr", "--emit", "llvm")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "column 16" in done.stderr
    lines = done.stderr.splitlines()
    caret = next(k for k, line in enumerate(lines) if line.strip() == "^")
    shown = lines[caret - 1]
    assert lines[caret].index("^") - shown.index("y(i)") == 16


@pytest.mark.parametrize("args", [["-f", "A:nosuchformat"], ["-f", "A:dia", "--emit", "bogus"],
                                  ["-f", "Q:csr"], ["-f", "A"], ["--name", "malloc"],
                                  ["--name", "ké"], ["--name", "int"],
                                  ["--index-dtype", "A:int16"], ["--index-dtype", "A:float64"],
                                  ["--dtype", "A:object"], ["--dtype", "Z:float32"]])
def test_dump_usage_errors(cli: Cli, args: list[str]) -> None:
    done = cli("dump", SPMV, *args, "--emit", "llvm")
    assert done.returncode == 2
    assert "error" in done.stderr and "Traceback" not in done.stderr


def test_dump_colour_only_on_a_terminal(env: dict[str, str], tmp_path: Path) -> None:
    def on_terminal(*extra: str) -> bytes:
        leader, follower = pty.openpty()
        done = subprocess.run([sys.executable, "-m", "llvsparse", "dump", SPMV, "-f", "A:csr",
                               "--emit", "notation", *extra], stdout=follower,
                              stderr=subprocess.PIPE, env=env, cwd=tmp_path, timeout=300,
                              check=False)
        os.close(follower)
        assert done.returncode == 0, done.stderr
        output = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # Linux reports the closed terminal as EIO
                break
            if not chunk:
                break
            output += chunk
        os.close(leader)
        return output

    assert b"\x1b[" in on_terminal()
    plain = on_terminal("--no-color")
    assert b"\x1b[" not in plain and b";; ---- notation ----" in plain


# -- run -------------------------------------------------------------------------------------
def test_run_random_input_to_matrix_market(cli: Cli, tmp_path: Path) -> None:
    done = cli("run", "B(i,j) = A(i,j) * x(j)", "-i", f"A:{OLM1000}", "-i", "x:random",
               "--seed", "7", "--out-format", "csr", "-o", "out.mtx", "--repeat", "3")
    assert done.returncode == 0, done.stderr
    for label in ("compile", "first call", "median of 3"):
        assert re.search(rf"^{label}\s+[\d.]+ ms", done.stdout, re.MULTILINE), done.stdout
    A = sp.csr_matrix(scipy.io.mmread(str(OLM1000)))
    x = np.random.default_rng(7).random(A.shape[1])
    got = sp.csr_matrix(scipy.io.mmread(str(tmp_path / "out.mtx")))
    assert got.shape == A.shape
    np.testing.assert_allclose(got.toarray(), A.multiply(x[None, :]).toarray())


def test_run_spmv_to_npy(cli: Cli, tmp_path: Path) -> None:
    done = cli("run", SPMV, "-i", f"A:{OLM1000}", "-i", "x:ones", "-f", "A:ell", "-o", "y.npy",
               "--repeat", "1")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^\s+A\s+1000x1000\s+ell\b", done.stdout, re.MULTILINE), done.stdout
    A = sp.csr_matrix(scipy.io.mmread(str(OLM1000)))
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), A @ np.ones(A.shape[1]))


def test_run_generated_shapes(cli: Cli, tmp_path: Path) -> None:
    done = cli("run", "s = x(i) * y(i)", "-i", "x:random:50", "-i", "y:ones", "--seed", "3",
               "-o", "s.npy", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(np.load(tmp_path / "s.npy"),
                               np.random.default_rng(3).random(50).sum())


@pytest.mark.parametrize(("args", "message"), [
    (["-i", "A:random", "-i", "x:random"], "cannot infer the extent of i, j for A"),
    (["-i", f"A:{OLM1000}", "-i", "x:random:5"], "index j has extent 1000"),
    (["-i", f"A:{OLM1000}", "-i", "x:ones", "-o", "y.mtx"], "holds matrices"),
    (["-i", f"A:{OLM1000}"], "no input for x"),
])
def test_run_usage_errors(cli: Cli, args: list[str], message: str) -> None:
    done = cli("run", SPMV, *args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_run_finds_bundled_matrix_by_name(cli: Cli, tmp_path: Path) -> None:
    """README's example named olm1000.mtx.gz, which only the package holds: exit 1."""
    assert not (tmp_path / "olm1000.mtx.gz").exists()
    done = cli("run", SPMV, "-i", "A:olm1000.mtx.gz", "-i", "x:random", "--seed", "1",
               "-o", "y.npy", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    A = sp.csr_matrix(scipy.io.mmread(str(ROOT / "llvsparse" / "data" / "olm1000.mtx.gz")))
    x = np.random.default_rng(1).random(A.shape[1])
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), A @ x)


def test_run_file_in_working_directory_wins_over_bundled(cli: Cli, tmp_path: Path) -> None:
    mine = sp.random(7, 5, density=0.5, format="coo", random_state=2)
    scipy.io.mmwrite(str(tmp_path / "olm1000.mtx"), mine)
    done = cli("run", SPMV, "-i", "A:olm1000.mtx", "-i", "x:ones", "-o", "y.npy",
               "--repeat", "1")
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), mine @ np.ones(5))


@pytest.mark.parametrize(("source", "message"), [
    ("x:rand", "'rand' is neither a generator"),
    ("x:rand:10", "'rand:10' is neither a generator"),
    ("x:data.txt", "'data.txt' is neither a generator"),
    ("x:missing.npy", "missing.npy: no such file"),
])
def test_run_unknown_source_is_a_bad_request(cli: Cli, source: str, message: str) -> None:
    """An unknown generator was read as a file name: exit code 1, like a failing kernel."""
    done = cli("run", SPMV, "-i", f"A:{OLM1000}", "-i", source)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_run_negative_seed_is_a_bad_request(cli: Cli) -> None:
    """--seed -1 reached numpy after compiling and ended in a traceback."""
    done = cli("run", SPMV, "-i", f"A:{OLM1000}", "-i", "x:random", "--seed", "-1")
    assert done.returncode == 2
    assert "--seed" in done.stderr and "Traceback" not in done.stderr


def test_run_out_of_memory_is_one_line(cli: Cli) -> None:
    done = cli("run", SPMV, "-i", "A:random:10000000x10000000", "-i", "x:ones")
    assert done.returncode == 1
    assert "out of memory" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--llvsparse-threads", "a"], "'a' is not a positive integer"),
    (["--llvsparse-threads", "1,0"], "'0' is not a positive integer"),
    (["--rounds", "0"], "'0' is not a positive integer"),
    (["--kernels", "nosuch"], "unknown kernel 'nosuch'"),
])
def test_bench_usage_errors(cli: Cli, args: list[str], message: str) -> None:
    done = cli("bench", "--quick", *args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


# -- formats ---------------------------------------------------------------------------------
def test_formats_list(cli: Cli) -> None:
    done = cli("formats")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^compressed\s+position iteration", done.stdout, re.MULTILINE)


def test_formats_lists_named_formats_with_their_levels(cli: Cli) -> None:
    """Only level formats were listed, not the names -f takes."""
    from llvsparse.tensors.format import NAMED_FORMATS, named_format

    done = cli("formats")
    assert done.returncode == 0, done.stderr
    listed = {}
    for line in done.stdout.splitlines():
        found = re.match(r"^  (\S+)\s+((?:\w+\([^)]*\) ?)+)", line)
        if found:
            listed[found[1]] = re.findall(r"(\w+)\(([^,)]*)", found[2])
    assert set(listed) == (NAMED_FORMATS - {"bcsr"}) | {"bcsrRxC"}
    for name in NAMED_FORMATS - {"bcsr"}:
        expected = [(level.kind, "storage-only" if level.mode is None else "ij"[level.mode])
                    for level in named_format(name, 2).levels]
        assert listed[name] == expected, name


def test_formats_check_good(cli: Cli) -> None:
    good = ROOT / "formats" / "dense.yaml"
    done = cli("formats", "--check", str(good))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{good}: ok (dense)"


BROKEN_KEY = """\
name: mylevel
doc: a level with a misspelt key
params: {}
arrays: {}
colour: blue
"""
BROKEN_BODY = """\
name: mylevel
doc: a level whose body imports
params: {}
arrays: {}
properties: {full: true, ordered: true, unique: true, branchless: false, compact: true}
capabilities:
  iterate: coordinate
  coord_bounds: return 0, N
  coord_access: |
    import os
    return p_parent * N + i, True
"""


def test_formats_check_broken_files(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "key.yaml").write_text(BROKEN_KEY)
    (tmp_path / "body.yaml").write_text(BROKEN_BODY)
    good = ROOT / "formats" / "compressed.yaml"
    done = cli("formats", "--check", "key.yaml", str(good), "body.yaml", "missing.yaml")
    assert done.returncode == 1
    assert f"{good}: ok (compressed)" in done.stdout
    assert re.search(r"^key\.yaml:5: .*'colour'", done.stderr, re.MULTILINE), done.stderr
    assert re.search(r"^body\.yaml:10: .*import", done.stderr, re.MULTILINE), done.stderr
    assert "missing.yaml" in done.stderr


# -- demo and help ---------------------------------------------------------------------------
def test_demo(cli: Cli) -> None:
    done = cli("demo")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WRONG" not in done.stdout
    # 2 matrices x (5 SpMV, B + B^T, trace, SpGEMM), then BFS and SSSP on gr_30_30
    assert done.stdout.count(" ok\n") == 18
    assert "SpGEMM" in done.stdout
    assert re.search(r"^BFS gr_30_30 .* ok$", done.stdout, re.MULTILINE)
    assert re.search(r"^SSSP gr_30_30 .* ok$", done.stdout, re.MULTILINE)


@pytest.mark.parametrize("command", [[], ["demo"], ["dump"], ["run"], ["bench"], ["formats"]])
def test_help(cli: Cli, command: list[str]) -> None:
    done = cli(*command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: llvsparse")
    assert "``" not in done.stdout  # plain text, not the docstrings' reStructuredText


def test_help_describes_every_subcommand(cli: Cli) -> None:
    """The description named demo, dump, run and formats, but not bench."""
    from llvsparse.commands.main import build_parser

    done = cli("--help")
    prose = done.stdout.split("positional arguments")[0]
    commands = build_parser()._subparsers._group_actions[0].choices
    assert commands and all(re.search(rf"\b{name}\b", prose) for name in commands), prose


def test_dump_takes_a_schedule(cli: Cli) -> None:
    schedule = "split(i, i0, i1, 32); parallelize(i0, cpu_thread, no_races)"
    done = cli("dump", SPMV, "-f", "A:csr", "--schedule", schedule,
               "--emit", "schedule,concrete,loops")
    assert done.returncode == 0, done.stderr
    found = sections(done.stdout)
    assert found["schedule"].splitlines()[0] == schedule
    assert found["concrete"].strip().startswith(
        "forall(i0 = split_outer(i, 32):cpu_thread:no_races, forall(i1 = split_inner(i, 32)")
    assert found["loops"].splitlines()[0] == f"schedule: {schedule}"
    refused = cli("dump", SPMV, "-f", "A:csr", "--schedule",
                  "parallelize(j, cpu_thread, no_races)", "--emit", "concrete")
    assert refused.returncode == 2
    assert "threads over j would reduce into the same entries of y" in refused.stderr
