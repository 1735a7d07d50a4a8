"""Exported kernels called from C: a real compiler, a real link, descriptors filled by hand.

The C programs in tests/c build their own CSR arrays, so these tests check the documented
ABI (header comments, descriptor layout, malloc'd outputs freed by the caller), not the
Python runtime's view of it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls

Tool = Callable[[str], str]
C_DIR = Path(__file__).resolve().parent / "c"
A_DENSE = np.array([[5, 1, 0, 0, 0, 0], [7, 3, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0],
                    [8, 0, 0, 4, 9, 0]], dtype=float)
B_DENSE = np.array([[0, 2, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0], [3, 0, 0, 0, 0, 0],
                    [8, 0, 6, 0, 0, 0]], dtype=float)
X = np.arange(1.0, 7.0)
CSR_SLOTS = ["arrays[0] = level 1 pos (pos)", "arrays[1] = level 1 crd (crd)",
             "arrays[2] = values"]


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compile fresh rather than load object code another checkout left in the cache."""
    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path / "cache"))


def build_and_run(kernel: ls.Kernel, name: str, source: str, folder: Path, compiler: str,
                  flags: tuple[str, ...] = ()) -> dict[str, list]:
    """Export ``kernel`` as folder/k.o + k.h, link tests/c/``source`` against it with
    ``compiler`` (and extra ``flags``), run it and parse its ``label: values`` lines."""
    obj, header = kernel.export(folder / "k.o", name=name)
    assert (obj, header) == (folder / "k.o", folder / "k.h")
    program = folder / "prog"
    subprocess.run([compiler, "-O1", "-Wall", "-Werror", *flags, "-I", str(folder),
                    str(C_DIR / source), str(obj), "-o", str(program)], check=True,
                   capture_output=True, text=True)
    done = subprocess.run([str(program)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    parsed: dict[str, list] = {}
    for line in done.stdout.splitlines():
        label, _, values = line.partition(":")
        parsed[label] = [float(v) for v in values.split()]
    assert parsed["status"] == [0]
    return parsed


def documented(header: str, tensor: str) -> list[str]:
    """The ``arrays[k] = ...`` lines the header documents for ``tensor``."""
    lines = header.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith(f" *   {tensor}: "))
    slots = []
    for line in lines[start + 1:]:
        text = line.lstrip(" *").strip()
        if not line.startswith(" *     "):
            break
        if text.startswith("arrays["):
            slots.append(text)
    return slots


def test_spmv_from_c(tmp_path: Path, tool: Tool) -> None:
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", y="dense")
    out = build_and_run(kernel, "spmv", "spmv_main.c", tmp_path, tool("cc"))
    header = (tmp_path / "k.h").read_text()
    assert "int32_t spmv(llvsparse_tensor **tensors);" in header
    assert "spmv_count" not in header  # a dense output has no assembly phases
    assert documented(header, "A") == CSR_SLOTS  # the layout spmv_main.c fills
    assert documented(header, "x") == ["arrays[0] = values"]
    np.testing.assert_array_equal(out["y"], A_DENSE @ X)


def assert_is_a_plus_b(out: dict[str, list]) -> None:
    """The printed C arrays are A + B in CSR (sorted columns)."""
    expected = sp.csr_matrix(A_DENSE + B_DENSE)
    expected.sort_indices()
    assert out["sizes"] == [4, expected.nnz]
    np.testing.assert_array_equal(out["pos"], expected.indptr)
    np.testing.assert_array_equal(out["crd"], expected.indices)
    np.testing.assert_array_equal(out["vals"], expected.data)


def test_sparse_add_from_c(tmp_path: Path, tool: Tool) -> None:
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", out_format="csr", A="csr", B="csr")
    out = build_and_run(kernel, "add_csr", "add_main.c", tmp_path, tool("cc"))
    header = (tmp_path / "k.h").read_text()
    assert "int32_t add_csr(llvsparse_tensor **tensors);" in header
    assert "add_csr_count" not in header  # a merge is gathered in one pass
    assert "int32_t add_csr_append(llvsparse_tensor **tensors" in header
    for tensor in "CAB":
        assert documented(header, tensor) == CSR_SLOTS
    assert_is_a_plus_b(out)


def test_sparse_add_gathered_from_c(tmp_path: Path, tool: Tool) -> None:
    """The gather phases the header documents, driven from C over three row ranges (one
    of them the empty row): the same arrays as one whole call."""
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", out_format="csr", A="csr", B="csr")
    out = build_and_run(kernel, "add_csr", "add_gather_main.c", tmp_path, tool("cc"))
    assert out["finish"] == [0]
    assert_is_a_plus_b(out)


def test_sparse_add_with_the_other_form_from_c(tmp_path: Path, tool: Tool) -> None:
    """The header's other-form entries, called by the same program (its add_csr renamed
    by the preprocessor): the same arrays."""
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", out_format="csr", A="csr", B="csr")
    out = build_and_run(kernel, "add_csr", "add_main.c", tmp_path, tool("cc"),
                        flags=("-Dadd_csr=add_csr_other_form",))
    header = (tmp_path / "k.h").read_text()
    for entry in ("add_csr_other_form", "add_csr_other_form_append"):
        assert f"int32_t {entry}(llvsparse_tensor **tensors" in header
    assert_is_a_plus_b(out)


def test_header_declares_split_assembly_phases(tmp_path: Path, tool: Tool) -> None:
    kernel = ls.compile("C(i,j) = S(i,j) * U(i,k) * V(j,k)", out_format="csr", S="csr")
    obj, header = kernel.export(tmp_path / "sddmm.o", name="sddmm")
    text = header.read_text()
    for phase in ("setup", "count", "fill", "finish"):
        assert f"int32_t sddmm_{phase}(llvsparse_tensor **tensors" in text
    symbols = subprocess.run([tool("nm"), str(obj)], capture_output=True, text=True,
                             check=True)
    assert all(f" T sddmm_{phase}" in symbols.stdout
               for phase in ("setup", "count", "fill", "finish"))


def test_header_links_from_cpp(tmp_path: Path, tool: Tool) -> None:
    """The header wraps its declarations in extern "C", so C++ finds the C symbols."""
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    obj, _ = kernel.export(tmp_path / "k.o", name="spmv")
    compiler = tool("c++")
    source = tmp_path / "main.cpp"
    source.write_text('#include "k.h"\nint main() {\n'
                      '  int32_t (*volatile entry)(llvsparse_tensor **) = spmv;\n'
                      '  return entry == nullptr;\n}\n')
    subprocess.run([compiler, "-Wall", "-Werror", "-I", str(tmp_path), str(source), str(obj),
                    "-o", str(tmp_path / "prog")], check=True, capture_output=True, text=True)
    assert subprocess.run([str(tmp_path / "prog")], check=False).returncode == 0


@pytest.mark.parametrize(("name", "message"), [
    ("malloc", "would define malloc"), ("free", "would define free"),
    ("posix_memalign", "would define posix_memalign"),
    ("llvsparse_alloc", "would define llvsparse_alloc"),
    ("llvsparse_tensor", "would define llvsparse_tensor"),
    ("int", "C keyword"), ("ké", "not a C identifier"), ("2x", "not a C identifier"),
    ("", "not a C identifier")])
def test_export_refuses_names_that_clash(tmp_path: Path, name: str, message: str) -> None:
    """A kernel named malloc made a library that crashed every program linking it."""
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", out_format="csr", A="csr", B="csr")
    with pytest.raises(ValueError, match=message):
        kernel.export(tmp_path / "k.so", name=name)
    assert list(tmp_path.glob("k.*")) == []


def test_shared_library_leaves_other_files_alone(tmp_path: Path, tool: Tool) -> None:
    tool("cc")  # export links a .so with it
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    (tmp_path / "k.o").write_text("someone else's object file")
    kernel.export(tmp_path / "k.so", name="spmv")
    assert (tmp_path / "k.o").read_text() == "someone else's object file"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == \
        ["k.h", "k.o", "k.so"]
    with pytest.raises(ValueError, match="not '.SO'"):
        kernel.export(tmp_path / "other.SO")
    assert not (tmp_path / "other.h").exists()


FAILING_LINKER = """#!/bin/sh
# writes half a library where -o points, then fails as a linker does
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then printf 'half' > "$2"; fi
  shift
done
echo "ld: cannot find -lnothing" >&2
exit 1
"""


def test_failed_link_leaves_no_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed link left k.h behind, describing a k.so that was never written."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "cc").write_text(FAILING_LINKER)
    (tools / "cc").chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    out = tmp_path / "out"
    out.mkdir()
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    with pytest.raises(RuntimeError, match=r"linking .*k\.so failed: ld: cannot find"):
        kernel.export(out / "k.so", name="spmv")
    assert list(out.iterdir()) == []
    (out / "k.h").write_text("an earlier header")
    (out / "k.so").write_text("an earlier library")
    with pytest.raises(RuntimeError, match="linking"):
        kernel.export(out / "k.so", name="spmv")
    assert sorted(p.name for p in out.iterdir()) == ["k.h", "k.so"]
    assert (out / "k.h").read_text() == "an earlier header"
    assert (out / "k.so").read_text() == "an earlier library"


def test_unwritable_target_leaves_no_header(tmp_path: Path) -> None:
    """The header was written before the object file, which could not be (a folder)."""
    (tmp_path / "k.o").mkdir()
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    with pytest.raises(OSError):
        kernel.export(tmp_path / "k.o", name="spmv")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["k.o"]
    assert list((tmp_path / "k.o").iterdir()) == []
    obj, header = kernel.export(tmp_path / "spmv.o", name="spmv")
    assert obj.read_bytes()[:4] == b"\x7fELF" and "int32_t spmv(" in header.read_text()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == \
        ["k.o", "spmv.h", "spmv.o"]


@pytest.mark.parametrize("ci", [None, "true"])
def test_missing_tool_skips_except_under_ci(tool: Tool, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            ci: str | None) -> None:
    """Without cc the C tests failed with a bare assertion; now they skip with the reason,
    and under CI (CI set) they fail, so CI cannot pass without running them."""
    monkeypatch.setenv("PATH", str(tmp_path))
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
        with pytest.raises(pytest.skip.Exception, match="cc is not on PATH"):
            tool("cc")
    else:
        monkeypatch.setenv("CI", ci)
        with pytest.raises(pytest.fail.Exception, match="under CI a missing tool is a failure"):
            tool("cc")
    (tmp_path / "cc").write_text("#!/bin/sh\n")
    (tmp_path / "cc").chmod(0o755)
    assert tool("cc") == str(tmp_path / "cc")


def test_an_entry_split_range_from_c(tmp_path: Path, tool: Tool) -> None:
    """A kernel whose threads cut rows exports its range entry with the window of
    positions (two windows cut row 1; each adds its part)."""
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", y="dense",
                        schedule="fuse(i, j, f); pos(f, fp, A(i,j)); split(fp, c, t, 3); "
                                 "parallelize(c, cpu_thread, atomics)")
    kernel(A=sp.csr_matrix(A_DENSE), x=X)
    out = build_and_run(kernel, "spmv", "spmv_windows_main.c", tmp_path, tool("cc"))
    header = (tmp_path / "k.h").read_text()
    assert "int64_t window_lo, int64_t window_hi);" in header
    np.testing.assert_array_equal(out["y"], A_DENSE @ X)
