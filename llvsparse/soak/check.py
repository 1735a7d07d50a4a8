"""Run one soak case (``soakcases``) in this process and say how it went.

A valid case compiles once and is called three times plainly, three times bound in each
loop form, and, when it asks for threads, three times bound on two threads in each way of
assembling; every result is compared with the numpy reference. A corrupted case must be
refused with one of the project's own exceptions. The worker of ``selftest`` calls
``run_case`` for each case it is sent; a crash or a hang here is the parent's to count.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

import llvsparse as ls

from ..calls import kernel_calls, probe
from .cases import Case, Operand, plugin_format, reference

INTERPRETED_EVERY = 5  # every fifth valid case also runs under target="interpret"


@dataclass
class Outcome:
    """``status`` is passed, refused, wrong, unexpected or accepted-corrupt; ``kind``
    names the exception type (or what was wrong) and ``detail`` says the rest."""

    status: str
    kind: str = ""
    detail: str = ""


def _quiet(phase: str) -> None:
    """Where a case is (compiling, or which call); the worker reports it to the parent,
    so a hang or a crash says where it happened."""


report_phase: Callable[[str], None] = _quiet


def _refusals() -> tuple[type[Exception], ...]:
    """What a valid case may raise instead of a result: documented refusals."""
    return (ls.ScheduleError, ls.ShapeError, ls.FormatError, ls.NotationError)


def _project_error(error: BaseException) -> bool:
    """Whether ``error`` is one of llvsparse's own exception classes."""
    return any(cls.__module__.split(".")[0] == "llvsparse" and cls.__module__ not in
               (__name__, "llvsparse.soak.cases") for cls in type(error).__mro__[:-1]
               if issubclass(cls, Exception) and cls.__module__ != "builtins")


def _documented_refusal(case: Case, error: BaseException) -> bool:
    """Subtraction of bools is refused with TypeError, as README says (a bool
    difference inside an integer expression too, as numpy refuses it)."""
    return (isinstance(error, TypeError)
            and any(np.dtype(op.dtype).kind == "b" for op in case.operands.values())
            and "bool" in str(error) and "refused" in str(error))


def _unexpected(error: BaseException) -> Outcome:
    where = traceback.extract_tb(error.__traceback__)[-1]
    return Outcome("unexpected", type(error).__name__,
                   f"{str(error)[:300]} (at {where.filename.rsplit('/', 2)[-2:]}:{where.lineno})")


def build(op: Operand):
    """The operand as the case passes it: a packed Tensor, or a plain numpy array."""
    if op.as_array:
        return op.dense
    return ls.Tensor.from_numpy(op.dense, format=op.format, dtype=op.dtype,
                                index_dtype=op.index_dtype, fill=op.fill or None)


def stored_mask(tensor, shape: tuple[int, ...]) -> np.ndarray:
    """Where ``tensor`` stores an entry (padding included): elsewhere it annihilates,
    unless its fill is not 0 (then an entry not stored is a plain value)."""
    if isinstance(tensor, np.ndarray) or tensor.fill_value != 0:
        return np.ones(shape, dtype=bool)
    mask = np.zeros(shape, dtype=bool)
    coords, _ = tensor.to_coo()
    mask[tuple(coords)] = True
    return mask


def run_case(case: Case) -> Outcome:
    """Build, compile, call and compare ``case``; never raises."""

    try:
        operands = {name: build(op) for name, op in case.operands.items()}
        for name, op in case.operands.items():
            tensor = operands[name]
            if not isinstance(tensor, np.ndarray) and not np.array_equal(
                    tensor.to_numpy(), op.dense, equal_nan=op.dense.dtype.kind == "f"):
                return Outcome("wrong", "packing", f"{name} as {op.format_name} reads back "
                                                   f"{tensor.to_numpy()!r}")
    except Exception as error:  # noqa: BLE001 - packing valid arrays must work, or be refused
        if isinstance(error, _refusals()):
            return Outcome("refused", type(error).__name__, f"packing: {str(error)[:300]}")
        return _unexpected(error)
    try:
        report_phase("compile")
        kernel = compiled(case)
        if case.kind == "valid":
            return _check_valid(case, kernel, operands)
        return _check_corrupt(case, kernel, operands)
    except Exception as error:  # noqa: BLE001 - every exception is tallied by its type
        if isinstance(error, _refusals()) or _documented_refusal(case, error):
            return Outcome("refused", type(error).__name__, str(error)[:300])
        return _unexpected(error)


def compiled(case: Case, target: str = "cpu"):
    """``case``'s kernel, for ``target``."""
    formats = {n: ("dense" if op.as_array else op.format) for n, op in case.operands.items()}
    out_format = plugin_format(case.out_format, len(case.out_vars)) \
        if case.out_format.startswith("plugin") else case.out_format
    return ls.compile(case.statement, out_format=out_format, target=target, **formats)


def _check_valid(case: Case, kernel, operands: dict) -> Outcome:
    report_phase("bind (compiles)")
    kernel.bind(**operands)
    report_phase("call 1")
    first = kernel(**operands)  # a documented refusal comes before any reference
    masks = {n: stored_mask(t, case.operands[n].dense.shape) for n, t in operands.items()}
    try:
        expected = reference(case, masks)
    except TypeError as error:  # numpy refuses it (bool subtraction): so should we
        return Outcome("wrong", "accepted", f"numpy refuses this ({error}), the kernel ran")
    calls = [("call 1", lambda: first)] + [
        (f"call {k + 1}", lambda: kernel(**operands)) for k in range(1, 3)]
    for outcome in _compare_all(calls, expected, case):
        return outcome
    if case.index % INTERPRETED_EVERY == 0:  # the loop IR alone gives the same result
        interpreted = compiled(case, target="interpret")
        for outcome in _compare_all([("interpreted", lambda: interpreted(**operands))],
                                    expected, case):
            return outcome
    for form in probe.FORMS:
        probe.FORCED["form"] = form
        try:
            bound = kernel.bind(**operands)
            calls = [(f"bind({form}) call {k + 1}", bound) for k in range(3)]
            for outcome in _compare_all(calls, expected, case):
                return outcome
        finally:
            probe.FORCED.pop("form", None)
    if not case.threads:
        return Outcome("passed")
    saved = kernel_calls.PARALLEL_MIN_WORK, kernel_calls.ASSEMBLY_MIN_ENTRIES
    kernel_calls.PARALLEL_MIN_WORK = kernel_calls.ASSEMBLY_MIN_ENTRIES = 1  # small inputs split over threads
    try:
        for assembly in probe.ASSEMBLIES:
            probe.FORCED["assembly"] = assembly
            bound = kernel.bind(threads=2, **operands)
            calls = [(f"bind(threads=2, {assembly}) call {k + 1}", bound) for k in range(3)]
            for outcome in _compare_all(calls, expected, case):
                return outcome
    finally:
        kernel_calls.PARALLEL_MIN_WORK, kernel_calls.ASSEMBLY_MIN_ENTRIES = saved
        probe.FORCED.pop("assembly", None)
    return _shared_binding(kernel.bind(**operands), expected, case)


def _shared_binding(bound, expected: np.ndarray, case: Case) -> Outcome:
    """One binding called from four Python threads at once, three times each (its
    converted operands' copies are refreshed per call: issue 37's 7-of-8 failure)."""
    report_phase("one binding from 4 threads")
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: [bound() for _ in range(3)], range(4)))
    calls = [(f"thread {t} call {k + 1}", lambda r=r: r)
             for t, rs in enumerate(results) for k, r in enumerate(rs)]
    for outcome in _compare_all(calls, expected, case):
        return outcome
    return Outcome("passed")


def _compare_all(calls, expected: np.ndarray, case: Case):
    """Yields the first mismatch of ``calls`` (label, thunk), if any."""
    for label, call in calls:
        report_phase(label)
        result = call()
        actual = result.to_numpy() if hasattr(result, "to_numpy") else np.asarray(result)
        problem = _mismatch(actual, expected)
        if problem:
            yield Outcome("wrong", "result", f"{label}: {problem}")
            return


def _mismatch(actual: np.ndarray, expected: np.ndarray) -> str:
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    if expected.dtype.kind == "f":
        tol = 1e-4 if expected.dtype == np.float32 else 1e-9
        close = np.isclose(actual, expected, rtol=tol, atol=tol, equal_nan=True)
    else:
        close = actual == expected
    if np.all(close):
        return ""
    where = tuple(int(w[0]) for w in np.nonzero(~np.atleast_1d(close)))[:actual.ndim]
    return (f"{int(np.sum(~close))} entries differ, first at {where}: "
            f"{actual[where]!r}, expected {expected[where]!r}")


def _check_corrupt(case: Case, kernel, operands: dict) -> Outcome:
    """The corrupted operand must be refused by a project exception, never accepted."""
    report_phase("bind valid operands (compiles)")
    kernel.bind(**operands)  # a refusal here is the expression's, not the corruption's
    try:
        if case.kind == "scipy":
            operands = dict(operands, A=_corrupt_scipy(case))
        else:
            operands = dict(operands, **{case.target: corrupt_tensor(case, operands)})
        report_phase(f"call on {case.corruption}")
        result = kernel(**operands)
    except Exception as error:  # noqa: BLE001 - which one it is decides the outcome
        if _project_error(error):
            return Outcome("passed", type(error).__name__)
        return _unexpected(error)
    return Outcome("accepted-corrupt", case.corruption,
                   f"returned {getattr(result, 'to_numpy', lambda: result)()!r}"[:300])


def corrupt_tensor(case: Case, operands: dict):
    """``case.target`` rebuilt with ``ls.Tensor(...)`` from arrays mutated so that no
    reading of them is valid."""
    op = case.operands[case.target]
    packed = operands[case.target]
    if isinstance(packed, np.ndarray):
        packed = ls.Tensor.from_numpy(op.dense, format="dense", dtype=op.dtype,
                                      index_dtype=op.index_dtype)
    copies: dict[int, np.ndarray] = {}  # an array shared by two levels stays shared
    arrays = [{name: copies.setdefault(id(a), a.copy()) for name, a in level.items()}
              for level in packed.level_arrays]
    extents, values = list(packed.level_extents), packed.values.copy()
    rng = np.random.default_rng([case.seed, case.index, 1])
    slots = [(k, name) for k, level in enumerate(arrays) for name in level]
    crd = [(k, n) for k, n in slots if n == "crd" and len(arrays[k][n])]
    pos = [(k, n) for k, n in slots if n == "pos" and len(arrays[k][n]) > 1]
    nonempty = [(k, n) for k, n in slots if len(arrays[k][n])]
    how = case.corruption
    if (how == "crd-range" and not crd) or (how == "pos-order" and not pos) \
            or (how == "short-array" and not nonempty) or (how == "index-dtype" and not slots):
        how = "extents"
    if how == "short-values" and not len(values):
        how = "extents"
    if how == "crd-range":
        k, name = crd[rng.integers(len(crd))]
        arrays[k][name][rng.integers(len(arrays[k][name]))] = extents[k] + rng.integers(0, 3)
    elif how == "pos-order":
        k, name = pos[rng.integers(len(pos))]
        at = int(rng.integers(len(arrays[k][name]) - 1))
        arrays[k][name][at] = arrays[k][name][at + 1] + 1
    elif how == "short-array":
        k, name = nonempty[rng.integers(len(nonempty))]
        _replace(arrays, arrays[k][name], arrays[k][name][:-1])
    elif how == "short-values":
        values = values[:-1]
    elif how == "values-dtype":
        values = values.astype(np.float32 if values.dtype != np.float32 else np.float64)
    elif how == "index-dtype":
        k, name = slots[rng.integers(len(slots))]
        wrong = np.int64 if packed.index_dtype == np.int32 else np.int32
        _replace(arrays, arrays[k][name], arrays[k][name].astype(wrong))
    else:
        moded = [k for k, level in enumerate(packed.format.levels) if level.mode is not None]
        extents[moded[rng.integers(len(moded))]] += 1
    case.corruption = how
    return ls.Tensor(packed.shape, packed.format, packed.dtype, packed.index_dtype, extents,
                     arrays, [dict(p) for p in packed.params], values)


def _replace(arrays: list[dict], old: np.ndarray, new: np.ndarray) -> None:
    for level in arrays:
        for name, array in level.items():
            if array is old:
                level[name] = new


def _corrupt_scipy(case: Case):
    """A scipy matrix of A's values whose arrays are mutated after construction (scipy
    checks little then), then packed with ``from_scipy``."""
    op = case.operands["A"]
    kind = {"csc": "csc", "coo": "coo"}.get(op.format_name, "csr")
    matrix = getattr(sp, f"{kind}_matrix")(op.dense)
    how = case.corruption if matrix.nnz else "indptr-order"
    if kind == "coo":
        rows, cols = matrix.row.copy(), matrix.col.copy()
        if not len(rows):  # index arrays longer than the values
            rows, cols = np.array([-1], rows.dtype), np.array([0], cols.dtype)
        elif how == "indices-range":
            cols[-1] = matrix.shape[1]
        elif how == "indptr-order":  # COO has no indptr: a negative row instead
            rows[-1] = -1
        else:
            rows = rows[:-1]
        matrix.row, matrix.col = rows, cols
    else:
        extent = matrix.shape[1] if kind == "csr" else matrix.shape[0]
        if how == "indices-range":
            matrix.indices[-1] = extent
        elif how == "indptr-order":
            at = len(matrix.indptr) - 2
            matrix.indptr[at] = matrix.indptr[at + 1] + 1
        else:
            matrix.indices = matrix.indices[:-1]
    case.corruption = how
    return ls.Tensor.from_scipy(matrix, format=op.format, dtype=op.dtype,
                                index_dtype=op.index_dtype)
