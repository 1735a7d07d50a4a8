"""``llvsparse bench --gpu``: without a GPU, cuda-python or cupy it says what it needs and
runs nothing; its verification and report, on fake implementations (timings not
checked)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import scipy.sparse as sp
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


def test_gpu_bench_sddmm_reference_matches_scipy(monkeypatch) -> None:
    """The SDDMM case's host reference (sliced gathers, never the dense product) is
    scipy's A * (D @ E.T) on A's pattern, in A's order, across slice edges."""
    monkeypatch.setattr(bench_gpu, "SDDMM_CHUNK", 7)
    rng = np.random.default_rng(0)
    for rows, cols in [(0, 5), (1, 1), (30, 20)]:
        A = sp.random(rows, cols, density=0.3, format="csr", random_state=rng)
        D, E = rng.standard_normal((rows, 4)), rng.standard_normal((cols, 4))
        expected = sp.csr_matrix(A.multiply(D @ E.T))
        got = bench_gpu.sddmm_values(A, D, E)
        dense = sp.csr_matrix((got, A.indices, A.indptr), shape=A.shape).toarray()
        assert got.shape == (A.nnz,) and np.allclose(dense, expected.toarray())
