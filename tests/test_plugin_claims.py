"""Plugin levels are not trusted unchecked: tensors packed through them are walked before
their first checked call, their bodies are type-checked when loaded, and their locate is
cross-checked against their iteration when registered or checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from llvsparse.formats import registry
from llvsparse.formats.loader import FormatFileError, load_level_text
from plugin_text import without_subsection

import llvsparse as ls

FORMATS = Path(registry.__file__).parent
B = np.array([[5, 1, 0], [0, 0, 0], [8, 0, 4]], dtype=float)


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """User registrations and compiled kernels stay inside the test."""
    monkeypatch.setattr(registry, "_user", {})
    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path / "cache"))


def _plugin(tmp_path: Path, shipped: str, name: str, *edits: tuple[str, str]) -> Path:
    text = without_subsection((FORMATS / f"{shipped}.yaml").read_text()).replace(
        f"name: {shipped}", f"name: {name}")
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


# -- tensors packed through a plugin are walked before their first checked call ---------
def test_plugin_packed_tensor_is_validated_not_trusted(tmp_path):
    """A plugin whose assembly stores the wrong coordinate was marked valid as packed, and
    SpMV read x[3] past the end of x (a wrong row sum, no error). (Its iteration is
    spelled differently from compressed's, so packing runs its assembly rather than
    scipy's, which a level iterated exactly as compressed is would get: layouts.py.)"""
    ls.register_level_format(_plugin(tmp_path, "compressed", "shifted",
                                     ("append_coord: crd[p] = i", "append_coord: crd[p] = i + 1"),
                                     ("pos_access: return crd[p], True",
                                      "pos_access: return crd[p] + 0, True")))
    A = ls.Tensor.from_numpy(B, format=ls.Format([ls.Level("dense", 0), ls.Level("shifted", 1)]))
    with pytest.raises(ls.CorruptTensorError, match="coordinate 3 is outside"):
        A.validate()
    with pytest.raises(ls.CorruptTensorError, match="coordinate 3 is outside"):
        ls.evaluate("y(i) = A(i,j) * x(j)", A=A, x=np.ones(3))


def test_honest_plugin_packed_tensor_passes_its_walk(tmp_path):
    ls.register_level_format(_plugin(tmp_path, "compressed", "mycompressed"))
    fmt = ls.Format([ls.Level("dense", 0), ls.Level("mycompressed", 1)])
    A = ls.Tensor.from_numpy(B, format=fmt)
    y = ls.evaluate("y(i) = A(i,j) * x(j)", A=A, x=np.arange(1.0, 4.0)).to_numpy()
    np.testing.assert_allclose(y, B @ np.arange(1.0, 4.0))


def test_shipped_formats_keep_the_packed_are_valid_fast_path():
    A = ls.Tensor.from_numpy(B, format="csr")
    assert A.__dict__.get("_validated") is not None and A._validated == A._sealed_state()


# -- the loader infers index and condition types -----------------------------------------
COMPRESSED = (FORMATS / "compressed.yaml").read_text()
HASHED = (FORMATS / "hashed.yaml").read_text()


@pytest.mark.parametrize("text, old, new, fragment", [pytest.param(*case, id=case[2]) for case in [
    (COMPRESSED, "return crd[p], True", "return crd[p], p + 1",
     "found (returned by pos_access) must be a condition, but `p + 1` is an index"),
    (COMPRESSED, "return pos[p_parent], pos[p_parent + 1]", "return True, pos[p_parent + 1]",
     "begin (returned by pos_bounds) must be an index, but `True` is a condition"),
    (COMPRESSED, "return crd[p], True", "return crd[p] == 0, True",
     "the position (returned by pos_access) must be an index"),
    (HASHED, "while crd[q] != i and crd[q] != -1 and n < W:", "while n:",
     "the test of while must be a condition, but `n` is an index"),
    (HASHED, "n = n + 1", "n = n < 1", "local 'n' holds an index but is assigned a condition"),
    (HASHED, "q = base + i % W", "q = base + (i < W)", "an operand of arithmetic must be an index"),
    (HASHED, "size: return parent_size * W", "size: return parent_size > W",
     "the size (returned by size) must be an index"),
    (HASHED, "n < W:", "n < W or q:", "an operand of and/or must be a condition"),
    (HASHED, "crd[p] = i\n", "crd[p] = i == 0\n",
     "a value stored into crd must be an index"),
    (COMPRESSED, "length: parent_size + 1", "length: parent_size > 1",
     "the value must be an index"),
]])
def test_type_mismatches_are_refused_at_their_line(text, old, new, fragment):
    assert old in text
    edited = text.replace(old, new)
    line = next(n for n, row in enumerate(edited.splitlines(), 1) if new.strip() in row)
    with pytest.raises(FormatFileError) as info:
        load_level_text(edited, "plugin.yaml")
    assert str(info.value).startswith(f"plugin.yaml:{line}: "), str(info.value)
    assert fragment in str(info.value)


def test_condition_locals_and_conditional_conditions_compile(tmp_path):
    """A local holding a condition, and a conditional expression of two conditions,
    are conditions in the compiled code too (the found flag of locate)."""
    path = _plugin(tmp_path, "hashed", "myhash", (
        "    return q, crd[q] == i",
        "    hit = crd[q] == i\n    found = hit if n < W else False\n    return q, found"), (
        "  pos_access: return crd[p], crd[p] != -1",
        "  pos_access: |\n    used = crd[p] != -1\n    return crd[p], used"))
    ls.register_level_format(path)
    fmt = ls.Format([ls.Level("dense", 0), ls.Level("myhash", 1)])
    A = ls.Tensor.from_numpy(B, format=fmt)
    x = np.arange(1.0, 4.0)
    y = ls.evaluate("y(i) = A(i,j) * x(j)", A=A, x=x).to_numpy()
    np.testing.assert_allclose(y, B @ x)
    C = ls.Tensor.from_numpy(np.ones((3, 3)), format="csr")  # iterated; A located into
    z = ls.evaluate("z(i,j) = C(i,j) * A(i,j)", A=A, C=C)
    np.testing.assert_allclose(z.to_numpy(), B)


# -- locate is cross-checked against iteration -------------------------------------------
MIRRORED = ("  locate: return p_parent * N + i, True",
            "  locate: return p_parent * N + (N - 1 - i), True")
ALWAYS_FOUND = ("    return q, crd[q] == i", "    return q, True")


@pytest.mark.parametrize("shipped, edit, fragment", [
    ("dense", MIRRORED, "coordinate 0 is iterated at position 0 but locate finds it at 6"),
    ("hashed", ALWAYS_FOUND, "locate finds coordinate 0, which iteration never visits"),
])
def test_registration_refuses_locate_that_disagrees_with_iteration(tmp_path, shipped, edit,
                                                                   fragment):
    path = _plugin(tmp_path, shipped, "liar", edit)
    with pytest.raises(FormatFileError, match=fragment) as info:
        ls.register_level_format(path)
    assert str(info.value).startswith(f"{path}:")
    assert "liar" not in ls.level_formats()


def test_formats_check_cross_checks_locate(tmp_path):
    bad = _plugin(tmp_path, "hashed", "liar", ALWAYS_FOUND)
    good = FORMATS / "hashed.yaml"
    done = subprocess.run([sys.executable, "-m", "llvsparse", "formats", "--check", str(bad),
                           str(good)], capture_output=True, text=True, timeout=300,
                          check=False, cwd=tmp_path)
    assert done.returncode == 1
    assert f"{good}: ok (hashed)" in done.stdout
    assert f"{bad}:22: locate disagrees with iteration" in done.stderr, done.stderr


def test_compact_claim_with_unused_positions_is_refused(tmp_path):
    """A hashed copy claiming compact positions: kernels would take its empty buckets
    (crd -1) as entries and read x[-1]."""
    ls.register_level_format(_plugin(tmp_path, "hashed", "packedhash",
                                     ("  compact: false", "  compact: true")))
    A = ls.Tensor.from_numpy(B, format=ls.Format([ls.Level("dense", 0),
                                                  ls.Level("packedhash", 1)]))
    with pytest.raises(ls.CorruptTensorError, match="claims compact positions but position"):
        ls.evaluate("y(i) = A(i,j) * x(j)", A=A, x=np.ones(3))


def test_registration_refuses_a_level_whose_packed_sample_is_out_of_range(tmp_path):
    path = _plugin(tmp_path, "hashed", "farhash",
                   ("            crd[p] = i\n", "            crd[p] = i + 100\n"))
    with pytest.raises(FormatFileError, match="cannot check locate against iteration on a "
                                              "sample .* gives coordinate 10[0-9], outside"):
        ls.register_level_format(path)
    assert "farhash" not in ls.level_formats()


# -- outputs a kernel assembles through a plugin are validated before they are trusted ---
NO_PREFIX_SUM = ("""    append_finalize: |
      total = pos[0]
      for q in range(1, parent_size + 1):
          total = total + pos[q]
          pos[q] = total
""", """    append_finalize: |
      pos[0] = 0
""")
ASSEMBLE_INTO_PLUGIN = """
import sys
import numpy as np, scipy.sparse as sp, llvsparse as ls
ls.register_level_format(sys.argv[1])
M = sp.random(300, 300, density=0.05, format="csr", random_state=0)
A = ls.Tensor.from_scipy(M, format="csr")
fmt = ls.Format([ls.Level("dense", 0), ls.Level(sys.argv[2], 1)])
C = ls.evaluate("C(i,j) = A(i,j) * 2", out_format=fmt, A=A)
for unpack in (C.to_numpy, C.to_scipy, C.to_coo, lambda: C.asformat("csc")):
    try:
        unpack()
    except ls.CorruptTensorError as error:
        print("refused:", error)
    else:
        print("accepted")
"""


def _assemble_into_plugin(tmp_path: Path, plugin: Path, name: str) -> list[str]:
    """The result of a kernel assembling into ``plugin``, unpacked four ways in a
    subprocess (scipy reading a corrupt pos segfaulted the process)."""
    done = subprocess.run([sys.executable, "-c", ASSEMBLE_INTO_PLUGIN, str(plugin), name],
                          capture_output=True, text=True, timeout=300, check=False,
                          cwd=tmp_path)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-2000:])
    return done.stdout.splitlines()


def test_output_of_a_plugin_without_its_prefix_sum_is_refused_not_handed_to_scipy(tmp_path):
    """A compressed copy whose append_finalize lacks its prefix sum registers fine; the
    pos it assembles (per-row counts) went to scipy unchecked: SIGSEGV or SIGABRT."""
    path = _plugin(tmp_path, "compressed", "noprefix", NO_PREFIX_SUM)
    lines = _assemble_into_plugin(tmp_path, path, "noprefix")
    assert len(lines) == 4 and all(line.startswith("refused:") for line in lines), lines
    assert all("level 1 (noprefix)" in line and "plugin level format(s) 'noprefix'" in line
               for line in lines), lines


def test_output_of_a_plugin_yielding_a_negative_coordinate_is_refused(tmp_path):
    """A plugin iterating coordinate -1 reached numpy's raw 'invalid entry in coordinates
    array' from to_numpy."""
    ls.register_level_format(_plugin(tmp_path, "compressed", "minusone",
                                     ("pos_access: return crd[p], True",
                                      "pos_access: return crd[p] - 1, True")))
    A = ls.Tensor.from_numpy(B, format="csr")
    C = ls.evaluate("C(i,j) = A(i,j) * 2", A=A,
                    out_format=ls.Format([ls.Level("dense", 0), ls.Level("minusone", 1)]))
    for unpack in (C.to_numpy, C.to_scipy, C.to_coo):
        with pytest.raises(ls.CorruptTensorError,
                           match=r"level 1 \(minusone\): coordinate -1 is outside .*plugin"):
            unpack()


def test_output_of_an_honest_plugin_unpacks(tmp_path):
    path = _plugin(tmp_path, "compressed", "honest")
    lines = _assemble_into_plugin(tmp_path, path, "honest")
    assert lines == ["accepted"] * 4, lines
    ls.register_level_format(path)
    A = ls.Tensor.from_numpy(B, format="csr")
    C = ls.evaluate("C(i,j) = A(i,j) * 3", A=A,
                    out_format=ls.Format([ls.Level("dense", 0), ls.Level("honest", 1)]))
    np.testing.assert_array_equal(C.to_numpy(), B * 3)
    np.testing.assert_array_equal(C.to_scipy().toarray(), B * 3)
