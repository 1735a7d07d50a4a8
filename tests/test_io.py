"""llvsparse.tensors.io against scipy.io and hand-parsed files: what is read is what was written."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.io as sio
import scipy.sparse as sp

import llvsparse as ls
from llvsparse.tensors.io import read, write

DATA = Path("/work/shared/data")
RNG_SEED = 20240611


def _random_matrix(field: str, symmetric: bool, seed: int = 0) -> sp.coo_matrix:
    """A small sparse matrix whose values suit a Matrix Market field."""
    rng = np.random.default_rng(seed)
    m = sp.random(7, 7, density=0.3, format="coo", random_state=rng)
    if field == "integer":
        m.data = rng.integers(-50, 50, size=m.nnz).astype(np.int64)
    if symmetric:
        m = (m + m.T).tocoo()
    if field == "pattern":
        m.data = np.ones(m.nnz)
    return m


def _first_line(path: Path) -> str:
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as fh:
        return fh.readline()


def _mmwrite(path: Path, matrix, **kwargs) -> None:
    """scipy.io.mmwrite to ``path``, gzipped when the name ends in .gz."""
    if path.suffix == ".gz":
        with gzip.open(path, "wb") as fh:
            sio.mmwrite(fh, matrix, **kwargs)
    else:
        sio.mmwrite(str(path), matrix, **kwargs)


# -- Matrix Market ---------------------------------------------------------------------------
@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("field", ["real", "integer", "pattern"])
def test_mtx_read_matches_scipy(tmp_path, field, symmetric, gz):
    matrix = _random_matrix(field, symmetric)
    path = tmp_path / ("m.mtx.gz" if gz else "m.mtx")
    _mmwrite(path, matrix, field=field, symmetry="symmetric" if symmetric else "general")
    header = _first_line(path)
    assert field in header and ("symmetric" if symmetric else "general") in header
    tensor = read(path)
    expected = sio.mmread(str(path)).toarray()
    assert tensor.shape == expected.shape
    assert tensor.dtype == (np.int64 if field == "integer" else np.float64)
    np.testing.assert_array_equal(tensor.to_numpy(), expected)


def test_mtx_skew_symmetric_expanded(tmp_path):
    path = tmp_path / "s.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 1.5\n3 1 -2\n")
    expected = np.array([[0, -1.5, 2], [1.5, 0, 0], [-2, 0, 0]])
    np.testing.assert_array_equal(read(path).to_numpy(), expected)


def test_mtx_keeps_explicit_zeros(tmp_path):
    path = tmp_path / "z.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real symmetric\n"
                    "3 3 3\n1 1 1.5\n2 1 0\n3 3 0\n")
    coords, values = read(path).to_coo()
    assert coords.T.tolist() == [[0, 0], [0, 1], [1, 0], [2, 2]]
    assert values.tolist() == [1.5, 0.0, 0.0, 0.0]


def test_mtx_dense_array_file(tmp_path):
    path = tmp_path / "d.mtx"
    dense = np.array([[1.0, 0.0], [2.5, -3.0]])
    sio.mmwrite(str(path), dense)
    np.testing.assert_array_equal(read(path).to_numpy(), dense)


def test_mtx_read_options(tmp_path):
    path = tmp_path / "m.mtx"
    matrix = _random_matrix("real", False, seed=3)
    sio.mmwrite(str(path), matrix)
    tensor = read(path, format="csr", dtype="float32")
    assert tensor.format == ls.named_format("csr", 2)
    assert tensor.dtype == np.float32
    np.testing.assert_allclose(tensor.to_numpy(), matrix.toarray(), rtol=1e-6)
    assert read(path, index_dtype="int64").index_dtype == np.int64
    assert read(tmp_path / "m.mtx", dtype=bool).dtype == np.bool_


@pytest.mark.parametrize("name", ["w.mtx", "w.mtx.gz"])
@pytest.mark.parametrize("dtype", ["float64", "int64", "int32", "bool"])
def test_mtx_write_read_by_scipy(tmp_path, name, dtype):
    rng = np.random.default_rng(RNG_SEED)
    dense = rng.random((6, 5)) * (rng.random((6, 5)) < 0.4) * 100
    dense = dense.astype(dtype)
    tensor = ls.Tensor.from_numpy(dense, format="coo")
    path = tmp_path / name
    write(tensor, path)
    back = sio.mmread(str(path))
    np.testing.assert_array_equal(back.toarray(), dense.astype(back.dtype))
    header = _first_line(path)
    field = {"float64": "real", "bool": "pattern"}.get(dtype, "integer")
    assert field in header
    again = read(path, dtype=dtype)
    np.testing.assert_array_equal(again.to_numpy(), dense)


def test_mtx_write_keeps_explicit_zero_and_exact_floats(tmp_path):
    values = np.random.default_rng(1).random(5)
    values[2] = 0.0
    coords = np.array([[0, 1, 2, 3, 3], [4, 0, 2, 1, 3]])
    tensor = ls.Tensor.from_coo(coords, values, (4, 5))
    write(tensor, tmp_path / "e.mtx")
    assert sio.mmread(str(tmp_path / "e.mtx")).nnz == 5
    back_coords, back_values = read(tmp_path / "e.mtx").to_coo()
    np.testing.assert_array_equal(back_coords, coords)
    np.testing.assert_array_equal(back_values, values)  # bit-exact


def test_mtx_bool_false_entries_dropped(tmp_path):
    tensor = ls.Tensor.from_coo([[0, 1], [0, 1]], np.array([True, False]), (2, 2))
    write(tensor, tmp_path / "b.mtx")
    assert sio.mmread(str(tmp_path / "b.mtx")).nnz == 1


# -- FROSTT ----------------------------------------------------------------------------------
def _random_tensor3(dtype="float64") -> ls.Tensor:
    rng = np.random.default_rng(RNG_SEED)
    shape = (5, 6, 7)
    coords = np.unique(np.stack([rng.integers(0, s, 40) for s in shape]), axis=1)
    values = rng.normal(size=coords.shape[1]) * 10
    return ls.Tensor.from_coo(coords, values.astype(dtype), shape)


@pytest.mark.parametrize("name", ["t.tns", "t.tns.gz"])
def test_tns_round_trip(tmp_path, name):
    tensor = _random_tensor3()
    path = tmp_path / name
    write(tensor, path)
    back = read(path, shape=tensor.shape)
    assert back.shape == tensor.shape and back.dtype == np.float64
    np.testing.assert_array_equal(back.to_numpy(), tensor.to_numpy())  # bit-exact
    inferred = read(path)
    coords, _ = tensor.to_coo()
    assert inferred.shape == tuple(int(c) + 1 for c in coords.max(axis=1))


def test_tns_integer_values_exact(tmp_path):
    tensor = _random_tensor3("int64")
    write(tensor, tmp_path / "i.tns")
    back = read(tmp_path / "i.tns", dtype="int64", shape=tensor.shape)
    assert back.dtype == np.int64
    np.testing.assert_array_equal(back.to_numpy(), tensor.to_numpy())
    big = 2**53 + 1  # not representable in float64
    (tmp_path / "big.tns").write_text(f"1 2 {big}\n")
    assert read(tmp_path / "big.tns", dtype="int64").to_coo()[1].tolist() == [big]
    assert read(tmp_path / "big.tns").dtype == np.float64  # float64 unless asked


def test_tns_comments_blank_lines_and_duplicates(tmp_path):
    path = tmp_path / "c.tns"
    path.write_text("# a FROSTT file\n\n1 1 2.5\n3 2 1e3  # trailing note\n   \n1 1 0.5\n")
    tensor = read(path)
    assert tensor.shape == (3, 2)
    np.testing.assert_array_equal(tensor.to_numpy(), [[3.0, 0], [0, 0], [0, 1000.0]])


def test_tns_order_one_and_four(tmp_path):
    (tmp_path / "v.tns").write_text("3 1.5\n1 2\n")
    np.testing.assert_array_equal(read(tmp_path / "v.tns").to_numpy(), [2, 0, 1.5])
    (tmp_path / "q.tns").write_text("1 2 3 4 9\n")
    tensor = read(tmp_path / "q.tns")
    assert tensor.order == 4 and tensor.shape == (1, 2, 3, 4)


def test_tns_empty_with_shape(tmp_path):
    (tmp_path / "e.tns").write_text("# nothing here\n")
    tensor = read(tmp_path / "e.tns", shape=(2, 3))
    assert tensor.shape == (2, 3) and not tensor.to_numpy().any()


# -- numpy / scipy containers ----------------------------------------------------------------
def test_npy_round_trip(tmp_path):
    dense = np.arange(24, dtype=np.float64).reshape(2, 3, 4) % 5
    np.save(tmp_path / "a.npy", dense)
    tensor = read(tmp_path / "a.npy")
    np.testing.assert_array_equal(tensor.to_numpy(), dense)
    write(tensor, tmp_path / "b.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "b.npy"), dense)


def test_npy_narrow_dtype_kept(tmp_path):
    """uint8 is a value dtype now: a file keeps it (float16 too; object is refused)."""
    np.save(tmp_path / "u.npy", np.array([[0, 3], [7, 0]], dtype=np.uint8))
    tensor = read(tmp_path / "u.npy")
    assert tensor.dtype == np.uint8
    np.testing.assert_array_equal(tensor.to_numpy(), [[0, 3], [7, 0]])


def test_npz_round_trip(tmp_path):
    matrix = _random_matrix("real", False, seed=5).tocsr()
    sp.save_npz(tmp_path / "m.npz", matrix)
    tensor = read(tmp_path / "m.npz")
    np.testing.assert_array_equal(tensor.to_numpy(), matrix.toarray())
    write(tensor, tmp_path / "w.npz")
    np.testing.assert_array_equal(sp.load_npz(tmp_path / "w.npz").toarray(), matrix.toarray())


# -- real files ------------------------------------------------------------------------------
def test_real_matrix_olm1000():
    path = DATA / "matrices" / "olm1000.mtx.gz"
    if not path.exists():
        pytest.skip("shared data not present")
    tensor = read(path)
    expected = sio.mmread(str(path))
    assert tensor.shape == expected.shape
    np.testing.assert_array_equal(tensor.to_scipy().toarray(), expected.toarray())


def _naive_tns(path: Path) -> dict[tuple[int, ...], float]:
    """Entries of a FROSTT file parsed the obvious way (duplicates summed)."""
    entries: dict[tuple[int, ...], float] = {}
    with open(path) as fh:
        for line in fh:
            fields = line.split("#", 1)[0].split()
            if fields:
                key = tuple(int(f) - 1 for f in fields[:-1])
                entries[key] = entries.get(key, 0.0) + float(fields[-1])
    return entries


def test_real_tensor_file():
    folder = DATA / "tensors"
    files = sorted(folder.glob("*.tns"), key=os.path.getsize) if folder.exists() else []
    if not files:
        pytest.skip("shared data not present")
    path = files[0]  # the smallest keeps the test quick
    expected = _naive_tns(path)
    tensor = read(path)
    coords, values = tensor.to_coo()
    assert coords.shape[1] == len(expected)
    assert tensor.shape == tuple(max(k[m] for k in expected) + 1 for m in range(tensor.order))
    rng = np.random.default_rng(0)
    for i in rng.choice(coords.shape[1], size=20, replace=False):
        assert values[i] == expected[tuple(int(c) for c in coords[:, i])]


# -- errors ----------------------------------------------------------------------------------
def test_unknown_extension(tmp_path):
    (tmp_path / "x.csv").write_text("1,2\n")
    with pytest.raises(ValueError, match=r"x\.csv.*extension"):
        read(tmp_path / "x.csv")
    with pytest.raises(ValueError, match="extension"):
        write(_random_tensor3(), tmp_path / "x.gz")


def test_missing_file(tmp_path):
    for name in ("no.mtx", "no.mtx.gz", "no.tns", "no.npy"):
        with pytest.raises(FileNotFoundError):
            read(tmp_path / name)


@pytest.mark.parametrize(("text", "match"), [
    ("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n2 x 1\n",
     r"line 4: could not convert string 'x' to int64 \(field 2\)"),
    ("%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1\n",
     "declares 3 entries but the file holds 1"),
    ("%%MatrixMarket matrix coordinate real general\n3 3 1\n4 1 1\n",
     r"entry 1 has row 4, outside 1\.\.3"),
    ("hello\n", "banner"),
    ("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 2\n", "complex"),
])
def test_malformed_mtx(tmp_path, text, match):
    path = tmp_path / "bad.mtx"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as info:
        read(path)
    assert "bad.mtx" in str(info.value)


def test_corrupt_gzip(tmp_path):
    (tmp_path / "c.mtx.gz").write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match=r"c\.mtx\.gz"):
        read(tmp_path / "c.mtx.gz")
    good = gzip.compress(b"# x\n1 2 3 4.0\n" * 200)
    (tmp_path / "t.tns.gz").write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match=r"t\.tns\.gz"):
        read(tmp_path / "t.tns.gz")


@pytest.mark.parametrize(("text", "match"), [
    ("# header\n1 1 1.0\n\n2 3 4 3.0\n", r"line 4: expected 3 fields"),
    ("1 1 1.0\n2 x 3.0\n", r"line 2: coordinate 'x' is not an integer"),
    ("1 1 1.0\n2 1.5 3.0\n", r"line 2: coordinate '1.5'"),
    ("1 1 1.0\n0 2 3.0\n", r"line 2: coordinate 0 is below 1"),
    ("1 1 1.0\n2 2 abc\n", r"line 2: value 'abc' is not a number"),
    ("5\n", r"line 1: expected coordinates and a value"),
    ("# only comments\n", "no entries"),
])
def test_malformed_tns(tmp_path, text, match):
    path = tmp_path / "bad.tns"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as info:
        read(path)
    assert "bad.tns" in str(info.value)


def test_tns_shape_errors(tmp_path):
    path = tmp_path / "s.tns"
    path.write_text("1 1 1.0\n3 2 2.0\n")
    with pytest.raises(ValueError, match=r"line 2: coordinate 3 of mode 0 exceeds the extent 2"):
        read(path, shape=(2, 2))
    with pytest.raises(ValueError, match="2 coordinates but shape has 3"):
        read(path, shape=(3, 3, 3))


def test_shape_checked_for_other_formats(tmp_path):
    sio.mmwrite(str(tmp_path / "m.mtx"), _random_matrix("real", False))
    assert read(tmp_path / "m.mtx", shape=(7, 7)).shape == (7, 7)
    with pytest.raises(ValueError, match="not the requested"):
        read(tmp_path / "m.mtx", shape=(8, 7))


def test_write_matrix_formats_need_matrices(tmp_path):
    tensor = _random_tensor3()
    for name in ("t.mtx", "t.npz"):
        with pytest.raises(ValueError, match="matrices"):
            write(tensor, tmp_path / name)


def test_bad_npy_and_npz(tmp_path):
    (tmp_path / "x.npy").write_bytes(b"junk")
    with pytest.raises(ValueError, match=r"x\.npy"):
        read(tmp_path / "x.npy")
    np.savez(tmp_path / "y.npz", a=np.ones(3))
    with pytest.raises(ValueError, match=r"y\.npz"):
        read(tmp_path / "y.npz")


@pytest.mark.parametrize(("stored", "dtype", "match"), [
    (np.array([2**64 - 1], np.uint64), "int64", "18446744073709551615 does not fit int64"),
    (np.array([3_000_000_000], np.int64), "int32", "3000000000 does not fit int32"),
    (np.array([1.5]), "int64", "1.5 does not fit int64"),
    (np.array([np.nan]), "int64", "nan does not fit int64"),
    (np.array([2.0**63]), "int64", "does not fit int64"),
    (np.array([1e300]), "float32", "overflows float32"),
])
def test_read_refuses_casts_that_change_values(tmp_path, stored, dtype, match):
    """A plain astype turned 2**64 - 1 into -1, 3e9 into -1294967296 and NaN into INT64_MIN."""
    path = tmp_path / "v.npy"
    np.save(path, stored)
    with pytest.raises(ValueError, match=match) as info:
        read(path, dtype=dtype)
    assert "v.npy" in str(info.value)


@pytest.mark.parametrize(("stored", "dtype"), [
    (np.array([2**63 - 1, -2**63], np.int64), "int64"),
    (np.array([7, 2**40], np.uint64), None),
    (np.array([-2.0**63, 3.0, -0.5]), "float32"),
    (np.array([2**31 - 1, -2**31], np.int64), "int32"),
    (np.array([4.0, -2.0**31]), "int32"),
    (np.array([2.0, 0.5]), "bool"),
])
def test_read_keeps_casts_that_keep_values(tmp_path, stored, dtype):
    path = tmp_path / "v.npy"
    np.save(path, stored)
    tensor = read(path, dtype=dtype)
    expected = stored.astype(dtype) if dtype else stored  # uint64 is kept as it is
    assert tensor.dtype == expected.dtype
    np.testing.assert_array_equal(tensor.to_numpy(), expected)


@pytest.mark.parametrize("value", [2.5, 0.0])
def test_scalar_npy_round_trip(tmp_path, value):
    """An order-0 result written by `llvsparse run 's = ...' -o s.npy` reads back."""
    scalar = ls.Tensor.from_numpy(np.array(value))
    write(scalar, tmp_path / "s.npy")
    back = read(tmp_path / "s.npy")
    assert back.shape == () and back.to_numpy() == value


def test_upper_case_extensions_keep_their_names(tmp_path):
    tensor = ls.Tensor.from_scipy(_random_matrix("real", False))
    for name in ("m.NPZ", "m.MTX", "m.NPY", "m.TNS", "m.MTX.GZ"):
        write(tensor, tmp_path / name)
        assert sorted(p.name for p in tmp_path.iterdir()) == [name]
        np.testing.assert_array_equal(read(tmp_path / name).to_numpy(), tensor.to_numpy())
        (tmp_path / name).unlink()


@pytest.mark.parametrize(("indptr", "indices", "match"), [
    ([0, 2, 1], [0, 1], "corrupt sparse matrix"),
    ([0, 1, 2], [0, 9], "corrupt sparse matrix"),
])
def test_corrupt_npz_names_the_file(tmp_path, indptr, indices, match):
    """scipy loads an .npz's index arrays without looking at them."""
    path = tmp_path / "c.npz"
    np.savez(path, format=b"csr", shape=np.array([2, 3]), data=np.ones(2),
             indices=np.array(indices, np.int32), indptr=np.array(indptr, np.int32))
    with pytest.raises(ValueError, match=match) as info:
        read(path)
    assert "c.npz" in str(info.value)


def test_shape_must_hold_integers(tmp_path):
    np.save(tmp_path / "v.npy", np.ones((2, 3)))
    with pytest.raises(TypeError, match="sequence of integers"):
        read(tmp_path / "v.npy", shape=(2.7, 3))
    assert read(tmp_path / "v.npy", shape=(np.int64(2), 3)).shape == (2, 3)


@pytest.mark.parametrize("fmt", ["ell", "bcsr2x2", "dia"])
@pytest.mark.parametrize("ext", ["mtx", "mtx.gz", "tns", "npz"])
def test_padding_is_not_written_as_entries(tmp_path, fmt, ext):
    """ELL's short rows and BCSR's blocks store zeros that are padding: files recorded
    them as explicit entries (12 for BCSR where the matrix has 7)."""
    matrix = np.diag([1.0, 2.0, 3.0, 4.0]) + np.diag([5.0, 6.0, 7.0], 1)
    path = tmp_path / f"m.{ext}"
    ls.write(ls.Tensor.from_numpy(matrix, format=fmt), path)
    back = ls.read(path, format="coo", **({"shape": (4, 4)} if ext == "tns" else {}))
    assert len(back.values) == 7
    np.testing.assert_array_equal(back.to_numpy(), matrix)

