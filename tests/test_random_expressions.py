"""Random elementwise expressions over operands in random formats, against numpy.

The fixed differential tests (test_differential.py) cover one expression shape each;
this draws trees of +, -, * and constants over sparse and dense matrices and a vector,
which mix unions, intersections and full operands in ways no hand-picked list does (a
dense operand inside an intersection that is unioned once lost whole cases). Values are
small integers, so every order of evaluation gives the same floats and results must be
equal, not close; the same holds on threads, in every way a binding may run. Derandomized,
so CI runs the same examples every time.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llvsparse as ls
from llvsparse.calls import probe

SHAPE = (7, 9)
MATRIX_FORMATS = ["dense", "csr", "dcsr", "csc", "coo", "hash"]
VECTOR_FORMATS = ["dense", "coo", "hash"]
MATRICES = ["A", "B", "C"]


def _operand_arrays(seed: int) -> dict[str, np.ndarray]:
    """Integer-valued operands: one sparse with an empty row and column, one denser,
    one all but empty, and a vector with gaps."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, density in zip(MATRICES, (0.3, 0.6, 0.05)):
        values = rng.integers(-4, 5, SHAPE) * (rng.random(SHAPE) < density)
        values[2, :] = 0
        values[:, 3] = 0
        arrays[name] = values.astype(np.float64)
    arrays["x"] = (rng.integers(-4, 5, SHAPE[1]) * (rng.random(SHAPE[1]) < 0.5)).astype(
        np.float64)
    return arrays


LEAVES = st.sampled_from(["A(i,j)", "B(i,j)", "C(i,j)", "x(j)", "2", "3"])
TREES = st.recursive(LEAVES, lambda children: st.tuples(
    children, st.sampled_from(["+", "-", "*"]), children), max_leaves=5)
OPERATIONS = {"+": np.add, "-": np.subtract, "*": np.multiply}


def _text(tree) -> str:
    if isinstance(tree, str):
        return tree
    left, op, right = tree
    return f"({_text(left)} {op} {_text(right)})"


def _reference(tree, arrays: dict[str, np.ndarray], shape: tuple[int, int] = SHAPE
               ) -> np.ndarray:
    """The tree evaluated on dense arrays, broadcast to the matrices' shape."""
    if isinstance(tree, tuple):
        left, op, right = tree
        return OPERATIONS[op](_reference(left, arrays, shape), _reference(right, arrays, shape))
    if tree == "x(j)":
        return np.broadcast_to(arrays["x"][None, :], shape)
    if tree[0] in MATRICES:
        return arrays[tree[0]]
    return np.full(shape, float(tree))


def _every_call(kernel: ls.Kernel, operands: dict) -> list[ls.Tensor]:
    """Three calls as ``kernel(...)`` and three through a binding of its own: a
    binding's calls alternate its loop forms (probe.py), so every form runs."""
    results = [kernel(**operands) for _ in range(3)]
    bound = kernel.bind(**operands)
    return results + [bound() for _ in range(3)]


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(tree=TREES.filter(lambda t: any(m in _text(t) for m in MATRICES)),
       formats=st.lists(st.sampled_from(MATRIX_FORMATS), min_size=3, max_size=3),
       vector_format=st.sampled_from(VECTOR_FORMATS), seed=st.integers(0, 3),
       summed=st.booleans())
def test_random_expression_matches_numpy(tree, formats, vector_format, seed, summed):
    arrays = _operand_arrays(seed)
    expr = _text(tree)
    used = [name for name in [*MATRICES, "x"] if f"{name}(" in expr]
    given_formats = dict(zip(MATRICES, formats)) | {"x": vector_format}
    # An explicit sum over the whole expression (an implicit one covers only the
    # smallest subexpression using j: y(i) = A(i,j) + 2 adds 2 once).
    statement = f"y(i) = sum_j({expr})" if summed else f"Z(i,j) = {expr}"
    kernel = ls.compile(statement, **{n: given_formats[n] for n in used})
    operands = {n: ls.Tensor.from_numpy(arrays[n], format=given_formats[n]) for n in used}
    expected = _reference(tree, arrays)
    if summed:
        expected = expected.sum(axis=1)
    for call, result in enumerate(_every_call(kernel, operands)):
        np.testing.assert_array_equal(result.to_numpy(), expected,
                                      err_msg=f"{statement} {given_formats}, call {call}")


# Contractions: Z(i,j) = sum_k(tree) over A(i,k), B(k,j), C(i,j) and x(k).
I_, J_, K_ = 6, 7, 5
CONTRACTION_LEAVES = st.sampled_from(["A(i,k)", "B(k,j)", "C(i,j)", "x(k)", "2"])
CONTRACTION_TREES = st.recursive(CONTRACTION_LEAVES, lambda children: st.tuples(
    children, st.sampled_from(["+", "-", "*"]), children), max_leaves=4)
BROADCAST = {"A(i,k)": lambda a: a["A"][:, None, :], "B(k,j)": lambda a: a["B"].T[None, :, :],
             "C(i,j)": lambda a: a["C"][:, :, None], "x(k)": lambda a: a["x"][None, None, :]}


def _contraction_reference(tree, arrays: dict[str, np.ndarray]) -> np.ndarray:
    if isinstance(tree, tuple):
        left, op, right = tree
        return OPERATIONS[op](_contraction_reference(left, arrays),
                              _contraction_reference(right, arrays))
    if tree in BROADCAST:
        return np.broadcast_to(BROADCAST[tree](arrays), (I_, J_, K_))
    return np.full((I_, J_, K_), float(tree))


def _covers_i_j_k(tree) -> bool:
    text = _text(tree)
    return "k)" in text and ("A(" in text or "C(" in text) and ("B(" in text or "C(" in text)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(tree=CONTRACTION_TREES.filter(_covers_i_j_k),
       formats=st.lists(st.sampled_from(MATRIX_FORMATS), min_size=3, max_size=3),
       vector_format=st.sampled_from(VECTOR_FORMATS), seed=st.integers(0, 3),
       out_format=st.sampled_from(["dense", "hash", "csr"]))
def test_random_contraction_matches_numpy(tree, formats, vector_format, seed, out_format):
    """No output refuses a scatter (appended outputs go through a workspace); only
    operands whose storage orders conflict are refused."""
    rng = np.random.default_rng(seed)
    shapes = {"A": (I_, K_), "B": (K_, J_), "C": (I_, J_)}
    arrays = {name: (rng.integers(-4, 5, shape) * (rng.random(shape) < 0.4)).astype(
        np.float64) for name, shape in shapes.items()}
    arrays["A"][1] = 0
    arrays["B"][:, 2] = 0
    arrays["x"] = (rng.integers(-4, 5, K_) * (rng.random(K_) < 0.5)).astype(np.float64)
    expr = _text(tree)
    used = [name for name in [*MATRICES, "x"] if f"{name}(" in expr]
    given_formats = dict(zip(MATRICES, formats)) | {"x": vector_format}
    statement = f"Z(i,j) = sum_k({expr})"
    operands = {n: ls.Tensor.from_numpy(arrays[n], format=given_formats[n]) for n in used}
    try:
        kernel = ls.compile(statement, out_format=out_format,
                            **{n: given_formats[n] for n in used})
        results = _every_call(kernel, operands)
    except ls.ScheduleError as error:
        if "conflict" not in str(error):
            raise
        return
    expected = _contraction_reference(tree, arrays).sum(axis=2)
    for call, result in enumerate(results):
        np.testing.assert_array_equal(
            result.to_numpy(), expected,
            err_msg=f"{statement} {given_formats} -> {out_format}, call {call}")


# On threads: every way a binding may run (probe.FORMS x probe.ASSEMBLIES), small inputs
# split as if they were large.
THREAD_SHAPE = (38, 24)


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(tree=TREES.filter(lambda t: any(m in _text(t) for m in MATRICES)),
       formats=st.lists(st.sampled_from([*MATRIX_FORMATS, "ell", "bcsr2x2"]),
                        min_size=3, max_size=3),
       seed=st.integers(0, 3), out_format=st.sampled_from(["dense", "csr", "dcsr", "coo",
                                                            "hash"]))
def test_random_expression_on_threads_matches_numpy(tree, formats, seed, out_format,
                                                    monkeypatch):
    monkeypatch.setattr(ls.calls.kernel_calls, "PARALLEL_MIN_WORK", 1)
    monkeypatch.setattr(ls.calls.kernel_calls, "ASSEMBLY_MIN_ENTRIES", 1)
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, density in zip(MATRICES, (0.3, 0.6, 0.05)):
        values = rng.integers(-4, 5, THREAD_SHAPE) * (rng.random(THREAD_SHAPE) < density)
        values[: rng.integers(6)] = 0  # empty chunks at the start
        arrays[name] = values.astype(np.float64)
    arrays["x"] = (rng.integers(-4, 5, THREAD_SHAPE[1])).astype(np.float64)
    expr = _text(tree)
    used = [name for name in [*MATRICES, "x"] if f"{name}(" in expr]
    given_formats = dict(zip(MATRICES, formats)) | {"x": "dense"}
    operands = {n: ls.Tensor.from_numpy(arrays[n], format=given_formats[n]) for n in used}
    expected = _reference(tree, arrays, THREAD_SHAPE)
    statement = f"Z(i,j) = {expr}"
    kernel = ls.compile(statement, out_format=out_format, **{n: given_formats[n] for n in used})
    for form, assembly in itertools.product(probe.FORMS, probe.ASSEMBLIES):
        monkeypatch.setitem(probe.FORCED, "form", form)
        monkeypatch.setitem(probe.FORCED, "assembly", assembly)
        try:
            call = kernel.bind(threads=2, **operands)
        except ls.ScheduleError as error:  # appending outputs refuse some orders
            assert out_format not in ("dense", "hash"), error
            return
        for _ in range(2):  # the second call reuses the binding's buffers
            np.testing.assert_array_equal(
                call().to_numpy(), expected,
                err_msg=f"{statement} {given_formats} -> {out_format}, {form}/{assembly}")
