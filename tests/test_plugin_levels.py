"""Plugin levels that differ from the shipped ones in ways the compiler must not assume
away: a reloaded definition, and an array-free level whose storage is not its extent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llvsparse.formats import registry

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
