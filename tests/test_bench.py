"""``llvsparse bench --quick``: every implementation's result verifies (timings not checked)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from llvsparse.tools import bench
from llvsparse.tools.bench_inputs import manifest
from llvsparse.tools.bench_peers import KERNELS, Case, Impl, Prepared, make_case, verify


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict, Path]:
    """One quick run in a subprocess (it pins thread pools process-wide)."""
    folder = tmp_path_factory.mktemp("bench")
    out, png = folder / "bench.json", folder / "bench.png"
    proc = subprocess.run(
        [sys.executable, "-m", "llvsparse.tools.bench", "--quick", "--json", str(out),
         "--png", str(png), "--no-progress", "--llvsparse-threads", "1,2", "--llvsparse-out"],
        check=False, capture_output=True, text=True, timeout=300)
    assert out.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.returncode, json.loads(out.read_text()), png


def test_every_implementation_verified(quick_report: tuple[int, dict, Path]) -> None:
    code, report, _ = quick_report
    results = report["results"]
    assert results
    failed = [(r["impl"], r["kernel"], r["input"], r["error"]) for r in results
              if not r["verified"]]
    assert not failed
    assert code == 0
    for kernel in KERNELS:
        mine = [r for r in results if r["kernel"] == kernel and r["library"] == "llvsparse"]
        assert mine and all(r["verified"] for r in mine), kernel
        assert {r["impl"] for r in mine} == {"llvsparse", "llvsparse-2t", "llvsparse-out",
                                            "llvsparse-2t-out"}, kernel
        if kernel != "spmv_ell" or importlib.util.find_spec("numba") is not None:
            assert any(r["library"] != "llvsparse" for r in results if r["kernel"] == kernel)


def test_report_contents(quick_report: tuple[int, dict, Path]) -> None:
    _, report, png = quick_report
    assert report["meta"]["quick"] and report["meta"]["rounds"] >= 7
    if manifest()["matrices"]:  # shared/data is there
        assert {"olm1000", "lp_ship04l"} <= {r["input"] for r in report["results"]}
    timed = [r for r in report["results"] if r["verified"]]
    assert all(len(r["times_s"]) == report["meta"]["rounds"] or r["single_call"] for r in timed)
    assert report["roofline"]["triad_1t_gbs"] > 0
    assert report["compile"]["cold_compile_s"]["median"] > 0
    edges = report["edges"]
    assert edges["rows"] and all(row["llvsparse_ms"] > 0 and row["reference_ms"] > 0
                                 for row in edges["rows"].values())
    assert edges["cold_compile_ms"]["optimize"] > 0
    assert any(r["roofline_fraction"] for r in timed if r["kernel"] == "spmv_csr")
    if importlib.util.find_spec("matplotlib") is not None:
        assert png.stat().st_size > 0


def test_wrong_result_is_not_verified() -> None:
    """An implementation whose answer is off is flagged, not timed."""
    from llvsparse.tools.bench_inputs import MatrixInput, uniform

    case: Case = make_case("spmv_csr", MatrixInput("tiny", uniform(50, 3), "generated"))

    def wrong(c: Case) -> Prepared:
        A, x = c.ops["A"], c.ops["x"]
        return Prepared(lambda: A @ x + 1e-3, lambda r: r)

    records = bench.run_case(case, [Impl("broken", "broken", 1, {"spmv_csr": wrong})], rounds=2)
    assert len(records) == 1 and not records[0].verified and not records[0].times_s
    assert "wrong result" in (records[0].error or "")
    assert verify(np.ones(3), np.ones(3)) is None
