"""A workspace policy defined outside the compiler and registered from Python.

The policy here keeps the producer's pairs sorted as they come (each one walks back past
the larger coordinates, which shift up a place: an insertion sort; an equal coordinate
is summed in place), so its drain is a walk: a drain none of the shipped policies has.
It is built only on what a plugin author has (WorkspacePolicy, PairStore), and runs
Gustavson's and the outer-product SpGEMM, checked against scipy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from llvmlite import ir
from llvsparse.backends.llvm.bodies import I1, I64
from llvsparse.backends.llvm.emit_base import ONE, ZERO, emit_counted_loop
from llvsparse.backends.llvm.workspace_store import PairStore, SortStore, Write
from llvsparse.ir.schedule.workspace_policy import WorkspaceBytes, WorkspacePolicy

import llvsparse as ls
import llvsparse.calls.workspaces
import llvsparse.kernel.api

SPGEMM = "C(i,j) = A(i,k) * B(k,j)"


class InsertionStore(PairStore):
    """Pairs in coordinate order, room for a row of the last index at first."""

    def __init__(self, kc, extents: list[ir.Value]) -> None:
        super().__init__(kc, kc.b.add(extents[-1], ONE), extents)
        self.checked()

    def add(self, at: ir.Value, value: ir.Value) -> None:
        b, kc = self.b, self.kc
        n = b.load(self.count)
        place = kc.alloca(I64, "ins.place")
        b.store(n, place)
        head, test, back, done = (b.append_basic_block(f"ins.{x}")
                                  for x in ("head", "test", "back", "done"))
        b.branch(head)
        b.position_at_end(head)
        q = b.load(place)
        b.cbranch(b.icmp_signed(">", q, ZERO), test, done)
        b.position_at_end(test)
        b.cbranch(b.icmp_signed(">", b.load(self.at(self.keys, b.sub(q, ONE))), at), back, done)
        b.position_at_end(back)
        b.store(b.sub(q, ONE), place)
        b.branch(head)
        b.position_at_end(done)
        q = b.load(place)
        same = kc.alloca(I1, "ins.same")
        b.store(ir.Constant(I1, 0), same)
        with b.if_then(b.icmp_signed(">", q, ZERO)):
            b.store(b.icmp_signed("==", b.load(self.at(self.keys, b.sub(q, ONE))), at), same)
        with b.if_else(b.load(same)) as (merge, insert):
            with merge:
                slot = self.at(self.vals, b.sub(q, ONE))
                b.store(self.plus(b.load(slot), value), slot)
            with insert:
                self.grow(b.add(n, ONE))

                def shift(t: ir.Value) -> None:
                    r = b.sub(n, t)
                    for array in (self.keys, self.vals):
                        b.store(b.load(self.at(array, b.sub(r, ONE))), self.at(array, r))
                emit_counted_loop(b, kc.alloca(I64, "ins.t"), ZERO, b.sub(n, q), shift,
                                  "ins.shift")
                b.store(at, self.at(self.keys, q))
                b.store(value, self.at(self.vals, q))
                b.store(b.add(n, ONE), self.count)

    def drain(self, ordered: bool, write: Write) -> None:
        del ordered  # always in order
        b = self.b
        emit_counted_loop(b, self.kc.alloca(I64, "ins.q"), ZERO, b.load(self.count),
                          lambda q: write(b.load(self.at(self.keys, q)),
                                          b.load(self.at(self.vals, q))), "ins.drain")
        b.store(ZERO, self.count)


class InsertionPolicy(WorkspacePolicy):
    def fixed_bytes(self, itemsize: int) -> WorkspaceBytes:
        return WorkspaceBytes(per_column=8 + itemsize)  # a key and a value per column


INSERTION = InsertionPolicy(
    "insertion", InsertionStore,
    "sparse workspace over {vars}: (coordinate, value) pairs kept in order as inserted",
    "its pairs, kept in order by each insert", "its pair count")


@pytest.fixture
def insertion():
    ls.register_workspace_policy(INSERTION)
    yield INSERTION
    ls.unregister_workspace_policy("insertion")


def _random(rows: int, cols: int, density: float, seed: int) -> sp.csr_matrix:
    return sp.random(rows, cols, density=density, format="csr", random_state=seed)


def _edges() -> list[tuple[sp.csr_matrix, sp.csr_matrix]]:
    a, b = _random(30, 20, 0.15, 1).tolil(), _random(20, 25, 0.15, 2).tolil()
    a[3, :], a[:, 4], b[7, :] = 0, 0, 0  # an empty row and column of A, a row of B
    dense_row = _random(12, 9, 0.2, 3).tolil()
    dense_row[5, :] = np.arange(1.0, 10.0)
    one = sp.csr_matrix(np.array([[2.5]]))
    return [(_random(40, 30, 0.1, 4), _random(30, 50, 0.1, 5)),
            (a.tocsr(), b.tocsr()),
            (dense_row.tocsr(), _random(9, 14, 0.5, 6)),
            (one, one),
            (sp.csr_matrix((6, 5)), _random(5, 7, 0.5, 7)),
            (sp.csr_matrix((0, 4)), _random(4, 3, 0.5, 8))]


def _check(kernel: ls.Kernel, operands: dict, expected: sp.csr_matrix) -> None:
    expected = expected.tocsr()
    expected.sort_indices()
    for _ in range(3):
        result = kernel(**operands)
        result.validate()
        got = result.to_scipy().tocsr()
        assert got.has_sorted_indices
        np.testing.assert_array_equal(got.indptr, expected.indptr)
        np.testing.assert_array_equal(got.indices, expected.indices)
        np.testing.assert_allclose(got.data, expected.data, rtol=1e-13)


@pytest.mark.parametrize("case", range(len(_edges())))
def test_gustavson_through_a_registered_policy_matches_scipy(insertion, case):
    a, b = _edges()[case]
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C="csr", workspace="insertion")
    _check(kernel, {"A": a, "B": b}, a @ b)
    assert kernel.concrete.endswith("with w: float64 [hashed:0] (insertion workspace))")


@pytest.mark.parametrize("case", range(len(_edges())))
def test_outer_product_through_a_registered_policy_matches_scipy(insertion, case):
    a, b = _edges()[case]
    kernel = ls.compile(SPGEMM, A="csc", B="csr", C="csr", workspace="insertion")
    _check(kernel, {"A": a.tocsc(), "B": b}, a @ b)
    assert kernel.concrete.startswith("where(forall(i, forall(j, C(i,j) = w(i,j))), forall(k,")
    assert kernel.concrete.endswith("(insertion workspace)")
    lines = kernel.loops.splitlines()
    assert lines[0] == ("allocate w: float64 (sparse workspace over i, j: (coordinate, value) "
                        "pairs kept in order as inserted)")
    assert "      w(i,j) += A(k,i) * B(k,j)" in lines
    assert "sort w: its pairs, kept in order by each insert" in lines


def test_registered_policy_is_listed_and_refused_once_removed():
    assert "insertion" not in ls.workspace_policies()
    ls.register_workspace_policy(INSERTION)
    try:
        assert ls.workspace_policies()["insertion"] is INSERTION
        assert list(ls.workspace_policies())[:4] == ["dense", "hash", "sort", "bucket"]
    finally:
        ls.unregister_workspace_policy("insertion")
    with pytest.raises(ValueError, match="unknown workspace 'insertion': use one of 'dense', "
                                         "'hash', 'sort', 'bucket'"):
        ls.compile(SPGEMM, A="csr", B="csr", C="csr", workspace="insertion")
    with pytest.raises(KeyError, match="no registered workspace policy 'insertion'"):
        ls.unregister_workspace_policy("insertion")


def test_unknown_name_lists_the_registered_policies(insertion):
    with pytest.raises(ValueError, match="unknown workspace 'insert': use one of 'dense', "
                                         "'hash', 'sort', 'bucket', 'insertion'"):
        ls.compile(SPGEMM, A="csr", B="csr", C="csr", workspace="insert")


def test_clashing_or_malformed_policies_are_refused(insertion):
    shipped = InsertionPolicy("sort", InsertionStore, "{vars}", "", "")
    with pytest.raises(ValueError, match="'sort' is shipped with llvsparse.*'insertion'"):
        ls.register_workspace_policy(shipped)
    with pytest.raises(ValueError, match="'insertion' is already registered: pass replace=True"):
        ls.register_workspace_policy(InsertionPolicy("insertion", InsertionStore, "", "", ""))
    with pytest.raises(ValueError, match="name is an identifier, not 'two words'"):
        ls.register_workspace_policy(InsertionPolicy("two words", InsertionStore, "", "", ""))
    with pytest.raises(TypeError, match="store must be a subclass of"):
        ls.register_workspace_policy(InsertionPolicy("other", dict, "", "", ""))
    with pytest.raises(ValueError, match=r"its layout text 'over \{i\}' is not a str.format"):
        ls.register_workspace_policy(InsertionPolicy("other", InsertionStore, "over {i}", "",
                                                     ""))
    with pytest.raises(TypeError, match="is a WorkspacePolicy, not str"):
        ls.register_workspace_policy("insertion")
    assert ls.workspace_policies()["insertion"] is INSERTION
    assert "other" not in ls.workspace_policies()


def test_replaced_policy_is_compiled_anew_not_served_from_the_cache(insertion):
    a, b = _edges()[0]
    first = ls.compile(SPGEMM, A="csc", B="csr", C="csr", workspace="insertion")
    _check(first, {"A": a.tocsc(), "B": b}, a @ b)
    appended = WorkspacePolicy("insertion", SortStore, "appended pairs over {vars}",
                               "sorted at the end", "its pair count", appends=True,
                               always_sorts=True)
    ls.register_workspace_policy(appended, replace=True)
    second = ls.compile(SPGEMM, A="csc", B="csr", C="csr", workspace="insertion")
    _check(second, {"A": a.tocsc(), "B": b}, a @ b)
    assert "allocate w: float64 (appended pairs over i, j)" in second.loops
    assert "append w(i,j) = A(k,i) * B(k,j)" in second.loops


def test_memory_check_uses_the_policy_byte_estimate(insertion, monkeypatch):
    """The policy's arrays sized by the extents (a key and a value per column: 16 bytes)
    are checked before the call: a MemoryError naming it, not a killed process."""
    monkeypatch.setattr(ls.calls.workspaces, "physical_memory", lambda: 1000)
    a, b = _random(10, 20, 0.2, 9), _random(20, 100, 0.1, 10)
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C="csr", workspace="insertion")
    with pytest.raises(MemoryError, match=r"the insertion workspace w\(j\) needs 1\.6 KiB "
                                          r"\(1 rows x 0 bytes \+ 100 columns x 16 bytes\)"):
        kernel(A=a, B=b)
    monkeypatch.setattr(ls.calls.workspaces, "physical_memory", lambda: 1600)
    _check(kernel, {"A": a, "B": b}, a @ b)


@pytest.mark.parametrize(("statement", "formats", "picked"), [
    (SPGEMM, {"A": ("csc", 2), "B": ("csr", 2), "C": ("csr", 2)}, "bucket"),  # outer product
    ("C(j,i) = A(i,j)", {"A": ("csr", 2), "C": ("csr", 2)}, "bucket"),  # transposed copy
    (SPGEMM, {"A": ("csc", 2), "B": ("csr", 2), "C": ("coo", 2)}, "sort"),  # rows not full
    (SPGEMM, {"A": ("csc", 2), "B": ("csr", 2), "C": ("dcsr", 2)}, "sort"),
    ("Y(k,j,i) = X(i,j,k)", {"X": ("csf", 3), "Y": ("csf", 3)}, "sort"),
    (SPGEMM, {"A": ("csr", 2), "B": ("csr", 2), "C": ("csr", 2)}, "dense"),  # Gustavson
])
def test_rule_buckets_rows_the_output_holds_anyway(statement, formats, picked):
    """Left to the rule, a sparse workspace is a bucket one where the output's levels of
    its rows (covered indices but the last) are full, so its count per row costs no more
    than the output; sort elsewhere (a hypersparse COO or DCSR output)."""
    from llvsparse.ir.concrete.from_notation import to_concrete
    from llvsparse.ir.schedule.workspace_schedule import schedule_kernel
    types = {n: ls.named_format(f, order).tensor_type("float64", "int32")
             for n, (f, order) in formats.items()}
    nests = schedule_kernel(to_concrete(ls.parse(statement), types), types)
    assert nests[0].workspace.policy is ls.workspace_policies()[picked]


def test_registered_policy_on_threads_matches_scipy(insertion, monkeypatch):
    """Rows split among threads, each with its own store of the registered policy."""
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 1000)
    monkeypatch.setattr(ls.calls.kernel_calls, "ASSEMBLY_MIN_ENTRIES", 1000)
    a, b = _random(300, 200, 0.05, 11), _random(200, 250, 0.05, 12)
    kernel = ls.compile(SPGEMM, A="csr", B="csr", C="csr", workspace="insertion")
    assert kernel.bind(threads=2, A=a, B=b).plan is not None
    _check(kernel, {"A": a, "B": b, "threads": 2}, a @ b)
