"""The autoscheduler: its cost model's picks on synthetic statistics (each rule's
boundary), results against scipy for every pick, and the disk-cached search."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.backends.cpu import STATS
from llvsparse.ir.opt.passes import GALLOP, PAIRS, PREFETCH, SELECT_OTHER
from llvsparse.ir.plan import cost_model as cm
from llvsparse.ir.plan.autoschedule import AutoChoice, KernelInfo, autoschedule

import llvsparse as ls
from llvsparse.calls import auto_choice, kernel_calls, probe
from llvsparse.calls.schedule_search import Candidate, bind_searched, search
from llvsparse.kernel import api

SPMV = "y(i) = A(i,j) * x(j)"
SPGEMM = "C(i,j) = A(i,k) * B(k,j)"


def stats(rows: int, mean: float, skew: float = 1.0, cols: int | None = None) -> cm.OperandStats:
    """Synthetic statistics: ``rows`` rows of ``mean`` entries, the longest ``skew``x."""
    stored = round(rows * mean)
    biggest = round(mean * skew)
    return cm.OperandStats((rows, cols or rows), stored, rows, rows, mean, biggest,
                           biggest / mean if mean else 1.0)


# -- statistics -----------------------------------------------------------------------

def test_stats_from_row_counts():
    s = cm.OperandStats.from_row_counts((4, 10), np.array([0, 3, 1, 8]))
    assert (s.stored, s.rows, s.nonempty_rows, s.max_per_row) == (12, 4, 3, 8)
    assert s.mean_per_row == 3.0 and s.skew == pytest.approx(8 / 3)
    empty = cm.OperandStats.from_row_counts((0, 5), np.zeros(0))
    assert (empty.stored, empty.mean_per_row, empty.skew) == (0, 0.0, 1.0)
    no_entries = cm.OperandStats.from_row_counts((3, 5), np.zeros(3))
    assert no_entries.skew == 1.0 and no_entries.nonempty_rows == 0


def test_stats_refuse_bad_counts():
    with pytest.raises(ValueError, match="non-negative"):
        cm.OperandStats.from_row_counts((2, 2), np.array([1, -1]))
    with pytest.raises(ValueError, match="one-dimensional"):
        cm.OperandStats.from_row_counts((2, 2), np.zeros((2, 2)))


def test_operand_stats_of_a_tensor_match_scipy_and_are_cached():
    a = sp.random(50, 40, density=0.1, format="csr", random_state=3)
    t = ls.Tensor.from_scipy(a, "csr")
    s = auto_choice.operand_stats(t)
    counts = np.diff(a.indptr)
    assert s.stored == a.nnz and s.max_per_row == counts.max()
    assert s.nonempty_rows == np.count_nonzero(counts)
    assert auto_choice.operand_stats(t) is s
    dense = auto_choice.operand_stats(ls.Tensor.from_numpy(np.ones((3, 4)), "dense"))
    assert (dense.stored, dense.mean_per_row, dense.skew) == (12, 4.0, 1.0)


# -- each rule's boundary ---------------------------------------------------------------

def test_pairs_form_boundaries():
    assert cm.pairs_form(stats(1000, cm.PAIRS_LONG_ROWS))[0] == "other"
    assert cm.pairs_form(stats(1000, cm.PAIRS_LONG_ROWS - 0.5))[0] == "first"
    regular = stats(1000, 40, skew=cm.PAIRS_REGULAR_SKEW)
    skewed = stats(1000, 40, skew=cm.PAIRS_REGULAR_SKEW * 1.1)
    assert cm.pairs_form(regular)[0] == "other"
    form, why = cm.pairs_form(skewed)
    assert form is None and "skewed" in why


def test_prefetch_form_boundaries():
    def located(mb: float, mean: float = 10.0) -> cm.OperandStats:
        rows = int(mb * 2**20 / 12 / mean)
        return stats(rows, mean)
    assert cm.prefetch_form(located(9))[0] == "other"
    assert cm.prefetch_form(located(1.9))[0] == "first"
    assert cm.prefetch_form(located(4))[0] is None
    assert cm.prefetch_form(located(9, mean=1.0))[0] == "first"


def test_split_kind_boundaries():
    assert cm.split_kind(stats(100, 10, skew=cm.SPLIT_SKEW))[0] == "entries"
    assert cm.split_kind(stats(100, 10, skew=cm.SPLIT_SKEW * 0.9))[0] == "rows"
    assert cm.split_kind(None)[0] == "rows"


def test_spgemm_model_keeps_dense_where_it_wins_or_ties_and_leaves_it_when_too_wide():
    info = KernelInfo(workspace="dense", product=("A", "B"), columns=10_000)
    long_rows = {"A": stats(10_000, 20), "B": stats(10_000, 20)}
    choice = autoschedule(info, long_rows)
    assert choice.workspace == "dense" and "estimated cheapest" in choice.reasons[0]
    # luxembourg_osm's shape: rows of two entries into a wide accumulator, a tie.
    wide = KernelInfo(workspace="dense", product=("A", "B"), columns=114_599)
    short = {"A": stats(114_599, 2.1), "B": stats(114_599, 2.1)}
    estimates = {e.name: e.ns for e in cm.spgemm_estimates(
        short["A"], short["B"], 114_599, ("dense", "sort"))}
    assert estimates["dense"] < estimates["sort"] * cm.TIE
    tie = autoschedule(wide, short)
    assert tie.workspace == "dense" and "no estimate beats it" in tie.reasons[0]
    # Few products into a million columns: clearing the dense accumulator dominates.
    hyper = KernelInfo(workspace="dense", product=("A", "B"), columns=1_000_000)
    few = {"A": stats(1000, 2, cols=1000), "B": stats(1000, 2, cols=1_000_000)}
    picked = autoschedule(hyper, few)
    assert picked.workspace in ("sort", "hash") and "estimated cheapest" in picked.reasons[0]


def test_spgemm_model_leaves_dense_on_a_wide_product_and_matches_scipy():
    rng = np.random.default_rng(5)
    a = sp.random(1000, 1000, density=0.002, format="csr", random_state=5)
    rows, cols = rng.integers(0, 1000, 2000), rng.integers(0, 1_000_000, 2000)
    b = sp.csr_matrix((rng.random(2000), (rows, cols)), shape=(1000, 1_000_000))
    b.sum_duplicates()
    kernel = ls.compile(SPGEMM, "csr", A="csr", B="csr")
    bound = kernel.bind(A=a, B=b)
    assert bound.auto.workspace in ("sort", "hash")
    assert bound.inst.workspace[0].split()[0] == bound.auto.workspace
    got = bound().to_scipy()
    assert abs(got - a @ b).max() < 1e-12 and got.nnz == (a @ b).nnz


def test_cheapest_overrules_the_rule_only_past_the_tie():
    rule = cm.Estimate("dense", 100.0 * cm.TIE * 1.01, "")
    best = cm.Estimate("sort", 100.0, "")
    assert cm.cheapest([rule, best], "dense") == (best, True)
    close = cm.Estimate("dense", 100.0 * cm.TIE, "")
    assert cm.cheapest([close, best], "dense") == (best, False)
    assert cm.cheapest([best], "bucket") == (best, False)  # the rule's is not estimated
    assert cm.cheapest([], "dense") == (None, False)


def test_user_workspace_and_unmodelled_kernels_keep_their_policy():
    s = {"A": stats(100, 5), "B": stats(100, 5)}
    fixed = autoschedule(KernelInfo(workspace="hash", workspace_fixed=True,
                                    product=("A", "B"), columns=100), s)
    assert fixed.workspace == "hash" and "user named" in fixed.reasons[0]
    other = autoschedule(KernelInfo(workspace="bucket", product=None), s)
    assert other.workspace == "bucket" and "no terms" in other.reasons[0]
    assert autoschedule(KernelInfo(), s).workspace is None


def test_forms_decided_only_when_every_note_agrees():
    s = {"A": stats(1000, 40), "B": stats(1000, 40)}
    assert autoschedule(KernelInfo(other_forms=frozenset({PAIRS}), rows_operand="A"),
                        s).form == "other"
    mixed = autoschedule(KernelInfo(other_forms=frozenset({PAIRS, GALLOP}),
                                    rows_operand="A"), s)
    assert mixed.form is None and "timed" in mixed.reasons[0]
    unknown = autoschedule(KernelInfo(other_forms=None), s)
    assert unknown.form is None and "unknown" in unknown.reasons[0]
    small_b = autoschedule(KernelInfo(other_forms=frozenset({PREFETCH}), product=("A", "B"),
                                      columns=1000), s)
    assert small_b.form == "first"


def test_union_form_from_matching_rows():
    """A union's branch form where the two operands store equally many entries in nearly
    every row (a symmetric pattern's A + A^T); the probe otherwise."""
    union = frozenset({SELECT_OTHER})
    same = autoschedule(KernelInfo(other_forms=union, matching_rows=1.0), {})
    assert same.form == "first" and "100%" in same.reasons[0]
    edge = autoschedule(KernelInfo(other_forms=union, matching_rows=cm.SELECT_SAME_ROWS), {})
    assert edge.form == "first"
    mixed = autoschedule(KernelInfo(other_forms=union, matching_rows=0.5), {})
    assert mixed.form is None and "timed" in mixed.reasons[0]
    assert autoschedule(KernelInfo(other_forms=union), {}).form is None  # no such pair


def test_union_binding_picks_from_the_operands():
    """SpAdd bound on A + A^T: a symmetric pattern gets the branch form from the model,
    an unsymmetric one is left to the probe; both results match scipy."""
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", "csr", A="csr", B="csr")
    rng = np.random.default_rng(3)
    lower = sp.random(200, 200, density=0.05, format="csr", random_state=4)
    symmetric = sp.csr_matrix(lower + lower.T + sp.identity(200))
    unsymmetric = sp.random(200, 200, density=0.05, format="csr", random_state=5)
    for a, form in ((symmetric, "first"), (unsymmetric, None)):
        b = sp.csr_matrix(a.T)
        b.data = rng.random(b.nnz)
        bound = kernel.bind(A=a, B=b, threads=1)
        assert bound.auto.form == form, bound.auto
        for _ in range(8):  # through the probe's calls too
            np.testing.assert_allclose(bound().to_scipy().toarray(), (a + b).toarray())
    empty = sp.csr_matrix((5, 5))
    assert kernel.bind(A=empty, B=empty, threads=1).auto.form == "first"


def test_every_pick_has_a_reason():
    info = KernelInfo(other_forms=frozenset({PAIRS}), workspace="dense", product=("A", "B"),
                      columns=1000, rows_operand="A", threads=2)
    choice = autoschedule(info, {"A": stats(1000, 30, skew=3), "B": stats(1000, 30)})
    assert isinstance(choice, AutoChoice)
    assert [r.split(":")[0] for r in choice.reasons] == ["workspace", "loop form",
                                                         "thread split"]
    assert choice.split == "entries"
    assert str(choice).splitlines() == list(choice.reasons)
    assert str(autoschedule(KernelInfo(), {})) == "nothing to choose"


# -- results against scipy for every pick ------------------------------------------------

def _matrices() -> dict[str, sp.csr_matrix]:
    rng = np.random.default_rng(7)
    n = 300
    random = sp.random(n, n, density=0.03, format="csr", random_state=1)
    empty_rows = random.tolil()
    empty_rows[::3] = 0
    one_dense = sp.random(n, n, density=0.01, format="lil", random_state=2)
    one_dense[17, :] = rng.random(n) + 0.5
    lengths = np.minimum((rng.pareto(1.2, n) * 2).astype(int), n)
    rows = np.repeat(np.arange(n), lengths)
    cols = rng.integers(0, n, rows.size)
    power = sp.csr_matrix((rng.random(rows.size), (rows, cols)), shape=(n, n))
    out = {"random": random, "empty rows": empty_rows, "one dense row": one_dense,
           "power law": power, "empty": sp.csr_matrix((n, n))}
    result = {}
    for name, m in out.items():
        m = sp.csr_matrix(m)
        m.sum_duplicates()
        m.eliminate_zeros()
        m.sort_indices()
        result[name] = m
    return result


MATRICES = _matrices()


@pytest.fixture
def forced(monkeypatch):
    """Fix the autoscheduler's picks (and the probe's form) for one test."""
    def fix(**picks):
        monkeypatch.setattr(auto_choice, "FORCED", dict(picks))
        if "form" in picks:
            monkeypatch.setitem(probe.FORCED, "form", picks["form"])
    return fix


@pytest.mark.parametrize("name", sorted(MATRICES))
@pytest.mark.parametrize("form", ["first", "other"])
@pytest.mark.parametrize("split", ["rows", "entries", "windows"])
def test_spmv_every_form_and_split_matches_scipy(name, form, split, forced, monkeypatch):
    monkeypatch.setattr(kernel_calls, "PARALLEL_MIN_WORK", 1)
    forced(form=form, split=split)
    a = MATRICES[name]
    x = np.random.default_rng(1).random(a.shape[1])
    kernel = ls.compile(SPMV, "dense", A="csr", x="dense", fastmath=split == "windows")
    bound = kernel.bind(A=a, x=x, threads=2)
    assert bound.auto.split == split and bound.plan is not None
    assert bool(bound.plan.windows) == (split == "windows")
    for _ in range(3):
        np.testing.assert_allclose(bound().to_numpy(), a @ x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(MATRICES))
@pytest.mark.parametrize("policy", ["dense", "hash", "sort", "bucket"])
def test_spgemm_every_workspace_matches_scipy(name, policy, forced):
    forced(workspace=policy)
    a = MATRICES[name]
    b = sp.csr_matrix(a.T)
    kernel = ls.compile(SPGEMM, "csr", A="csr", B="csr")
    bound = kernel.bind(A=a, B=b, threads=1)
    assert bound.auto.workspace == policy
    assert bound.inst.workspace[0].split()[0] == policy
    got = bound().to_scipy()
    np.testing.assert_allclose(got.toarray(), (a @ b).toarray(), rtol=1e-12, atol=1e-12)


def test_model_fixes_the_form_of_regular_long_rows_and_probes_skewed_ones():
    kernel = ls.compile(SPMV, "dense", A="csr", x="dense")
    rng = np.random.default_rng(0)
    n = 200
    cols = np.concatenate([rng.choice(n, 30, replace=False) for _ in range(n)])
    regular = sp.csr_matrix((rng.random(n * 30), cols, np.arange(0, n * 30 + 1, 30)),
                            shape=(n, n))
    regular.sort_indices()
    x = rng.random(n)
    bound = kernel.bind(A=regular, x=x)
    assert bound.auto.form == "other" and bound.probe.forms == ("other",)
    assert not bound.probe.probing
    np.testing.assert_allclose(bound().to_numpy(), regular @ x, rtol=1e-12)
    x = rng.random(300)
    skewed = kernel.bind(A=MATRICES["power law"], x=x)
    assert skewed.auto.form is None and skewed.probe.probing
    for _ in range(8):  # through the probe's timed calls
        np.testing.assert_allclose(skewed().to_numpy(), MATRICES["power law"] @ x,
                                   rtol=1e-12)


def test_a_kernel_from_disk_still_lets_the_model_pick_its_form(tmp_path, monkeypatch):
    """The loops' other-form notes travel in the disk entry's metadata."""
    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LLVSPARSE_CACHE", raising=False)
    monkeypatch.setattr(api, "_CACHE", {})
    assert ls.compile(SPMV, "dense", A="csr", x="dense").instance().other_forms == (PAIRS,)
    monkeypatch.setattr(api, "_CACHE", {})
    loads = STATS.get("disk_loads", 0)
    kernel = ls.compile(SPMV, "dense", A="csr", x="dense")
    a = MATRICES["random"]  # 9 entries per row, even: one row at a time
    x = np.random.default_rng(4).random(a.shape[1])
    bound = kernel.bind(A=a, x=x)
    assert STATS.get("disk_loads", 0) == loads + 1
    assert bound.inst.program is None and bound.inst.other_forms == (PAIRS,)
    assert bound.auto.form == "first" and not bound.probe.probing
    np.testing.assert_allclose(bound().to_numpy(), a @ x, rtol=1e-12)


def test_model_off_keeps_the_probe(forced):
    forced(off=True)
    kernel = ls.compile(SPMV, "dense", A="csr", x="dense")
    bound = kernel.bind(A=MATRICES["random"], x=np.ones(300))
    assert bound.auto is None and bound.probe.probing


# -- the disk-cached search --------------------------------------------------------------

def test_search_is_paid_once_and_its_winner_is_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LLVSPARSE_CACHE", raising=False)
    a = MATRICES["power law"]
    b = sp.csr_matrix(a.T)
    first = search(ls.compile(SPGEMM, "csr", A="csr", B="csr"), A=a, B=b, rounds=2)
    assert not first.cached and first.winner in first.seconds
    assert {c.workspace for c in first.seconds} == {"dense", "hash", "sort", "bucket"}
    assert Candidate("dense", "other", None) in first.seconds  # Gustavson's prefetch form
    files = list((tmp_path / "search").glob("*.json"))
    assert len(files) == 1
    again = search(ls.compile(SPGEMM, "csr", A="csr", B="csr"), A=a, B=b)
    assert again.cached and again.winner == first.winner and again.seconds == {}
    # Other operands: another search.
    other = search(ls.compile(SPGEMM, "csr", A="csr", B="csr"), A=MATRICES["random"],
                   B=sp.csr_matrix(MATRICES["random"].T), rounds=1)
    assert not other.cached
    # An unreadable entry is searched again, not trusted.
    files[0].write_text("{not json")
    redo = search(ls.compile(SPGEMM, "csr", A="csr", B="csr"), A=a, B=b, rounds=1)
    assert not redo.cached and isinstance(redo.winner, Candidate)


def test_searched_binding_matches_scipy(tmp_path, monkeypatch):
    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path))
    a = MATRICES["one dense row"]
    x = np.random.default_rng(2).random(a.shape[1])
    kernel = ls.compile(SPMV, "dense", A="csr", x="dense")
    bound = bind_searched(kernel, A=a, x=x)
    np.testing.assert_allclose(bound().to_numpy(), a @ x, rtol=1e-12)


def test_split_kind_cuts_rows_only_past_a_threads_share():
    heavy = cm.OperandStats.from_row_counts((4, 10), np.array([6, 1, 1, 1]))
    assert cm.split_kind(heavy, threads=2)[0] == "windows"  # 6 of 9 > half
    assert cm.split_kind(heavy, threads=1)[0] != "windows"
    even = cm.OperandStats.from_row_counts((4, 10), np.array([4, 2, 1, 1]))
    assert cm.split_kind(even, threads=2)[0] == "entries"  # 4 of 8: no more than half
