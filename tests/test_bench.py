"""``llvsparse bench --quick``: every implementation's result verifies (timings not checked)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from llvsparse.tools import bench, bench_kernels, bench_mkl
from llvsparse.tools.bench_inputs import MatrixInput, manifest, uniform
from llvsparse.tools.bench_kernels import KERNELS, Case, Impl, Prepared, make_case, verify
from llvsparse.tools.bench_mkl import mkl_runtime_path, set_mkl_rt
from llvsparse.tools.bench_report import LARGE_S, summary_table
from llvsparse.tools.bench_timing import Record, annotate, run_case

# One worker runs this module (pytest-xdist's loadgroup), so quick_report's minute-long
# bench run happens once, not once per worker its tests land on.
pytestmark = pytest.mark.xdist_group("bench")


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict, Path]:
    """One quick run in a subprocess (it pins thread pools process-wide)."""
    folder = tmp_path_factory.mktemp("bench")
    out, png = folder / "bench.json", folder / "bench.png"
    chart = ["--png", str(png)] if importlib.util.find_spec("matplotlib") else []
    proc = subprocess.run(
        [sys.executable, "-m", "llvsparse.tools.bench", "--quick", "--json", str(out),
         *chart, "--no-progress", "--llvsparse-threads", "1,2", "--llvsparse-out"],
        check=False, capture_output=True, text=True, timeout=900)
    assert out.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.returncode, json.loads(out.read_text()), png


@pytest.mark.slow
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


@pytest.mark.slow
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

    records = run_case(case, [Impl("broken", "broken", 1, {"spmv_csr": wrong})], rounds=2)
    assert len(records) == 1 and not records[0].verified and not records[0].times_s
    assert "wrong result" in (records[0].error or "")
    assert verify(np.ones(3), np.ones(3)) is None


def test_png_without_matplotlib_fails_before_running(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    """--png without matplotlib ran the whole suite, then only printed a note."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    png = tmp_path / "bench.png"
    with pytest.raises(SystemExit) as stopped:
        bench.main(["--quick", "--png", str(png), "--kernels", "spmv_csr", "--rounds", "1",
                    "--inputs", "olm1000", "--no-roofline", "--no-compile", "--no-progress"])
    assert stopped.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "--png needs matplotlib" in err
    assert not png.exists()


def _timed(impl: str, library: str, seconds: float, kernel: str = "spmv_csr",
           name: str = "in") -> Record:
    return Record(kernel, name, impl, library, 1, {"rows": 1, "cols": 1, "nnz": 1},
                  verified=True, times_s=[seconds])


def test_large_input_summary_is_never_an_empty_table() -> None:
    """With only small inputs (--quick) the second summary printed a bare header."""
    records = [_timed("llvsparse", "llvsparse", 2e-5), _timed("scipy", "scipy", 4e-5)]
    annotate(records, {})
    everything = summary_table(records)
    row = next(line for line in everything.splitlines() if line.startswith("spmv_csr"))
    assert row.split()[1:4] == ["1", f"{2e-5 / 4e-5:.2f}", "1.00"]
    large = summary_table(records, min_best_s=LARGE_S)
    assert "spmv_csr" not in large
    assert f"no input where a peer was verified and the fastest took >= {LARGE_S * 1e3:g} ms" \
        in large
    records += [_timed("llvsparse", "llvsparse", 3e-3, name="big"),
                _timed("scipy", "scipy", 2e-3, name="big")]
    annotate(records, {})
    large = summary_table(records, min_best_s=LARGE_S)
    row = next(line for line in large.splitlines() if line.startswith("spmv_csr"))
    assert row.split()[1:4] == ["1", f"{3e-3 / 2e-3:.2f}", "1.00"]


def _fake_mkl_wheel(root: Path, names: list[str]) -> Path:
    """An installed ``mkl`` distribution as pip lays out the wheel: metadata in
    site-packages, the libraries in the environment's lib folder (outside any search path);
    returns the site-packages folder."""
    site = root / "lib" / "python3" / "site-packages"
    info = site / "mkl-2099.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mkl\nVersion: 2099.0\n")
    lines = [f"../../../lib/{name},," for name in names] + ["mkl-2099.0.dist-info/RECORD,,"]
    (info / "RECORD").write_text("\n".join(lines) + "\n")
    for name in names:
        (root / "lib" / name).write_bytes(b"")
    return site


def test_mkl_rt_names_the_installed_wheels_library(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """sparse_dot_mkl found no MKL after pip install -e '.[bench]' unless MKL_RT was set."""
    site = _fake_mkl_wheel(tmp_path, ["libmkl_core.so.3", "libmkl_rt.so.3"])
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("MKL_RT", raising=False)
    expected = str((tmp_path / "lib" / "libmkl_rt.so.3").resolve())
    assert mkl_runtime_path() == expected
    assert set_mkl_rt() == expected and os.environ["MKL_RT"] == expected
    monkeypatch.setenv("MKL_RT", "/opt/my/libmkl_rt.so")  # the user's choice stays
    assert set_mkl_rt() == "/opt/my/libmkl_rt.so"


def test_mkl_rt_left_unset_without_the_wheel(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKL_RT", raising=False)
    monkeypatch.setattr(bench_mkl.metadata, "files", _no_distribution)
    assert mkl_runtime_path() is None
    assert set_mkl_rt() is None and "MKL_RT" not in os.environ


def _no_distribution(name: str) -> None:
    raise bench_mkl.metadata.PackageNotFoundError(name)


def test_a_spgemm_case_past_the_cap_takes_leading_rows(monkeypatch) -> None:
    """SpGEMM's output bounds a case's memory: past the cap on its entries, A's leading
    rows up to it are taken (and said), and the reference follows."""
    item = MatrixInput("small", uniform(300, 6), "generated")
    a = item.matrix
    full = make_case("spgemm", item)
    assert "sample" not in full.meta and full.ops["A"].shape == a.shape
    per_row = np.diff(full.reference.indptr)
    for cap in (full.reference.nnz // 3, full.reference.nnz - 1):
        monkeypatch.setattr(bench_kernels, "SPGEMM_MAX_OUTPUT", cap)
        case = make_case("spgemm", item)
        kept = case.ops["A"].shape[0]
        assert per_row[:kept].sum() <= cap < per_row[:kept + 1].sum()
        assert f"first {kept:,} of 300 rows" in case.meta["sample"]
        assert case.ops["B"].shape == (a.shape[1], a.shape[0])
        assert verify(case.ops["A"] @ case.ops["B"], case.reference) is None
        np.testing.assert_allclose(case.reference.toarray(), (a[:kept] @ a.T).toarray())
