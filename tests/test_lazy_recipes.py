"""Lazy chains as recipes (llvsparse/frontend/lazy_tensor.py): ``ls.compute`` runs a chain by
the plan of its structure and its leaves' signatures, and the same chain on the same
tensors by a fast call. Every result checked against numpy on every call, on random
and edge inputs, in COO, CSR and CSC, with fill 0 and another."""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls
from llvsparse.frontend import eager_plans, lazy_tensor
from llvsparse.frontend.lazy_tensor import LazyRecipe
from llvsparse.kernel import api

FORMATS = ("coo", "csr", "csc")


def _pair(seed: int, fmt: str, shape=(7, 5), density=0.3, fill=None):
    rng = np.random.default_rng(seed)
    a = np.where(rng.random(shape) < density, rng.standard_normal(shape) * 4, 0.0)
    if fill is not None:
        a = np.where(a == 0, fill, a)
    return a, ls.Tensor.from_numpy(a, format=fmt, fill=fill)


def _dense(value) -> np.ndarray:
    return np.asarray(value.todense() if isinstance(value, ls.Tensor) else value)


def _chains(A, B, C, x, a, b, c):
    L = ls.lazy(A)
    return [(((L + B) * 2 - A * 3).sum(axis=1), ((a + b) * 2 - a * 3).sum(axis=1)),
            (L * B + C, a * b + c), ((L - C).max(axis=0), (a - c).max(axis=0)),
            (np.exp(L) * B + x, np.exp(a) * b + x), ((L + L) / 4, (a + a) / 4),
            ((L + B).sum(), (a + b).sum()), (-abs(L) + 1, -abs(a) + 1)]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill", [None, 1.5])
def test_chains_match_numpy_every_call(fmt, fill):
    eager_plans.forget()
    (a, A), (b, B), (c, C) = (_pair(s, fmt, fill=fill) for s in (1, 2, 3))
    x = np.linspace(-1, 1, 5)
    for _ in range(8):
        for expr, want in _chains(A, B, C, x, a, b, c):
            assert isinstance(expr, ls.LazyTensor)
            got = ls.compute(expr)
            assert np.allclose(_dense(got), want, equal_nan=True), expr
    # new tensors of the same signatures: the plan serves them, with their own values
    (a2, A2), (b2, B2), (c2, C2) = (_pair(s, fmt, fill=fill) for s in (4, 5, 6))
    for expr, want in _chains(A2, B2, C2, x, a2, b2, c2):
        assert np.allclose(_dense(ls.compute(expr)), want, equal_nan=True)


def test_edge_shapes():
    for shape in [(0, 4), (1, 1), (3, 0)]:
        a, A = _pair(7, "csr", shape=shape)
        for _ in range(3):
            got = ls.compute(((ls.lazy(A) + A) * 2).sum(axis=0))
            assert np.allclose(_dense(got), ((a + a) * 2).sum(axis=0))


def test_a_repeated_chain_runs_no_kernel_call_path(monkeypatch):
    """Once settled, the same chain on the same tensors is a fast call: no
    ``Kernel.__call__``, no node built."""
    eager_plans.forget()
    (a, A), (b, B) = _pair(8, "csr"), _pair(9, "csr")
    for _ in range(60):  # until the probe of the kernel's forms has settled
        ls.compute(ls.lazy(A) * B + 2.0)
    calls = []
    original = api.Kernel.__call__
    monkeypatch.setattr(api.Kernel, "__call__",
                        lambda self, **kw: calls.append(1) or original(self, **kw))
    built = LazyRecipe.node
    monkeypatch.setattr(LazyRecipe, "node",
                        property(lambda self: calls.append(2) or built.fget(self)))
    for _ in range(3):
        assert np.allclose(_dense(ls.compute(ls.lazy(A) * B + 2.0)), a * b + 2.0)
    assert not calls


def test_shape_dtype_and_errors_where_the_operation_is_written():
    (a, A), B = _pair(10, "csr"), _pair(11, "csr", shape=(5, 7))[1]
    L = ls.lazy(A)
    with pytest.raises(ValueError, match="broadcast"):
        L + B
    expr = (L < 0.5) * 2
    assert expr.shape == (7, 5) and expr.dtype == ((a < 0.5) * 2).dtype
    assert (L.sum(axis=1)).shape == (7,) and (L / 2).dtype == np.float64
    ints = ls.lazy(ls.Tensor.from_numpy(np.arange(6, dtype=np.int32).reshape(2, 3)))
    assert ints.sum(axis=0).dtype == np.int64 and (ints * 2).dtype == np.int32
    assert str((L + 1).assignment).startswith("OUT(")  # the node, built when asked for


def test_chains_with_views_and_lists_take_the_node_path():
    """Parts without a recipe (a transposed lazy tensor, a list operand) are computed
    from their node, as before."""
    (a, A), (b, B) = _pair(12, "csr"), _pair(13, "csr", shape=(5, 7))
    for _ in range(3):
        got = ls.compute((ls.lazy(A).T + B).sum(axis=0))
        assert np.allclose(_dense(got), (a.T + b).sum(axis=0))
        got = ls.compute(ls.lazy(A) * [1.0, 2.0, 3.0, 4.0, 5.0])
        assert np.allclose(_dense(got), a * [1.0, 2.0, 3.0, 4.0, 5.0])


class _Clock:
    """A clock that each way's call moves on by its cost (the faster costs 1, the
    other 3), in place of ``time`` in lazy_tensor."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def costing(self, run, cost: float):
        def timed(*args):
            self.now += cost
            return run(*args)
        return timed


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("faster", ["fused", "eager"])
def test_fused_or_eager_is_timed_then_kept(fmt, faster, monkeypatch):
    """Each chain is timed both ways on its first calls, then runs the faster; both ways
    give numpy's values on every call."""
    (a, A), (b, B), (c, C) = (_pair(s, fmt, fill=0.5) for s in (14, 15, 16))
    clock, choice = _Clock(), lazy_tensor.Choice()
    monkeypatch.setattr(lazy_tensor, "_CHOICES", choice)
    monkeypatch.setattr(lazy_tensor, "time", clock)
    choice.ways = {way: clock.costing(run, 1.0 if way == faster else 3.0)
                   for way, run in choice.ways.items()}
    for _ in range(30):
        got = ls.compute((ls.lazy(A) * B + C) * 2)
        assert np.allclose(_dense(got), (a * b + c) * 2)
    assert list(lazy_tensor._CHOICES.chosen.values()) == [faster]
