"""Every level array and the values must have the length their YAML declarations give.

The walk bounds-checks only the reads it makes, so an array that no read reaches was
accepted at any length: an all-zero DCSR whose inner pos was [] instead of [0], an
empty hash tensor one value short, a CSR whose crd ran past pos[-1]. Each case here
changes one array's length where no read notices, and must be refused.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llvsparse.formats import registry

import llvsparse as ls

M = np.array([[1.0, 0, 2, 0], [0, 0, 3, 0], [4, 0, 0, 5], [0, 6, 0, 0]])
# Its last diagonal (offset 2) holds no entry in the last two rows: DIA's last value
# is a hole that no read reaches.
UPPER = np.array([[1.0, 0, 2, 0], [0, 3, 0, 4], [0, 0, 5, 0], [0, 0, 0, 6]])
ZERO = np.zeros((4, 4))


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """Plugin registrations and compiled kernels stay inside the test."""
    monkeypatch.setattr(registry, "_user", {})
    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path / "cache"))


def _longer(array: np.ndarray) -> np.ndarray:
    return np.append(array, array[-1:] if len(array) else [0]).astype(array.dtype)


def _shorter(array: np.ndarray) -> np.ndarray:
    return np.array(array[:-1])


def _with(tensor: ls.Tensor, level: int | None, name: str, change) -> ls.Tensor:
    """``tensor`` rebuilt by the constructor, one array (or the values) changed; a shared
    array is changed in every level that holds it."""
    arrays = [dict(a) for a in tensor.level_arrays]
    values = tensor.values
    if level is None:
        values = change(values)
    else:
        old = arrays[level][name]
        new = change(old)
        for held in arrays:
            for key, array in held.items():
                if array is old:
                    held[key] = new
    return ls.Tensor(tensor.shape, tensor.format, tensor.dtype, tensor.index_dtype,
                     list(tensor.level_extents), arrays, [dict(p) for p in tensor.params],
                     values)


def _spmv(tensor: ls.Tensor) -> np.ndarray:
    x = np.arange(1.0, tensor.shape[1] + 1)
    return ls.evaluate("y(i) = A(i,j) * x(j)", A=tensor, x=x).to_numpy()


CASES = [  # format, matrix, level (None: the values), array, change
    ("dense", M, None, "values", _longer),
    ("csr", M, 1, "pos", _longer),
    ("csr", M, 1, "crd", _longer),
    ("dcsr", ZERO, 1, "pos", _shorter),  # [] instead of [0]
    ("dcsr", M, 0, "crd", _longer),
    ("coo", M, 1, "crd", _longer),  # singleton
    ("coo", M, None, "values", _longer),
    (ls.Format(["dense", "hashed"]), ZERO, None, "values", _shorter),  # W buckets per row
    ("hash", M, 1, "crd", _longer),
    ("hash", M, 1, "key", _longer),  # a table no locate reaches the end of
    ("hash", M, 1, "at", _shorter),
    ("dia", UPPER, None, "values", _shorter),  # range and offset
    ("dia", M, None, "values", _longer),
    ("ell", M, 2, "crd", _longer),
    ("ell-rows", M, None, "values", _longer),
    ("bcsr2x2", M, 1, "pos", _longer),
    ("bcsr2x2", M, None, "values", _longer),
]


@pytest.mark.parametrize("fmt, matrix, level, name, change", CASES)
def test_an_array_of_the_wrong_length_is_refused(fmt, matrix, level, name, change):
    tensor = ls.Tensor.from_numpy(matrix, format=fmt)
    valid = _with(tensor, level, name, lambda a: a.copy())  # unsealed: validated in full
    np.testing.assert_allclose(_spmv(valid), matrix @ np.arange(1.0, 5))
    corrupt = _with(tensor, level, name, change)
    with pytest.raises(ls.CorruptTensorError, match="declared length|values has"):
        _spmv(corrupt)


def test_a_plugin_levels_declared_lengths_are_checked(tmp_path):
    """A plugin level's lengths come from its own declarations, not from its name."""
    text = (Path(registry.__file__).parent / "compressed.yaml").read_text()
    path = tmp_path / "segments.yaml"
    path.write_text(text.replace("name: compressed", "name: segments"))
    ls.register_level_format(path)
    fmt = ls.Format([ls.Level("dense", 0), ls.Level("segments", 1)])
    tensor = ls.Tensor.from_numpy(M, format=fmt)
    np.testing.assert_allclose(_spmv(_with(tensor, 1, "crd", lambda a: a.copy())),
                               M @ np.arange(1.0, 5))
    for name, change in (("crd", _longer), ("pos", _longer), ("pos", _shorter)):
        with pytest.raises(ls.CorruptTensorError, match=f"array '{name}' has .* declared"):
            _spmv(_with(tensor, 1, name, change))


@pytest.mark.parametrize("fmt", ["csr", "dcsr", "coo", "hash", "dia", "ell", "bcsr2x2",
                                 "csf"])
def test_computed_and_converted_tensors_keep_their_declared_lengths(fmt):
    """Kernels' outputs and conversions are validated like any input: they are not
    refused, whether empty or not."""
    for matrix in (M, ZERO):
        A = ls.Tensor.from_numpy(matrix, format=fmt)
        for tensor in (A, A.asformat("csr").asformat(fmt)):
            fresh = _with(tensor, None, "values", lambda a: a.copy())
            np.testing.assert_allclose(_spmv(fresh), matrix @ np.arange(1.0, 5))
        if fmt not in ("dia", "ell", "bcsr2x2"):  # outputs: assembled, unblocked levels
            doubled = ls.evaluate("Z(i,j) = A(i,j) * 2", A=A, out_format=fmt)
            fresh = _with(doubled, None, "values", lambda a: a.copy())
            np.testing.assert_allclose(_spmv(fresh), 2 * matrix @ np.arange(1.0, 5))
