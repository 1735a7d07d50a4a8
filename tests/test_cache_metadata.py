"""The disk cache's metadata is covered by the entry's digest and checked on load: an
edited, truncated or ill-typed metadata file is a miss (the entry is deleted and rebuilt),
never trusted. Before, ``"conversions": {}`` made every later run segfault,
``"initializes_output": true`` gave wrong DIA and ELL SpMV results, and a bad
``parallel_mode`` raised IndexError on every run without the entry being discarded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.backends.cpu import STATS

import llvsparse as ls
from llvsparse.caching import disk as cache
from llvsparse.kernel import api


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(api, "_CACHE", {})
    return tmp_path


def _edit_entry(folder: Path, edit, rehash: bool, pick=lambda meta: True) -> None:
    """Apply ``edit`` to the metadata of the one entry ``pick`` accepts; ``rehash``: as
    if whoever edited it also wrote a matching digest, so only the check on load stands
    in the way."""
    (path,) = [p for p in folder.glob("*.json") if pick(json.loads(p.read_text()))]
    meta = json.loads(path.read_text())
    meta = edit(meta)
    if rehash:
        meta["sha256"] = cache.digest(path.with_suffix(".o").read_bytes(), meta)
    path.write_text(json.dumps(meta))


def _compile_again(expr: str, **formats) -> tuple[ls.Kernel, int, int]:
    """A kernel compiled as in a new process (the in-memory cache emptied), with the
    counts of LLVM compiles and disk loads it took."""
    api._CACHE.clear()
    compiles, loads = STATS.get("llvm_compiles", 0), STATS.get("disk_loads", 0)
    kernel = ls.compile(expr, **formats)
    kernel.instance()
    return kernel, STATS.get("llvm_compiles", 0) - compiles, STATS.get("disk_loads", 0) - loads


def _matrix(seed: int = 3) -> sp.csr_matrix:
    matrix = sp.random(40, 30, density=0.15, format="csr", random_state=seed)
    keep = np.ones(40)
    keep[5] = 0  # an empty row: a kernel that does not clear it leaves it as it was
    matrix = (sp.diags(keep) @ matrix).tocsr()
    matrix.eliminate_zeros()
    return matrix


SPMV = "y(i) = A(i,j) * x(j)"


@pytest.mark.parametrize("fmt", ["dia", "ell"])
def test_a_claim_to_initialize_the_output_is_not_trusted(folder, fmt):
    """Well-formed, so only the digest stands in its way (see the last test)."""
    ls.compile(SPMV, A=fmt).instance()
    _edit_entry(folder, lambda meta: dict(meta, initializes_output=True), rehash=False)
    kernel, compiles, loads = _compile_again(SPMV, A=fmt)
    assert (compiles, loads) == (1, 0)
    matrix, x = _matrix(), np.arange(30.0)
    result = kernel(A=ls.Tensor.from_scipy(matrix, fmt), x=x, out=np.full(40, np.nan))
    np.testing.assert_allclose(result.to_numpy(), matrix @ x, rtol=1e-13)
    assert not kernel.instance().initializes_output
    assert _compile_again(SPMV, A=fmt)[1:] == (0, 1)  # healed: the rebuilt entry loads


BAD_EDITS = {
    "parallel mode past the output's modes": lambda meta: dict(meta, parallel_mode=5),
    "parallel mode of the wrong type": lambda meta: dict(meta, parallel_mode="0"),
    "a boolean parallel mode": lambda meta: dict(meta, parallel_mode=True),
    "missing key": lambda meta: {k: v for k, v in meta.items() if k != "lattices"},
    "extra key": lambda meta: dict(meta, extra=1),
    "wrong type": lambda meta: dict(meta, initializes_output="yes"),
    "conversion of an unknown operand": lambda meta: dict(meta, conversions={"Z": [0, 1]}),
    "conversion of the output": lambda meta: dict(meta, conversions={"y": [0]}),
    "conversion to a non-permutation": lambda meta: dict(meta, conversions={"A": [0, 0]}),
    "conversion to strings": lambda meta: dict(meta, conversions={"A": ["0", "1"]}),
    "a name that is not a symbol": lambda meta: dict(meta, name="no such kernel"),
    "a symbol the object lacks": lambda meta: dict(meta, name="llvsparse_missing"),
    "not a mapping": lambda meta: [meta],
}


@pytest.mark.parametrize("rehash", [False, True])
@pytest.mark.parametrize("edit", BAD_EDITS.values(), ids=BAD_EDITS.keys())
def test_unusable_metadata_is_a_miss_and_is_healed(folder, edit, rehash):
    ls.compile(SPMV, A="csr").instance()
    _edit_entry(folder, edit, rehash and not isinstance(edit({}), list))
    kernel, compiles, loads = _compile_again(SPMV, A="csr")
    assert (compiles, loads) == (1, 0)
    matrix, x = sp.random(3000, 50, density=0.1, format="csr", random_state=2), np.ones(50)
    result = kernel(A=ls.Tensor.from_scipy(matrix, "csr"), x=x, threads=2)
    np.testing.assert_allclose(result.to_numpy(), matrix @ x, rtol=1e-13)
    assert _compile_again(SPMV, A="csr")[1:] == (0, 1)


@pytest.mark.parametrize("damage", ["truncate", "not utf-8", "empty", "object removed"])
def test_a_damaged_entry_is_a_miss(folder, damage):
    ls.compile(SPMV, A="csr").instance()
    (path,) = folder.glob("*.json")
    text = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(text[: len(text) // 2])
    elif damage == "not utf-8":
        path.write_bytes(b"\xff\xfe" + text)
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.with_suffix(".o").unlink()
    kernel, compiles, loads = _compile_again(SPMV, A="csr")
    assert (compiles, loads) == (1, 0)
    matrix, x = _matrix(), np.arange(30.0)
    np.testing.assert_allclose(kernel(A=ls.Tensor.from_scipy(matrix, "csr"), x=x).to_numpy(),
                               matrix @ x, rtol=1e-13)
    assert _compile_again(SPMV, A="csr")[1:] == (0, 1)


CONVERTING = """
import json, numpy as np, scipy.sparse as sp, llvsparse as ls
A = sp.random(30, 30, density=0.2, format="csr", random_state=4)
B = sp.random(30, 30, density=0.2, format="csr", random_state=5)
k = ls.compile("C(i,j) = A(i,j) + B(j,i)", "csr", A="csr", B="csr")
C = k(A=ls.Tensor.from_scipy(A, "csr"), B=ls.Tensor.from_scipy(B, "csr")).to_numpy()
print(json.dumps({"right": bool(np.allclose(C, (A + B.T).toarray())),
                  "conversions": sorted(k.instance().conversions)}))
"""


def test_dropped_conversions_are_a_miss(tmp_path):
    """The kernel reads B as a converted coordinate list: run on B's CSR arrays instead
    (``"conversions": {}``), it segfaulted on every later run."""
    env = dict(os.environ, LLVSPARSE_CACHE_DIR=str(tmp_path), LLVSPARSE_CACHE="1")

    def run() -> dict:
        done = subprocess.run([sys.executable, "-c", CONVERTING], env=env, text=True,
                              capture_output=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert run() == {"right": True, "conversions": ["B"]}
    _edit_entry(tmp_path, lambda meta: dict(meta, conversions={}), False,
                pick=lambda meta: meta["conversions"])  # not the conversion's copy kernel
    assert run() == {"right": True, "conversions": ["B"]}


def test_edits_that_keep_the_digest_are_beyond_the_check(folder):
    """What the check cannot see (a well-formed claim with a recomputed digest) is the
    digest's job; this pins that the digest covers every metadata field."""
    ls.compile(SPMV, A="csr").instance()
    (path,) = folder.glob("*.json")
    meta = json.loads(path.read_text())
    obj = path.with_suffix(".o").read_bytes()
    assert cache.digest(obj, meta) == meta["sha256"]
    for field in ("name", "concrete", "lattices", "parallel_mode", "initializes_output",
                  "conversions", "key"):
        changed = dict(meta, **{field: "x" if meta[field] != "x" else "y"})
        assert cache.digest(obj, changed) != meta["sha256"], field
    assert cache.digest(obj + b"\0", meta) != meta["sha256"]
