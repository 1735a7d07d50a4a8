"""Golden tests from paper 003 (Chou et al., unified sparse formats), digest sections 3.2 and 6."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.ir.concrete.expressions import Apply, Operand
from llvsparse.ir.concrete.lattice import Iter, build_lattice, choose_iterated
from llvsparse.ir.notation.operators import ADD, MUL

import llvsparse as ls

# The running 4x6 matrix B (digest section 2.2 / 3.2) and x = [1..6].
B = np.array([[5, 1, 0, 0, 0, 0],
              [7, 3, 0, 0, 0, 0],
              [0, 0, 0, 0, 0, 0],
              [8, 0, 0, 4, 9, 0]], dtype=np.float64)
X = np.arange(1, 7, dtype=np.float64)
SPMV = np.array([7.0, 13, 0, 69])

# C of the Fig. 9b example: (row, col, val)
C_ENTRIES = [(0, 1, 10), (0, 5, 20), (1, 2, 30), (2, 0, 40), (3, 0, 50), (3, 4, 60)]
C = np.zeros((4, 6))
for _r, _c, _v in C_ENTRIES:
    C[_r, _c] = _v
B_PLUS_C = np.array([[5, 11, 0, 0, 0, 20],
                     [7, 3, 30, 0, 0, 0],
                     [40, 0, 0, 0, 0, 0],
                     [58, 0, 0, 4, 69, 0]], dtype=np.float64)


def arrays(t, level):
    return {k: np.asarray(v).tolist() for k, v in t.level_arrays[level].items()}


# ---------------------------------------------------------------------------------------
# 6.1 / 3.2: level arrays of the running matrix
# ---------------------------------------------------------------------------------------
def test_csr_arrays():
    t = ls.Tensor.from_numpy(B, format="csr")
    assert arrays(t, 1) == {"pos": [0, 2, 4, 4, 7], "crd": [0, 1, 0, 1, 0, 3, 4]}
    assert t.values.tolist() == [5, 1, 7, 3, 8, 4, 9]
    assert t.level_extents[0] == 4
    # test 1: pos_iter(3) -> <4,7>, pos_iter(1) -> <2,4> with coords {0,1}, row 2 empty
    pos, crd = t.level_arrays[1]["pos"], t.level_arrays[1]["crd"]
    assert (pos[3], pos[4]) == (4, 7)
    assert crd[4:7].tolist() == [0, 3, 4]
    assert (pos[1], pos[2]) == (2, 4) and crd[2:4].tolist() == [0, 1]
    assert pos[2] == pos[3] == 4


def test_csc_arrays():
    t = ls.Tensor.from_numpy(B, format="csc")
    assert arrays(t, 1) == {"pos": [0, 3, 5, 5, 6, 7, 7], "crd": [0, 1, 3, 0, 1, 3, 3]}
    assert t.values.tolist() == [5, 7, 8, 1, 3, 4, 9]
    assert t.level_extents[0] == 6


def test_dcsr_arrays():
    t = ls.Tensor.from_numpy(B, format="dcsr")
    assert arrays(t, 0) == {"pos": [0, 3], "crd": [0, 1, 3]}
    assert arrays(t, 1) == {"pos": [0, 2, 4, 7], "crd": [0, 1, 0, 1, 0, 3, 4]}
    assert t.values.tolist() == [5, 1, 7, 3, 8, 4, 9]


def test_coo_arrays():
    t = ls.Tensor.from_numpy(B, format="coo")
    assert arrays(t, 0) == {"pos": [0, 7], "crd": [0, 0, 1, 1, 3, 3, 3]}
    assert arrays(t, 1) == {"crd": [0, 1, 0, 1, 0, 3, 4]}
    assert t.values.tolist() == [5, 1, 7, 3, 8, 4, 9]
    levels = t.format.levels
    assert levels[0].kind == "compressed" and levels[0].properties["unique"] is False
    assert levels[1].kind == "singleton"


def test_dia_arrays():
    t = ls.Tensor.from_numpy(B, format="dia")
    assert t.level_arrays[1]["offset"].tolist() == [-3, -1, 0, 1]
    assert t.level_extents == [4, 4, 6]
    vals = t.values.reshape(4, 4)
    # '-' padding slots are never read; check only the slots that are read
    read = {0: [3], 1: [1, 2, 3], 2: [0, 1, 2, 3], 3: [0, 1, 2, 3]}
    expected = {0: [8], 1: [7, 0, 0], 2: [5, 3, 0, 4], 3: [1, 0, 0, 9]}
    for d, rows in read.items():
        assert vals[d, rows].tolist() == expected[d]
    # test 3: range coord_iter(d) = [max(0, -off), min(N, M - off))
    offsets = t.level_arrays[1]["offset"]
    ranges = [(max(0, -o), min(4, 6 - o)) for o in offsets]
    assert ranges == [(3, 4), (1, 4), (0, 4), (0, 4)]
    # Offset level: row 3 on diagonal 1 (offset -1) gives column 2
    assert 3 + offsets[1] == 2


def test_ell_arrays():
    t = ls.Tensor.from_numpy(B, format="ell")
    assert t.level_extents[0] == 3
    # The paper pads with column 0; padding here takes columns the row does not store,
    # so no padding entry duplicates a stored one (row 2's padding: columns 0, 1, 2).
    assert t.level_arrays[2]["crd"].tolist() == [0, 0, 0, 0, 1, 1, 1, 3, 2, 2, 2, 4]
    assert t.values.tolist() == [5, 7, 0, 8, 1, 3, 0, 4, 0, 0, 0, 9]


def test_dense_arrays():
    t = ls.Tensor.from_numpy(B, format="dense")
    assert t.level_extents == [4, 6]
    assert t.values.tolist() == B.ravel().tolist()


def _hash_vector(nonzeros, size=8):
    v = np.zeros(size)
    for k, c in enumerate(nonzeros):
        v[c] = k + 1
    fmt = ls.Format([ls.Level("hashed", 0, params={"W": 6})])
    return ls.Tensor.from_numpy(v, format=fmt), v


@pytest.mark.parametrize("order", [[0, 1, 4, 6], [6, 4, 1, 0], [4, 0, 6, 1]])
def test_hash_vector_w6(order):
    t, v = _hash_vector(order)
    assert t.params[0]["W"] == 6
    assert t.level_arrays[0]["crd"].tolist() == [0, 1, 6, -1, 4, -1]
    np.testing.assert_array_equal(t.to_numpy(), v)
    t.validate()


def test_hash_vector_full_table():
    """W coordinates in a W-slot table; a kernel locating a missing one must terminate."""
    v = np.zeros(12)
    v[[0, 1, 2, 3, 4, 6]] = [1, 2, 3, 4, 5, 6]
    fmt = ls.Format([ls.Level("hashed", 0, params={"W": 6})])
    t = ls.Tensor.from_numpy(v, format=fmt)
    assert sorted(t.level_arrays[0]["crd"].tolist()) == [0, 1, 2, 3, 4, 6]
    d = np.zeros(12)
    d[[5, 7]] = [1, 1]  # missing in the table
    d[0] = 2
    res = ls.evaluate("a = h(i) * d(i)", out_format="dense", h=t, d=ls.Tensor.from_numpy(d))
    assert float(res.to_numpy()) == 2.0


def test_compressed_append_empty_row():
    """Test 5: appending rows 0, 1, 3 (row 2 gets no call) gives pos=[0,2,4,4,7]."""
    t = ls.evaluate("C(i,j) = A(i,j)", out_format="csr", A=ls.Tensor.from_numpy(B, "coo"))
    assert t.level_arrays[1]["pos"].tolist() == [0, 2, 4, 4, 7]


@pytest.mark.parametrize("fmt", ["dense", "csr", "csc", "coo", "dcsr", "dcsc", "dia", "ell", "ell-rows",
                                 "hash"])
def test_generic_iteration_returns_nonzeros(fmt):
    """Test 6: iterating every encoding gives exactly B's nonzeros (stored zeros filtered)."""
    t = ls.Tensor.from_numpy(B, format=fmt)
    t.validate()
    coords, vals = t.to_coo()
    keep = vals != 0
    got = sorted(zip(coords[0][keep].tolist(), coords[1][keep].tolist(), vals[keep].tolist()))
    r, c = np.nonzero(B)
    assert got == sorted(zip(r.tolist(), c.tolist(), B[r, c].tolist()))


# ---------------------------------------------------------------------------------------
# 6.2 kernel tests
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["dense", "csr", "csc", "coo", "dcsr", "dcsc", "dia", "ell", "ell-rows",
                                 "hash"])
@pytest.mark.parametrize("fx", ["dense", "coo", "hash"])
def test_7_spmv(fmt, fx):
    y = ls.evaluate("y(i) = B(i,j) * x(j)", out_format="dense",
                    B=ls.Tensor.from_numpy(B, format=fmt), x=ls.Tensor.from_numpy(X, format=fx))
    assert y.to_numpy().tolist() == SPMV.tolist()


def test_8_csr_plus_coo_into_dense():
    c = ls.Tensor.from_coo(np.array([[e[0] for e in C_ENTRIES], [e[1] for e in C_ENTRIES]]),
                           np.array([e[2] for e in C_ENTRIES], dtype=float), (4, 6), "coo")
    a = ls.evaluate("A(i,j) = B(i,j) + C(i,j)", out_format="dense",
                    B=ls.Tensor.from_numpy(B, "csr"), C=c)
    np.testing.assert_array_equal(a.to_numpy(), B_PLUS_C)


@pytest.mark.parametrize("fb,fc", [("coo", "dense"), ("csr", "dense"), ("csr", "coo"),
                                   ("dense", "coo"), ("coo", "coo")])
@pytest.mark.parametrize("fo", ["dense", "csr", "coo"])
def test_9_hadamard(fb, fc, fo):
    a = ls.evaluate("A(i,j) = B(i,j) * C(i,j)", out_format=fo,
                    B=ls.Tensor.from_numpy(B, fb), C=ls.Tensor.from_numpy(C, fc))
    expected = np.zeros((4, 6))
    expected[0, 1], expected[3, 0], expected[3, 4] = 10, 400, 540
    np.testing.assert_array_equal(a.to_numpy(), expected)


def test_10_csr_plus_csr_into_csr():
    a = ls.evaluate("A(i,j) = B(i,j) + C(i,j)", out_format="csr",
                    B=ls.Tensor.from_numpy(B, "csr"), C=ls.Tensor.from_numpy(C, "csr"))
    assert a.level_arrays[1]["pos"].tolist() == [0, 3, 6, 7, 10]
    assert a.level_arrays[1]["crd"][:10].tolist() == [0, 1, 5, 0, 1, 2, 0, 0, 3, 4]
    assert a.values[:10].tolist() == [5, 11, 20, 7, 3, 30, 40, 58, 4, 69]


def test_11_coo_plus_coo_into_coo():
    a = ls.evaluate("A(i,j) = B(i,j) + C(i,j)", out_format="coo",
                    B=ls.Tensor.from_numpy(B, "coo"), C=ls.Tensor.from_numpy(C, "coo"))
    assert a.level_arrays[0]["pos"].tolist() == [0, 10]
    rows = a.level_arrays[0]["crd"][:10].tolist()
    cols = a.level_arrays[1]["crd"][:10].tolist()
    assert list(zip(rows, cols)) == sorted(zip(*np.nonzero(B_PLUS_C)))
    assert a.values[:10].tolist() == B_PLUS_C[np.nonzero(B_PLUS_C)].tolist()


DUP_ROWS = [2, 0, 2, 0, 1, 0]
DUP_COLS = [1, 3, 1, 0, 2, 3]
DUP_VALS = [1.0, 2, 3, 4, 5, 6]
DUP_DENSE = np.array([[4.0, 0, 0, 8], [0, 0, 5, 0], [0, 4, 0, 0]])


@pytest.mark.parametrize("fmt", ["coo", "csr", "dcsr", "dense", "hash", "dia", "ell", "ell-rows"])
def test_12_duplicates_from_coo(fmt):
    m = ls.Tensor.from_coo(np.array([DUP_ROWS, DUP_COLS]), np.array(DUP_VALS), (3, 4), fmt)
    np.testing.assert_array_equal(m.to_numpy(), DUP_DENSE)
    for x, y in [([1, 1, 1, 1], [12, 5, 4]), ([1, 2, 3, 4], [36, 15, 8])]:
        got = ls.evaluate("y(i) = M(i,j) * x(j)", out_format="dense", M=m,
                          x=np.array(x, dtype=float))
        assert got.to_numpy().tolist() == y


def _unordered_coo():
    """The example stored as given: unordered, non-unique COO (no sorting by from_coo)."""
    fmt = ls.Format([ls.Level("compressed", 0, {"unique": False, "ordered": False}),
                     ls.Level("singleton", 1, {"unique": False, "ordered": False})])
    return ls.Tensor((3, 4), fmt, "float64", "int32", [3, 4],
                     [{"pos": np.array([0, 6], np.int32),
                       "crd": np.array(DUP_ROWS, np.int32)},
                      {"crd": np.array(DUP_COLS, np.int32)}],
                     [{}, {}], np.array(DUP_VALS))


def test_12_unordered_storage_roundtrip():
    m = _unordered_coo()
    m.validate()
    np.testing.assert_array_equal(m.to_numpy(), DUP_DENSE)


@pytest.mark.parametrize("x,y", [([1, 1, 1, 1], [12, 5, 4]), ([1, 2, 3, 4], [36, 15, 8])])
def test_12_unordered_spmv_scatter(x, y):
    got = ls.evaluate("y(i) = M(i,j) * x(j)", out_format="dense", M=_unordered_coo(),
                      x=np.array(x, dtype=float))
    assert got.to_numpy().tolist() == y


def test_12_unordered_plus_into_dense():
    got = ls.evaluate("A(i,j) = M(i,j) + N(i,j)", out_format="dense", M=_unordered_coo(),
                      N=ls.Tensor.from_numpy(DUP_DENSE, "csr"))
    np.testing.assert_array_equal(got.to_numpy(), 2 * DUP_DENSE)


# 13: third-order COO kernels
B3 = np.zeros((2, 3, 4))
for (i, j, k), v in {(0, 0, 1): 1, (0, 2, 0): 2, (0, 2, 3): 3, (1, 1, 2): 4,
                     (1, 2, 3): 5}.items():
    B3[i, j, k] = v
C3 = np.zeros((2, 3, 4))
for (i, j, k), v in {(0, 0, 1): 10, (0, 1, 1): 20, (1, 2, 3): 30}.items():
    C3[i, j, k] = v


def coo3(a):
    return ls.Tensor.from_numpy(a, format="coo")


@pytest.mark.parametrize("fo", ["coo", "dense"])
def test_13_ttv(fo):
    a = ls.evaluate("A(i,j) = B(i,j,k) * c(k)", out_format=fo, B=coo3(B3),
                    c=np.array([1.0, 2, 3, 4]))
    assert a.to_numpy().tolist() == [[2, 0, 14], [0, 12, 20]]


@pytest.mark.parametrize("fo", ["coo", "dense"])
def test_13_ttm(fo):
    ckl = np.array([[1.0, 2, 3, 4], [5, 6, 7, 8]])
    a = ls.evaluate("A(i,j,l) = B(i,j,k) * C(l,k)", out_format=fo, B=coo3(B3), C=ckl)
    got = a.to_numpy()
    assert got[0].tolist() == [[2, 6], [0, 0], [14, 34]]
    assert got[1].tolist() == [[0, 0], [12, 28], [20, 40]]


def test_13_mttkrp():
    ckj = np.array([[1.0, 2], [3, 4], [5, 6]])
    dlj = np.array([[1.0, 2], [3, 4], [5, 6], [7, 8]])
    a = ls.evaluate("A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", out_format="dense",
                    B=coo3(B3), C=ckj, D=dlj)
    assert a.to_numpy().tolist() == [[118, 176], [235, 336]]


@pytest.mark.parametrize("fo", ["coo", "dense"])
def test_13_plus(fo):
    a = ls.evaluate("A(i,j,k) = B(i,j,k) + C(i,j,k)", out_format=fo, B=coo3(B3), C=coo3(C3))
    coords, vals = a.to_coo()
    got = {tuple(c): v for c, v in zip(coords.T.tolist(), vals.tolist()) if v != 0}
    assert got == {(0, 0, 1): 11, (0, 1, 1): 20, (0, 2, 0): 2, (0, 2, 3): 3,
                   (1, 1, 2): 4, (1, 2, 3): 35}
    if fo == "coo":
        assert a.level_arrays[0]["pos"].tolist() == [0, 6]


def test_13_innerprod():
    a = ls.evaluate("a = B(i,j,k) * C(i,j,k)", out_format="dense", B=coo3(B3), C=coo3(C3))
    assert float(a.to_numpy()) == 160.0


def test_14_coo_spdm():
    rng = np.random.default_rng(0)
    dense = rng.integers(0, 5, (6, 3)).astype(float)
    a = ls.evaluate("A(i,j) = B(i,k) * C(k,j)", out_format="dense",
                    B=ls.Tensor.from_numpy(B, "coo"), C=dense)
    np.testing.assert_array_equal(a.to_numpy(), B @ dense)


# ---------------------------------------------------------------------------------------
# 6.3: lattice shapes, fusion, capabilities
# ---------------------------------------------------------------------------------------
def _lattice(expr, full_uids=()):
    def iter_of(op: Operand):
        return Iter(op.uid, 0)

    def is_full(it: Iter):
        return it.uid in full_uids

    return build_lattice(expr, iter_of, is_full), is_full


def _points(lattice):
    return [frozenset(it.uid for it in p) for p in lattice.points]


S1, S2 = Operand("s1", ("i",), 1), Operand("s2", ("i",), 2)
D1, D2 = Operand("d1", ("i",), 3), Operand("d2", ("i",), 4)


def test_16_lattice_mul():
    lat, _ = _lattice(Apply(MUL, (S1, S2)))
    assert _points(lat) == [frozenset({1, 2})]


def test_16_lattice_add():
    lat, _ = _lattice(Apply(ADD, (S1, S2)))
    assert _points(lat)[0] == frozenset({1, 2})
    assert sorted(_points(lat)[1:], key=sorted) == [frozenset({1}), frozenset({2})]


def test_16_lattice_dense_plus_sparse_pruned():
    lat, _ = _lattice(Apply(ADD, (D1, S2)), full_uids={3})
    assert _points(lat) == [frozenset({3, 2}), frozenset({3})]


def test_16_lattice_sparse_times_dense_locates():
    lat, is_full = _lattice(Apply(MUL, (S1, D1)), full_uids={3})
    assert _points(lat) == [frozenset({1, 3})]
    iterated, located = choose_iterated(lat, lat.points[0],
                                        can_locate=lambda it: it.uid == 3, is_full=is_full)
    assert [it.uid for it in iterated] == [1]
    assert [it.uid for it in located] == [3]


@pytest.mark.parametrize("op", [ADD, MUL])
def test_16_lattice_two_dense(op):
    lat, is_full = _lattice(Apply(op, (D1, D2)), full_uids={3, 4})
    assert _points(lat) == [frozenset({3, 4})]
    iterated, located = choose_iterated(lat, lat.points[0], can_locate=lambda it: True,
                                        is_full=is_full)
    assert len(iterated) == 1 and len(located) == 1


def _loops(kernel, var):
    return len(re.findall(rf"^\"?{re.escape(var)}\.head(\.\d+)?\"?:", kernel.llvm_ir, re.MULTILINE))


def test_17_coo_spmv_single_loop_where_rows_are_unordered():
    """The paper's fused single loop (y[crd0[p]] += ... per entry) is kept where a row's
    entries need not be adjacent (unordered coordinates)."""
    k = ls.compile("y(i) = A(i,j) * x(j)", out_format="dense", A="coo-unordered", x="dense")
    y = k(A=ls.Tensor.from_numpy(B, "coo-unordered"), x=X).to_numpy()
    np.testing.assert_allclose(y, B @ X)
    assert _loops(k, "i") == 1
    assert _loops(k, "j") == 0
    assert "dedup" not in k.llvm_ir


def test_17_sorted_coo_spmv_single_loop_sums_each_row_in_a_register():
    """The paper's single loop, with sorted rows summed in a register: each position
    continues its row's sum; where the row changes, a branch stores the finished sum and
    restarts it, so y is never read and the adds follow the row's order, bit for bit."""
    k = ls.compile("y(i) = A(i,j) * x(j)", out_format="dense", A="coo", x="dense")
    y = k(A=ls.Tensor.from_numpy(B, "coo"), x=X).to_numpy()
    assert _loops(k, "i") == 1
    assert _loops(k, "j") == 0
    assert "dedup" not in k.llvm_ir and "run.sum" in k.llvm_ir
    coo = sp.coo_matrix(B)
    expected = np.zeros(B.shape[0])
    for row, col, value in zip(coo.row, coo.col, coo.data):  # row-major, in order
        expected[row] += value * X[col]
    np.testing.assert_array_equal(y, expected)


def test_17_coo_dense_hadamard_single_loop():
    k = ls.compile("A(i,j) = B(i,j) * C(i,j)", out_format="dense", B="coo", C="dense")
    k(B=ls.Tensor.from_numpy(B, "coo"), C=C)
    assert _loops(k, "i") == 1
    assert _loops(k, "j") == 0
    assert "dedup" not in k.llvm_ir


def test_17_dia_spmv_two_loops():
    k = ls.compile("y(i) = A(i,j) * x(j)", out_format="dense", A="dia", x="dense")
    y = k(A=ls.Tensor.from_numpy(B, "dia"), x=X)
    assert y.to_numpy().tolist() == SPMV.tolist()
    heads = set(re.findall(r"^\"?([\w$]+)\.head\"?:", k.llvm_ir,
                           re.MULTILINE)) - {"fill", "dedup"}
    assert "i" in heads
    assert "j" not in heads
    assert len(heads) == 2  # the hidden diagonal variable and i


@pytest.mark.parametrize("fmt", ["dia", "ell"])
def test_18_dia_ell_output_rejected(fmt):
    with pytest.raises(ls.ScheduleError):
        k = ls.compile("C(i,j) = A(i,j)", out_format=fmt, A="csr")
        k(A=ls.Tensor.from_numpy(B, "csr"))


def test_18_unordered_union_into_append_goes_through_a_sort():
    """Digest pitfall 3 / test 18: an unordered merge into an append-only output is either
    rejected or goes through a scratch sort. llvsparse sorts the unordered operand into a
    coordinate list first, and says so in the kernel's conversions."""
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", out_format="csr", A="hash", B="csr")
    result = kernel(A=ls.Tensor.from_numpy(B, "hash"), B=ls.Tensor.from_numpy(C, "csr"))
    np.testing.assert_array_equal(result.to_numpy(), B + C)
    assert list(kernel.last.conversions) == ["A"]
    without_sort = ls.Kernel("C(i,j) = A(i,j) + B(i,j)", {"A": "hash", "B": "csr"}, "csr",
                             convert=False)
    with pytest.raises(ls.ScheduleError, match="unordered"):
        without_sort.instance()
