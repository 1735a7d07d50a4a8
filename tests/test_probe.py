"""Kernels with loops of two forms (here: co-iterations with two merges) are compiled both
ways, and a binding's first calls time them (with gathering threads, where the binding
may gather) and keep the faster. Both merges must give the same result, bit for bit, on
every pattern."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.backends.cpu import STATS

import llvsparse as ls
from llvsparse.calls.probe import TIMED_CALLS, Probe, Way
from llvsparse.kernel import api

# expression, numpy reference of the dense operands
MERGED = {
    "C(i,j) = A(i,j) + B(i,j)": lambda a, b: a + b,
    "C(i,j) = A(i,j) - 2 * B(i,j)": lambda a, b: a - 2 * b,
    "C(i,j) = A(i,j) * B(i,j)": lambda a, b: a * b,
    "C(i,j) = A(i,j) * B(i,j) + A(i,j)": lambda a, b: a * b + a,
}


def _patterns(seed: int) -> list[tuple[sp.csr_matrix, sp.csr_matrix]]:
    """Random, skewed (one long row against short ones), equal, disjoint, empty and
    one-sided operand pairs: each steps a merge's cases differently."""
    rng = np.random.default_rng(seed)
    rows, cols = 300, 400

    def rand(density: float) -> sp.csr_matrix:
        return sp.random(rows, cols, density=density, random_state=rng, format="csr")

    a, b = rand(0.03), rand(0.05)
    skewed = sp.lil_matrix((rows, cols))
    skewed[::7, :] = rng.random((len(range(0, rows, 7)), cols))
    evens = sp.csr_matrix((rng.random(rows * cols // 2), (np.repeat(np.arange(rows), cols // 2),
                                                          np.tile(np.arange(0, cols, 2), rows))),
                          shape=(rows, cols))
    odds = evens.copy()
    odds.indices = odds.indices + 1
    empty = sp.csr_matrix((rows, cols))
    return [(a, b), (skewed.tocsr(), b), (a, a.copy()), (evens, odds), (empty, b), (a, empty),
            (empty, empty)]


@pytest.mark.slow
@pytest.mark.parametrize("expr", list(MERGED))
@pytest.mark.parametrize("out_format", ["csr", "dense"])
@pytest.mark.parametrize("fmt", ["csr", "dcsr"])
def test_both_merges_match_the_reference_bit_for_bit(expr, out_format, fmt, monkeypatch):
    kernel = ls.compile(expr, A=fmt, B=fmt, out_format=out_format)
    for seed in (1, 2):
        for a, b in _patterns(seed):
            operands = {"A": ls.Tensor.from_scipy(a, fmt), "B": ls.Tensor.from_scipy(b, fmt)}
            results = {}
            for form in ("first", "other"):  # a binding reads FORCED when it is made
                monkeypatch.setitem(ls.calls.probe.FORCED, "form", form)
                call = kernel.bind(**operands)
                assert call.way == Way(form, "direct")
                results[form] = call().to_numpy()
            expected = MERGED[expr](a.toarray(), b.toarray())
            np.testing.assert_allclose(results["first"], expected, rtol=1e-15, atol=0)
            np.testing.assert_array_equal(results["other"], results["first"])
    assert kernel.last.jit.other is not None


@pytest.mark.parametrize(("expr", "formats", "choice"), [
    ("C(i,j) = A(i,j) + B(i,j)", {"A": "csr", "B": "csr"}, True),  # merges
    ("C(i,j) = A(i,j) * B(i,j)", {"A": "csr", "B": "csr"}, True),
    ("y(i) = A(i,j) * x(j)", {"A": "csr"}, True),  # two rows at once (see test_pairs)
    ("y(i) = A(i,j) * x(j)", {"A": "coo"}, False),
    ("C(i,j) = A(i,j) * B(i,j)", {"A": "csr", "B": "dense"}, False),  # B is located
])
def test_only_kernels_with_a_choice_of_form_get_the_other(expr, formats, choice):
    kernel = ls.compile(expr, out_format="csr" if "C" in expr else None, **formats)
    assert (kernel.instance().jit.other is not None) is choice


def test_the_other_form_comes_back_from_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(api, "_CACHE", {})
    expr = "C(i,j) = A(i,j) + B(i,j)"
    ls.compile(expr, A="csr", B="csr", out_format="csr").instance()
    monkeypatch.setattr(api, "_CACHE", {})
    loads = STATS.get("disk_loads", 0)
    kernel = ls.compile(expr, A="csr", B="csr", out_format="csr")
    a, b = _patterns(3)[0]
    monkeypatch.setitem(ls.calls.probe.FORCED, "form", "other")
    result = kernel(A=ls.Tensor.from_scipy(a, "csr"), B=ls.Tensor.from_scipy(b, "csr"))
    assert STATS.get("disk_loads", 0) == loads + 1
    assert kernel.last.jit.other is not None and kernel.last.jit.llvm_ir is None
    np.testing.assert_allclose(result.to_numpy(), (a + b).toarray(), rtol=1e-15)


def test_printing_a_kernel_or_its_instance_compiles_nothing(monkeypatch):
    """repr of an instance said whether it has two forms by asking for the other one,
    which compiled it (one LLVM compile per print of a fresh kernel)."""
    monkeypatch.setenv("LLVSPARSE_CACHE", "0")
    monkeypatch.setattr(api, "_CACHE", {})
    a, b = _patterns(5)[0]
    A, B = ls.Tensor.from_scipy(a, "csr"), ls.Tensor.from_scipy(b, "csr")
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", A="csr", B="csr", out_format="csr")
    result = kernel(A=A, B=B)
    compiles = STATS.get("llvm_compiles", 0)
    texts = [repr(kernel), str(kernel), repr(kernel.last), str(kernel.last), repr(result),
             str(result), repr(A)]
    assert STATS.get("llvm_compiles", 0) == compiles
    assert "two loop forms" in texts[2] and kernel.last.jit.compiled is None
    np.testing.assert_allclose(result.to_numpy(), (a + b).toarray(), rtol=1e-15)


def _run(probe: Probe, seconds: dict[Way, float], calls: int) -> list[Way]:
    """The ways ``probe`` picks over ``calls`` calls; each way's first call takes 5 s
    longer (fresh memory), and its last but one 7 s (another process), the others
    ``seconds[way]``."""
    ways: list[Way] = []
    for _ in range(calls):
        way = probe.next_way()
        ways.append(way)
        late = 7.0 if ways.count(way) == TIMED_CALLS - 1 else 0.0
        probe.record(way, seconds[way] + late + (5.0 if ways.count(way) == 1 else 0.0))
    return ways


def test_probe_times_each_form_in_turn_and_keeps_the_faster():
    for fast in ("first", "other"):
        seconds = {Way("first", "direct"): 2.0, Way("other", "direct"): 2.0}
        seconds[Way(fast, "direct")] = 1.0
        ways = _run(Probe(("first", "other"), ("direct",)), seconds, 2 * TIMED_CALLS + 3)
        assert [w.form for w in ways[:2 * TIMED_CALLS]] == ["first", "other"] * TIMED_CALLS
        assert ways[2 * TIMED_CALLS:] == [Way(fast, "direct")] * 3


def test_probe_times_assemblies_with_the_faster_form():
    seconds = {Way("first", "direct"): 3.0, Way("other", "direct"): 2.0,
               Way("first", "gathered"): 0.5, Way("other", "gathered"): 1.0}
    probed = 3 * TIMED_CALLS
    ways = _run(Probe(("first", "other"), ("direct", "gathered")), seconds, probed + 3)
    assert ways[:probed] == [Way("first", "direct"), Way("other", "direct")] * TIMED_CALLS + [
        Way("other", "gathered")] * TIMED_CALLS  # the gathered first form is never timed
    assert ways[probed:] == [Way("other", "gathered")] * 3


def test_probe_without_a_choice_of_form_times_both_assemblies():
    for direct, gathered, chosen in ((2.0, 1.0, "gathered"), (1.0, 2.0, "direct")):
        seconds = {Way("first", "direct"): direct, Way("first", "gathered"): gathered}
        ways = _run(Probe(("first",), ("direct", "gathered")), seconds, 2 * TIMED_CALLS + 3)
        assert [w.assembly for w in ways[:2 * TIMED_CALLS]] == ["direct", "gathered"] * \
            TIMED_CALLS
        assert ways[2 * TIMED_CALLS:] == [Way("first", chosen)] * 3


def test_forced_or_single_ways_are_not_probed(monkeypatch):
    assert not Probe(("first",), ("direct",)).probing
    assert Probe(("first",), ("direct",)).next_way() == Way("first", "direct")
    monkeypatch.setitem(ls.calls.probe.FORCED, "form", "other")
    probe = Probe(("first", "other"), ("direct",))
    assert not probe.probing and probe.next_way() == Way("other", "direct")
    assert Probe(("first",), ("direct",)).next_way() == Way("first", "direct")


def test_an_unknown_forced_dimension_is_an_error(monkeypatch):
    monkeypatch.setitem(ls.calls.probe.FORCED, "merge", "other")  # the name before "form"
    with pytest.raises(ValueError, match="merge"):
        Probe(("first", "other"), ("direct",))


def test_a_probe_whose_calls_failed_keeps_the_defaults():
    probe = Probe(("first", "other"), ("direct",))
    for _ in range(2 * TIMED_CALLS):
        probe.next_way()  # no time recorded: the call raised
    assert probe.next_way() == Way("first", "direct")


def test_a_binding_probes_then_keeps_its_choice():
    a, b = _patterns(4)[0]
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", A="csr", B="csr", out_format="csr")
    operands = {"A": ls.Tensor.from_scipy(a, "csr"), "B": ls.Tensor.from_scipy(b, "csr")}
    call = kernel.bind(threads=1, **operands)
    expected = (a + b).toarray()
    for _ in range(2 * TIMED_CALLS + 3):
        np.testing.assert_allclose(call().to_numpy(), expected, rtol=1e-15)
    assert call.probe.choice in (Way("first", "direct"), Way("other", "direct"))
    assert set(call.probe.seconds) == {Way("first", "direct"), Way("other", "direct")}
