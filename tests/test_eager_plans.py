"""Eager operations replayed by operand signature (llvsparse/frontend/eager_plans.py), bindings
serving new operands of their signature (BoundCall._sibling), kernel outputs remembered
as valid, and the values path of a pointwise operation with a number: each checked
against numpy on random and edge inputs, in COO, CSR, CSC and with a fill other than 0."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
from llvsparse.frontend import eager_plans
from llvsparse.kernel import api
from llvsparse.tensors import tensor_validation

FORMATS = ("coo", "csr", "csc")


def _pair(seed: int, fmt: str, shape=(7, 5), density=0.3, fill=None):
    """A random matrix with some explicit zeros, as (dense array, Tensor)."""
    rng = np.random.default_rng(seed)
    a = np.where(rng.random(shape) < density, rng.standard_normal(shape), 0.0)
    if a.size:
        a.flat[rng.integers(0, a.size)] = 0.0
    if fill is not None:
        a = np.where(a == 0, fill, a)
    return a, ls.Tensor.from_numpy(a, format=fmt, fill=fill)


def _dense(value) -> np.ndarray:
    return np.asarray(value.todense() if isinstance(value, ls.Tensor) else value)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill", [None, 2.5])
def test_replayed_operations_match_numpy_on_new_operands(fmt, fill):
    """The same operations on new tensors of one signature (plans, sibling bindings and
    the values path serve them after the first) give numpy's values every time."""
    eager_plans.forget()
    x = np.linspace(-1, 1, 5)
    for seed in range(4):
        (a, A), (b, B) = _pair(seed, fmt, fill=fill), _pair(seed + 10, fmt, fill=fill)
        for got, want in [(A + B, a + b), (A - B, a - b), (A * B, a * b), (A * 2.0, a * 2.0),
                          (2.0 - A, 2.0 - a), (A / 4, a / 4), (A @ x, a @ x),
                          (A < 0.5, a < 0.5), (-A, -a), (abs(A), abs(a)),
                          ((A + B) * 2 - A, (a + b) * 2 - a), (A.sum(axis=1), a.sum(axis=1)),
                          (A.max(axis=0), a.max(axis=0)), (A @ B.T, a @ b.T)]:
            assert _dense(got).dtype == want.dtype
            assert np.allclose(_dense(got), want), (seed, got)
        assert (A * 2.0).fill_value == A.fill_value * 2.0


def test_one_tensor_twice_and_two_tensors_are_different_plans():
    """``A + A`` reads one operand twice: a later ``A + B`` of the same signature must
    not replay it (it would compute A + A)."""
    (a, A), (b, B) = _pair(1, "csr"), _pair(2, "csr")
    for _ in range(2):
        assert np.allclose(_dense(A + A), a + a)
        assert np.allclose(_dense(A + B), a + b)
        assert np.allclose(_dense(B + A), b + a)


def test_a_literal_is_part_of_the_signature_with_its_type_and_the_sign_of_zero():
    _, A = _pair(3, "csr")
    i = np.arange(12, dtype=np.int64).reshape(3, 4) * (np.arange(12).reshape(3, 4) % 3 > 0)
    I = ls.Tensor.from_numpy(i, format="csr")
    eager_plans.forget()
    first = A * -0.0  # the full path
    eager_plans.forget()
    assert np.allclose(_dense(A * 0.0), 0.0)  # planned: a plan for 0.0
    again = A * -0.0  # not that plan
    assert np.array_equal(np.signbit(_dense(again)), np.signbit(_dense(first)))
    assert np.signbit(again.fill_value) == np.signbit(first.fill_value)
    for _ in range(2):
        assert (I * 2).dtype == np.int64 and (I * 2.0).dtype == np.float64
        assert np.array_equal(_dense(I * 2), i * 2) and np.array_equal(_dense(I * 3), i * 3)
        assert np.allclose(_dense(I / 2), i / 2)


def test_a_signature_is_planned_once(monkeypatch):
    """The second call of a signature makes no kernel: it calls the plan's."""
    made = []
    kernel = api.Kernel  # (eager_plans loads it from kernel.api when it makes a plan)
    monkeypatch.setattr(api, "Kernel",
                        lambda *args, **kw: made.append(str(args[0])) or kernel(*args, **kw))
    eager_plans.forget()
    x = np.ones(5)
    for seed in range(3):
        a, A = _pair(seed, "csr")
        assert np.allclose(_dense(A @ x), a @ x)
    assert len(made) == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_number_times_a_tensor_shares_its_index_arrays(fmt):
    """``A * 2.0`` after the first call: the operand's read-only index arrays, new values
    (numpy's), the kernel's format, fill and dtype."""
    eager_plans.forget()
    for fill in (None, -1.0):
        a, A = _pair(5, fmt, fill=fill)
        first = A * 2.0
        again = A * 2.0
        assert np.array_equal(_dense(first), a * 2.0) and np.array_equal(_dense(again), a * 2.0)
        assert again.format == first.format and again.fill_value == first.fill_value
        shared = [x is y for la, lb in zip(again.level_arrays, A.level_arrays)
                  for x, y in zip(la.values(), lb.values())]
        assert shared and all(shared)
        assert not np.shares_memory(again.values, A.values)
        assert np.array_equal(_dense(again + A), a * 3.0)  # a valid operand of a kernel


def test_the_values_path_reads_current_values_and_refuses_writable_index_arrays():
    a, A = _pair(6, "csr")
    A * 2.0
    A.values = A.values * 3  # a new values array: the memo of validity is for the old
    assert np.allclose(_dense(A * 2.0), a * 6.0)
    D = ls.Tensor.from_numpy(a)  # dense, wrapping the caller's writable array
    for _ in range(2):
        result = D * 2.0
        assert np.allclose(_dense(result), a * 2.0)
        assert not np.shares_memory(result.values, a)


def test_kernel_outputs_are_valid_as_adopted(monkeypatch):
    """A chain's intermediate result is not walked again before the next kernel."""
    (a, A), (b, B) = _pair(7, "csr"), _pair(8, "csr")
    total = A + B

    def walk(*args, **kwargs):
        raise AssertionError("walked a kernel's own output")
    monkeypatch.setattr(tensor_validation, "walk_levels", walk)
    total.validate()
    assert np.allclose(_dense(total * B), (a + b) * b)


def test_sibling_bindings_follow_each_operands_entries():
    """A chain on tensors of one shape and format whose entries differ in number and
    place (each binding after the first is a sibling on new operands)."""
    for density in (0.0, 0.1, 0.5, 1.0, 0.3):
        (a, A), (b, B), (c, C) = (_pair(s, "csr", (6, 6), density) for s in (1, 2, 3))
        assert np.allclose(_dense((A + B) * 2 - C), (a + b) * 2 - c)
        assert np.allclose(_dense(((A + B) * 2 - A * 3).sum(axis=1)),
                           ((a + b) * 2 - a * 3).sum(axis=1))


def test_refusals_stay_refusals_on_every_call():
    _, A = _pair(9, "csr")
    for _ in range(2):
        with pytest.raises(ValueError, match="broadcast"):
            A + np.ones(3)
        with pytest.raises(ValueError):
            A @ np.ones(3)


def test_scipy_and_empty_operands():
    S = sp.random(4, 6, density=0.0, format="csr", random_state=0)
    E = ls.asarray(S)
    for _ in range(2):
        assert np.array_equal(_dense(E * 2.0), np.zeros((4, 6)))
        assert np.array_equal(_dense(E + E), np.zeros((4, 6)))
        assert np.array_equal(_dense(E @ np.ones(6)), np.zeros(4))
