"""Read and write tensors in the usual exchange files, chosen by the file's extension.

Supported: Matrix Market (``.mtx``, ``.mtx.gz``), FROSTT (``.tns``, ``.tns.gz``), numpy
dense arrays (``.npy``) and scipy sparse matrices (``.npz``). Every failure caused by the
file's contents is a ``ValueError`` that names the file (and the line, where one is known),
so that a bad file in a batch of inputs is easy to find.
"""

from __future__ import annotations

import gzip
import io as _io
import os
import zlib
from collections.abc import Callable, Sequence
from typing import IO

import numpy as np
from numpy.typing import DTypeLike

from .coerce import asarray
from .format import Format
from .made_as import tensor_class
from .matrix_market import read_matrix_market, write_matrix_market
from .tensor import StoredTensor
from .value_types import VALUE_DTYPES, checked_shape

PathLike = str | os.PathLike
FormatSpec = Format | str | Sequence

_READ_KINDS = (".mtx.gz", ".tns.gz", ".mtx", ".tns", ".npy", ".npz")
_WRITE_KINDS = _READ_KINDS
# Errors a broken or truncated (possibly gzipped) file raises while being decoded.
_DECODE_ERRORS = (ValueError, EOFError, gzip.BadGzipFile, zlib.error, OverflowError)


def _kind(path: str, kinds: tuple[str, ...]) -> str:
    """The recognised extension of ``path`` (the longest one wins, so ``.mtx.gz`` beats
    ``.gz``); a ValueError otherwise, because guessing a format from contents is fragile."""
    lower = path.lower()
    for kind in kinds:
        if lower.endswith(kind):
            return kind
    raise ValueError(f"{path}: unknown file extension; expected one of {', '.join(kinds)}")


def _supported_dtype(dtype: np.dtype, path: str) -> np.dtype:
    """Widen a file's value type to one kernels support (e.g. uint8 -> int64), rather than
    refusing files that were merely saved with a narrower type."""
    if str(dtype) in VALUE_DTYPES:
        return dtype
    if dtype.kind in "iu":
        return np.dtype(np.int64)
    if dtype.kind == "f":
        return np.dtype(np.float64)
    raise ValueError(f"{path}: values of type {dtype} are not supported "
                     f"(supported: {', '.join(VALUE_DTYPES)})")


def _exactly_as(values: np.ndarray, target: np.dtype, path: str) -> np.ndarray:
    """``values`` as ``target``, refusing a cast that would change a value rather than
    round it: into an integer type, every value must be a whole number in its range
    (2**64 - 1 is not -1, 1.5 is not 1, NaN is not INT64_MIN); into a float type, a
    finite value must stay finite. Floats may round (that is what a narrower float
    is), and bool keeps numpy's truth (pattern files read as bool)."""
    if target.kind == "b" or values.dtype == target:
        return values.astype(target, copy=False)
    if target.kind in "iu":
        info = np.iinfo(target)
        if values.dtype.kind == "f":
            whole = np.isfinite(values) & (values == np.round(values))
            fits = whole & (values >= float(info.min)) & (values < -float(info.min))
        else:
            fits = (values >= info.min) & (values <= info.max)
        if not fits.all():
            bad = values[np.argmin(fits)]
            raise ValueError(f"{path}: value {bad} does not fit {target} exactly; read it "
                             "with a wider dtype= or none")
    with np.errstate(over="ignore", invalid="ignore"):
        cast = values.astype(target)
    if target.kind == "f":
        overflow = np.isinf(cast) & np.isfinite(values)
        if overflow.any():
            raise ValueError(f"{path}: value {values[np.argmax(overflow)]} overflows {target}")
    return cast


def _check_shape(path: str, found: tuple[int, ...], shape: Sequence[int] | None) -> None:
    """Formats that store their shape can only confirm a requested one, never change it."""
    if shape is None:
        return
    requested = checked_shape(shape)
    if requested != tuple(found):
        raise ValueError(f"{path}: file has shape {tuple(found)}, not the requested "
                         f"{requested}")


# -- reading ---------------------------------------------------------------------------------
def read(path: PathLike, format: FormatSpec = "coo", dtype: DTypeLike | None = None,
         index_dtype: DTypeLike | None = None, *,
         shape: Sequence[int] | None = None) -> StoredTensor:
    """Load a tensor from ``path``, packed into ``format``.

    ``dtype`` defaults to the file's value type (pattern Matrix Market files and FROSTT
    files give float64). ``shape`` sets the extents of a ``.tns`` file, which otherwise
    are the largest coordinate of each mode; for other files it is only checked.
    """
    name = os.fspath(path)
    kind = _kind(name, _READ_KINDS)
    if kind in (".mtx", ".mtx.gz"):
        coords, values, found = read_matrix_market(name)
    elif kind in (".tns", ".tns.gz"):
        value_dtype = np.dtype(dtype) if dtype is not None else None
        coords, values, found = _read_tns(name, shape, value_dtype)
    elif kind == ".npy":
        coords, values, found = _read_npy(name)
    else:
        coords, values, found = _read_npz(name)
    if kind not in (".tns", ".tns.gz"):
        _check_shape(name, found, shape)
    target = np.dtype(dtype) if dtype is not None else _supported_dtype(values.dtype, name)
    return tensor_class().from_coo(coords, _exactly_as(values, target, name), found, format, None,
                                   index_dtype)


def _dense_entries(array: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Nonzeros of a dense array; zeros of a dense file are fill, not stored entries."""
    if array.ndim == 0:  # a scalar: one entry at no coordinates, or none if it is zero
        flat = array.reshape(1)
        stored = flat[flat != 0]
        return np.zeros((0, len(stored)), np.int64), stored, ()
    coords = np.array(np.nonzero(array), dtype=np.int64).reshape(array.ndim, -1)
    return coords, array[tuple(coords)], tuple(array.shape)


def _sparse_entries(matrix) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Stored entries of a scipy sparse matrix or array of any order."""
    coo = matrix.tocoo()
    parts = coo.coords if hasattr(coo, "coords") else (coo.row, coo.col)
    coords = np.vstack([np.asarray(p, dtype=np.int64) for p in parts]).reshape(len(parts), -1)
    return coords, np.asarray(coo.data), tuple(int(s) for s in coo.shape)


def _read_npy(path: str) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """A dense numpy array; pickles are refused since loading one can run code."""
    with open(path, "rb") as fh:
        try:
            array = np.lib.format.read_array(fh, allow_pickle=False)
        except (*_DECODE_ERRORS, OSError) as err:
            raise ValueError(f"{path}: not a readable .npy array: {err}") from err
    return _dense_entries(array)


def _read_npz(path: str) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """A sparse matrix saved by ``scipy.sparse.save_npz``."""
    return _sparse_entries(load_npz(path))


def load_npz(path: str):
    """The scipy.sparse matrix of a ``save_npz`` file, its index arrays checked (a
    ValueError naming the file otherwise); ``Tensor.from_scipy`` packs a CSR one
    without sorting, 5x faster than ``read``'s way through coordinates."""
    import scipy.sparse  # loaded on first use: import llvsparse stays light

    try:
        matrix = scipy.sparse.load_npz(path)
    except FileNotFoundError:
        raise
    except (*_DECODE_ERRORS, OSError, KeyError) as err:
        raise ValueError(f"{path}: not a scipy.sparse .npz file: {err}") from err
    if hasattr(matrix, "check_format"):  # scipy loads index arrays without looking at them
        try:
            matrix.check_format(full_check=True)
        except ValueError as err:
            raise ValueError(f"{path}: corrupt sparse matrix: {err}") from err
    return matrix


def _open_text(path: str, mode: str = "rt") -> IO[str]:
    """Open plain or gzipped text, so that callers need not care which."""
    if path.lower().endswith(".gz"):
        return gzip.open(path, mode, encoding="utf-8")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")


def _tns_fields(line: str) -> list[str]:
    """The whitespace-separated fields of a FROSTT line, with any ``#`` comment removed."""
    return line.split("#", 1)[0].split()


def _tns_order(path: str) -> int | None:
    """The order implied by the first data line (None for a file without entries)."""
    try:
        with _open_text(path) as fh:
            for number, line in enumerate(fh, 1):
                fields = _tns_fields(line)
                if fields:
                    if len(fields) < 2:
                        raise ValueError(f"{path}, line {number}: expected coordinates and a "
                                         f"value, found {len(fields)} field")
                    return len(fields) - 1
    except (UnicodeDecodeError, EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise ValueError(f"{path}: not a readable FROSTT text file: {err}") from err
    return None


def _read_tns(path: str, shape: Sequence[int] | None, dtype: np.dtype | None
              ) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """FROSTT text: one entry per line, 1-based coordinates then the value.

    numpy's C parser does the work; only if it fails, or the coordinates are out of range,
    is the file scanned again line by line, to say which line is at fault.
    """
    order = _tns_order(path)
    if order is None:
        if shape is None:
            raise ValueError(f"{path}: no entries, so the shape is unknown; pass shape=")
        found = checked_shape(shape)
        values = np.zeros(0, dtype=dtype if dtype is not None else np.float64)
        return np.zeros((len(found), 0), np.int64), values, found
    if shape is not None and len(shape) != order:
        raise ValueError(f"{path}: entries have {order} coordinates but shape has "
                         f"{len(shape)} extents")
    # Integers are parsed as integers so that large ones stay exact.
    exact_int = dtype is not None and dtype.kind in "iu"
    rows = None
    for value_type in ((np.int64, np.float64) if exact_int else (np.float64,)):
        layout = np.dtype([("c", np.int64, (order,)), ("v", value_type)])
        try:
            with _open_text(path) as fh:
                rows = np.loadtxt(fh, dtype=layout, comments="#", ndmin=1)
            break
        except (ValueError, EOFError, gzip.BadGzipFile, zlib.error):
            continue
    if rows is None:
        _tns_locate_error(path, order, shape)
        raise ValueError(f"{path}: malformed FROSTT file")
    coords = rows["c"].T.astype(np.int64) - 1
    values = np.ascontiguousarray(rows["v"])
    found = checked_shape(shape) if shape is not None else \
        tuple(int(m) + 1 for m in coords.max(axis=1))
    if coords.min() < 0 or any(int(coords[m].max()) >= found[m] for m in range(order)):
        _tns_locate_error(path, order, found)
        raise ValueError(f"{path}: coordinates outside the shape {found}")
    return coords, values, found


def _tns_locate_error(path: str, order: int, shape: Sequence[int] | None) -> None:
    """Scan a FROSTT file line by line and raise a ValueError naming the first bad line."""
    try:
        with _open_text(path) as fh:
            for number, line in enumerate(fh, 1):
                fields = _tns_fields(line)
                if not fields:
                    continue
                where = f"{path}, line {number}"
                if len(fields) != order + 1:
                    raise ValueError(f"{where}: expected {order + 1} fields (coordinates and "
                                     f"a value), found {len(fields)}")
                for mode, field in enumerate(fields[:-1]):
                    try:
                        coord = int(field)
                    except ValueError:
                        raise ValueError(f"{where}: coordinate {field!r} is not an "
                                         "integer") from None
                    if coord < 1:
                        raise ValueError(f"{where}: coordinate {coord} is below 1 "
                                         "(FROSTT coordinates are 1-based)")
                    if shape is not None and coord > shape[mode]:
                        raise ValueError(f"{where}: coordinate {coord} of mode {mode} "
                                         f"exceeds the extent {shape[mode]}")
                try:
                    float(fields[-1])
                except ValueError:
                    raise ValueError(f"{where}: value {fields[-1]!r} is not a "
                                     "number") from None
    except (UnicodeDecodeError, EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise ValueError(f"{path}: not a readable FROSTT text file: {err}") from err


# -- writing ---------------------------------------------------------------------------------
def write(path: PathLike | StoredTensor, tensor: object) -> None:
    """Save ``tensor`` to ``path`` in the format its extension names.

    ``write(path, tensor)``, as ``np.save`` and ``scipy.io.mmwrite`` order them, or
    ``write(tensor, path)``: the path is the argument that is a ``str`` or ``PathLike``.
    ``tensor`` may be a Tensor, a numpy array or a scipy/pydata sparse array.

    Matrix Market and ``.npz`` hold matrices only. Boolean matrices become Matrix Market
    *pattern* files (their stored False entries are dropped, as pattern files cannot hold
    them), so they read back as float64 ones unless ``read`` is given ``dtype=bool``.
    FROSTT files record only entries, so trailing empty slices need ``read(shape=...)``.
    """
    if _is_path(tensor) and not _is_path(path):
        path, tensor = tensor, path
    if not _is_path(path):
        raise TypeError(f"ls.write(path, tensor) needs a file path (str or PathLike), "
                        f"got {type(path).__name__} and {type(tensor).__name__}")
    tensor = asarray(tensor)
    name = os.fspath(path)
    kind = _kind(name, _WRITE_KINDS)
    if kind in (".mtx", ".mtx.gz"):
        _write_mtx(tensor, name, kind == ".mtx.gz")
    elif kind in (".tns", ".tns.gz"):
        _write_tns(tensor, name)
    elif kind == ".npy":
        with open(name, "wb") as fh:  # a file object stops numpy from renaming the file
            np.save(fh, tensor.to_numpy(), allow_pickle=False)
    else:
        import scipy.sparse  # loaded on first use: import llvsparse stays light

        _need_matrix(tensor, name)
        coords, values = _written_entries(tensor)
        matrix = scipy.sparse.coo_matrix((values, (coords[0], coords[1])), shape=tensor.shape)
        with open(name, "wb") as fh:  # given a name, scipy appends ".npz" to "x.NPZ"
            scipy.sparse.save_npz(fh, matrix)


def _is_path(value: object) -> bool:
    return isinstance(value, (str, os.PathLike))


def _written_entries(tensor: StoredTensor) -> tuple[np.ndarray, np.ndarray]:
    """The entries a file records: every stored one, but for formats that pad (ELL's
    short rows, BCSR's blocks, storage-only or blocked levels) the zeros, which are
    padding there and would read back as explicit entries (as scipy drops DIA's)."""
    coords, values = tensor.to_coo()
    if tensor.format.has_hidden_levels:
        kept = values != 0
        coords, values = coords[:, kept], values[kept]
    return coords, values


def _need_matrix(tensor: StoredTensor, path: str) -> None:
    if tensor.order != 2:
        raise ValueError(f"{path}: this format holds matrices, not order-{tensor.order} tensors")


def _write_mtx(tensor: StoredTensor, path: str, compress: bool) -> None:
    """Matrix Market coordinate file in general symmetry, so every stored entry (explicit
    zeros included, padding not) is written as is."""
    _need_matrix(tensor, path)
    coords, values = _written_entries(tensor)
    write_matrix_market(path, coords, values, tensor.shape, compress)


def _format_value(dtype: np.dtype) -> Callable[[object], str]:
    """A formatter that writes each value so it reads back exactly."""
    if dtype.kind == "b":
        return lambda v: "1" if v else "0"
    if dtype.kind == "i":
        return str
    return repr  # shortest string that round-trips a Python float


def _write_tns(tensor: StoredTensor, path: str) -> None:
    """FROSTT text, 1-based coordinates then value, one stored entry per line."""
    if tensor.order == 0:
        raise ValueError(f"{path}: FROSTT files hold tensors of order 1 or more")
    coords, values = _written_entries(tensor)
    fmt = _format_value(tensor.dtype)
    rows = (coords + 1).T.tolist()
    buffer = _io.StringIO()
    for row, value in zip(rows, values.tolist()):
        buffer.write(" ".join(map(str, row)))
        buffer.write(" ")
        buffer.write(fmt(value))
        buffer.write("\n")
    with _open_text(path, "wt") as fh:
        fh.write(buffer.getvalue())


__all__ = ["read", "write"]
