"""Work bounded by what is stored (issue 32), checked by counting, not timing: a
counting build (``ls.compile(..., counting=True)``, backends/llvm/counting.py) counts
every loop head a call runs, so growing every dimension 4x at a fixed number of stored
entries must leave the count of a kernel over sparse levels almost unchanged. Each case
is checked against numpy too.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
from llvsparse.soak.complexity import Growth, complexity_soak

ENTRIES = 400
SIZES = (4096, 16384)  # hypersparse at both: rows and fibres hold about one entry each
GROWTH = 1.5  # the most a count may grow for 4x dimensions (collisions, hashing)


def _matrix(n: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, n, (2, ENTRIES))
    return sp.coo_matrix((rng.random(ENTRIES), (rows, cols)), shape=(n, n)).tocsr()


def _tensor3(n: int, seed: int, fmt: str = "csf") -> ls.Tensor:
    rng = np.random.default_rng(seed)
    return ls.Tensor.from_coo(rng.integers(0, n, (3, ENTRIES)), rng.random(ENTRIES),
                              (n, n, n), format=fmt)


def _counts(kernel, operands_at) -> list[int]:
    counts = []
    for n in SIZES:
        operands, check = operands_at(n)
        check(kernel(**operands))
        counts.append(kernel.loop_count)
    return counts


def _same_entries(result: ls.Tensor, expected: dict) -> None:
    """``result`` stores ``expected`` ({coordinates: value}) up to rounding, and no
    other nonzero value."""
    coords, values = result.to_coo()
    got = {}
    for key, value in zip(zip(*coords.tolist()), values.tolist()):
        got[key] = got.get(key, 0.0) + value
    got = {k: v for k, v in got.items() if v != 0}
    assert got.keys() == expected.keys()
    np.testing.assert_allclose([got[k] for k in expected], list(expected.values()),
                               rtol=1e-12)


def _entries(matrix) -> dict:
    coo = sp.coo_matrix(matrix)
    coo.sum_duplicates()
    return {(int(i), int(j)): float(v) for i, j, v in zip(coo.row, coo.col, coo.data)
            if v != 0}


def _bounded(counts: list[int], what: str) -> None:
    small, large = counts
    assert large <= GROWTH * small, f"{what}: {small} loop heads at n, {large} at 4n"


@pytest.mark.parametrize("out", ["dcsr", "coo"])
def test_dcsr_spgemm(out: str) -> None:
    """Merging each row's k list against all of B's rows was O(rows(A) x rows(B)).
    (A dense output at these sizes would be 2 GB: its size is the bound's, not tested.)"""
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="dcsr", B="dcsr", out_format=out,
                        counting=True)

    def at(n):
        a, b = _matrix(n, 1), _matrix(n, 2)
        operands = {"A": ls.Tensor.from_scipy(a, "dcsr"), "B": ls.Tensor.from_scipy(b, "dcsr")}

        def check(result):
            _same_entries(result, _entries(a @ b))
        return operands, check
    _bounded(_counts(kernel, at), f"DCSR x DCSR -> {out}")


def test_dcsr_spgemm_locates_the_rows_of_b() -> None:
    """Merging each row's k list against B's stored rows (galloping) cost a search per
    entry of A, 3.1x scipy's CSR time at n = 20,000; B read with a full top level (a
    copy made per call, O(n + entries)) is located as CSR's is: the same loop heads as
    DCSR x CSR."""
    a, b = _matrix(4096, 11), _matrix(4096, 12)
    counts = []
    for fb in ("dcsr", "csr"):
        kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="dcsr", B=fb, out_format="dcsr",
                            counting=True)
        result = kernel(A=ls.Tensor.from_scipy(a, "dcsr"), B=ls.Tensor.from_scipy(b, fb))
        _same_entries(result, _entries(a @ b))
        counts.append(kernel.loop_count)
        assert "locate B.0 at k" in kernel.loops
    assert counts[0] == counts[1]


def test_mttkrp_with_finite_factors() -> None:
    """The exact plan visits every (i, k) B does not store; finite factors need not."""
    kernel = ls.compile("A(i,j) = B(i,k,l) * D(l,j) * C(k,j)", B="csf", C="dense",
                        D="dense", out_format="dcsr", counting=True)
    rng = np.random.default_rng(3)

    def at(n):
        b = _tensor3(n, 4)
        c, d = rng.random((n, 8)), rng.random((n, 8))

        def check(result):
            coords, values = b.to_coo()
            expected: dict = {}
            for (i, k, l), v in zip(coords.T.tolist(), values.tolist()):
                row = expected.setdefault(i, np.zeros(8))
                row += v * d[l] * c[k]
            _same_entries(result, {(i, j): float(row[j]) for i, row in expected.items()
                                   for j in range(8) if row[j] != 0})
        return {"B": b, "C": c, "D": d}, check
    _bounded(_counts(kernel, at), "MTTKRP, B in CSF")


@pytest.mark.parametrize("fmt", ["csf", "coo"])
def test_ttm_into_csf(fmt: str) -> None:
    kernel = ls.compile("A(i,j,r) = B(i,j,k) * U(k,r)", B=fmt, U="dense", out_format="csf",
                        counting=True)
    rng = np.random.default_rng(5)

    def at(n):
        b, u = _tensor3(n, 6, fmt), rng.random((n, 4))

        def check(result):
            coords, values = b.to_coo()
            expected: dict = {}
            for (i, j, k), v in zip(coords.T.tolist(), values.tolist()):
                for r in range(4):
                    expected[i, j, r] = expected.get((i, j, r), 0.0) + v * u[k, r]
            _same_entries(result, expected)
        return {"B": b, "U": u}, check
    _bounded(_counts(kernel, at), f"TTM, B in {fmt}")


@pytest.mark.parametrize("fmt", ["dcsr", "coo", "hash"])
def test_sparse_matrix_sums(fmt: str) -> None:
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", A=fmt, B=fmt, out_format="dcsr",
                        counting=True)

    def at(n):
        a, b = _matrix(n, 7), _matrix(n, 8)

        def check(result):
            _same_entries(result, _entries(a + b))
        return {"A": ls.Tensor.from_scipy(a, fmt), "B": ls.Tensor.from_scipy(b, fmt)}, check
    _bounded(_counts(kernel, at), f"A + B in {fmt}")


@pytest.mark.parametrize("out", ["dcsc", "dcsr"])
def test_a_locating_level_read_against_its_order(out: str) -> None:
    """Into a column-major output, A's locating column level (under compressed rows) was
    looped over every column to locate it in each row: columns x rows. A converted copy
    of A bounds it (ir/loops/bound.py)."""
    fmt = ls.Format(["compressed", "hashmap"])
    kernel = ls.compile("C(i,j) = max(A(i,j), A(i,j))", A=fmt, out_format=out,
                        counting=True)

    def at(n):
        a = _matrix(n, 10)

        def check(result):
            _same_entries(result, _entries(a))
        return {"A": ls.Tensor.from_scipy(a, fmt)}, check
    _bounded(_counts(kernel, at), f"max(A, A), A in compressed+hashmap -> {out}")
    assert "coordinates of U" not in kernel.loops


def test_a_conversion_that_still_walks_an_extent_is_passed_over() -> None:
    """Where the operands as stored cannot be ordered, the first conversion that lowered
    was taken even when it left A's locating level read against its order (B converted
    alone: j looped over its extent above A's k and i); both converted is bounded."""
    fmt = ls.Format(["compressed", "compressed", "hashmap"])
    kernel = ls.compile("Z(j,k,i) = A(k,i,j) + B(i,j,k)", A=fmt, B="csf", out_format=fmt,
                        counting=True)

    def at(n):
        a, b = _tensor3(n, 13, fmt), _tensor3(n, 14)

        def check(result):
            expected = {}
            for tensor, perm in ((a, (2, 0, 1)), (b, (1, 2, 0))):
                coords, values = tensor.to_coo()
                for c, v in zip(coords.T.tolist(), values.tolist()):
                    key = tuple(c[m] for m in perm)
                    expected[key] = expected.get(key, 0.0) + v
            _same_entries(result, expected)
        return {"A": a, "B": b}, check
    _bounded(_counts(kernel, at), "A(k,i,j) + B(i,j,k) into (j,k,i)")


def _off_diagonal(n: int, seed: int, diagonal: int = 0) -> sp.csr_matrix:
    """ENTRIES random entries off the diagonal, then ``diagonal`` on it."""
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, n, (2, ENTRIES))
    rows, cols = rows[rows != cols], cols[rows != cols]
    on = rng.choice(n, diagonal, replace=False)
    rows, cols = np.concatenate([rows, on]), np.concatenate([cols, on])
    return sp.coo_matrix((rng.random(len(rows)) + 0.5, (rows, cols)), shape=(n, n)).tocsr()


BROADCASTS = [("+", "dcsr", ["compressed", "hashmap"]),
              ("-", ["compressed", "hashmap"], ["compressed", "hashmap"]),
              ("+", ["compressed", "hashmap"], "dcsr"),
              ("-", "dcsr", "coo")]


@pytest.mark.parametrize("op, fa, out", BROADCASTS)
def test_a_term_broadcast_along_an_output_index(op: str, fa, out) -> None:
    """``A(j,i) + A(j,j)`` (the long soak's two violations): A(j,j) lacks i, so the
    kernel as written walks i's extent, and merged A's rows again for every i, even
    where A's diagonal stores nothing; then the statement runs as ``A(j,i) + 0``
    (llvsparse/calls/broadcast_terms.py), the check included in the count."""
    fa = ls.Format(fa) if isinstance(fa, list) else fa
    out = ls.Format(out) if isinstance(out, list) else out
    kernel = ls.compile(f"Z(i,j) = A(j,i) {op} A(j,j)", A=fa, out_format=out,
                        counting=True)

    def at(n):
        a = _off_diagonal(n, 15)

        def check(result):
            _same_entries(result, _entries(a.T))
        return {"A": ls.Tensor.from_scipy(a, fa)}, check
    _bounded(_counts(kernel, at), f"A(j,i) {op} A(j,j), A in {fa} -> {out}")
    sign = 1 if op == "+" else -1
    # With 3 entries on the diagonal the result holds 3 x n of them: the work follows
    # it, where merging A's rows again for every i cost n x rows of A.
    per_entry = []
    for n in (1024, 4096):
        a = _off_diagonal(n, 16, 3)
        result = kernel(A=ls.Tensor.from_scipy(a, fa))
        dense_row = np.zeros(n)
        dense_row[a.diagonal() != 0] = a.diagonal()[a.diagonal() != 0]
        expected = _entries(a.T)
        for j in np.flatnonzero(dense_row):
            for i in range(n):
                value = expected.get((i, j), 0.0) + sign * dense_row[j]
                expected[i, j] = value
        _same_entries(result, {k: v for k, v in expected.items() if v != 0})
        per_entry.append(kernel.loop_count / len(result.values))
    assert per_entry[1] <= GROWTH * per_entry[0], per_entry
    for n, diagonal in ((40, 0), (40, 3), (64, 40), (40, 0)):  # the check, both ways
        a = _off_diagonal(n, n + diagonal, diagonal)
        result = kernel(A=ls.Tensor.from_scipy(a, fa))
        dense = a.toarray()
        np.testing.assert_allclose(result.to_numpy(), dense.T + sign * np.diag(dense)[None, :],
                                   rtol=1e-12)


def test_a_broadcast_term_keeps_its_fill_and_dtype() -> None:
    """The replaced term is its fill: an int operand stays int, a fill of 2 is added."""
    kernel = ls.compile("Z(i,j) = A(i,j) + B(j)", A="dcsr", B="coo", out_format="dcsr")
    a = sp.random(30, 30, density=0.05, format="csr", random_state=1) * 10
    a = a.astype(np.int64)
    for b_coords in ([], [3, 7]):
        for fill in (0, 2):
            b = ls.Tensor.from_coo(np.array([b_coords], dtype=np.int64).reshape(1, -1),
                                   np.arange(1, len(b_coords) + 1, dtype=np.int64), (30,),
                                   format="coo", fill=fill)
            result = kernel(A=ls.Tensor.from_scipy(a, "dcsr"), B=b)
            expected = a.toarray() + b.to_numpy()[None, :]
            assert result.to_numpy().dtype == expected.dtype
            np.testing.assert_array_equal(result.to_numpy(), expected)


def test_a_transposed_copy_whose_rescan_is_of_stored_entries() -> None:
    """``sum_k(A(k,k) * A(i,j))`` into (j, i) (the long soak's case 705): as stored, j
    looped over its extent to locate it in A's hashmap level under every row; a copy of
    A in (j, i) order was refused because A(k,k) is walked again for every (j, i), which
    costs stored entries times stored entries, not a dimension: now taken."""
    fa = ls.Format(["compressed", "hashmap"])
    kernel = ls.compile("Z(j,i) = sum_k(A(k,k) * A(i,j))", A=fa, out_format="dcsr",
                        counting=True)

    def at(n):
        a = _off_diagonal(n, 17, 2)

        def check(result):
            _same_entries(result, _entries(a.T * a.diagonal().sum()))
        return {"A": ls.Tensor.from_scipy(a, fa)}, check
    _bounded(_counts(kernel, at), "sum_k(A(k,k) * A(i,j)) -> (j, i)")
    a = _off_diagonal(30, 18, 4)
    result = kernel(A=ls.Tensor.from_scipy(a, fa))
    np.testing.assert_allclose(result.to_numpy(), np.einsum("kk,ij->ji", a.toarray(),
                                                            a.toarray()), rtol=1e-12)


def test_a_counting_build_counts_every_iteration() -> None:
    """SpMV over CSR: a loop head per row and per entry, and one more per loop entered."""
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", counting=True)
    a = _matrix(50, 9)
    y = kernel(A=ls.Tensor.from_scipy(a, "csr"), x=np.ones(50))
    np.testing.assert_allclose(y.to_numpy(), a @ np.ones(50), rtol=1e-12)
    assert a.nnz + 50 <= kernel.loop_count <= a.nnz + 3 * 50 + 10
    plain = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    plain(A=ls.Tensor.from_scipy(a, "csr"), x=np.ones(50))
    assert plain.loop_count is None


COMPLEXITY_SEED = 2026  # fixed: CI measures the same cases every time


def _report(results) -> str:
    return "\n" + "\n".join(str(g) for g in results)


def test_a_growth_beyond_the_result_is_a_violation() -> None:
    assert Growth("c", (100, 140), (10, 10)).violation is False
    assert Growth("c", (100, 400), (10, 10)).violation is True
    assert Growth("c", (100, 400), (10, 40)).violation is False  # the result grew too
    assert Growth("c", (100, 100), (10, 10), zeros=(0, 400)).violation is True
    assert Growth("c", skipped="refused").violation is False
    assert Growth("c", failure="ran past 60 s").violation is True


@pytest.mark.slow
def test_complexity_soak_short() -> None:
    """Random expressions over sparse formats at n and 4n (llvsparse/soak/complexity.py),
    each in a process of its own."""
    results = complexity_soak(24, seed=COMPLEXITY_SEED, timeout=120)
    assert not [g for g in results if g.violation], _report(results)
    assert sum(not g.skipped for g in results) >= 12, _report(results)


@pytest.mark.soak
def test_complexity_soak_long() -> None:
    """``LLVSPARSE_COMPLEXITY_CASES`` (default 2000) and ``LLVSPARSE_COMPLEXITY_SEED``
    (default 1) choose the run: python -m pytest -m soak -k complexity."""
    results = complexity_soak(int(os.environ.get("LLVSPARSE_COMPLEXITY_CASES", "2000")),
                              seed=int(os.environ.get("LLVSPARSE_COMPLEXITY_SEED", "1")))
    assert not [g for g in results if g.violation], _report(
        [g for g in results if g.violation])


def _tensor3_entries(n: int, seed: int, diagonal: int = 0, special: bool = False,
                     cube: bool = False):
    """ENTRIES distinct coordinates of an n x n x n tensor, none with its first two
    equal, then ``diagonal`` that have (A(k,k,i) stores them; with ``cube``, A(j,j,j));
    values of either sign; ``special``: some inf, -inf or NaN."""
    rng = np.random.default_rng(seed)
    flat = rng.choice(n ** 3, min(ENTRIES, n ** 3 // 2), replace=False)
    coords = np.array(np.unravel_index(flat, (n, n, n)))
    coords = coords[:, coords[0] != coords[1]]
    on = rng.choice(n, (2, diagonal))
    coords = np.concatenate([coords, np.stack([on[0], on[0], on[0] if cube else on[1]])],
                            axis=1)
    coords = np.unique(coords, axis=1)
    values = (rng.random(coords.shape[1]) + 0.5) * rng.choice([-1.0, 1.0], coords.shape[1])
    if special:
        values[:3] = [np.inf, -np.inf, np.nan]
    return coords, values


def _kki(dense: np.ndarray) -> np.ndarray:
    return np.einsum("kki->ik", dense)[:, None, :]


def _jjj(dense: np.ndarray) -> np.ndarray:
    return np.einsum("jjj->j", dense)[None, :, None]


# The long soak's cases 1588 and 1981: the statement, the term's plane, numpy's form.
ON_VALUES = [("Z(i,j,k) = A(i,j,k) / A(k,k,i)", False, lambda a, t: a / t, _kki),
             ("Z(i,j,k) = min(A(i,j,k), A(j,j,j))", True, np.minimum, _jjj)]


@pytest.mark.parametrize("fmt", ["coo", "csf"])
@pytest.mark.parametrize("statement, cube, function, term", ON_VALUES)
def test_a_broadcast_term_under_an_operator_on_values(fmt, statement, cube, function,
                                                      term) -> None:
    """``A(i,j,k) / A(k,k,i)``: A(k,k,i) lacks j, and a division reads an absent entry
    as its value 0 (no annihilator), so the kernel as written walked j's extent for
    every (k, i) where A's diagonal plane stores nothing (and ``min`` likewise); such a
    term is a broadcast term under any operator that computes on values alone
    (broadcast_terms.py), and the statement runs as ``A(i,j,k) / 0``."""
    kernel = ls.compile(statement, A=fmt, out_format=fmt, counting=True)

    def at(n):
        coords, values = _tensor3_entries(n, 19, cube=cube)

        def check(result):
            """Every coordinate A stores holds f(value, 0); any other, the fill."""
            fill = function(np.float64(0.0), np.float64(0.0))
            np.testing.assert_array_equal(result.fill_value, fill)
            got_coords, got = result.to_coo()
            stored = dict(zip(zip(*got_coords.tolist()), got.tolist()))
            for key, value in zip(zip(*coords.tolist()), function(values, 0.0).tolist()):
                np.testing.assert_array_equal(stored.pop(key, fill), value)
            np.testing.assert_array_equal(list(stored.values()), [fill] * len(stored))
        return {"A": ls.Tensor.from_coo(coords, values, (n,) * 3, format=fmt)}, check
    with np.errstate(divide="ignore", invalid="ignore"):
        _bounded(_counts(kernel, at), f"{statement}, A in {fmt}")
        for n, diagonal, special in ((9, 0, True), (9, 3, False), (9, 3, True), (7, 0, False)):
            coords, values = _tensor3_entries(n, n + diagonal, diagonal, special, cube)
            a = ls.Tensor.from_coo(coords, values, (n,) * 3, format=fmt)
            dense = a.to_numpy()
            np.testing.assert_array_equal(kernel(A=a).to_numpy(),
                                          function(dense, term(dense)))


@pytest.mark.parametrize("statement", ["Z(i,j) = A(j) / B(i,j)", "Z(i,j) = B(i,j) / A(j)",
                                       "Z(i,j) = max(B(i,j), A(j))",
                                       "Z(i,j) = B(i,j) < A(j)",
                                       "Z(i,j) = A(j) / (A(j) / B(i,j)) + A(j)",
                                       "Z(i,j) = B(i,j) * A(j)"])
def test_a_broadcast_term_under_other_operators_keeps_numpy_results(statement: str) -> None:
    """A term lacking an output index is replaced by its fill only under operators that
    compute on values alone: under a product an absent 0 annihilates even a stored NaN
    or inf, which a literal 0 would not, so ``B(i,j) * A(j)`` keeps its kernel.
    Checked against numpy with A storing nothing, or something, and B storing inf and
    NaN."""
    kernel = ls.compile(statement, A="coo", B="dcsr", out_format="dcsr")
    n = 12
    rng = np.random.default_rng(20)
    b = sp.random(n, n, density=0.2, format="csr", random_state=3)
    b.data[:3] = [np.inf, -np.inf, np.nan]
    for a_at in ([], [2, 5]):
        a_dense = np.zeros(n)
        a_dense[a_at] = rng.random(len(a_at)) + 0.5
        a = ls.Tensor.from_coo(np.array([a_at], dtype=np.int64).reshape(1, -1),
                               a_dense[a_at], (n,), format="coo")
        result = kernel(A=a, B=ls.Tensor.from_scipy(b, "dcsr")).to_numpy()
        ns = {"A": a_dense[None, :], "B": b.toarray()}
        with np.errstate(all="ignore"):
            if "*" in statement:  # an absent entry annihilates the product
                expected = np.where((ns["A"] != 0) & (ns["B"] != 0), ns["B"] * ns["A"], 0.0)
            else:
                expected = eval(statement.split("=")[1].replace("(j)", "").replace(
                    "(i,j)", "").replace("max", "np.maximum"), {"np": np}, ns)
        np.testing.assert_array_equal(result, expected)
