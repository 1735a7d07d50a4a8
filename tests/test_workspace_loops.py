"""The loop IR of kernels through a workspace (paper 002): the workspace allocated once
outside the hoisted loops, the producers reducing into it, its entries ordered and
appended to the output, and the clear between hoisted coordinates; and a differential
check that every kernel that compiles prints its concrete notation and loops (the loop
IR of a workspace statement raised an AssertionError before)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.ir.concrete.statements import Where
from llvsparse.ir.loops.lower_workspace import lower_workspace
from llvsparse.ir.loops.nodes import Allocate, Entries, Sort, walk
from llvsparse.ir.opt import loop_ir

import llvsparse as ls
from llvsparse.commands.main import main

SPMV = "y(i) = A(i,j) * x(j)"
SPADD = "C(i,j) = A(i,j) + B(i,j)"
SPGEMM = "C(i,j) = A(i,k) * B(k,j)"

A = sp.random(40, 30, density=0.12, format="csr", random_state=1)
B = sp.random(30, 35, density=0.15, format="csr", random_state=2)
S = sp.random(40, 30, density=0.1, format="csr", random_state=3)
D = sp.random(40, 35, density=0.1, format="csr", random_state=4)


def _result(kernel: ls.Kernel, **operands) -> np.ndarray:
    return kernel(**operands).to_numpy()


def test_spmv_concrete_and_loops():
    kernel = ls.compile(SPMV, A="csr", x="dense")
    x = np.linspace(-1, 1, 30)
    np.testing.assert_allclose(_result(kernel, A=A, x=x), A @ x, rtol=1e-13)
    assert kernel.concrete == "forall(i, forall(j, y(i) += A(i,j) * x(j)))"
    lines = kernel.loops.splitlines()
    assert lines[0].startswith("for i in coordinates of A.0:")
    assert lines[3:] == ["  for j in positions of A.1:", "    locate x.0 at j",
                         "    acc += A(i,j) * x(j)", "  insert y(i) = acc()"]
    assert "allocate" not in kernel.loops.replace("allocate acc", "") and "entries" not in \
        kernel.loops


def test_spadd_concrete_and_loops():
    kernel = ls.compile(SPADD, A="csr", B="csr", C="csr")
    np.testing.assert_allclose(_result(kernel, A=A, B=S), (A + S).toarray(), rtol=1e-13)
    assert kernel.concrete == "forall(i, forall(j, C(i,j) = A(i,j) + B(i,j)))"
    loops = kernel.loops
    assert loops.splitlines()[2].startswith("  merge j over A.1, B.1:")
    for case in ("case A.1, B.1:", "case A.1:", "case B.1:"):
        assert case in loops
    assert "append C(i,j) = A(i,j) + B(i,j)" in loops and "workspace" not in loops


def test_gustavson_dense_workspace_loops():
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C="csr")
    np.testing.assert_allclose(_result(kernel, A=A, B=B), (A @ B).toarray(), rtol=1e-13)
    assert kernel.concrete == ("forall(i, where(forall(j, C(i,j) = w(j)), forall(k, forall(j, "
                               "w(j) += A(i,k) * B(k,j)))) "
                               "with w: float64 [dense:0] (dense workspace))")
    lines = kernel.loops.splitlines()
    # Allocated once, before the hoisted loop over rows.
    assert lines[0].startswith("allocate w: float64 (dense workspace over j")
    assert lines[1] == "for i in coordinates of A.0:  {thread rows}"
    assert lines[2:8] == [
        "  for k in positions of A.1:  [other form: prefetch 4 ahead]",
        "    locate B.0 at k",
        "    for j in positions of B.1:",
        "      w(j) += A(i,k) * B(k,j)",
        ("  sort w: its touched coordinates, by a scan of its marks or a bitmap or, where they "
        "are few or spread, a sort"),
        "  for j in entries of w, in order:"]
    assert lines[8:] == ["    append C(i,j) = w(j)",
                         "  clear w = 0.0 through its touched list (marks of a new run)",
                         "threads assemble in phases: setup, append(lo, hi), finish(total)"]


@pytest.mark.parametrize("policy", ["sort", "hash", "bucket"])
def test_outer_product_sparse_workspace_loops(policy):
    kernel = ls.compile(SPGEMM, A="csc", B="csr", C="csr", workspace=policy)
    np.testing.assert_allclose(_result(kernel, A=A.tocsc(), B=B), (A @ B).toarray(),
                               rtol=1e-13)
    assert kernel.concrete == (
        "where(forall(i, forall(j, C(i,j) = w(i,j))), forall(k, forall(i, forall(j, "
        "w(i,j) += A(k,i) * B(k,j))))) with w: float64 [hashed:0, hashed:1] "
        f"({policy} workspace)")
    lines = kernel.loops.splitlines()
    assert lines[0].startswith("allocate w: float64 (sparse workspace over i, j")
    produce = "w(i,j) += " if policy == "hash" else "append w(i,j) = "
    assert lines[1:6] == ["for k in coordinates of A.0:", "  locate B.0 at k",
                          "  for i in positions of A.1:  {thread rows}", "    for j in positions of B.1:",
                          f"      {produce}A(k,i) * B(k,j)"]
    # No hoisted loop: one sort (or compaction) of every entry, then the consumer.
    assert lines[6].startswith("sort w: ")
    assert lines[7:] == ["for i, j in entries of w, in order:", "  append C(i,j) = w(i,j)"]


def test_hoisted_sparse_workspace_clears_per_row():
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C="csr", workspace="hash")
    np.testing.assert_allclose(_result(kernel, A=A, B=B), (A @ B).toarray(), rtol=1e-13)
    lines = kernel.loops.splitlines()
    assert lines[1] == "for i in coordinates of A.0:  {thread rows}"
    assert lines[-2:] == ["  clear w = 0.0 through its list of occupied slots",
                          "threads assemble in phases: setup, append(lo, hi), finish(total)"]
    assert lines[-4] == "  for j in entries of w, in order:"


def test_loop_ir_nodes_of_a_workspace_kernel():
    """The workspace's nodes are data (not only text): one allocation outside every
    loop, one sort and one walk over its entries, which appends to the output."""
    types = {n: ls.named_format(f, 2).tensor_type("float64", "int32")
             for n, f in (("C", "csr"), ("A", "csr"), ("B", "csr"))}
    from llvsparse.ir.concrete.from_notation import to_concrete
    from llvsparse.ir.schedule.workspace_schedule import schedule_kernel
    nests = schedule_kernel(to_concrete(ls.parse(SPGEMM), types), types)
    program = loop_ir(nests, types, "C")
    nodes = list(walk(program.root))
    assert isinstance(nodes[1], Allocate) and nodes[1].name == "w"
    assert [type(n) for n in nodes].count(Sort) == 1
    (entries,) = [n for n in nodes if isinstance(n, Entries)]
    assert entries.indices == ("j",) and entries.ordered
    with pytest.raises(ValueError, match="not a statement through workspace w"):
        lower_workspace(to_concrete_stmt(nests, types).consumer, types, "C",
                        nests[0].workspace, nests)


def to_concrete_stmt(nests, types) -> Where:
    from llvsparse.ir.loops.from_schedule import statement_of
    stmt = statement_of(nests, types)
    while not isinstance(stmt, Where):
        stmt = stmt.body
    return stmt


def test_dump_emits_loops_of_a_workspace_kernel(capsys: pytest.CaptureFixture[str]):
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C="csr")
    kernel(A=A, B=B)
    assert main(["dump", SPGEMM, "-f", "A:csr", "-f", "B:csr", "-f", "C:csr",
                 "--emit", "loops", "--no-color"]) == 0
    assert kernel.loops in capsys.readouterr().out


X3 = np.random.default_rng(5).random((6, 7, 8)) * (np.random.default_rng(6).random((6, 7, 8))
                                                     < 0.3)
U = np.random.default_rng(7).random((5, 8))
V = np.random.default_rng(8).random((30, 4))
P, Q = np.random.default_rng(9).random((7, 4)), np.random.default_rng(10).random((8, 4))
ROWLESS = A.toarray()[:6, :5]
ROWLESS[1] = 0  # a row of A stored nowhere: the hoisted union's other case

KERNELS = [  # statement, formats, workspace, operands, reference
    (SPMV, {"A": "csr"}, None, {"A": A, "x": np.ones(30)}, A @ np.ones(30)),
    (SPMV, {"A": "coo"}, None, {"A": A, "x": np.ones(30)}, A @ np.ones(30)),
    (SPMV, {"A": "csc"}, None, {"A": A.tocsc(), "x": np.ones(30)}, A @ np.ones(30)),
    (SPADD, {"A": "csr", "B": "csr", "C": "csr"}, None, {"A": A, "B": S}, (A + S).toarray()),
    ("C(i,j) = A(i,j) * B(i,j)", {"A": "csr", "B": "csr", "C": "csr"}, None,
     {"A": A, "B": S}, A.multiply(S).toarray()),
    ("C(i,j) = A(i,j) + B(j,i)", {"A": "csr", "B": "csr", "C": "csr"}, None,
     {"A": A, "B": S.T.tocsr()}, (A + S).toarray()),
    ("C(i,k) = A(i,j) * B(j,k)", {"A": "csr", "B": "dense", "C": "dense"}, None,
     {"A": A, "B": V}, A @ V),
    ("y(i) = sum_j(A(i,j) * x(j)) + z(i)", {"A": "csr"}, None,
     {"A": A, "x": np.ones(30), "z": np.arange(40.0)}, A @ np.ones(30) + np.arange(40.0)),
    ("C(i,j) = S(i,j) * A(i,k) * B(j,k)", {"S": "csr", "C": "csr"}, None,
     {"S": S, "A": np.ones((40, 4)), "B": V}, S.multiply(np.ones((40, 4)) @ V.T).toarray()),
    ("Y(i,j,l) = X(i,j,k) * U(l,k)", {"X": "csf", "Y": "csf"}, None, {"X": X3, "U": U},
     np.einsum("ijk,lk->ijl", X3, U)),
    (SPGEMM, {"A": "csr", "B": "csr", "C": "csr"}, None, {"A": A, "B": B}, (A @ B).toarray()),
    (SPGEMM, {"A": "csr", "B": "csr", "C": "dcsr"}, None, {"A": A, "B": B}, (A @ B).toarray()),
    (SPGEMM, {"A": "csc", "B": "csc", "C": "csc"}, None, {"A": A.tocsc(), "B": B.tocsc()},
     (A @ B).toarray()),
    (SPGEMM, {"A": "csr", "B": "csr", "C": "csr"}, "sort", {"A": A, "B": B},
     (A @ B).toarray()),
    (SPGEMM, {"A": "csc", "B": "csr", "C": "csr"}, "sort", {"A": A.tocsc(), "B": B},
     (A @ B).toarray()),
    (SPGEMM, {"A": "csc", "B": "csr", "C": "csr"}, "hash", {"A": A.tocsc(), "B": B},
     (A @ B).toarray()),
    (SPGEMM, {"A": "coo", "B": "coo", "C": "coo"}, "dense", {"A": A, "B": B},
     (A @ B).toarray()),
    ("C(i,j) = A(i,k) * B(k,j) + D(i,j)", {"A": "csr", "B": "csr", "D": "csr", "C": "csr"},
     "dense", {"A": A, "B": B, "D": D}, (A @ B + D).toarray()),
    ("y(j) = A(i,j) * x(i)", {"A": "csr", "y": "sparse"}, None,
     {"A": A, "x": np.linspace(1, 2, 40)}, A.T @ np.linspace(1, 2, 40)),
    ("C(j,i) = A(i,j)", {"A": "csr", "C": "csr"}, "hash", {"A": A}, A.T.toarray()),
    ("M(i,j) = X(i,k,l) * P(k,j) * Q(l,j)", {"X": "csf", "M": "csr"}, None,
     {"X": X3, "P": P, "Q": Q}, np.einsum("ikl,kj,lj->ij", X3, P, Q)),
    ("Z(i,j) = sum_k(A(i,k) + B(k,j))", {"A": "dcsr", "B": "csr", "Z": "csr"}, None,
     {"A": ls.Tensor.from_numpy(ROWLESS, "dcsr"), "B": B[:5, :7]},
     (ROWLESS[:, None, :] + B[:5, :7].toarray().T[None, :, :]).sum(axis=2)),
]


@pytest.mark.parametrize(("statement", "formats", "workspace", "operands", "reference"),
                         KERNELS, ids=[f"{s} {f} {w}" for s, f, w, _, _ in KERNELS])
def test_every_kernel_prints_its_loops(statement, formats, workspace, operands, reference):
    """Each kernel matches numpy, and its loop IR loops over every index its concrete
    notation does; one through a workspace allocates it and walks its entries."""
    kernel = ls.compile(statement, workspace=workspace, **formats)
    np.testing.assert_allclose(_result(kernel, **operands), reference, rtol=1e-12)
    concrete, loops = kernel.concrete, kernel.loops
    heads = set(re.findall(r"(?:for|merge) (\w+) (?:in|over)", loops))
    heads |= {v for group in re.findall(r"for ([\w, ]+) in entries of", loops)
              for v in group.split(", ")}
    assert set(re.findall(r"forall\((\w+)", concrete)) <= heads
    through = re.search(r"with (w\w*): \w+ \[", concrete)
    if through:
        name = through.group(1)
        assert loops.startswith(f"allocate {name}: ") and f"entries of {name}" in loops
        assert re.search(rf"(append|insert) \w+\([\w,]+\) = {name}\(", loops)
    else:
        assert "entries of" not in loops
