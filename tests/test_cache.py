"""Compiled kernels persist on disk: a new process loads object code instead of running
LLVM, a corrupt entry is rebuilt, and the cache can be turned off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import llvsparse.backends
import llvsparse.ir
import pytest

from llvsparse.caching import disk as cache

SCRIPT = """
import json, numpy as np, llvsparse as ls
from llvsparse.backends.cpu import STATS
A = np.array([[1.0, 0, 2], [0, 3, 0], [4, 0, 5]])
k = ls.compile("y(i) = A(i,j) * x(j)", A="dense")
y = k(A=A, x=np.array([1.0, 2.0, 3.0])).to_numpy()
print(json.dumps({"y": y.tolist(), "stats": dict(STATS)}))
"""
EXPECTED = [7.0, 6.0, 19.0]


def _run(cache: Path, enabled: bool = True, script: str = SCRIPT, **env_vars: str) -> dict:
    env = dict(os.environ, LLVSPARSE_CACHE_DIR=str(cache),
               LLVSPARSE_CACHE="1" if enabled else "0", **env_vars)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_second_process_loads_from_disk(tmp_path):
    first = _run(tmp_path)
    assert first["y"] == EXPECTED
    assert first["stats"].get("llvm_compiles", 0) >= 1
    second = _run(tmp_path)
    assert second["y"] == EXPECTED
    assert second["stats"].get("llvm_compiles", 0) == 0
    assert second["stats"].get("disk_loads", 0) >= 1


def test_corrupt_entry_is_rebuilt_not_trusted(tmp_path):
    _run(tmp_path)
    for obj in tmp_path.glob("*.o"):
        data = bytearray(obj.read_bytes())
        data[len(data) // 2] ^= 0xFF
        obj.write_bytes(bytes(data))
    again = _run(tmp_path)
    assert again["y"] == EXPECTED
    assert again["stats"].get("llvm_compiles", 0) >= 1
    assert again["stats"].get("disk_loads", 0) == 0
    for meta in tmp_path.glob("*.json"):
        assert "sha256" in json.loads(meta.read_text())


def test_cache_can_be_disabled(tmp_path):
    result = _run(tmp_path, enabled=False)
    assert result["y"] == EXPECTED
    assert list(tmp_path.iterdir()) == []


def test_size_bound_evicts_least_recently_used(tmp_path):
    from llvsparse.caching import disk as cache

    for n, age in enumerate((300, 200, 100)):  # entry 0 is the oldest
        (tmp_path / f"k{n}.o").write_bytes(b"x" * 1000)
        (tmp_path / f"k{n}.json").write_text("{}")
        os.utime(tmp_path / f"k{n}.json", (1e9 - age, 1e9 - age))
    cache.evict(tmp_path, max_bytes=10_000)
    assert len(list(tmp_path.glob("*.o"))) == 3  # under the bound: nothing goes
    cache.evict(tmp_path, max_bytes=2_500)
    assert sorted(p.stem for p in tmp_path.glob("*.o")) == ["k2"]
    assert sorted(p.stem for p in tmp_path.glob("*.json")) == ["k2"]


def test_store_respects_the_size_bound(tmp_path, monkeypatch):
    from llvsparse.caching import disk as cache

    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LLVSPARSE_CACHE_MAX_MB", str(3000 / 2**20))
    for n in range(5):
        cache.store(f"entry{n}", b"y" * 1000, {"name": "k"})
        os.utime(tmp_path / f"entry{n}.json", (1e9 + n, 1e9 + n))
    total = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert 0 < total <= 3000
    assert (tmp_path / "entry4.o").exists() and not (tmp_path / "entry0.o").exists()
    assert cache.load("entry4") is not None


def test_stores_under_the_bound_list_the_folder_once(tmp_path, monkeypatch):
    """Every store listed the folder and stat'ed each entry to total it: 0.2 s a compile
    once the folder held 4,500 kernels, as the test suite's own cache did."""
    from llvsparse.caching import disk as cache

    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path))
    listings = []
    real = cache.evict
    monkeypatch.setattr(cache, "evict", lambda folder, bound: listings.append(folder)
                        or real(folder, bound))
    for n in range(40):
        cache.store(f"entry{n}", b"y" * 100, {"name": "k"})
    assert listings == [tmp_path]
    assert all(cache.load(f"entry{n}")[0] == b"y" * 100 for n in range(40))


def test_what_other_processes_store_counts_towards_the_bound(tmp_path, monkeypatch):
    """A process lists the folder again after RELIST stores of its own, so entries that
    others wrote meanwhile are evicted (oldest first) within that many stores."""
    from llvsparse.caching import disk as cache

    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LLVSPARSE_CACHE_MAX_MB", str(20_000 / 2**20))
    cache.store("mine0", b"y" * 100, {"name": "k"})
    for n in range(5):  # another process's entries, older than any of ours
        (tmp_path / f"theirs{n}.o").write_bytes(b"x" * 10_000)
        (tmp_path / f"theirs{n}.json").write_text("{}")
        os.utime(tmp_path / f"theirs{n}.json", (1e9 + n, 1e9 + n))
    for n in range(1, cache.RELIST + 1):
        cache.store(f"mine{n}", b"y" * 100, {"name": "k"})
    total = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert 0 < total <= 20_000
    assert not (tmp_path / "theirs0.o").exists()
    assert all((tmp_path / f"mine{n}.o").exists() for n in range(cache.RELIST + 1))


def test_a_kernel_from_disk_still_knows_it_zeroes_its_rows(tmp_path, monkeypatch):
    """Whether a kernel zeroes its dense output itself travels with its object code: the
    caller skips the clear only when the loaded kernel does it."""
    import numpy as np
    import scipy.sparse as sp
    from llvsparse.backends.cpu import STATS

    import llvsparse as ls
    from llvsparse.kernel import api

    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(api, "_CACHE", {})
    expr = "C(i,k) = A(i,j) * B(j,k)"
    assert ls.compile(expr, A="csr").instance().initializes_output
    monkeypatch.setattr(api, "_CACHE", {})
    loads = STATS.get("disk_loads", 0)
    kernel = ls.compile(expr, A="csr")
    A = sp.random(200, 30, density=0.05, format="csr", random_state=8)
    B = np.random.default_rng(8).random((30, 8))
    result = kernel(A=ls.Tensor.from_scipy(A, format="csr"), B=B,
                    out=np.full((200, 8), np.nan))
    assert STATS.get("disk_loads", 0) == loads + 1 and kernel.instance().initializes_output
    np.testing.assert_allclose(result.to_numpy(), A @ B, rtol=1e-13)


def test_entry_under_another_key_is_rebuilt(tmp_path):
    """Every entry's kernel has the same symbol, so a file copied over another key's
    loaded and ran the other kernel (2 A x for A x here; a segfault for other operands)."""
    doubled = SCRIPT.replace('"y(i) = A(i,j) * x(j)"', '"y(i) = 2 * A(i,j) * x(j)"')
    assert _run(tmp_path / "doubled", script=doubled)["y"] == [2 * v for v in EXPECTED]
    _run(tmp_path / "plain")
    (target,) = (tmp_path / "plain").glob("*.json")
    (source,) = (tmp_path / "doubled").glob("*.json")
    for suffix in (".json", ".o"):
        target.with_suffix(suffix).write_bytes(source.with_suffix(suffix).read_bytes())
    again = _run(tmp_path / "plain")
    assert again["y"] == EXPECTED
    assert again["stats"].get("llvm_compiles", 0) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("edit", [
    lambda meta: [], lambda meta: None, lambda meta: "x",
    lambda meta: {k: v for k, v in meta.items() if k != "concrete"},
    lambda meta: dict(meta, name=5), lambda meta: dict(meta, conversions={"A": "nosuch"})])
def test_unusable_metadata_is_rebuilt_and_healed(tmp_path, edit):
    """Metadata that parses but cannot be used raised on every later compile."""
    _run(tmp_path)
    (meta_path,) = tmp_path.glob("*.json")
    meta_path.write_text(json.dumps(edit(json.loads(meta_path.read_text()))))
    again = _run(tmp_path)
    assert again["y"] == EXPECTED and again["stats"].get("llvm_compiles", 0) >= 1
    healed = _run(tmp_path)
    assert healed["y"] == EXPECTED and healed["stats"].get("llvm_compiles", 0) == 0


@pytest.mark.parametrize("bound", ["inf", "-inf", "1e400", "abc"])
def test_unreadable_size_bound_falls_back_to_the_default(tmp_path, bound):
    result = _run(tmp_path, LLVSPARSE_CACHE_MAX_MB=bound)
    assert result["y"] == EXPECTED
    assert list(tmp_path.glob("*.o"))


def test_a_process_keys_its_kernels_by_the_sources_it_imported():
    """The compiler's fingerprint was read from the source files at the first compile:
    a tree edited after the import (a test run while commits land) gave old code the new
    sources' key, and the disk cache would serve it to processes running the new code.
    The sources are "edited" here by making every read of them return other bytes."""
    script = """
import pathlib, sys
import llvsparse.kernel.api
from llvsparse.caching.disk import compiler_fingerprint
if sys.argv[1] == "edited":
    real = pathlib.Path.read_bytes
    pathlib.Path.read_bytes = lambda path: real(path) + b"# edited after the import"
print(compiler_fingerprint())
"""
    prints = [subprocess.run([sys.executable, "-c", script, mode], capture_output=True,
                             text=True, check=True).stdout.split()
              for mode in ("as-imported", "edited")]
    assert len(prints[0]) == 1 and prints[1] == prints[0]


def test_the_fingerprint_covers_every_compiler_source(monkeypatch):
    """The fingerprint hashed only the top folder of ir/ and backends/: an edit to
    ir/opt/passes.py (which shapes the emitted loops) kept the old key, and the disk
    cache served kernels built by the old passes."""
    read = set()
    real = Path.read_bytes

    def recording(path):
        read.add(path.resolve())
        return real(path)

    monkeypatch.setattr(Path, "read_bytes", recording)
    cache._sources_digest()
    for package in (llvsparse.ir, llvsparse.backends):
        folder = Path(package.__file__).resolve().parent
        sources = {p.resolve() for p in folder.rglob("*.py")}
        assert sources and sources - read == set()
