"""Random expressions x random formats x random schedules, against numpy.

The trees of test_random_expressions.py (+, -, * and constants over three matrices and
a vector, integer values, so every evaluation order gives the same floats) under a
schedule drawn from the directives that lower: reorders, splits and divides of the
parallel loop, chunks by an operand's stored entries, threads over a reduced index. A
schedule may be refused (a reorder against storage the kernel cannot convert): then
only with a ScheduleError that says so. Otherwise the result must equal numpy's exactly.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_random_expressions import MATRICES, MATRIX_FORMATS, TREES, _reference, _text

import llvsparse as ls

SHAPE = (23, 11)


def _arrays(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, density in zip(MATRICES, (0.3, 0.6, 0.05)):
        values = rng.integers(-4, 5, SHAPE) * (rng.random(SHAPE) < density)
        values[: rng.integers(5)] = 0  # empty rows first: empty chunks
        arrays[name] = values.astype(np.float64)
    arrays["x"] = rng.integers(-4, 5, SHAPE[1]).astype(np.float64)
    return arrays


def _schedule(draw, used: list[str], summed: bool) -> str:
    """A schedule over i (rows) and j (columns)."""
    kind = draw(st.sampled_from(["none", "rows", "split", "divide", "entries", "reorder",
                                 "reduced", "inner", "nested", "shared"]))
    sparse_rows = [n for n in used if n in MATRICES]
    if kind == "rows":
        return "parallelize(i, cpu_thread, no_races)"
    if kind == "split":
        return f"split(i, i0, i1, {draw(st.integers(1, 9))}); " \
               "parallelize(i0, cpu_thread, no_races)"
    if kind == "divide":
        return f"divide(i, i0, i1, {draw(st.integers(1, 6))}); " \
               "parallelize(i0, cpu_thread, no_races)"
    if kind == "entries" and sparse_rows:
        name = draw(st.sampled_from(sparse_rows))
        return f"pos(i, ip, {name}(i,j)); split(ip, c, t, {draw(st.integers(1, 30))}); " \
               "parallelize(c, cpu_thread, no_races)"
    if kind == "shared" and sparse_rows:  # windows of entries cut rows: atomic adds
        name = draw(st.sampled_from(sparse_rows))
        return f"fuse(i, j, f); pos(f, fp, {name}(i,j)); " \
               f"split(fp, c, t, {draw(st.integers(1, 30))}); parallelize(c, cpu_thread, atomics)"
    if kind == "reorder":
        return "reorder(j, i)"
    if kind == "reduced" and summed:
        return "reorder(j, i); parallelize(j, cpu_thread, temporaries)"
    if kind == "inner" and summed:  # a reduced index under the rows' loop
        return "parallelize(j, cpu_thread, parallel_reduction)"
    if kind == "nested":  # an output index under another loop
        return "parallelize(j, cpu_thread, no_races)" if not summed else \
            "reorder(j, i); parallelize(i, cpu_thread, no_races)"
    return ""


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(tree=TREES.filter(lambda t: any(m in _text(t) for m in MATRICES)),
       formats=st.lists(st.sampled_from(MATRIX_FORMATS), min_size=3, max_size=3),
       seed=st.integers(0, 3), summed=st.booleans(),
       out_format=st.sampled_from(["dense", "csr", "coo"]), threads=st.integers(1, 3),
       data=st.data())
def test_random_expressions_under_random_schedules(tree, formats, seed, summed, out_format,
                                                   threads, data):
    arrays = _arrays(seed)
    expr = _text(tree)
    used = [name for name in [*MATRICES, "x"] if f"{name}(" in expr]
    given_formats = dict(zip(MATRICES, formats)) | {"x": "dense"}
    operands = {n: ls.Tensor.from_numpy(arrays[n], format=given_formats[n]) for n in used}
    schedule = _schedule(data.draw, used, summed)
    statement = f"y(i) = sum_j({expr})" if summed else f"Z(i,j) = {expr}"
    expected = _reference(tree, arrays, SHAPE)
    if summed:
        expected = expected.sum(axis=1)
        out_format = "dense"
    try:
        kernel = ls.compile(statement, out_format=out_format, schedule=schedule,
                            **{n: given_formats[n] for n in used})
        bound = kernel.bind(**operands, threads=threads)
        results = [kernel(**operands, threads=threads)] + [bound() for _ in range(3)]
    except ls.ScheduleError as error:
        assert any(reason in str(error) for reason in (
            "cannot be kept", "conflict", "threads cannot own rows", "dense-like output",
            "threads split one loop of one nest", "positions that cut coordinates",
            "must be the loop directly inside", "its first level does not store")), \
            f"{statement} {given_formats} -> {out_format} under {schedule!r}: {error}"
        return
    for call, result in enumerate(results):  # a binding's calls alternate loop forms
        np.testing.assert_array_equal(
            result.to_numpy(), expected,
            err_msg=f"{statement} {given_formats} -> {out_format} under {schedule!r}, "
                    f"call {call}")
