"""The strict Matrix Market reader: every valid variant as scipy reads it, every damaged
file a ValueError naming the file and line (scipy's own reader crashed the process on
some of these, and read others as if the junk were not there)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import scipy.io as sio
import scipy.sparse as sp

from llvsparse.frontend.tensor import Tensor
from llvsparse.tensors.io import read, write

BANNER = b"%%MatrixMarket matrix coordinate real general\n"


@pytest.mark.parametrize(("content", "match"), [
    (BANNER + b"1 1 1\n1 1 1e", r"line 3: could not convert string '1e'"),
    (BANNER + b"1 1 1\n1 1 1x", r"line 3: could not convert string '1x'"),
    (BANNER + b"1 1 1\n1 1 1x\n", r"line 3: could not convert string '1x'"),
    (BANNER + b"2 2 2\n1 1 1\n1 1 1\x00\n", r"line 4: byte b'\\x00' is not text"),
    (b"%%MatrixMarket matrix array real general\n1 1\n4\x96", r"line 3: byte b'\\x96'"),
    (b"%%MatrixMarket matrix coordinate pattern general\n1 1 1\n1 1x", r"line 3"),
    (b"%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 1.5\n",
     r"line 3: could not convert string '1.5' to int64"),
    (b"%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 99999999999999999999\n",
     r"line 3"),
    (BANNER + b"3 3 2\n1 1 1\n2 2\n", r"line 4: expected 3 fields, found 2"),
    (BANNER + b"3 3 1\n1 1 1 1\n", r"line 3"),
    (BANNER + b"3 3 1\n% a comment among the data\n1 1 1\n", r"line 3"),
    (BANNER + b"3 3 1\n1 1 1\n2 2 2\n", r"declares 1 entries but the file holds 2"),
    (BANNER + b"3 3 1000000000000\n1 1 1\n", r"declares 1000000000000 entries"),
    (BANNER + b"3 3 1\n0 1 1\n", r"entry 1 has row 0, outside 1\.\.3"),
    (BANNER + b"3 3 1\n1 4 1\n", r"entry 1 has column 4, outside 1\.\.3"),
    (BANNER + b"3 -3 1\n1 1 1\n", r"line 2: the size line"),
    (BANNER + b"3 3\n1 1 1\n", r"line 2: the size line"),
    (BANNER, r"no size line"),
    (b"", r"line 1: missing the banner"),
    (b"%%MatrixMarket matrix coordinate real\n1 1 0\n", r"missing the banner"),
    (b"%%MatrixMarket vector coordinate real general\n1 1 0\n", r"only 'matrix'"),
    (b"%%MatrixMarket matrix sparse real general\n1 1 0\n", r"'sparse' is neither"),
    (b"%%MatrixMarket matrix array pattern general\n1 1\n", r"pattern only with"),
    (b"%%MatrixMarket matrix coordinate real diagonal\n1 1 0\n", r"symmetry 'diagonal'"),
    (b"%%MatrixMarket matrix coordinate real symmetric\n2 3 0\n", r"must be square"),
    (b"%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n1 1 5\n",
     r"stores no diagonal entries"),
    (b"%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n", r"declares 4 entries"),
    (b"%%MatrixMarket matrix array real general\n1 2\n1 2\n", r"line 3: expected 1 fields, found 2"),
])
@pytest.mark.parametrize("gz", [False, True])
def test_damaged_file_raises_naming_it(tmp_path, content, match, gz):
    path = tmp_path / ("bad.mtx.gz" if gz else "bad.mtx")
    path.write_bytes(gzip.compress(content) if gz else content)
    with pytest.raises(ValueError, match=match) as info:
        read(path)
    assert str(path) in str(info.value)


def test_every_truncation_raises_or_reads(tmp_path):
    """Cut anywhere, a file reads as the valid file it became or raises ValueError."""
    matrix = sp.random(9, 8, density=0.4, format="coo", random_state=4)
    full = tmp_path / "full.mtx"
    sio.mmwrite(str(full), matrix)
    content = full.read_bytes()
    cut = tmp_path / "cut.mtx"
    outcomes = set()
    for end in range(len(content)):
        cut.write_bytes(content[:end])
        try:
            tensor = read(cut)
        except ValueError as err:
            assert "cut.mtx" in str(err)
            outcomes.add("raised")
            continue
        coords, values = tensor.to_coo()
        expected = sp.coo_matrix((values, tuple(coords)), shape=tensor.shape).toarray()
        np.testing.assert_array_equal(tensor.to_numpy(), expected)
        outcomes.add("read")
    assert outcomes == {"raised", "read"}  # a cut inside the last value still parses


def test_directory_named_like_a_file(tmp_path):
    (tmp_path / "d.mtx").mkdir()
    with pytest.raises(ValueError, match="is a directory"):
        read(tmp_path / "d.mtx")


@pytest.mark.parametrize("symmetry", ["general", "symmetric", "skew-symmetric"])
@pytest.mark.parametrize("field", ["real", "integer"])
def test_array_files_match_scipy(tmp_path, symmetry, field):
    rng = np.random.default_rng(7)
    dense = rng.integers(-3, 4, (5, 5)).astype(np.float64 if field == "real" else np.int64)
    if symmetry == "symmetric":
        dense = dense + dense.T
    elif symmetry == "skew-symmetric":
        dense = dense - dense.T
    path = tmp_path / "a.mtx"
    sio.mmwrite(str(path), dense, field=field, symmetry=symmetry)
    assert symmetry in path.read_text().splitlines()[0]
    np.testing.assert_array_equal(read(path).to_numpy(), sio.mmread(str(path)))


def test_layout_variants_match_scipy(tmp_path):
    """CRLF line ends, long comment blocks, blank lines, mixed-case banner words."""
    matrix = sp.random(6, 7, density=0.5, format="coo", random_state=2)
    path = tmp_path / "v.mtx"
    sio.mmwrite(str(path), matrix)
    lines = path.read_text().splitlines()
    lines[0] = lines[0].replace("coordinate real", "Coordinate REAL")
    variant = [lines[0]] + ["% comment"] * 100 + ["", "  "] + lines[1:3] + [""] + lines[3:]
    path.write_bytes("\r\n".join(variant).encode() + b"\r\n")
    np.testing.assert_array_equal(read(path).to_numpy(), matrix.toarray())


@pytest.mark.parametrize("dtype", ["int64", "int32", "float64", "float32", "bool"])
def test_empty_matrix_keeps_its_field(tmp_path, dtype):
    tensor = Tensor.from_coo(np.zeros((2, 0), np.int64), np.zeros(0, dtype), (3, 4))
    path = tmp_path / "e.mtx"
    write(tensor, path)
    field = {"bool": "pattern", "float64": "real", "float32": "real"}.get(dtype, "integer")
    assert path.read_text().splitlines()[0].split()[3] == field
    back = read(path)
    assert back.shape == (3, 4) and back.nnz == 0
    assert back.dtype == (np.int64 if field == "integer" else np.float64)
    assert sio.mmread(str(path)).shape == (3, 4)
