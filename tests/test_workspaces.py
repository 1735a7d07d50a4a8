"""Scattered outputs go through a workspace (paper 002) instead of being refused.

Gustavson's SpGEMM (CSR x CSR -> CSR runs i, k, j) reduces each row into a dense
workspace and appends it sorted; the outer product (CSC x CSR runs k, i, j) and a
transposed copy reduce everything into a sparse one. Every result is checked against
numpy/scipy, on every call of a kernel called three times.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llvsparse.backends.llvm.workspace_dense import SORT_ROWS_UP_TO
from llvsparse.ir.schedule.scheduler import ScatteredOutputError

import llvsparse as ls
import llvsparse.calls.workspaces
import llvsparse.kernel.api

SPGEMM = "C(i,j) = A(i,k) * B(k,j)"
POLICIES = ["dense", "hash", "sort", "bucket"]
# Output formats assembled by appending (llvsparse/tensors/format.py's names).
APPENDED = ["csr", "csc", "dcsr", "dcsc", "coo", "coo-unordered", "csf"]


def _matrix(rows: int, cols: int, density: float, seed: int) -> sp.csr_matrix:
    return sp.random(rows, cols, density=density, format="csr", random_state=seed)


def _calls(kernel: ls.Kernel, operands: dict, times: int = 3) -> list[ls.Tensor]:
    results = []
    for _ in range(times):
        result = kernel(**operands)
        result.validate()
        results.append(result)
    return results


A = _matrix(40, 30, 0.1, 1)
B = _matrix(30, 50, 0.1, 2)
D = _matrix(40, 50, 0.1, 3)


@pytest.mark.parametrize("policy", [None, *POLICIES])
def test_gustavson_spgemm_into_csr_matches_scipy(policy):
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C="csr", workspace=policy)
    expected = (A @ B).tocsr()
    expected.sort_indices()
    for result in _calls(kernel, {"A": A, "B": B}):
        got = result.to_scipy()
        assert got.has_sorted_indices
        np.testing.assert_array_equal(got.indptr, expected.indptr)
        np.testing.assert_array_equal(got.indices, expected.indices)
        np.testing.assert_allclose(got.data, expected.data, rtol=1e-13)


def test_gustavson_concrete_notation_shows_a_dense_workspace():
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C="csr")
    kernel(A=A, B=B)
    assert kernel.concrete == ("forall(i, where(forall(j, C(i,j) = w(j)), forall(k, forall(j, "
                               "w(j) += A(i,k) * B(k,j)))) "
                               "with w: float64 [dense:0] (dense workspace))")


@pytest.mark.parametrize("policy", ["hash", "sort"])
def test_outer_product_concrete_notation_shows_a_sparse_workspace(policy):
    kernel = ls.compile(SPGEMM, A="csc", B="csr", C="csr", workspace=policy)
    result = kernel(A=A.tocsc(), B=B)
    assert kernel.concrete == ("where(forall(i, forall(j, C(i,j) = w(i,j))), forall(k, forall(i, "
                               "forall(j, w(i,j) += A(k,i) * B(k,j))))) with w: float64 "
                               f"[hashed:0, hashed:1] ({policy} workspace)")
    np.testing.assert_allclose(result.to_numpy(), (A @ B).toarray(), rtol=1e-13)


def test_rule_prefers_a_converted_operand_to_a_sparse_workspace():
    """Left to the rule, the outer product converts A to row-major and runs Gustavson
    through a dense workspace (cage10: 60 ms, against 0.9-1.1 s through a sparse one)."""
    kernel = ls.compile(SPGEMM, A="csc", B="csr", C="csr")
    result = kernel(A=A.tocsc(), B=B)
    assert list(kernel.last.conversions) == ["A"]
    assert kernel.concrete.startswith("forall(i, where(forall(j, C(i,j) = w(j)), ")
    np.testing.assert_allclose(result.to_numpy(), (A @ B).toarray(), rtol=1e-13)


def test_workspace_of_the_wrong_name_is_refused_clearly():
    with pytest.raises(ValueError, match="unknown workspace 'dens'.*'dense', 'hash', 'sort'"):
        ls.compile(SPGEMM, A="csr", B="csr", C="csr", workspace="dens")


SCATTERS = [  # statement, formats, operands, reference
    (SPGEMM, {"A": "csr", "B": "csr", "C": "dcsr"}, lambda: {"A": A, "B": B},
     lambda: (A @ B).toarray()),
    (SPGEMM, {"A": "csc", "B": "csc", "C": "csc"}, lambda: {"A": A.tocsc(), "B": B.tocsc()},
     lambda: (A @ B).toarray()),
    ("C(i,j) = A(i,k) * B(k,j) + D(i,j)", {"A": "csr", "B": "csr", "D": "csr", "C": "csr"},
     lambda: {"A": A, "B": B, "D": D}, lambda: (A @ B + D).toarray()),
    (SPGEMM, {"A": "csc", "B": "csr", "C": "csr"}, lambda: {"A": A.tocsc(), "B": B},
     lambda: (A @ B).toarray()),
    (SPGEMM, {"A": "coo", "B": "coo", "C": "coo"}, lambda: {"A": A, "B": B},
     lambda: (A @ B).toarray()),
    ("y(j) = A(i,j) * x(i)", {"A": "csr", "x": "dense", "y": "sparse"},
     lambda: {"A": A, "x": np.linspace(1, 2, 40)}, lambda: A.T @ np.linspace(1, 2, 40)),
    ("C(j,i) = A(i,j)", {"A": "csr", "C": "csr"}, lambda: {"A": A}, lambda: A.T.toarray()),
]


@pytest.mark.parametrize("policy", [None, *POLICIES])
@pytest.mark.parametrize(("statement", "formats", "operands", "reference"), SCATTERS,
                         ids=[f"{s} {f}" for s, f, _, _ in SCATTERS])
def test_scattered_outputs_match_numpy(statement, formats, operands, reference, policy):
    kernel = ls.compile(statement, workspace=policy, **formats)
    for result in _calls(kernel, operands()):
        np.testing.assert_allclose(result.to_numpy(), reference(), rtol=1e-13)


def _tensor3(shape: tuple[int, ...], density: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.random(shape) * (rng.random(shape) < density)


def test_ttm_and_mttkrp_into_sparse_outputs_match_numpy():
    X = _tensor3((6, 7, 8), 0.3, 4)
    U, P, Q = _tensor3((5, 8), 1, 5), _tensor3((7, 4), 1, 6), _tensor3((8, 4), 1, 7)
    ttm = ls.compile("Y(i,j,l) = X(i,j,k) * U(l,k)", X="csf", U="dense", Y="csf")
    for result in _calls(ttm, {"X": X, "U": U}):
        np.testing.assert_allclose(result.to_numpy(), np.einsum("ijk,lk->ijl", X, U))
    mttkrp = ls.compile("M(i,j) = X(i,k,l) * P(k,j) * Q(l,j)", X="csf", M="csr")
    for result in _calls(mttkrp, {"X": X, "P": P, "Q": Q}):
        np.testing.assert_allclose(result.to_numpy(), np.einsum("ikl,kj,lj->ij", X, P, Q))


def test_dense_workspace_too_large_for_memory(monkeypatch):
    """A dense workspace larger than memory: a MemoryError naming it and its size when
    asked for by name, a sparse workspace (same result) when the rule chose it."""
    monkeypatch.setattr(ls.calls.workspaces, "physical_memory", lambda: 1000)  # < 50 x 24 bytes
    forced = ls.compile(SPGEMM, A="csr", B="csr", C="csr", workspace="dense")
    with pytest.raises(MemoryError, match=r"dense workspace w\(j\) needs 1\.2 KiB "
                                          r"\(50 coordinates x 24 bytes\)"):
        forced(A=A, B=B)
    chosen = ls.compile(SPGEMM, A="csr", B="csr", C="csr")
    for result in _calls(chosen, {"A": A, "B": B}):
        np.testing.assert_allclose(result.to_numpy(), (A @ B).toarray(), rtol=1e-13)


@pytest.mark.parametrize("policy", POLICIES)
def test_spgemm_on_threads_matches_serial_bit_for_bit(policy, monkeypatch):
    """Rows split among threads, each with its own workspace (the gathered assembly)."""
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 1000)
    monkeypatch.setattr(ls.calls.kernel_calls, "ASSEMBLY_MIN_ENTRIES", 1000)
    a, b = _matrix(400, 300, 0.05, 8), _matrix(300, 350, 0.05, 9)
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C="csr", workspace=policy)
    assert kernel.bind(threads=2, A=a, B=b).plan is not None
    serial = kernel(threads=1, A=a, B=b).to_scipy()
    for _ in range(3):
        threaded = kernel(threads=2, A=a, B=b)
        threaded.validate()
        threaded = threaded.to_scipy()
        for part in ("indptr", "indices", "data"):
            np.testing.assert_array_equal(getattr(threaded, part), getattr(serial, part))
    np.testing.assert_allclose(serial.toarray(), (a @ b).toarray(), rtol=1e-13)


# Differential: random products and sums whose operands' storage orders scatter into
# outputs assembled by appending; none may be refused as scattered.
N = 7
FACTORS = ["A(i,k)", "A(k,i)", "B(k,j)", "B(j,k)", "D(i,j)", "D(j,i)", "x(k)", "x(j)", "2"]
INPUT_FORMATS = ["csr", "csc", "dcsr", "coo", "dense", "hash"]
TERMS = st.lists(st.sampled_from(FACTORS), min_size=1, max_size=3).map(lambda f: " * ".join(f))


def _uses_i_and_j(terms: list[tuple[str, str]]) -> bool:
    used = {v for _, term in terms for f in term.split(" * ") if f != "2"
            for v in f[2:-1].split(",")}
    return {"i", "j"} <= used


EXPRESSIONS = st.lists(st.tuples(st.sampled_from(["+", "-"]), TERMS), min_size=1,
                       max_size=3).filter(_uses_i_and_j)


def _einsum_term(term: str, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """The term over (i, j, k), broadcast; summed over k by the caller."""
    total = np.ones((N, N, N))
    for factor in term.split(" * "):
        if factor == "2":
            total = total * 2
        else:
            total = total * _broadcast(arrays[factor[0]], factor[2:-1].split(","))
    return total


def _broadcast(array: np.ndarray, idx: list[str]) -> np.ndarray:
    """``array`` indexed by ``idx`` as an (i, j, k) array."""
    letters = "".join(idx)
    full = np.einsum(f"{letters}->{''.join(sorted(letters, key='ijk'.index))}", array)
    shape = [N if v in idx else 1 for v in "ijk"]
    return full.reshape(shape)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(terms=EXPRESSIONS, formats=st.lists(st.sampled_from(INPUT_FORMATS), min_size=4,
                                           max_size=4),
       out_format=st.sampled_from(APPENDED), seed=st.integers(0, 3))
def test_random_scatters_into_appended_outputs_match_numpy(terms, formats, out_format, seed):
    rng = np.random.default_rng(seed)
    arrays = {n: (rng.integers(-4, 5, (N, N)) * (rng.random((N, N)) < 0.35)).astype(float)
              for n in "ABD"}
    arrays["x"] = (rng.integers(-4, 5, N) * (rng.random(N) < 0.5)).astype(float)
    expr = " ".join(f"{sign} {term}" for sign, term in terms).lstrip("+ ")
    summed = "k" in expr  # sum_k over an expression without k is refused
    statement = f"Z(i,j) = sum_k({expr})" if summed else f"Z(i,j) = {expr}"
    used = sorted({f[0] for _, t in terms for f in t.split(" * ") if f != "2"})
    given_formats = dict(zip("ABDx", formats))
    given_formats["x"] = "dense" if given_formats["x"] not in ("dense", "coo", "hash") else \
        given_formats["x"]
    operands = {n: ls.Tensor.from_numpy(arrays[n], format=given_formats[n]) for n in used}
    expected = np.zeros((N, N))
    for sign, term in terms:
        value = _einsum_term(term, arrays)
        expected += (1 if sign == "+" else -1) * (value.sum(axis=2) if summed else value[..., 0])
    try:
        kernel = ls.compile(statement, out_format=out_format,
                            **{n: given_formats[n] for n in used})
        results = _calls(kernel, operands)
    except ScatteredOutputError:
        raise
    except ls.ScheduleError as error:  # operands whose storage orders conflict
        assert "conflict" in str(error), str(error)
        return
    for call, result in enumerate(results):
        np.testing.assert_allclose(result.to_numpy(), expected, rtol=1e-12, atol=1e-12,
                                   err_msg=f"{statement} {given_formats} -> {out_format}, "
                                           f"call {call}")


def test_workspace_past_64_bit_coordinates_is_refused():
    """A sparse workspace numbers its coordinates in 64-bit keys (row-major over the
    covered indices): 2**31 x 2**31 would wrap, so it is refused before the call."""
    n = 2**31
    A = ls.Tensor.from_coo(np.array([[0, 5], [3, 1]]), np.array([1.0, 2.0]), (n, n),
                           format="coo")
    kernel = ls.compile("C(j,i) = A(i,j)", A="coo", C="coo", workspace="sort")
    with pytest.raises(ValueError, match=r"sort workspace w\(j,i\) would number "
                                         r"4611686018427387904 coordinates"):
        kernel(A=A)


def _csr_spgemm_in_order(a: sp.csr_matrix, b: sp.csr_matrix) -> sp.csr_matrix:
    """scipy's ``a @ b`` with sorted rows, after checking that every call of the CSR
    Gustavson kernel gives exactly its pattern, in order, and its values."""
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C="csr")
    expected = (a @ b).tocsr()
    expected.sort_indices()
    for result in _calls(kernel, {"A": a, "B": b}):
        got = result.to_scipy()
        np.testing.assert_array_equal(got.indptr, expected.indptr)
        np.testing.assert_array_equal(got.indices, expected.indices)
        np.testing.assert_allclose(got.data, expected.data, rtol=1e-13)
    return expected


def test_rows_spread_over_many_columns_are_sorted_or_scanned():
    """A row's coordinates come out in order both ways a dense workspace drains it: a
    bitmap scan where they are many for their spread, a sort where few spread wide
    (10**6 columns span 245 chunks of 4,096: a row of more than 61 entries is scanned)."""
    rng = np.random.default_rng(3)
    a = sp.csr_matrix((rng.random((60, 40)) < np.linspace(0.02, 0.6, 60)[:, None]) * 1.5)
    b = sp.random(40, 10**6, density=4e-6, format="csr", random_state=4)
    expected = _csr_spgemm_in_order(a, b)
    lengths = np.diff(expected.indptr)
    assert 0 < lengths[lengths > 0].min() <= 61 < lengths.max()  # both ways taken


def test_short_and_long_rows_drain_in_order():
    """Runs of at most SORT_ROWS_UP_TO coordinates are sorted without a look at their
    span, longer ones over few chunks of 4,096 columns are scanned: rows of 0 to 40 entries
    over 1,000 columns (one chunk) take both ways, either side of the bound."""
    rng = np.random.default_rng(5)
    lengths = np.arange(41)
    rows = np.repeat(np.arange(41), lengths)
    cols = np.concatenate([rng.choice(1000, n, replace=False) for n in lengths])
    a = sp.csr_matrix((rng.random(rows.size) + 0.5, (rows, cols)), shape=(41, 1000))
    eye = sp.identity(1000, format="csr") * 2.0
    expected = _csr_spgemm_in_order(a, eye)
    assert {SORT_ROWS_UP_TO, SORT_ROWS_UP_TO + 1} <= set(np.diff(expected.indptr))


@pytest.mark.parametrize("fmt", ["dcsr", "coo"])
def test_union_keeps_its_other_term_where_a_row_is_absent(fmt):
    """sum_k(A(i,k) + B(k,j)) with row 1 of A stored nowhere: the workspace's producer
    was skipped for that row (A absent), losing B's term; it must still add B."""
    rng = np.random.default_rng(0)
    a = (rng.integers(-4, 5, (6, 5)) * (rng.random((6, 5)) < 0.4)).astype(float)
    a[1] = 0
    b = (rng.integers(-4, 5, (5, 7)) * (rng.random((5, 7)) < 0.4)).astype(float)
    kernel = ls.compile("Z(i,j) = sum_k(A(i,k) + B(k,j))", A=fmt, B="csr", out_format="csr")
    operands = {"A": ls.Tensor.from_numpy(a, format=fmt), "B": ls.Tensor.from_numpy(b, "csr")}
    for result in _calls(kernel, operands):
        np.testing.assert_array_equal(result.to_numpy(),
                                      (a[:, None, :] + b.T[None, :, :]).sum(axis=2))


@pytest.mark.parametrize("policy", [None, *POLICIES])
@pytest.mark.parametrize("fills", [(2.0, 3.0), (np.inf, np.inf), (1.0, 0.0), (np.nan, np.nan)])
def test_a_workspace_under_a_result_fill_other_than_zero(policy, fills):
    """The workspace holds only the coordinates a nest computes; the rest are the
    result's fill, which is not 0 here (A + B' with fills 2 and 3 has fill 5, A @ B with
    NaN fills is NaN where no k meets): against numpy on the dense arrays."""
    fa, fb = fills
    a, b = (_matrix(6, 6, 0.3, seed).toarray() for seed in (7, 8))
    a, b = np.where(a != 0, a, fa), np.where(b != 0, b, fb)
    A = ls.Tensor.from_numpy(a, "csr", fill=fa)
    B = ls.Tensor.from_numpy(b, "csr", fill=fb)
    with np.errstate(invalid="ignore"):
        product = np.where(np.isnan(b[None]) | (b[None] != 0) | (fb != 0),
                           a[:, :, None] * b[None], 0.0).sum(axis=1)
    for text, expected in (("C(i,j) = A(i,j) + B(j,i)", a + b.T), (SPGEMM, product)):
        got = ls.compile(text, A="csr", B="csr", out_format="csr", workspace=policy)(A=A, B=B)
        np.testing.assert_allclose(got.to_numpy(), expected, equal_nan=True, err_msg=text)
