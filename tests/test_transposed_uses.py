"""Operands read in an order other than their storage's: ``A(i,j) * A(j,i)`` with A in
CSR, ``C(j,i) = A(i,j)`` from CSR into CSR. The kernel converts such an operand (or a
further use of a repeated one, renamed ``A__1``) to a coordinate list in the mode order
the loops need, and every result must still equal numpy's."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llvsparse as ls
from llvsparse.kernel import api

N = 6  # square, and a multiple of BCSR's 2x2 blocks
MATRIX_FORMATS = ["dense", "csr", "csc", "coo", "dcsr", "dcsc", "hash", "dia", "ell",
                  "bcsr2x2"]
OUTPUT_FORMATS = ["dense", "csr", "csc", "coo", "dcsr", "hash"]

# Statement, and its numpy reference on dense arrays A and B.
STATEMENTS = {
    "y(i) = A(i,j) * A(j,i)": lambda A, B: (A * A.T).sum(axis=1),
    "C(i,j) = A(i,j) * A(j,i)": lambda A, B: A * A.T,
    "C(i,j) = A(i,j) + A(j,i)": lambda A, B: A + A.T,
    "C(i,j) = A(i,j) - B(j,i)": lambda A, B: A - B.T,
    "C(j,i) = A(i,j)": lambda A, B: A.T,
    "C(j,i) = A(i,j) * B(i,j)": lambda A, B: (A * B).T,
    "C(i,j) = A(i,j) * B(j,i) + A(j,i)": lambda A, B: A * B.T + A.T,
    "C(i,k) = A(i,j) * A(k,j)": lambda A, B: A @ A.T,
    "y(j) = A(i,j) * A(j,i)": lambda A, B: (A * A.T).sum(axis=0),
}


def _matrix(rng: np.random.Generator, density: float) -> np.ndarray:
    values = rng.integers(-4, 5, (N, N)) * (rng.random((N, N)) < density)
    values[rng.integers(N)] = 0  # an empty row
    values[:, rng.integers(N)] = 0  # and an empty column
    return values.astype(np.float64)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(statement=st.sampled_from(sorted(STATEMENTS)),
       formats=st.lists(st.sampled_from(MATRIX_FORMATS), min_size=2, max_size=2),
       out_format=st.sampled_from(OUTPUT_FORMATS), density=st.sampled_from([0.0, 0.3, 0.8]),
       seed=st.integers(0, 3))
def test_transposed_use_matches_numpy(statement, formats, out_format, density, seed):
    rng = np.random.default_rng(seed)
    dense = {"A": _matrix(rng, density), "B": _matrix(rng, 0.5)}
    used = [n for n in "AB" if f"{n}(" in statement]
    given_formats = dict(zip("AB", formats))
    operands = {n: ls.Tensor.from_numpy(dense[n], format=given_formats[n]) for n in used}
    kernel = ls.compile(statement, out_format=out_format if "C(" in statement else "dense",
                        **{n: given_formats[n] for n in used})
    for _ in range(2):  # the second call reuses the binding
        result = kernel(**operands).to_numpy()
        np.testing.assert_array_equal(result, STATEMENTS[statement](dense["A"], dense["B"]),
                                      err_msg=f"{statement} {given_formats} -> {out_format}")


def test_a_repeated_csr_operand_is_renamed_and_its_transposed_use_converted():
    rng = np.random.default_rng(0)
    dense = _matrix(rng, 0.4)
    A = ls.Tensor.from_numpy(dense, format="csr")
    kernel = ls.compile("y(i) = A(i,j) * A(j,i)", A="csr")
    np.testing.assert_array_equal(kernel(A=A).to_numpy(), (dense * dense.T).sum(axis=1))
    assert str(kernel.aliases["A__1"]) == "A(j,i)"
    converted = kernel.last.conversions
    assert list(converted) == ["A__1"]
    assert [level.mode for level in converted["A__1"].levels] == [1, 0]
    assert A.format == ls.tensors.format.named_format("csr", 2)  # the caller's tensor is untouched


def test_transposing_copy_between_row_major_formats():
    """C(j,i) = A(i,j) from CSR into CSR, on a non-square matrix with empty rows."""
    rng = np.random.default_rng(1)
    dense = (rng.random((5, 9)) < 0.3) * rng.standard_normal((5, 9))
    dense[2] = 0
    kernel = ls.compile("C(j,i) = A(i,j)", A="csr", out_format="csr")
    result = kernel(A=ls.Tensor.from_numpy(dense, format="csr"))
    assert result.format == ls.tensors.format.named_format("csr", 2)
    np.testing.assert_array_equal(result.to_numpy(), dense.T)


@pytest.mark.parametrize("fmt", ["csf", "coo", "dense"])
def test_permuting_an_order_3_tensor(fmt):
    rng = np.random.default_rng(2)
    dense = (rng.random((3, 4, 5)) < 0.3) * rng.standard_normal((3, 4, 5))
    T = ls.Tensor.from_numpy(dense, format=fmt)
    result = ls.compile("Z(k,i,j) = T(i,j,k)", T=fmt, out_format="csf")(T=T)
    np.testing.assert_array_equal(result.to_numpy(), dense.transpose(2, 0, 1))


def test_without_conversion_the_conflict_is_still_reported():
    A = ls.Tensor.from_numpy(np.eye(4), format="csr")
    kernel = api.Kernel("y(i) = A(i,j) * A(j,i)", {"A": "csr"}, convert=False)
    with pytest.raises(ls.ScheduleError, match="storage orders"):
        kernel(A=A)


def test_shape_errors_name_the_callers_tensor_not_its_alias():
    A = ls.Tensor.from_numpy(np.ones((3, 4)), format="csr")
    kernel = ls.compile("y(i) = A(i,j) * A(j,i)", A="csr")
    with pytest.raises(ls.ShapeError) as error:
        kernel(A=A)
    assert "A__1" not in str(error.value) and "A (shape (3, 4))" in str(error.value)
    with pytest.raises(TypeError, match="A__1"):
        kernel(A=A, A__1=A)


def test_dtypes_given_by_the_callers_name_reach_the_alias():
    dense = np.arange(16, dtype=np.float32).reshape(4, 4) % 3
    A = ls.Tensor.from_numpy(dense, format="csr")
    kernel = ls.compile("C(i,j) = A(i,j) * A(j,i)", A="csr", out_format="csr")
    inst = kernel.instance({"A": "float32"})
    assert inst.types["A__1"].dtype == "float32"
    result = kernel(A=A)
    assert result.dtype == np.float32
    np.testing.assert_array_equal(result.to_numpy(), dense * dense.T)


def test_a_permuted_conversion_survives_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path))
    dense = np.triu(np.arange(1.0, 26.0).reshape(5, 5))
    A = ls.Tensor.from_numpy(dense, format="csr")
    statement = "C(j,i) = A(i,j) * 2"
    first = ls.compile(statement, A="csr", out_format="csr")
    np.testing.assert_array_equal(first(A=A).to_numpy(), 2 * dense.T)
    api._CACHE.clear()
    again = ls.compile(statement, A="csr", out_format="csr")
    np.testing.assert_array_equal(again(A=A).to_numpy(), 2 * dense.T)
    assert [lv.mode for lv in again.last.conversions["A"].levels] == [1, 0]
    assert again.last.jit.llvm_ir is None  # loaded as object code, not rebuilt


@settings(max_examples=60, deadline=None, derandomize=True)
@given(shape=st.lists(st.sampled_from([1, 3, 70_000, 2**31 - 1, 2**40]), min_size=1,
                      max_size=3),
       count=st.integers(0, 300), seed=st.integers(0, 3), data=st.data())
def test_counting_sort_order_is_lexsorts_order(shape, count, seed, data):
    """Transposed copies are sorted by a stable counting sort per mode (a comparison sort
    for a key spread far wider than the entries): the order, ties included, is
    lexsort's."""
    from llvsparse.tensors.ordering import lexicographic_order

    rng = np.random.default_rng(seed)
    coords = np.stack([rng.integers(0, min(s, 2**62), count) for s in shape])
    coords[:, : count // 3] = coords[:, :1] if count else coords[:, :0]  # repeated entries
    modes = data.draw(st.permutations(range(len(shape))))
    expected = np.lexsort([coords[m] for m in reversed(modes)])
    np.testing.assert_array_equal(lexicographic_order([coords[m] for m in modes]), expected)


def test_exported_header_says_which_operand_is_the_same_tensor(tmp_path):
    kernel = ls.compile("y(i) = A(i,j) * A(j,i)", A="csr")
    _, header = kernel.export(tmp_path / "k.o")
    text = header.read_text()
    assert "[2] A__1 (the tensor A again, for A(j,i)) (converted" in text
    assert "A__1: 2-d" in text and "level 0: compressed (mode 1)" in text


def test_a_converted_copy_follows_the_values_the_caller_changes():
    """The binding of ``A + A(j,i)`` is reused for the same tensor, but its transposed
    copy is made again on every call: values written in place between calls count."""
    dense = np.triu(np.arange(1.0, 17.0).reshape(4, 4))
    A = ls.Tensor.from_numpy(dense, format="csr")
    kernel = ls.compile("C(i,j) = A(i,j) + A(j,i)", A="csr", out_format="csr")
    np.testing.assert_array_equal(kernel(A=A).to_numpy(), dense + dense.T)
    A.values[:] *= 3
    np.testing.assert_array_equal(kernel(A=A).to_numpy(), 3 * (dense + dense.T))


def test_alias_names_avoid_index_names_and_report_the_callers_use():
    kernel = ls.compile("y(i) = A(i,A__1) * A(A__1,i)", A="csr")
    assert {n: str(u) for n, u in kernel.aliases.items()} == {"A__2": "A(A__1,i)"}
    kernel = ls.compile("y(i) = A(i,j) * x(j) + A(i,i)", A="csr")
    assert {n: str(u) for n, u in kernel.aliases.items()} == {"A__1": "A(i,i)"}
    dense = np.arange(1.0, 10.0).reshape(3, 3) * np.eye(3)[::-1].clip(0, 1) + np.eye(3)
    x = np.array([1.0, -2.0, 3.0])
    got = kernel(A=ls.Tensor.from_numpy(dense, format="csr"), x=x).to_numpy()
    np.testing.assert_array_equal(got, dense @ x + np.diag(dense))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(fmt=st.sampled_from(MATRIX_FORMATS), density=st.sampled_from([0.0, 0.3, 0.9]),
       seed=st.integers(0, 3))
def test_a_remembered_transposed_layout_follows_the_values(fmt, density, seed):
    """A packed tensor's index arrays are read-only, so where each entry of its
    transposed copy reads its value is remembered; later copies gather the values as
    they are then (written in place between calls), whatever the source format."""
    rng = np.random.default_rng(seed)
    dense = _matrix(rng, density)
    A = ls.Tensor.from_numpy(dense.copy(), format=fmt)  # a dense one views its array
    column_major = ls.tensors.format.named_format("coo", 2, [1, 0])
    first = A.asformat(column_major)
    np.testing.assert_array_equal(first.to_numpy(), dense)
    A.values[:] = A.values * 3 + (A.values != 0)
    expected = np.where(dense != 0, dense * 3 + 1, 0)
    second = A.asformat(column_major)
    np.testing.assert_array_equal(second.to_numpy(), expected)
    if fmt in ("csr", "coo", "dcsr"):  # sorted on the host, entries one to one
        assert A.__dict__["_sorted_memo"][1] is not None
        assert second.level_arrays[0]["crd"] is first.level_arrays[0]["crd"]


def test_arrays_the_caller_may_still_write_are_sorted_every_time():
    dense = np.triu(np.arange(1.0, 17.0).reshape(4, 4))
    S = __import__("scipy.sparse", fromlist=["csr_matrix"]).csr_matrix(dense)
    A = ls.Tensor(S.shape, ls.tensors.format.named_format("csr", 2), "float64", "int32", [4, 4],
                  [{}, {"pos": S.indptr.copy(), "crd": S.indices.copy()}], [{}, {}],
                  S.data.copy())
    column_major = ls.tensors.format.named_format("coo", 2, [1, 0])
    np.testing.assert_array_equal(A.asformat(column_major).to_numpy(), dense)
    assert "_sorted_memo" not in A.__dict__
    A.level_arrays[1]["crd"][0] = 1  # row 0 now stores columns 1, 1, 2, 3: not unique
    with pytest.raises(ls.CorruptTensorError):
        A.asformat(column_major)


@pytest.mark.parametrize("out_format", ["csr", "csc", "coo"])
def test_a_transposed_copy_never_makes_an_inner_product(out_format):
    """CSR x CSR into a sparse output compiled, through a column-major copy of one
    operand, to loops that walked A's rows for every column of the result: O(rows x
    columns) where a workspace costs O(flops). It runs through a workspace, with no
    operand converted."""
    A = ls.Tensor.from_numpy(np.eye(4), format="csr")
    kernel = ls.compile("C(i,k) = A(i,j) * B(j,k)", A="csr", B="csr", out_format=out_format)
    np.testing.assert_array_equal(kernel(A=A, B=A).to_numpy(), np.eye(4))
    assert not kernel.last.conversions and "where(" in kernel.concrete
    dense = ls.compile("C(i,k) = A(i,j) * B(j,k)", A="csr", B="csr")
    np.testing.assert_array_equal(dense(A=A, B=A).to_numpy(), np.eye(4))
