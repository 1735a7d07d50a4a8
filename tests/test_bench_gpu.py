"""``llvsparse bench --gpu``: without a GPU, cuda-python or cupy it says what it needs and
runs nothing; its verification and report, on fake implementations (timings not
checked)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from llvsparse.backends.cuda import driver
from llvsparse.tools import bench, bench_gpu


def test_gpu_bench_says_what_it_needs(monkeypatch, capsys) -> None:
    monkeypatch.setattr(driver, "_CONTEXTS", {})
    monkeypatch.setattr(driver, "DRIVER_MODULE", "llvsparse_no_such_module.driver")
    assert bench.main(["--gpu"]) == 2
    said = capsys.readouterr().out
    assert said.startswith("llvsparse bench --gpu needs a CUDA GPU, cuda-python (pip install "
                           "'llvsparse[cuda]') and cupy")
    assert "the GPU target needs cuda-python" in said
    assert ("cupy is not installed" in said) == (importlib.util.find_spec("cupy") is None)


def test_gpu_bench_verifies_before_timing(capsys) -> None:
    reference = np.arange(4.0)
    case = bench_gpu.GpuCase("spmv_csr", "tiny", reference, {
        "llvsparse-thread_per_row": lambda: reference + 0.0,
        "llvsparse-wrong": lambda: reference + 1.0,
        "cusparse": lambda: reference.copy()})
    medians = bench_gpu.time_case(case, rounds=3)
    assert set(medians) == {"llvsparse-thread_per_row", "cusparse"}
    assert all(seconds > 0 for seconds in medians.values())
    assert "NOT VERIFIED: llvsparse-wrong spmv_csr tiny" in capsys.readouterr().out
    table = bench_gpu.report([(case, medians)])
    row = next(line for line in table.splitlines() if "llvsparse-thread_per_row" in line)
    ratio = medians["cusparse"] / medians["llvsparse-thread_per_row"]
    assert row.split()[-1] == f"{ratio:.2f}x"
    assert "copy descriptors in" in table


@pytest.mark.gpu
def test_gpu_bench_runs_on_a_gpu() -> None:
    """The quick comparison verifies every implementation (skipped without a GPU)."""
    if absent := bench_gpu.missing():
        pytest.skip(f"no GPU comparison here: {'; '.join(absent)}")
    assert bench_gpu.run(quick=True, rounds=3) == 0
