"""GPU kernels without a GPU: the planning rule's tags, the emulator (the device kernel
run over its whole grid on the CPU) against numpy, the PTX catalog through ptxas, and
refusals of what has no GPU mapping yet."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.backends.cuda import check_ptx, driver
from llvsparse.ir.gpu_plan import BLOCK_SIZE, GpuMappingError, plan_gpu

import llvsparse as ls

# The catalog: (name, expression, formats, reference(operands) -> dense result).
CATALOG: list[tuple[str, str, dict[str, str], Callable[..., np.ndarray]]] = [
    ("csr_spmv_thread_per_row", "y(i) = A(i,j) * x(j)", {"A": "csr", "x": "dense"},
     lambda A, x: A @ x),
    ("coo_spmv_thread_per_row", "y(i) = A(i,j) * x(j)", {"A": "coo", "x": "dense"},
     lambda A, x: A @ x),
    ("csr_spmm_thread_per_row", "C(i,k) = A(i,j) * B(j,k)",
     {"A": "csr", "B": "dense", "C": "dense"}, lambda A, B: A @ B),
    ("sddmm_into_dense", "C(i,j) = A(i,j) * D(i,k) * E(j,k)",
     {"A": "csr", "D": "dense", "E": "dense", "C": "dense"},
     lambda A, D, E: A.multiply(D @ E.T).toarray()),
    ("csr_add_into_dense", "C(i,j) = A(i,j) + F(i,j)",
     {"A": "csr", "F": "csr", "C": "dense"}, lambda A, F: (A + F).toarray()),
]
IDS = [entry[0] for entry in CATALOG]
# Shapes around a block's edge, edge cases (0x0, one row, empty rows) and a larger grid.
SHAPES = [(0, 0), (1, 5), (BLOCK_SIZE - 1, 9), (BLOCK_SIZE, 4), (BLOCK_SIZE + 1, 17), (300, 40)]


def _operands(expression: str, formats: dict[str, str], rows: int, cols: int,
              rng: np.random.Generator, empty_rows: bool) -> dict[str, object]:
    """Random operands of the catalog's kernels: sparse ones with some rows left empty."""
    inner = 3
    made: dict[str, object] = {}
    for name in formats:
        if name in ("y", "C"):
            continue
        if name in ("A", "F"):
            m = sp.random(rows, cols, density=0.2, format="csr", random_state=rng)
            if empty_rows and rows:
                keep = np.ones(rows)
                keep[::3] = 0
                m = sp.csr_matrix(sp.diags(keep) @ m)
            made[name] = m
        elif name == "x":
            made[name] = rng.standard_normal(cols)
        elif name == "B":
            made[name] = rng.standard_normal((cols, 6))
        elif name == "D":
            made[name] = rng.standard_normal((rows, inner))
        elif name == "E":
            made[name] = rng.standard_normal((cols, inner))
    return made


def _matches_numpy(target: str, name: str, expression: str, formats: dict[str, str],
                   reference: Callable[..., np.ndarray]) -> None:
    kernel = ls.compile(expression, target=target, **formats)
    rng = np.random.default_rng(len(name))
    for rows, cols in SHAPES:
        for empty_rows in (False, True):
            operands = _operands(expression, formats, rows, cols, rng, empty_rows)
            got = kernel(**operands).to_numpy()
            expected = np.asarray(reference(**operands))
            assert got.shape == expected.shape, (rows, cols)
            assert np.allclose(got, expected), (name, rows, cols, empty_rows)


@pytest.mark.parametrize(("name", "expression", "formats", "reference"), CATALOG, ids=IDS)
def test_emulator_matches_numpy(name, expression, formats, reference) -> None:
    _matches_numpy("cuda-emulated", name, expression, formats, reference)


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "expression", "formats", "reference"), CATALOG, ids=IDS)
def test_catalog_on_a_gpu(name, expression, formats, reference) -> None:
    """The emulator's checks, on a real GPU (skipped, saying why, without one)."""
    try:
        driver.device(0)
    except driver.NoDevice as error:
        pytest.skip(f"no GPU here: {error}")
    _matches_numpy("cuda", name, expression, formats, reference)


def test_emulator_runs_every_thread_of_the_grid() -> None:
    """Every row is written by its own thread: a row past the first block's is right,
    and so is one whose thread is the last of a partial block."""
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense", target="cuda-emulated")
    rows = 2 * BLOCK_SIZE + 3
    A = sp.csr_matrix(np.eye(rows) * np.arange(1, rows + 1))
    x = np.ones(rows)
    assert np.array_equal(kernel(A=A, x=x).to_numpy(), np.arange(1, rows + 1.0))


@pytest.mark.parametrize(("name", "expression", "formats", "reference"), CATALOG, ids=IDS)
def test_plan_tags_the_split_loop(name, expression, formats, reference) -> None:
    kernel = ls.compile(expression, **formats)
    plan = kernel.gpu_plan()
    assert plan.block == BLOCK_SIZE
    shown = ls.ir.loops.show(plan.program.root)
    assert f"for {plan.index} " in shown.splitlines()[0] or "gpu_thread" in shown
    head = next(line for line in shown.splitlines() if "gpu_thread" in line)
    assert "gpu_block" in head and head.lstrip().startswith(f"for {plan.index}")
    assert plan.grid(0) == 1 and plan.grid(BLOCK_SIZE) == 1 and plan.grid(BLOCK_SIZE + 1) == 2


@pytest.mark.parametrize(("name", "expression", "formats", "reference"), CATALOG, ids=IDS)
@pytest.mark.parametrize(("sm", "arch"), [("sm_70", "sm_75"), ("sm_80", "sm_80"),
                                          ("sm_90", "sm_90")])
def test_catalog_ptx_passes_ptxas(name, expression, formats, reference, sm, arch,
                                  tool) -> None:
    """PTX for sm_70 is assembled for sm_75 where ptxas (CUDA 13) no longer takes sm_70:
    PTX of a target assembles for every later one."""
    tool("ptxas")
    ptx = ls.compile(expression, **formats).ptx(sm)
    assert f".target {sm}" in ptx
    assert ".entry llvsparse_kernel_device(" in ptx
    assert "%ctaid.x" in ptx and "%tid.x" in ptx and "%ntid.x" in ptx
    assert "malloc" not in ptx  # no device heap: outputs are sized on the host
    check_ptx(ptx, arch)


@pytest.mark.parametrize(("expression", "formats", "match"), [
    ("C(i,j) = A(i,j) * D(i,k) * E(j,k)", {"A": "csr", "D": "dense", "E": "dense",
                                           "C": "csr"}, "assembled"),
    ("a = A(i,j) * B(i,j)", {"A": "csr", "B": "csr"}, "no loop"),
    ("y(j) = A(i,j) * x(i)", {"A": "csr", "x": "dense"}, "no loop"),
])
def test_no_gpu_mapping_is_refused(expression, formats, match) -> None:
    kernel = ls.compile(expression, **formats)
    with pytest.raises(GpuMappingError, match=match):
        kernel.ptx("sm_80")
    emulated = ls.compile(expression, target="cuda-emulated", **formats)
    rng = np.random.default_rng(0)
    operands = {"A": sp.random(4, 5, density=0.5, format="csr", random_state=rng),
                "B": sp.random(4, 5, density=0.5, format="csr", random_state=rng),
                "D": rng.random((4, 2)), "E": rng.random((5, 2)), "x": rng.random(4)}
    with pytest.raises(GpuMappingError, match=match):
        emulated(**{n: operands[n] for n in formats if n in operands})


@pytest.mark.parametrize("block", [0, 33, 2048, "128"])
def test_block_size_is_checked(block) -> None:
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    program = kernel.program(kernel._with_code())
    with pytest.raises(ValueError, match="multiple of 32"):
        plan_gpu(program, True, block)
