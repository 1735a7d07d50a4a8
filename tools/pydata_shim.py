"""A pytest plugin that runs pydata/sparse's own tests against llvsparse.

It maps constructors only: ``sparse.COO``, ``sparse.GCXS``, ``sparse.DOK``, ``sparse.random``,
``sparse.asarray`` and friends build the pydata array as before, then hand the test an
llvsparse Tensor holding the same entries and fill value (COO -> coo, 2-d GCXS -> csr/csc).
The functions of the ``sparse`` namespace that numpy has by the same name (``sparse.sum``,
``sparse.concatenate``, ...) call numpy's, which dispatches to llvsparse through
``__array_function__``, as a user switching writes them. ``assert_eq`` compares dense
values (and dtypes, where the test asks) against the test's numpy reference.

Each test's outcome is appended, one JSON line, to ``$LLVSPARSE_PYDATA_LOG``:
``{"id", "outcome", "kind", "error"}`` where kind is one of ``pass``, ``wrong`` (a value
differs), ``type`` (the values agree but the kind of result differs from pydata's: a numpy
scalar for its 0-d array, a tensor for its ndarray), ``missing`` (an exception that names what is unsupported), ``unclear`` (any other
exception) ``no_raise`` (an error the test expected did not come) or ``message`` (it came, in
other words than pydata's).
Load it with ``pytest -p tools.pydata_shim``; tools/pydata_suite.py does.
"""

from __future__ import annotations

import json
import os
import traceback

import numpy as np
import pytest
import sparse
import sparse.numba_backend._compressed as compressed
import sparse.numba_backend._utils as utils

import llvsparse as ls

_ORIGINAL = {name: getattr(sparse, name) for name in
             ("COO", "GCXS", "DOK", "random", "asarray", "zeros", "ones", "full",
              "zeros_like", "ones_like", "full_like", "eye", "empty", "empty_like")
             if hasattr(sparse, name)}
_SPARSE_TYPES = tuple(getattr(sparse, n) for n in ("SparseArray",) if hasattr(sparse, n))


class WrongResult(AssertionError):
    """A value computed by llvsparse differs from the test's reference."""


class Refused:
    """A pydata array llvsparse refused to convert (a dtype it lacks): every use raises
    the refusal, so a test fails when it uses the array, not when it is collected."""

    def __init__(self, error: Exception):
        self._error = error

    def _raise(self, *args, **kwargs):
        raise self._error

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        self._raise()

    __array__ = __array_ufunc__ = __array_function__ = __getitem__ = __len__ = _raise
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _raise
    __truediv__ = __rtruediv__ = __matmul__ = __rmatmul__ = __pow__ = __neg__ = _raise
    __eq__ = __ne__ = __lt__ = __gt__ = __le__ = __ge__ = __abs__ = __bool__ = _raise
    __and__ = __or__ = __xor__ = __invert__ = __lshift__ = __rshift__ = _raise
    __hash__ = object.__hash__


def to_llvsparse(value: object) -> object:
    """A pydata array as an llvsparse Tensor in the nearest format; anything else as is."""
    if not isinstance(value, _SPARSE_TYPES):
        return value
    axes = getattr(value, "compressed_axes", None)
    try:
        if axes is not None and value.ndim == 2:
            return ls.Tensor.from_pydata(value,
                                         format="csr" if tuple(axes) == (0,) else "csc")
        return ls.Tensor.from_pydata(value)
    except (TypeError, ValueError) as error:
        return Refused(error)


def _unmapped(value: object) -> object:
    """A mapped class given as an argument (``format=sparse.COO``) as pydata's own."""
    return getattr(value, "_original", value) if isinstance(value, _MappedType) else value


def _mapped(original):
    """``original`` (a constructor) returning llvsparse tensors."""
    def build(*args, **kwargs):
        args = tuple(_unmapped(a) for a in args)
        kwargs = {k: _unmapped(v) for k, v in kwargs.items()}
        return to_llvsparse(original(*args, **kwargs))
    return build


def elemwise(function, *args, **kwargs):
    """pydata's ``sparse.elemwise(f, x, y)``: ``f(x, y)`` as a numpy user writes it."""
    return function(*args, **kwargs)


class _MappedType(type):
    """A pydata class whose constructors and classmethods return llvsparse tensors, and
    of which an llvsparse Tensor is an instance."""

    def __instancecheck__(cls, value: object) -> bool:
        return isinstance(value, (ls.Tensor, cls._original))

    def __call__(cls, *args, **kwargs):
        return _mapped(cls._original)(*args, **kwargs)

    def __getattr__(cls, name: str):
        attribute = getattr(cls._original, name)
        return _mapped(attribute) if callable(attribute) and name.startswith("from") \
            else attribute


def _mapped_class(original: type) -> type:
    return _MappedType(original.__name__, (), {"_original": original})


def _dense(value: object) -> np.ndarray:
    if isinstance(value, _SPARSE_TYPES):
        return value.todense()
    if hasattr(value, "toarray") and not isinstance(value, ls.Tensor):  # scipy.sparse
        return value.toarray()
    return np.asarray(value)


def assert_eq(x, y, check_nnz=True, compare_dtype=True, **kwargs) -> None:
    """Both sides' dense values are equal (NaN equal to NaN), and their dtypes if asked."""
    a, b = _dense(x), _dense(y)
    if a.shape != b.shape:
        raise WrongResult(f"shapes differ: {a.shape} != {b.shape}")
    if compare_dtype and a.dtype != b.dtype:
        raise WrongResult(f"dtypes differ: {a.dtype} != {b.dtype}")
    try:
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=True)
    except (AssertionError, TypeError) as error:
        if not np.array_equal(a, b):
            raise WrongResult(str(error)) from None


_NUMPY_FUNCTIONS = ("sum", "prod", "max", "min", "mean", "std", "var", "nansum", "nanprod",
                    "nanmax", "nanmin", "nanmean", "any", "all", "concatenate", "stack",
                    "where", "dot", "matmul", "einsum", "transpose", "reshape",
                    "moveaxis", "swapaxes", "squeeze", "expand_dims", "broadcast_to",
                    "roll", "tril", "triu", "clip", "isinf", "isnan", "nonzero", "kron",
                    "argmax", "argmin", "diagonal", "pad", "abs", "outer", "result_type",
                    "round", "sort", "take", "flip", "isclose", "allclose", "argwhere",
                    "count_nonzero", "unique_values", "vecdot", "permute_dims", "diff",
                    "repeat", "matrix_transpose", "unique_counts", "interp")


# pydata functions whose numpy namesake lacks their options: llvsparse's own, as a user
# switching writes ``ls.sort(x, descending=True)``, ``ls.tensordot(a, b, return_type=)``.
_OWN_FUNCTIONS = ("sort", "tensordot")


def _patch() -> None:
    for name in ("COO", "GCXS", "DOK"):
        setattr(sparse, name, _mapped_class(_ORIGINAL[name]))
    compressed.GCXS = sparse.GCXS
    for name, original in _ORIGINAL.items():
        if name not in ("COO", "GCXS", "DOK"):
            setattr(sparse, name, _mapped(original))
    for name in _NUMPY_FUNCTIONS:
        if hasattr(np, name) and hasattr(sparse, name):
            setattr(sparse, name, getattr(np, name))
    for name in _OWN_FUNCTIONS:  # numpy's lacks pydata's options (sort's descending=)
        setattr(sparse, name, getattr(ls, name))
    sparse.elemwise = elemwise
    utils.assert_eq = assert_eq


def _checks_type(excinfo, text: str) -> bool:
    """Whether a failed assertion of the test's own checks the kind of result (a 0-d
    array, not a scalar; COO, not GCXS; ndarray, not a tensor), not a value."""
    frames = [f for f in traceback.extract_tb(excinfo.tb) if "/tests/" in f.filename]
    line = frames[-1].line if frames else ""
    return "SparseArray" in text or any(word in (line or "") for word in
                                        ("isinstance", "type(", "__class__", ".format",
                                         "isscalar", ".coords"))


def classify(excinfo) -> tuple[str, str]:
    """The failure kind of an exception, and a one-line description of it."""
    error = excinfo.value
    text = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    if isinstance(error, WrongResult):
        return "wrong", text
    if isinstance(error, pytest.fail.Exception) and "DID NOT RAISE" in str(error):
        return "no_raise", text
    if isinstance(error, AssertionError) and "Regex pattern did not match" in str(error):
        return "message", text  # the expected exception, in other words than pydata's
    if isinstance(error, AssertionError):
        return ("type" if _checks_type(excinfo, text) else "wrong"), text
    frames = traceback.extract_tb(excinfo.tb)
    where = frames[-1].filename if frames else ""
    clear_type = isinstance(error, (TypeError, ValueError, NotImplementedError, IndexError,
                                    AttributeError, ls.NotationError, ls.ScheduleError))
    from_pydata = "sparse/numba_backend" in where and "/tests/" not in where
    if clear_type and str(error) and not from_pydata:
        return "missing", text
    return "unclear", text + (f" (in {os.path.basename(where)})" if where else "")


def pytest_configure(config) -> None:
    _patch()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    path = os.environ.get("LLVSPARSE_PYDATA_LOG")
    done = report.when == "call" or (report.when == "setup" and not report.passed)
    if path and done:
        if report.passed or report.skipped:
            kind, text = ("pass" if report.passed else "skip"), ""
        else:
            kind, text = classify(call.excinfo)
        with open(path, "a") as log:
            log.write(json.dumps({"id": item.nodeid, "outcome": report.outcome,
                                  "kind": kind, "error": text[:300]}) + "\n")
    return report
