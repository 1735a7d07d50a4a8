"""Plugin levels that differ from the shipped ones in ways the compiler must not assume
away: a reloaded definition, and an array-free level whose storage is not its extent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from llvsparse.formats import registry
from plugin_text import without_subsection

import llvsparse as ls

DENSE_YAML = (Path(registry.__file__).parent / "dense.yaml").read_text()


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """User registrations and compiled kernels stay inside the test."""
    monkeypatch.setattr(registry, "_user", {})
    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path / "cache"))


def test_reloaded_plugin_is_not_served_old_code(tmp_path):
    """Re-registering an edited file (the README's way to work on a plugin) used to keep
    the conversion and kernels compiled from the first definition."""
    path = tmp_path / "mydense.yaml"
    path.write_text(DENSE_YAML.replace("name: dense", "name: mydense"))
    ls.register_level_format(path)
    x, z = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 0.0])
    before = ls.Tensor.from_numpy(x, format=ls.Format([ls.Level("mydense", 0)]))
    assert before.values.tolist() == [1.0, 2.0, 3.0]
    reversed_positions = DENSE_YAML.replace("name: dense", "name: mydense").replace(
        "p_parent * N + i, True", "p_parent * N + (N - 1 - i), True")
    assert reversed_positions.count("(N - 1 - i)") >= 2  # coord_access and locate
    path.write_text(reversed_positions)
    ls.register_level_format(path)
    fmt = ls.Format([ls.Level("mydense", 0)])
    after = ls.Tensor.from_numpy(x, format=fmt)
    assert after.values.tolist() == [3.0, 2.0, 1.0]
    np.testing.assert_array_equal(after.to_numpy(), x)
    dot = ls.compile("a = x(i) * z(i)", x=fmt)
    assert dot(x=after, z=z).to_numpy() == 1.0
    with pytest.raises(ls.FormatError, match="earlier definition of level format 'mydense'"):
        dot(x=before, z=z)  # laid out by the first definition: its 1.0 is read as 3.0


def test_a_kernel_compiled_before_a_reload_compiles_again(tmp_path):
    """A Kernel object kept across a re-registration kept its machine code, which read
    tensors packed by the new definition with the old layout."""
    path = tmp_path / "mydense.yaml"
    path.write_text(DENSE_YAML.replace("name: dense", "name: mydense"))
    ls.register_level_format(path)
    fmt = ls.Format([ls.Level("mydense", 0)])
    dot = ls.compile("a = x(i) * z(i)", x=fmt)
    x, z = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 0.0])
    assert dot(x=ls.Tensor.from_numpy(x, format=fmt), z=z).to_numpy() == 1.0
    path.write_text(DENSE_YAML.replace("name: dense", "name: mydense").replace(
        "p_parent * N + i, True", "p_parent * N + (N - 1 - i), True"))
    ls.register_level_format(path)
    assert dot(x=ls.Tensor.from_numpy(x, format=fmt), z=z).to_numpy() == 1.0


PADDED_YAML = """\
name: padded
doc: dense rows stored with a stride of W >= N positions
params:
  W: {type: index, packed: "N + 2"}
arrays: {}
properties:
  full: true
  ordered: [true, configurable]
  unique: [true, configurable]
  branchless: false
  compact: false
capabilities:
  iterate: coordinate
  coord_bounds: return 0, N
  coord_access: return p_parent * W + i, True
  locate: return p_parent * W + i, True
  insert:
    size: return parent_size * W
    insert_coord: pass
"""


@pytest.mark.parametrize("width", [None, 5])
def test_array_free_level_with_a_parameter(tmp_path, width):
    """Its parameter was dropped from kernel outputs (rows summed into row 0), and its
    values were sized as if it held N positions per row, not W."""
    path = tmp_path / "padded.yaml"
    path.write_text(PADDED_YAML)
    ls.register_level_format(path)
    params = {} if width is None else {"W": width}
    fmt = ls.Format([ls.Level("dense", 0), ls.Level("padded", 1, params=params)])
    rng = np.random.default_rng(5)
    M = rng.random((4, 3))
    A = ls.Tensor.from_numpy(M, format=fmt)
    assert A.params[1]["W"] == (width or 5)
    assert len(A.values) == 4 * (width or 5)
    np.testing.assert_array_equal(A.to_numpy(), M)
    x = rng.random(3)
    np.testing.assert_allclose(ls.evaluate("y(i) = A(i,j) * x(j)", A=A, x=x).to_numpy(),
                               M @ x, rtol=1e-14)
    doubled = ls.evaluate("C(i,j) = A(i,j) * 2", A=A, out_format=fmt)
    np.testing.assert_array_equal(doubled.to_numpy(), 2 * M)
    total = ls.compile("C(i,j) = A(i,j) + B(i,j)", A=fmt, B="dense", out_format=fmt)
    np.testing.assert_array_equal(total(A=A, B=M).to_numpy(), 2 * M)


COMPRESSED_YAML = without_subsection(
    (Path(registry.__file__).parent / "compressed.yaml").read_text())


def _edited(text: str, *changes: tuple[str, str]) -> str:
    """The shipped compressed level with ``changes`` made (each must apply once)."""
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


# Coordinates stored times S - 1: S = 1 divides by zero.
SCALED_YAML = _edited(COMPRESSED_YAML, ("name: compressed", "name: scaled"),
                      ("params: {}", "params:\n  S: {type: index}"),
                      ("pos_access: return crd[p], True",
                       "pos_access: return crd[p] // (S - 1), True"),
                      ("append_coord: crd[p] = i", "append_coord: crd[p] = i * (S - 1)"))

# Runs in a child process: a kernel that divides by zero used to die of SIGFPE.
UNCHECKED_ZERO_DIVISOR = """\
import sys
import numpy as np
import llvsparse as ls
ls.register_level_format(sys.argv[1])
M = np.array([[1.0, 0, 2], [0, 0, 3], [4, 0, 0]])
A = ls.Tensor.from_numpy(M, format=ls.Format([ls.Level("dense", 0),
                                              ls.Level("scaled", 1, params={"S": 3})]))
bad = ls.Format([ls.Level("dense", 0), ls.Level("scaled", 1, params={"S": 1})])
corrupt = ls.Tensor(A.shape, bad, A.dtype, A.index_dtype, A.level_extents,
                    A.level_arrays, [{}, {"S": 1}], A.values)
y = ls.compile("y(i) = A(i,j) * x(j)", A=bad)(A=corrupt, x=np.ones(3), check=False)
print(y.to_numpy().tolist())
"""


def test_a_runtime_zero_divisor_is_refused_when_checked_and_never_kills_the_process(
        tmp_path):
    """A division in a level function by a value that is zero only at run time (here a
    parameter) trapped in the kernel. Checked calls now refuse the tensor; unchecked ones
    get numpy's integer result for a zero divisor (0) instead of a hardware fault."""
    path = tmp_path / "scaled.yaml"
    path.write_text(SCALED_YAML)
    ls.register_level_format(path)
    M = np.array([[1.0, 0, 2], [0, 0, 3], [4, 0, 0]])
    x = np.array([1.0, 2.0, 3.0])
    fmt = ls.Format([ls.Level("dense", 0), ls.Level("scaled", 1, params={"S": 3})])
    A = ls.Tensor.from_numpy(M, format=fmt)
    assert A.level_arrays[1]["crd"].tolist() == [0, 4, 4, 0]  # coordinates times 2
    np.testing.assert_array_equal(ls.evaluate("y(i) = A(i,j) * x(j)", A=A, x=x).to_numpy(),
                                  M @ x)
    bad = ls.Format([ls.Level("dense", 0), ls.Level("scaled", 1, params={"S": 1})])
    corrupt = ls.Tensor(A.shape, bad, A.dtype, A.index_dtype, A.level_extents,
                        A.level_arrays, [{}, {"S": 1}], A.values)
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A=bad)
    with pytest.raises(ls.CorruptTensorError, match="divides by zero"):
        kernel(A=corrupt, x=x)
    child = subprocess.run([sys.executable, "-c", UNCHECKED_ZERO_DIVISOR, str(path)],
                           check=False, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, LLVSPARSE_CACHE_DIR=str(tmp_path / "c")))
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["[3.0,", "3.0,", "4.0]"]  # every column read as 0


# An append one slot too early: crd[-1] at p = 0.
NEGATIVE_STORE_YAML = _edited(COMPRESSED_YAML, ("name: compressed", "name: negstore"),
                              ("append_coord: crd[p] = i", "append_coord: crd[p - 1] = i"))

# Runs in a child process: the store in front of crd corrupted the heap.
NEGATIVE_STORE = """\
import sys
import numpy as np
import llvsparse as ls
ls.register_level_format(sys.argv[1])
fmt = ls.Format([ls.Level("dense", 0), ls.Level("negstore", 1)])
kernel = ls.compile("C(i,j) = A(i,j) * 2", A="csr", out_format=fmt)
for attempt in range(3):
    try:
        kernel(A=ls.Tensor.from_numpy(np.eye(3), format="csr"))
    except ls.KernelRuntimeError as error:
        print(error)
"""


def test_a_plugin_store_at_a_negative_position_fails_the_call(tmp_path):
    """An append function writing crd[p - 1] stored in front of the array at p = 0 (a
    heap corruption); the kernel now returns a status that names the cause."""
    path = tmp_path / "negstore.yaml"
    path.write_text(NEGATIVE_STORE_YAML)
    child = subprocess.run([sys.executable, "-c", NEGATIVE_STORE, str(path)], check=False,
                           capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, LLVSPARSE_CACHE_DIR=str(tmp_path / "c")))
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    assert len(lines) == 3 and all("negative position" in line for line in lines)


# A sorted level whose positions may be empty slots (-1), which pos_access reports as
# not found.
GAPPED_YAML = _edited(COMPRESSED_YAML, ("name: compressed", "name: gapped"),
                      ("pos_access: return crd[p], True",
                       "pos_access: return crd[p], crd[p] >= 0"),
                      ("compact: true", "compact: false"))


def test_no_search_over_positions_that_may_be_empty(tmp_path):
    """The galloping merge searched a level whose positions may hold no coordinate: an
    empty slot (-1) read as a small coordinate sent the search past the match at 12.
    A level that may not find at a position is stepped through, never searched."""
    path = tmp_path / "gapped.yaml"
    path.write_text(GAPPED_YAML)
    ls.register_level_format(path)
    fmt = ls.Format([ls.Level("gapped", 0)])
    crd = np.array([0, 3, 12, -1, -1, -1, 20], np.int32)
    x = ls.Tensor((24,), fmt, "float64", "int32", [24],
                  [{"pos": np.array([0, len(crd)], np.int32), "crd": crd}], [{}],
                  np.arange(1.0, len(crd) + 1))
    dense_x = x.to_numpy()
    z = np.zeros(24)
    z[12] = 2.0
    kernel = ls.compile("a = x(i) * z(i)", x=fmt, z="csf")
    operands = {"x": x, "z": ls.Tensor.from_numpy(z, format="csf")}
    for _ in range(3):  # the binding's second call runs the other form
        assert kernel(**operands).to_numpy() == dense_x @ z == 6.0
