"""Inputs for ``llvsparse bench``: generated matrices and 3-tensors, and the real ones in
shared/data (listed by its manifest.json)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

# Sizes per kernel family: (full, quick). Full sizes are chosen so a call takes roughly
# 5-500 ms on one core of a current x86 server; the matrices outgrow a 32 MiB L3 so the
# SpMV roofline (bytes / memory bandwidth) applies to them.
MATRIX_SIZES: dict[str, dict[str, tuple[int, int]]] = {
    # family: generator -> (rows or grid side, nonzeros per row)
    "large": {"uniform": (400_000, 10), "powerlaw": (400_000, 10), "stencil5": (900, 5)},
    "medium": {"uniform": (100_000, 8), "powerlaw": (100_000, 8), "stencil5": (300, 5)},
    "quick": {"uniform": (2_000, 6), "powerlaw": (2_000, 6), "stencil5": (40, 5)},
}
TENSOR_SIZES: dict[str, tuple[tuple[int, int, int], int]] = {
    "full": ((2_000, 2_000, 1_000), 1_000_000),
    "quick": ((60, 50, 40), 3_000),
}
QUICK_REAL = ("olm1000", "lp_ship04l")


@dataclass
class MatrixInput:
    """A matrix operand with where it came from."""

    name: str
    matrix: sp.csr_matrix
    source: str  # "generated" or "real"
    notes: dict = field(default_factory=dict)

    @property
    def meta(self) -> dict:
        rows, cols = self.matrix.shape
        return {"rows": rows, "cols": cols, "nnz": int(self.matrix.nnz), "source": self.source,
                **self.notes}


@dataclass
class TensorInput:
    """A 3-tensor as sorted, unique coordinates (3, nnz) and float64 values."""

    name: str
    coords: np.ndarray
    values: np.ndarray
    shape: tuple[int, int, int]
    source: str
    notes: dict = field(default_factory=dict)

    @property
    def meta(self) -> dict:
        return {"shape": list(self.shape), "nnz": len(self.values), "source": self.source,
                **self.notes}


def data_dir() -> Path:
    """shared/data: $LLVSPARSE_BENCH_DATA, else /work/shared/data, else ../shared/data."""
    env = os.environ.get("LLVSPARSE_BENCH_DATA")
    if env:
        return Path(env)
    for candidate in (Path("/work/shared/data"),
                      Path(__file__).resolve().parents[2] / "shared" / "data",
                      Path(__file__).resolve().parents[1] / "shared" / "data"):
        if (candidate / "manifest.json").exists():
            return candidate
    return Path("/work/shared/data")


def canonical_csr(matrix: sp.spmatrix) -> sp.csr_matrix:
    """float64 CSR with sorted, summed indices and int32 index arrays (every input's form)."""
    csr = sp.csr_matrix(matrix, dtype=np.float64)
    csr.sum_duplicates()
    csr.sort_indices()
    csr.indices = csr.indices.astype(np.int32)
    csr.indptr = csr.indptr.astype(np.int32)
    return csr


def _random_values(rng: np.random.Generator, count: int) -> np.ndarray:
    return rng.uniform(0.5, 1.5, count)


def uniform(rows: int, per_row: int, seed: int = 0) -> sp.csr_matrix:
    """Square matrix with ``rows * per_row`` uniformly random positions (duplicates merged)."""
    rng = np.random.default_rng(seed)
    count = rows * per_row
    r = rng.integers(0, rows, count)
    c = rng.integers(0, rows, count)
    return canonical_csr(sp.coo_matrix((_random_values(rng, count), (r, c)), shape=(rows, rows)))


def powerlaw(rows: int, mean: int, seed: int = 1, exponent: float = 1.8) -> sp.csr_matrix:
    """Square matrix whose row lengths follow a Pareto law (mean ``mean``), random columns."""
    rng = np.random.default_rng(seed)
    raw = rng.pareto(exponent - 1.0, rows) + 1.0
    lengths = np.minimum(np.floor(raw * mean * rows / raw.sum()).astype(np.int64),
                         max(rows // 4, 1))
    lengths = np.maximum(lengths, 0)
    r = np.repeat(np.arange(rows), lengths)
    c = rng.integers(0, rows, len(r))
    return canonical_csr(sp.coo_matrix((_random_values(rng, len(r)), (r, c)), shape=(rows, rows)))


def stencil5(side: int) -> sp.csr_matrix:
    """The 2-D 5-point Laplacian on a ``side x side`` grid (5 diagonals)."""
    eye = sp.identity(side, format="csr")
    line = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(side, side), format="csr")
    return canonical_csr(sp.kron(eye, line) + sp.kron(line, eye))


def generated_matrices(family: str) -> Iterator[MatrixInput]:
    """uniform, powerlaw and stencil5 matrices of one size family."""
    sizes = MATRIX_SIZES[family]
    rows, per_row = sizes["uniform"]
    yield MatrixInput(f"uniform-{_short(rows)}", uniform(rows, per_row), "generated",
                      {"generator": f"uniform, {per_row} per row"})
    rows, per_row = sizes["powerlaw"]
    yield MatrixInput(f"powerlaw-{_short(rows)}", powerlaw(rows, per_row), "generated",
                      {"generator": f"Pareto row lengths, mean {per_row}"})
    side, _ = sizes["stencil5"]
    yield MatrixInput(f"stencil5-{side}x{side}", stencil5(side), "generated",
                      {"generator": "2-D 5-point Laplacian"})


def _short(count: int) -> str:
    return f"{count // 1000}k" if count >= 1000 else str(count)


def manifest() -> dict:
    path = data_dir() / "manifest.json"
    if not path.exists():
        return {"matrices": [], "tensors": []}
    return json.loads(path.read_text())


def real_matrix_names(quick: bool) -> list[str]:
    names = [m["name"] for m in manifest().get("matrices", [])]
    return [n for n in names if n in QUICK_REAL] if quick else names


def load_real_matrix(name: str) -> MatrixInput:
    """A matrix of the manifest, read with scipy (symmetric files expanded)."""
    entry = next(m for m in manifest()["matrices"] if m["name"] == name)
    matrix = canonical_csr(scipy.io.mmread(str(data_dir() / entry["file"])))
    return MatrixInput(name, matrix, "real", {"category": entry.get("category", "")})


def banded(matrix: sp.csr_matrix, limit: float = 4.0) -> bool:
    """Whether DIA storage stays within ``limit`` times the nonzeros."""
    coo = matrix.tocoo()
    if coo.nnz == 0:
        return False
    diagonals = len(np.unique(coo.col.astype(np.int64) - coo.row))
    return diagonals * matrix.shape[0] <= limit * coo.nnz


def ell_friendly(matrix: sp.csr_matrix, limit: float = 4.0) -> bool:
    """Whether ELL storage (rows x longest row) stays within ``limit`` times the nonzeros."""
    if matrix.nnz == 0:
        return False
    longest = int(np.diff(matrix.indptr).max())
    return longest * matrix.shape[0] <= limit * matrix.nnz


# -- tensors ---------------------------------------------------------------------------------
def _sorted_unique(coords: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort(coords[::-1])
    coords, values = coords[:, order], values[order]
    if coords.shape[1] == 0:
        return coords, values
    new = np.ones(coords.shape[1], dtype=bool)
    new[1:] = np.any(coords[:, 1:] != coords[:, :-1], axis=0)
    starts = np.flatnonzero(new)
    return coords[:, starts], np.add.reduceat(values, starts)


def random_tensor(shape: tuple[int, int, int], nnz: int, skew: bool, seed: int = 2
                  ) -> TensorInput:
    """Uniform random 3-tensor, or with Pareto-distributed slice sizes along mode 0."""
    rng = np.random.default_rng(seed)
    if skew:
        weights = rng.pareto(0.8, shape[0]) + 1.0
        first = rng.choice(shape[0], size=nnz, p=weights / weights.sum())
    else:
        first = rng.integers(0, shape[0], nnz)
    coords = np.vstack([first, rng.integers(0, shape[1], nnz), rng.integers(0, shape[2], nnz)])
    coords, values = _sorted_unique(coords.astype(np.int64), _random_values(rng, nnz))
    kind = "powerlaw" if skew else "uniform"
    return TensorInput(f"tensor-{kind}-{_short(nnz)}", coords, values, shape, "generated",
                       {"generator": f"{kind} 3-tensor"})


def generated_tensors(quick: bool) -> Iterator[TensorInput]:
    shape, nnz = TENSOR_SIZES["quick" if quick else "full"]
    yield random_tensor(shape, nnz, skew=False)
    yield random_tensor(shape, nnz, skew=True)


def real_tensor_entries() -> list[dict]:
    return list(manifest().get("tensors", []))


def load_real_tensor(entry: dict) -> TensorInput:
    """A FROSTT file of the manifest (1-based coordinates), as a float64 3-tensor."""
    table = np.loadtxt(data_dir() / entry["file"], dtype=np.float64, ndmin=2)
    order = table.shape[1] - 1
    if order != 3:
        raise ValueError(f"order {order}, not 3")
    coords = table[:, :3].astype(np.int64).T - 1
    shape = tuple(int(d) for d in coords.max(axis=1) + 1)
    coords, values = _sorted_unique(coords, table[:, 3].copy())
    return TensorInput(entry["name"], coords, values, shape, "real",  # type: ignore[arg-type]
                       {"domain": entry.get("domain", "")})
