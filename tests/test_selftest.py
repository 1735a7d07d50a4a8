"""The soak harness (llvsparse selftest): random cases against numpy, isolated in worker
subprocesses. The CI slice runs a fixed set of quick cases and must find nothing; the
long soak runs only with ``pytest -m soak``. The harness itself is checked on a fake
worker that crashes, hangs and exits, and on kernels made to answer wrongly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
from llvsparse.commands import main as cli
from llvsparse.soak import cases as soakcases
from llvsparse.soak import check as soakcheck
from llvsparse.soak.selftest import soak

SLICE_SEED = 2026  # fixed: CI runs the same cases every time
SLICE_CASES = 200


def _failures(report) -> str:
    return "\n" + report.summary()


@pytest.mark.slow
def test_ci_slice_finds_no_crash_hang_wrong_result_or_unexpected_exception():
    report = soak(SLICE_CASES, seed=SLICE_SEED, small=True, timeout=120,
                  jobs=min(2, os.cpu_count() or 1))
    assert len(report.results) == SLICE_CASES
    assert sorted(r.index for r in report.results) == list(range(SLICE_CASES))
    assert report.tallies["passed"] > SLICE_CASES // 2, _failures(report)
    assert not report.failures, _failures(report)


@pytest.mark.soak  # not also slow: -m slow would then run it (it overrides the default)
def test_long_soak():
    """``LLVSPARSE_SOAK_CASES`` (default 2000), ``LLVSPARSE_SOAK_SEED`` (default 1) and
    ``LLVSPARSE_SOAK_JOBS`` (default 1) choose the run."""
    cases = int(os.environ.get("LLVSPARSE_SOAK_CASES", "2000"))
    report = soak(cases, seed=int(os.environ.get("LLVSPARSE_SOAK_SEED", "1")), timeout=120,
                  jobs=int(os.environ.get("LLVSPARSE_SOAK_JOBS", "1")))
    assert len(report.results) == cases
    assert not report.failures, _failures(report)


FAKE_WORKER = textwrap.dedent("""
    import json, os, signal, sys, time
    for line in sys.stdin:
        seed, index, small = map(int, line.split())
        if index == 2:
            os.kill(os.getpid(), signal.SIGSEGV)
        if index == 4:
            time.sleep(600)
        if index == 6:
            sys.exit(3)
        status = "wrong" if index == 7 else "passed"
        print(json.dumps({"index": index, "status": status, "kind": "", "detail": "",
                          "description": "fake"}), flush=True)
""")


@pytest.mark.parametrize("jobs", [1, 2])
def test_crashes_and_hangs_are_counted_against_their_case(tmp_path, jobs):
    script = tmp_path / "worker.py"
    script.write_text(FAKE_WORKER)
    report = soak(9, seed=5, timeout=1.0, jobs=jobs, worker=[sys.executable, str(script)])
    status = {r.index: (r.status, r.kind) for r in report.results}
    assert sorted(status) == list(range(9))
    assert status[2] == ("crash", "SIGSEGV")
    assert status[4] == ("hang", "over 1 s")
    assert status[6] == ("crash", "exit 3")
    assert status[7][0] == "wrong"
    assert all(status[i] == ("passed", "") for i in (0, 1, 3, 5, 8))
    assert dict(report.tallies) == {"passed": 5, "crash": 2, "hang": 1, "wrong": 1}
    assert "llvsparse selftest --case 5:2" in report.summary()


def _valid_cases(count: int) -> list[soakcases.Case]:
    """Valid cases with operands and a numeric result, from the quick stream."""
    found = []
    for index in range(400):
        case = soakcases.build_case(11, index, small=True)
        if case.kind == "valid" and case.operands and case.out_vars \
                and soakcases.result_dtype(case).kind != "b" \
                and all(n > 1 for n in case.extents.values()):
            found.append(case)
        if len(found) == count:
            return found
    raise AssertionError("too few valid cases")


def test_a_wrong_result_is_flagged(monkeypatch):
    real = ls.compile

    class OffByOne:
        def __init__(self, kernel):
            self.kernel = kernel

        def __call__(self, **operands):
            return self.kernel(**operands).to_numpy() + 1

        def bind(self, **operands):
            return self.kernel.bind(**operands)

    passing = [case for case in _valid_cases(5) if soakcheck.run_case(case).status == "passed"]
    assert len(passing) >= 2
    monkeypatch.setattr(ls, "compile", lambda *a, **k: OffByOne(real(*a, **k)))
    for case in passing:
        outcome = soakcheck.run_case(case)
        assert (outcome.status, outcome.kind) == ("wrong", "result"), case.describe()
        assert "call 1" in outcome.detail


def test_reference_lets_unstored_entries_annihilate_inf_as_scipy_does():
    """y(i) = A(i,j) * x(j) with CSR A and an inf in x where a row stores nothing: the
    reference agrees with scipy (not with dense numpy, which gives NaN), and so does
    llvsparse."""
    dense = np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    x = np.array([np.inf, 3.0])
    A = soakcases.Operand("A", "ij", "csr", "csr", "float64", "int32", dense)
    X = soakcases.Operand("B", "j", "dense", "dense", "float64", "int32", x)
    tree = soakcases.Node("*", [soakcases.Node("access", tensor="A", indices="ij"),
                                soakcases.Node("access", tensor="B", indices="j")])
    case = soakcases.Case(0, 0, "valid", {"i": 3, "j": 2}, {"A": A, "B": X}, tree, "i",
                          f"Z(i) = {tree}", "dense", threads=False)
    masks = {"A": dense != 0, "B": np.ones(2, dtype=bool)}
    np.testing.assert_array_equal(soakcases.reference(case, masks),
                                  sp.csr_matrix(dense) @ x)
    assert soakcheck.run_case(case).status == "passed"


CORRUPT_ALL = textwrap.dedent("""
    import json, sys
    import numpy as np
    from llvsparse.soak import cases as soakcases
    from llvsparse.soak import check as soakcheck
    fmt = sys.argv[1]
    for how in soakcases.CORRUPTIONS:
        dense = np.array([[1.0, 0.0, 2.0, 0.0], [0.0, 0.0, 3.0, 1.0]])
        A = soakcases.Operand("A", "ij", fmt, fmt, "float64", "int32", dense)
        tree = soakcases.Node("access", tensor="A", indices="ij")
        case = soakcases.Case(3, 4, "corrupt", {"i": 2, "j": 4}, {"A": A}, tree, "ij",
                              "Z(i,j) = A(i,j)", "dense", threads=False, corruption=how,
                              target="A")
        outcome = soakcheck.run_case(case)
        print(json.dumps([how, case.corruption, outcome.status, outcome.kind]), flush=True)
""")


@pytest.mark.parametrize("fmt", ["csr", "coo", "hash", "dia", "ell", "bcsr2x2", "csf"])
def test_every_corruption_is_refused(fmt):
    """Each way the soak corrupts a tensor is refused with the project's errors (in a
    subprocess: a kernel that accepts corrupt extents writes past its output)."""
    run = subprocess.run([sys.executable, "-c", CORRUPT_ALL, fmt], check=False,
                         capture_output=True, text=True, timeout=300)
    outcomes = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(outcomes) == len(soakcases.CORRUPTIONS), run.stderr[-2000:]
    for how, made, status, kind in outcomes:
        assert (status, kind) in {("passed", "CorruptTensorError"), ("passed", "FormatError"),
                                  ("passed", "ShapeError")}, (fmt, how, made, status, kind)


def test_cli_runs_cases_and_refuses_a_bad_case_id(capsys):
    assert cli.main(["selftest", "--case", "seven"]) == 2
    assert "SEED:INDEX" in capsys.readouterr().err
    code = cli.main(["selftest", "--case", "0:6", "--small"])
    out = capsys.readouterr().out
    assert "[0:6]" in out and "selftest: 1 cases, seed 0" in out
    assert code == (0 if "1 passed" in out or "1 refused" in out else 1)
