"""Exported kernels called from C: a real compiler, a real link, descriptors filled by hand.

The C programs in tests/c build their own CSR arrays, so these tests check the documented
ABI (header comments, descriptor layout, malloc'd outputs freed by the caller), not the
Python runtime's view of it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls

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


def build_and_run(kernel: ls.Kernel, name: str, source: str, folder: Path,
                  flags: tuple[str, ...] = ()) -> dict[str, list]:
    """Export ``kernel`` as folder/k.o + k.h, link tests/c/``source`` against it (with
    extra compiler ``flags``), run it and parse its ``label: values`` lines."""
    obj, header = kernel.export(folder / "k.o", name=name)
    assert (obj, header) == (folder / "k.o", folder / "k.h")
    compiler = shutil.which("cc")
    assert compiler is not None, "these tests need the system C compiler, cc"
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


def test_spmv_from_c(tmp_path: Path) -> None:
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", y="dense")
    out = build_and_run(kernel, "spmv", "spmv_main.c", tmp_path)
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


def test_sparse_add_from_c(tmp_path: Path) -> None:
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", out_format="csr", A="csr", B="csr")
    out = build_and_run(kernel, "add_csr", "add_main.c", tmp_path)
    header = (tmp_path / "k.h").read_text()
    assert "int32_t add_csr(llvsparse_tensor **tensors);" in header
    assert "add_csr_count" not in header  # a merge is gathered in one pass
    assert "int32_t add_csr_append(llvsparse_tensor **tensors" in header
    for tensor in "CAB":
        assert documented(header, tensor) == CSR_SLOTS
    assert_is_a_plus_b(out)


def test_sparse_add_gathered_from_c(tmp_path: Path) -> None:
    """The gather phases the header documents, driven from C over three row ranges (one
    of them the empty row): the same arrays as one whole call."""
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", out_format="csr", A="csr", B="csr")
    out = build_and_run(kernel, "add_csr", "add_gather_main.c", tmp_path)
    assert out["finish"] == [0]
    assert_is_a_plus_b(out)


def test_sparse_add_with_the_other_form_from_c(tmp_path: Path) -> None:
    """The header's other-form entries, called by the same program (its add_csr renamed
    by the preprocessor): the same arrays."""
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", out_format="csr", A="csr", B="csr")
    out = build_and_run(kernel, "add_csr", "add_main.c", tmp_path,
                        flags=("-Dadd_csr=add_csr_other_form",))
    header = (tmp_path / "k.h").read_text()
    for entry in ("add_csr_other_form", "add_csr_other_form_append"):
        assert f"int32_t {entry}(llvsparse_tensor **tensors" in header
    assert_is_a_plus_b(out)


def test_header_declares_split_assembly_phases(tmp_path: Path) -> None:
    kernel = ls.compile("C(i,j) = S(i,j) * U(i,k) * V(j,k)", out_format="csr", S="csr")
    obj, header = kernel.export(tmp_path / "sddmm.o", name="sddmm")
    text = header.read_text()
    for phase in ("setup", "count", "fill", "finish"):
        assert f"int32_t sddmm_{phase}(llvsparse_tensor **tensors" in text
    symbols = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True)
    assert all(f" T sddmm_{phase}" in symbols.stdout
               for phase in ("setup", "count", "fill", "finish"))


def test_header_links_from_cpp(tmp_path: Path) -> None:
    """The header wraps its declarations in extern "C", so C++ finds the C symbols."""
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    obj, _ = kernel.export(tmp_path / "k.o", name="spmv")
    compiler = shutil.which("c++")
    assert compiler is not None, "this test needs the system C++ compiler, c++"
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


def test_shared_library_leaves_other_files_alone(tmp_path: Path) -> None:
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    (tmp_path / "k.o").write_text("someone else's object file")
    kernel.export(tmp_path / "k.so", name="spmv")
    assert (tmp_path / "k.o").read_text() == "someone else's object file"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == \
        ["k.h", "k.o", "k.so"]
    with pytest.raises(ValueError, match="not '.SO'"):
        kernel.export(tmp_path / "other.SO")
    assert not (tmp_path / "other.h").exists()
