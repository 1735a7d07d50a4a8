"""The prefetch pass (ir/opt/passes.py) and its emission (backends/llvm/prefetch.py): where it
fires, and that kernels prefetching the next rows compute what scipy computes, also
where the position ahead runs past the rows (empty rows, the last row, empty arrays)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.backends.cpu import OTHER_FORM_SUFFIX
from llvsparse.ir.concrete.from_notation import to_concrete
from llvsparse.ir.loops.nodes import loops_of
from llvsparse.ir.opt import loop_ir
from llvsparse.ir.opt import passes as opt
from llvsparse.ir.schedule.workspace_schedule import schedule_kernel

import llvsparse as ls
from llvsparse.calls.probe import Way
from llvsparse.commands.main import main

SPGEMM = "C(i,j) = A(i,k) * B(k,j)"


def _noted(statement: str, **formats: tuple[str, int]) -> dict[str, tuple[int, int]]:
    """Each loop's prefetch distance: (in the first form, in the other form)."""
    types = {n: ls.named_format(f, order).tensor_type("float64", "int32")
             for n, (f, order) in formats.items()}
    concrete = to_concrete(ls.parse(statement), types)
    program = loop_ir(schedule_kernel(concrete, types), types, statement.split("(")[0])
    return {node.index: (node.forms.prefetch, (node.other or node.forms).prefetch)
            for node in loops_of(program.root)}


def test_fires_on_gustavson_spgemm_only() -> None:
    gustavson = _noted(SPGEMM, C=("csr", 2), A=("csr", 2), B=("csr", 2))
    assert gustavson["k"] == (0, opt.AHEAD)  # the other form only
    assert all(gustavson[v] == (0, 0) for v in ("i", "j"))
    into_dense = _noted(SPGEMM, C=("dense", 2), A=("csr", 2), B=("csr", 2))
    assert into_dense["k"] == (0, opt.AHEAD)
    for statement, formats in [
            ("y(i) = A(i,j) * x(j)", {"y": ("dense", 1), "A": ("csr", 2), "x": ("dense", 1)}),
            ("C(i,j) = A(i,j) + B(i,j)", {"C": ("csr", 2), "A": ("csr", 2), "B": ("csr", 2)}),
            # B's rows are dense: iterated by coordinate, no bounds to read ahead
            (SPGEMM, {"C": ("dense", 2), "A": ("csr", 2), "B": ("dense", 2)}),
            # B's first level cannot be located at k: it is co-iterated instead
            (SPGEMM, {"C": ("dense", 2), "A": ("csr", 2), "B": ("dcsr", 2)})]:
        notes = _noted(statement, **formats)
        assert all(n == (0, 0) for n in notes.values()), statement


def test_shown_in_emit_loops(capsys: pytest.CaptureFixture[str]) -> None:
    main(["dump", SPGEMM, "-f", "A:csr", "-f", "B:csr", "--out-format", "csr",
          "--emit", "loops", "--no-color"])
    line = next(t for t in capsys.readouterr().out.splitlines() if "for k" in t)
    assert line.endswith(f"[other form: prefetch {opt.AHEAD} ahead]")


def _prefetching_functions(llvm_ir: str) -> dict[str, bool]:
    """Each function defined in a module's text, and whether it calls llvm.prefetch."""
    result = {}
    for chunk in llvm_ir.split("\ndefine ")[1:]:
        name = chunk.split("@", 1)[1].split("(", 1)[0].strip('"')
        result[name] = "llvm.prefetch" in chunk.split("\n}", 1)[0]
    return result


def test_only_the_other_form_prefetches() -> None:
    """Whether the kernel was built here or loaded from the disk cache (as in a full run,
    where an earlier test stored it), its inspected module holds both forms."""
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C="csr")
    functions = _prefetching_functions(kernel.llvm_ir)
    other = {n: p for n, p in functions.items() if OTHER_FORM_SUFFIX in n}
    first = {n: p for n, p in functions.items() if n.startswith("llvsparse_kernel")
             and OTHER_FORM_SUFFIX not in n}
    assert other and any(other.values()), functions
    assert first and not any(first.values()), functions
    spmv = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    assert "llvm.prefetch" not in spmv.llvm_ir


def _csr(dense: np.ndarray) -> sp.csr_matrix:
    return sp.csr_matrix(dense)


def _cases() -> list[tuple[str, sp.csr_matrix, sp.csr_matrix]]:
    rng = np.random.default_rng(7)
    cases = []
    for m, n, q, density in [(60, 50, 40, 0.1), (200, 300, 7, 0.02), (9, 9, 9, 0.5)]:
        a = sp.random(m, n, density=density, format="csr", random_state=rng)
        b = sp.random(n, q, density=density, format="csr", random_state=rng)
        cases.append((f"random {m}x{n}x{q}", a, b))
    # k near the end: A's entries in its last columns, B's last rows the only full ones
    a = np.zeros((5, 12))
    a[:, -2:] = 1.5
    a[4, :] = np.arange(12)
    b = np.zeros((12, 6))
    b[-1, :] = 2.0
    b[3, 2] = -1.0
    cases.append(("last rows", _csr(a), _csr(b)))
    # rows of A shorter than the distance ahead, and B's rows mostly empty
    a = np.eye(10)[::-1] + np.eye(10)
    b = np.zeros((10, 4))
    b[0, 1] = 3.0
    cases.append(("short rows", _csr(a), _csr(b)))
    cases.append(("empty B", _csr(np.ones((3, 4))), sp.csr_matrix((4, 5))))
    cases.append(("empty A", sp.csr_matrix((3, 4)), _csr(np.ones((4, 5)))))
    cases.append(("one entry", _csr(np.array([[2.0]])), _csr(np.array([[3.0]]))))
    return cases


@pytest.mark.parametrize("name,a,b", _cases(), ids=[c[0] for c in _cases()])
@pytest.mark.parametrize("out", ["csr", "dense"])
def test_both_forms_match_scipy(name: str, a: sp.csr_matrix, b: sp.csr_matrix, out: str,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C=out)
    expected = (a @ b).toarray()
    for form in ("first", "other"):  # a binding reads FORCED when it is made
        monkeypatch.setitem(ls.calls.probe.FORCED, "form", form)
        call = kernel.bind(A=a, B=b, threads=1)
        assert call.way == Way(form, "direct")
        np.testing.assert_allclose(call().to_numpy(), expected, rtol=1e-13, atol=0)


def test_int64_indices_and_a_probed_binding() -> None:
    rng = np.random.default_rng(3)
    a = sp.random(300, 200, density=0.03, format="csr", random_state=rng)
    b = sp.random(200, 100, density=0.05, format="csr", random_state=rng)
    for m in (a, b):
        m.indices, m.indptr = m.indices.astype(np.int64), m.indptr.astype(np.int64)
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C="csr")
    call = kernel.bind(A=a, B=b, threads=1)
    for _ in range(8):  # the probe's calls time both forms, then one is kept
        np.testing.assert_allclose(call().to_numpy(), (a @ b).toarray(), rtol=1e-13,
                                   atol=0)
