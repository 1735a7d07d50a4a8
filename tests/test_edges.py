"""The edges around kernels: to_numpy, to_scipy and asformat, against numpy and scipy.

Tensors laid out as numpy or scipy lay out theirs (by their levels, not their names)
hand their arrays over; every other tensor is unpacked by one vectorized walk."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.backends.cpu import STATS
from llvsparse.formats import loader

import llvsparse as ls
from llvsparse.calls import auto_choice
from llvsparse.kernel import api
from llvsparse.tensors.format import Level, named_format

MATRIX_FORMATS = ["dense", "csr", "csc", "coo", "coo-unordered", "dcsr", "dcsc", "hash",
                  "dia", "ell", "ell-rows", "bcsr2x2"]
DTYPES = ["float64", "float32", "int64", "int32", "bool"]


def _matrix(seed: int, dtype: str, shape=(6, 8)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dense = rng.integers(-4, 5, shape) * (rng.random(shape) < 0.4)
    dense[1] = 0  # an empty row
    return dense.astype(dtype)


@pytest.mark.parametrize("fmt", MATRIX_FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_to_numpy_and_to_scipy_of_every_format(fmt, dtype):
    dense = _matrix(3, dtype)
    tensor = ls.Tensor.from_numpy(dense, format=fmt)
    got = tensor.to_numpy()
    assert got.dtype == dense.dtype
    np.testing.assert_array_equal(got, dense)
    for target in ("csr", "csc", "coo"):
        matrix = tensor.to_scipy(target)
        assert matrix.format == target
        np.testing.assert_array_equal(matrix.toarray(), dense)


def test_a_dense_tensor_gives_a_view_of_its_values():
    """O(1): the values reshaped (and transposed for column-major storage), not a walk."""
    dense = _matrix(0, "float64", (4, 5))
    row_major = ls.Tensor.from_numpy(dense)
    got = row_major.to_numpy()
    np.testing.assert_array_equal(got, dense)
    assert np.shares_memory(got, row_major.values)
    column_major = row_major.asformat(ls.Format([Level("dense", 1), Level("dense", 0)]))
    got = column_major.to_numpy()
    np.testing.assert_array_equal(got, dense)
    assert np.shares_memory(got, column_major.values)


def test_a_dense_result_is_a_view_and_writing_it_writes_the_tensor():
    A = sp.random(50, 30, density=0.2, format="csr", random_state=1)
    x = np.arange(30.0)
    y = ls.evaluate("y(i) = A(i,j) * x(j)", A=ls.Tensor.from_scipy(A), x=x)
    got = y.to_numpy()
    np.testing.assert_allclose(got, A @ x)
    got[0] = 123.0  # documented: a view, as np.asarray(y.values) would be
    assert y.values[0] == 123.0


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_to_scipy_hands_over_the_arrays_as_stored(fmt, index_dtype):
    reference = sp.random(40, 30, density=0.3, format="csr", random_state=2)
    tensor = ls.Tensor.from_scipy(reference, format=fmt, index_dtype=index_dtype)
    matrix = tensor.to_scipy(fmt)
    np.testing.assert_array_equal(matrix.toarray(), reference.toarray())
    assert np.shares_memory(matrix.data, tensor.values)
    indices = [matrix.row, matrix.col] if fmt == "coo" else [matrix.indices, matrix.indptr]
    assert all(a.dtype == np.dtype(index_dtype) for a in indices)
    inner = tensor.level_arrays[1]["crd"]
    assert np.shares_memory(matrix.col if fmt == "coo" else matrix.indices, inner)


def test_a_level_is_recognised_by_its_functions_not_its_name(tmp_path):
    """A copy of compressed.yaml under another name hands its arrays to scipy too."""
    source = Path(loader.__file__).parent / "compressed.yaml"
    text = source.read_text().replace("name: compressed", "name: packedcols")
    path = tmp_path / "packedcols.yaml"
    path.write_text(text)
    ls.register_level_format(str(path))
    reference = sp.random(20, 10, density=0.3, format="csr", random_state=3)
    tensor = ls.Tensor.from_scipy(reference, format=ls.Format(["dense", "packedcols"]))
    matrix = tensor.to_scipy()
    np.testing.assert_array_equal(matrix.toarray(), reference.toarray())
    assert np.shares_memory(matrix.indices, tensor.level_arrays[1]["crd"])


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("source", ["csr", "csc", "coo", "coo-unordered"])
@pytest.mark.parametrize("target", ["csr", "csc", "coo", "coo-unordered", "coo(1,0)"])
def test_conversions_among_csr_csc_and_coo(source, target, index_dtype):
    reference = _matrix(5, "float64", (30, 20))
    tensor = ls.Tensor.from_numpy(reference, format=source, index_dtype=index_dtype)
    fmt = named_format("coo", 2, [1, 0]) if target == "coo(1,0)" else \
        named_format(target, 2)
    converted = tensor.asformat(fmt)
    assert converted.format == fmt
    assert converted.index_dtype == np.dtype(index_dtype)
    np.testing.assert_array_equal(converted.to_numpy(), reference)
    converted.__dict__.pop("_validated", None)
    converted.validate()  # every claim of the target format holds


def test_an_unordered_product_converts_to_csr():
    """SpGEMM into an unordered COO (entries in the order the kernel made them), then
    CSR: scipy's product."""
    A = sp.random(60, 40, density=0.1, format="csr", random_state=4)
    B = sp.random(40, 50, density=0.1, format="csr", random_state=5)
    kernel = ls.compile("C(i,k) = A(i,j) * B(j,k)", C="coo-unordered", A="csr", B="csr")
    product = kernel(A=ls.Tensor.from_scipy(A), B=ls.Tensor.from_scipy(B))
    csr = product.asformat("csr")
    np.testing.assert_allclose(csr.to_numpy(), (A @ B).toarray())
    np.testing.assert_allclose(product.to_scipy().toarray(), (A @ B).toarray())


def test_a_corrupt_csr_is_refused_before_scipy_reads_it():
    """scipy trusts index arrays; a tensor made from the caller's arrays is validated
    first (CorruptTensorError) instead of writing out of bounds."""
    good = ls.Tensor.from_scipy(sp.random(5, 5, density=0.5, format="csr", random_state=6))
    crd = good.level_arrays[1]["crd"].copy()
    crd[-1] = 1000
    bad = ls.Tensor(good.shape, good.format, good.dtype, good.index_dtype,
                    good.level_extents, [{}, {"pos": good.level_arrays[1]["pos"].copy(),
                                              "crd": crd}],
                    [{}, {}], good.values.copy())
    for convert in (bad.to_numpy, bad.to_scipy, lambda: bad.asformat("csc")):
        with pytest.raises(ls.CorruptTensorError):
            convert()


def test_duplicates_and_padding_add_up_in_to_numpy():
    """Entries stored twice (a non-unique level) are summed, as to_coo sums them."""
    coords = np.array([[0, 0, 2, 2], [1, 1, 3, 0]])
    values = np.array([1.0, 2.0, 3.0, 4.0])
    fmt = ls.Format([Level("compressed", 0, {"unique": False}),
                     Level("singleton", 1, {"unique": False, "ordered": False})])
    pos = np.array([0, 4], np.int32)
    tensor = ls.Tensor((3, 4), fmt, "float64", "int32", [3, 4],
                       [{"pos": pos, "crd": coords[0].astype(np.int32)},
                        {"crd": coords[1].astype(np.int32)}], [{}, {}], values)
    expected = np.zeros((3, 4))
    np.add.at(expected, tuple(coords), values)
    np.testing.assert_array_equal(tensor.to_numpy(), expected)
    np.testing.assert_array_equal(tensor.to_scipy().toarray(), expected)
    ints = ls.Tensor((3, 4), fmt, "int64", "int32", [3, 4], tensor.level_arrays, [{}, {}],
                     values.astype(np.int64))
    np.testing.assert_array_equal(ints.to_numpy(), expected.astype(np.int64))


def test_import_loads_nothing_until_a_name_is_used():
    """``import llvsparse`` took 0.4-0.6 s loading the compiler and llvmlite; names now
    come from their modules on first use, and the public API is the same objects."""
    script = (
        "import sys, llvsparse as ls\n"
        "heavy = [m for m in ('numpy', 'llvmlite', 'yaml', 'llvsparse.kernel.api') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from llvsparse.frontend.tensor import Tensor\n"
        "from llvsparse.kernel.api import compile\n"
        "assert ls.Tensor is Tensor and ls.compile is compile\n"
        "assert all(hasattr(ls, name) for name in ls.__all__)\n"
        "assert ls.tensors.format.named_format is ls.named_format\n"
        "try:\n    ls.no_such_name\nexcept AttributeError:\n    print('ok')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_transposed_operand_converts_once_and_follows_its_values():
    """A loop of calls with a mixed-order operand keeps its binding: the conversion's
    structure is remembered on the source, and each call gathers the source's current
    values into it (written in place, or a new values array)."""
    rng = np.random.default_rng(7)
    a = sp.random(30, 30, density=0.2, format="csr", random_state=8)
    b = sp.random(30, 30, density=0.2, format="csr", random_state=9)
    A, B = ls.Tensor.from_scipy(a), ls.Tensor.from_scipy(b)
    kernel = ls.compile("C(i,j) = A(i,j) + B(j,i)", C="csr", A="csr", B="csr")
    first = kernel(A=A, B=B)
    assert kernel.last.conversions  # B is read column by column: converted
    np.testing.assert_allclose(first.to_numpy(), (a + b.T).toarray())
    bound = kernel._last_bound
    for _ in range(3):
        B.values[:] = rng.standard_normal(len(B.values))
        b = sp.csr_matrix((B.values.copy(), b.indices, b.indptr), shape=b.shape)
        got = kernel(A=A, B=B)
        np.testing.assert_allclose(got.to_numpy(), (a + b.T).toarray())
        assert kernel._last_bound is bound  # no new binding, no new conversion
    B.values = B.values * 2  # a new array: bound again
    got = kernel(A=A, B=B)
    np.testing.assert_allclose(got.to_numpy(), (a + 2 * b.T).toarray())


def test_the_other_form_compiles_when_first_run(tmp_path, monkeypatch):
    """A cold compile builds the form a first call runs; the other (timed from the
    second call on) compiles then, goes to the disk cache under its own entry, and
    comes back from there with no LLVM work. Inspection still shows both forms."""
    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(api, "_CACHE", {})
    # The probe times both forms (the autoscheduler would fix one for these even rows).
    monkeypatch.setitem(auto_choice.FORCED, "off", True)
    a = sp.random(40, 30, density=0.3, format="csr", random_state=10)
    x = np.arange(30.0)
    A = ls.Tensor.from_scipy(a)
    compiles = STATS["llvm_compiles"]
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    np.testing.assert_allclose(kernel(A=A, x=x).to_numpy(), a @ x)
    assert STATS["llvm_compiles"] == compiles + 1
    assert kernel.last.jit.has_other and kernel.last.jit.compiled is None
    for _ in range(4):  # the probe runs both forms
        np.testing.assert_allclose(kernel(A=A, x=x).to_numpy(), a @ x)
    assert kernel.last.jit.compiled is not None
    assert STATS["llvm_compiles"] == compiles + 2
    monkeypatch.setattr(api, "_CACHE", {})
    loads = STATS["disk_loads"]
    again = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    monkeypatch.setitem(ls.calls.probe.FORCED, "form", "other")
    np.testing.assert_allclose(again(A=A, x=x).to_numpy(), a @ x)
    assert STATS["disk_loads"] == loads + 2 and STATS["llvm_compiles"] == compiles + 2
    assert "_other_form" in again.llvm_ir  # recompiled with both forms to show them
