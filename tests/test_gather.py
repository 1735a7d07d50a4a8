"""Sparse outputs gathered by threads: each thread appends its rows into buffers of its
own from position 0, and the buffers are concatenated. That is only right for levels
whose append functions are relocatable (ir/loops/relocatable.py); the others keep one thread,
and every result equals the serial one and the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.formats.loader import load_level_text
from llvsparse.formats.registry import get_level, unregister_level_format
from llvsparse.ir.loops.relocatable import appends_relocatably

import llvsparse as ls
from llvsparse.calls.probe import TIMED_CALLS

HEADER = """
name: {name}
doc: a test level
params: {{}}
arrays:
  pos: {{type: pos, length: parent_size + 1, init: 0}}
  crd: {{type: crd, length: size}}
properties:
  full: false
  ordered: true
  unique: true
  branchless: false
  compact: true
capabilities:
  iterate: position
  pos_bounds: return pos[p_parent], pos[p_parent + 1]
  pos_access: return crd[p], True
  append:
    append_init: pos[0] = 0
"""
PREFIX_SUM = """
    append_finalize: |
      total = pos[0]
      for q in range(1, parent_size + 1):
          total = total + pos[q]
          pos[q] = total
"""
# Stores each row's end as an absolute position; empty rows take the previous end.
ABSOLUTE = """
    append_coord: crd[p] = i
    append_edges: pos[p_parent + 1] = p_end
    append_finalize: |
      for q in range(1, parent_size + 1):
          if pos[q] < pos[q - 1]:
              pos[q] = pos[q - 1]
"""


def _level(name: str, append: str, finalize: str = PREFIX_SUM):
    return load_level_text(HEADER.format(name=name) + append + finalize)


def _appends(coord: str, edges: str) -> str:
    """append_coord and append_edges bodies, statements separated by ';'."""
    def block(name: str, body: str) -> str:
        lines = "".join(f"      {line.strip()}\n" for line in body.split(";"))
        return f"    {name}: |\n{lines}"
    return block("append_coord", coord) + block("append_edges", edges)


RELOCATED = _appends("crd[p] = i", "pos[p_parent + 1] = p_end - p_begin")


@pytest.mark.parametrize(("append", "relocatable"), [
    (RELOCATED, True),
    (_appends("c = i; crd[p] = c", "n = p_end - p_begin; pos[p_parent + 1] = n"), True),
    # positions other than a segment's length reach a shared array
    (_appends("crd[p] = i", "pos[p_parent + 1] = p_end"), False),
    (_appends("crd[p] = i", "n = p_begin; pos[p_parent + 1] = p_end - n"), False),
    # a private buffer written somewhere other than the entry's position, or with it
    (_appends("crd[p + 1] = i", "pos[p_parent + 1] = p_end - p_begin"), False),
    (_appends("crd[p] = p", "pos[p_parent + 1] = p_end - p_begin"), False),
    # a shared cell that is not the parent row's own, or read back
    (_appends("crd[p] = i", "pos[1] = p_end - p_begin"), False),
    (_appends("crd[p] = i", "pos[p_parent + 1] = pos[p_parent] + p_end - p_begin"), False),
])
def test_relocatable_append_functions(append, relocatable):
    assert appends_relocatably(_level("probe", append)) is relocatable


def test_shipped_append_levels_are_relocatable():
    for name in ("compressed", "singleton"):
        assert appends_relocatably(get_level(name))


def _register(tmp_path: Path, name: str, append: str, finalize: str) -> ls.Format:
    path = tmp_path / f"{name}.yaml"
    path.write_text(HEADER.format(name=name) + append + finalize)
    ls.register_level_format(path, replace=True)
    return ls.Format([ls.Level("dense", 0), ls.Level(name, 1)])


@pytest.fixture
def many_threads(monkeypatch):
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 1000)
    monkeypatch.setattr(ls.calls.kernel_calls, "ASSEMBLY_MIN_ENTRIES", 1000)


def _operands(seed: int):
    rng = np.random.default_rng(seed)
    mats = []
    for k in range(2):
        m = sp.random(2000, 1500, density=0.006 + 0.004 * k, random_state=rng, format="csr")
        m = sp.diags((np.arange(2000) % 97 > 10).astype(float)) @ m  # runs of empty rows
        m.eliminate_zeros()
        mats.append(m)
    return mats


@pytest.mark.slow
@pytest.mark.parametrize(("name", "append", "gathered"), [
    ("relocated", RELOCATED, True), ("absolute", ABSOLUTE, False)])
@pytest.mark.parametrize("op", ["+", "*"])
def test_plugin_output_levels_gathered_only_when_relocatable(tmp_path, many_threads, name,
                                                             append, gathered, op,
                                                             always_gather):
    fmt = _register(tmp_path, name, append, "" if name == "absolute" else PREFIX_SUM)
    try:
        a, b = _operands(3)
        kernel = ls.compile(f"C(i,j) = A(i,j) {op} B(i,j)", A="csr", B="csr", out_format=fmt)
        operands = {"A": ls.Tensor.from_scipy(a, "csr"), "B": ls.Tensor.from_scipy(b, "csr")}
        serial = kernel(threads=1, **operands)
        always_gather.clear()  # (conversions of operands may gather too)
        threaded = kernel(threads=2, **operands)
        assert ("append" in kernel.last.jit.assembly) is gathered
        assert (kernel.bind(threads=2, **operands).plan is not None) is gathered
        assert len(always_gather) == int(gathered)
        for one, two in zip(serial.level_arrays, threaded.level_arrays, strict=True):
            assert one.keys() == two.keys()
            for array in one:
                np.testing.assert_array_equal(one[array], two[array])
        np.testing.assert_array_equal(serial.values, threaded.values)
        reference = (a + b) if op == "+" else a.multiply(b)
        np.testing.assert_allclose(threaded.to_numpy(), reference.toarray(), rtol=1e-15)
    finally:
        unregister_level_format(name)


@pytest.mark.parametrize("threads", [2, 3, 5])
def test_gathered_union_with_skewed_rows_and_growth(many_threads, threads, monkeypatch,
                                                    always_gather):
    """Rows of very different lengths, and chunk reservations too small (the kernel grows
    each thread's buffers): the arrays of one thread, bit for bit."""
    rng = np.random.default_rng(9)
    lengths = np.minimum(rng.pareto(0.8, 3000).astype(int), 1200)
    rows = np.repeat(np.arange(3000), lengths)
    cols = np.concatenate([rng.choice(1200, n, replace=False) for n in lengths])
    a = sp.csr_matrix((rng.standard_normal(len(rows)), (rows, cols)), shape=(3000, 1200))
    b = sp.random(3000, 1200, density=0.01, random_state=rng, format="csr")
    kernel = ls.compile("C(i,j) = A(i,j) - B(i,j)", A="csr", B="csr", out_format="csr")
    operands = {"A": ls.Tensor.from_scipy(a, "csr"), "B": ls.Tensor.from_scipy(b, "csr")}
    serial = kernel(threads=1, **operands)
    always_gather.clear()
    real_split = ls.abi.thread_calls.split
    monkeypatch.setattr(ls.abi.thread_calls, "split", lambda *args: _starved(real_split(*args)))
    for calls in (1, 2):  # the second call appends into the first one's buffers
        threaded = kernel(threads=threads, **operands)
        assert len(always_gather) == calls
        assert kernel.bind(threads=threads, **operands).plan is not None
        for one, two in zip(serial.level_arrays, threaded.level_arrays, strict=True):
            for array in one:
                np.testing.assert_array_equal(one[array], two[array])
        np.testing.assert_array_equal(serial.values, threaded.values)
    np.testing.assert_allclose(threaded.to_numpy(), (a - b).toarray(), rtol=1e-15)


def _starved(plan: ls.abi.thread_calls.Split) -> ls.abi.thread_calls.Split:
    """The same chunks, reserving one entry each."""
    return ls.abi.thread_calls.Split(plan.chunks, plan.order, plan.threads, (1,) * len(plan.chunks))


def test_a_binding_probes_then_keeps_its_choice(many_threads, monkeypatch):
    """Repeated calls of one binding: both ways are timed, one is kept, and every call
    gives the same arrays."""
    a, b = _operands(4)
    kernel = ls.compile("C(i,j) = A(i,j) + B(i,j)", A="csr", B="csr", out_format="csr")
    operands = {"A": ls.Tensor.from_scipy(a, "csr"), "B": ls.Tensor.from_scipy(b, "csr")}
    serial = kernel(threads=1, **operands)
    call = kernel.bind(threads=2, **operands)
    gathered = []
    real = ls.calls.binding.gather_parallel
    monkeypatch.setattr(ls.calls.binding, "gather_parallel",
                        lambda *args: gathered.append(1) or real(*args))
    probed = 3 * TIMED_CALLS  # each merge on one thread, then gathering (test_probe.py)
    for _ in range(probed + 3):
        result = call()
        np.testing.assert_array_equal(result.values, serial.values)
        np.testing.assert_array_equal(result.level_arrays[1]["crd"],
                                      serial.level_arrays[1]["crd"])
    assert call.probe.choice.assembly in ("direct", "gathered")
    assert len(gathered) == TIMED_CALLS + (3 if call.probe.choice.assembly == "gathered" else 0)
