"""Matrix Market files, read strictly and written exactly.

scipy's reader (fast_matrix_market) is not used: on malformed files it can crash the
process (a file cut inside a number, a NUL byte after a value), and it reads ``1x`` or
``1e`` as 1. Here the header is parsed by hand and the entries by numpy's C tokenizer,
which refuses any field that is not a whole number; only when it fails is the data
bisected to name the first bad line. The writer formats values the way the FROSTT
writer does, so floats read back bit for bit and the field always matches the dtype
(scipy writes an empty integer matrix as ``real``).
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

SYMMETRIES = ("general", "symmetric", "skew-symmetric", "hermitian")
FIELDS = {"real": np.float64, "double": np.float64, "integer": np.int64,
          "unsigned-integer": np.int64, "pattern": np.float64}
# Errors that a broken or truncated gzip stream raises while being decompressed.
TEXT_BYTES = b"\t\n\r" + bytes(range(0x20, 0x7f))
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, OSError)

Entries = tuple[np.ndarray, np.ndarray, tuple[int, ...]]


@dataclass(frozen=True)
class Header:
    layout: str  # "coordinate" or "array"
    field: str  # one of FIELDS
    symmetry: str  # one of SYMMETRIES
    shape: tuple[int, int]
    entries: int  # lines of data the file declares
    data_line: int  # 1-based number of the line where the data starts
    data_offset: int  # and its first character


def read_matrix_market(path: str) -> Entries:
    """Coordinates (2, n), values and shape of the matrix in ``path`` (``.gz`` or not).

    Symmetric storage is expanded; explicit zeros of coordinate files are kept as stored
    entries; zeros of array (dense) files are fill. Every fault of the contents is a
    ValueError naming the file and, where there is one, the line.
    """
    text = _ascii_text(path)
    header = _parse_header(path, text)
    data = text[header.data_offset:]
    if header.layout == "array":
        return _array_entries(path, header, data)
    return _coordinate_entries(path, header, data)


def _ascii_text(path: str) -> str:
    """The file's text: Matrix Market is ASCII, and a NUL or high byte means a damaged
    or binary file (some of which crash other parsers)."""
    try:
        if path.lower().endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                raw = fh.read()
        else:
            with open(path, "rb") as fh:
                raw = fh.read()
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise ValueError(f"{path}: is a directory, not a Matrix Market file") from None
    except GZIP_ERRORS as err:
        raise ValueError(f"{path}: not a readable gzip file: {err}") from err
    bad = raw.translate(None, TEXT_BYTES) and re.search(rb"[^\t\n\r\x20-\x7e]", raw)
    if bad:
        line = raw.count(b"\n", 0, bad.start()) + 1
        raise ValueError(f"{path}, line {line}: byte {bad.group()!r} is not text "
                         "(Matrix Market files are ASCII)")
    return raw.decode("ascii")


def _parse_header(path: str, text: str) -> Header:
    lines = enumerate(_lines(text), 1)
    _, (banner, offset) = next(lines, (1, ("", 0)))
    words = banner.lower().split()
    if len(words) != 5 or words[0] != "%%matrixmarket":
        raise ValueError(f"{path}, line 1: missing the banner '%%MatrixMarket matrix "
                         "<coordinate|array> <field> <symmetry>'")
    kind, layout, field, symmetry = words[1:]
    if kind != "matrix":
        raise ValueError(f"{path}, line 1: only 'matrix' objects are supported, not {kind!r}")
    if layout not in ("coordinate", "array"):
        raise ValueError(f"{path}, line 1: format {layout!r} is neither 'coordinate' nor "
                         "'array'")
    if field == "complex":
        raise ValueError(f"{path}, line 1: complex values are not supported")
    if field not in FIELDS or (field == "pattern" and layout == "array"):
        raise ValueError(f"{path}, line 1: field {field!r} is not one of "
                         f"{', '.join(FIELDS)} (pattern only with coordinate)")
    if symmetry not in SYMMETRIES:
        raise ValueError(f"{path}, line 1: symmetry {symmetry!r} is not one of "
                         f"{', '.join(SYMMETRIES)}")
    for number, (line, offset) in lines:
        if line.strip() and not line.lstrip().startswith("%"):
            return _size_line(path, number, line, layout, field, symmetry, offset)
    raise ValueError(f"{path}: no size line after the banner and comments")


def _lines(text: str) -> Iterator[tuple[str, int]]:
    """Each line of ``text`` with the offset just past it, found lazily (the header is
    a few lines at the top of what may be a large file)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        yield text[start:end], end
        start = end


def _size_line(path: str, number: int, line: str, layout: str, field: str,
               symmetry: str, data_offset: int) -> Header:
    expected = 3 if layout == "coordinate" else 2
    fields = line.split()
    if len(fields) != expected or not all(f.isdigit() for f in fields):
        names = "rows, columns and entries" if expected == 3 else "rows and columns"
        raise ValueError(f"{path}, line {number}: the size line must hold {names} as "
                         f"non-negative integers, not {line.strip()!r}")
    rows, cols = int(fields[0]), int(fields[1])
    if symmetry != "general" and rows != cols:
        raise ValueError(f"{path}, line {number}: a {symmetry} matrix must be square, not "
                         f"{rows} x {cols}")
    if layout == "coordinate":
        entries = int(fields[2])
    elif symmetry == "general":
        entries = rows * cols
    else:
        entries = rows * (rows + 1) // 2 if symmetry != "skew-symmetric" else \
            rows * (rows - 1) // 2
    return Header(layout, field, symmetry, (rows, cols), entries, number + 1,
                  data_offset)


def _table(path: str, header: Header, data: str, dtype: np.dtype) -> np.ndarray:
    """The data lines parsed as ``dtype`` rows, exactly as many as the header declares."""
    if not data or data.isspace():
        rows = np.zeros(0, dtype)
    else:
        try:
            rows = _load_rows(data, dtype)
        except ValueError:
            _raise_first_bad_line(path, header.data_line, data, dtype)
            raise
    if len(rows) != header.entries:
        raise ValueError(f"{path}: the size line declares {header.entries} entries but the "
                         f"file holds {len(rows)}")
    return rows


def _raise_first_bad_line(path: str, first_line: int, data: str, dtype: np.dtype) -> None:
    """Bisect the data for the first line numpy cannot parse and raise naming it; each
    line parses or not on its own, so the half holding a failure holds the first one."""
    lines = data.split("\n")
    lo, hi = 0, len(lines)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _parses("\n".join(lines[lo:mid]), dtype):
            lo = mid
        else:
            hi = mid
    try:
        _load_rows(lines[lo], dtype)
    except ValueError as err:
        reason = re.sub(r" at row \d+(, column (\d+))?[.;].*", r" (field \2)", str(err))
        reason = re.sub(r"the dtype passed requires (\d+) columns but (\d+) were found",
                        r"expected \1 fields, found \2", reason.replace(" (field )", ""))
        raise ValueError(f"{path}, line {first_line + lo}: {reason}") from None


def _load_rows(text: str, dtype: np.dtype) -> np.ndarray:
    """Each line of ``text`` as one ``dtype`` row; numpy refuses partial numbers."""
    return np.loadtxt(io.StringIO(text), dtype=dtype, comments=None, ndmin=1)


def _parses(text: str, dtype: np.dtype) -> bool:
    if not text or text.isspace():
        return True
    try:
        _load_rows(text, dtype)
    except ValueError:
        return False
    return True


def _coordinate_entries(path: str, header: Header, data: str) -> Entries:
    value_type = FIELDS[header.field]
    fields = [("c", np.int64, (2,))] + ([] if header.field == "pattern" else
                                          [("v", value_type)])
    rows = _table(path, header, data, np.dtype(fields))
    coords = np.ascontiguousarray(rows["c"].T)  # row-wise: the mirror below gathers fast
    coords -= 1
    values = np.ones(len(rows)) if header.field == "pattern" else np.asarray(rows["v"])
    for axis, extent in enumerate(header.shape):
        outside = (coords[axis] < 0) | (coords[axis] >= extent)
        if outside.any():
            k = int(np.argmax(outside))
            raise ValueError(f"{path}: entry {k + 1} has {['row', 'column'][axis]} "
                             f"{coords[axis, k] + 1}, outside 1..{extent}")
    return _expand_symmetry(path, header.symmetry, coords, values) + (header.shape,)


def _expand_symmetry(path: str, symmetry: str, coords: np.ndarray, values: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Add the mirror of each off-diagonal entry (negated for skew-symmetric)."""
    if symmetry == "general":
        return coords, values
    off = coords[0] != coords[1]
    if symmetry == "skew-symmetric" and not off.all():
        raise ValueError(f"{path}: a skew-symmetric file stores no diagonal entries "
                         f"(entry {int(np.argmin(off)) + 1})")
    mirror = -values[off] if symmetry == "skew-symmetric" else values[off]
    return (np.hstack([coords, coords[::-1, off]]), np.concatenate([values, mirror]))


def _array_entries(path: str, header: Header, data: str) -> Entries:
    """Dense column-major values (the lower triangle only, for symmetric storage)."""
    values = _table(path, header, data, np.dtype([("v", FIELDS[header.field])]))["v"]
    rows, cols = header.shape
    dense = np.zeros((rows, cols), values.dtype)
    if header.symmetry == "general":
        dense[:] = values.reshape(cols, rows).T
    else:
        upper = np.triu_indices(rows, 1 if header.symmetry == "skew-symmetric" else 0)
        lower = (upper[1], upper[0])  # column-major lower = row-major upper, transposed
        dense[lower] = values
        dense[upper] = -values if header.symmetry == "skew-symmetric" else values
    coords = np.array(np.nonzero(dense), dtype=np.int64).reshape(2, -1)
    return coords, dense[tuple(coords)], (rows, cols)


def write_matrix_market(path: str, coords: np.ndarray, values: np.ndarray,
                        shape: tuple[int, int], compress: bool) -> None:
    """A coordinate file in general symmetry, every entry as given. Bool values make a
    pattern file of their True entries (a pattern file cannot hold a False)."""
    if values.dtype == np.dtype(bool):
        field, coords, values = "pattern", coords[:, values], None
    else:
        field = "integer" if values.dtype.kind == "i" else "real"
    lines = [f"%%MatrixMarket matrix coordinate {field} general",
             f"{shape[0]} {shape[1]} {coords.shape[1]}"]
    one_based = (coords + 1).T.tolist()
    if values is None:
        lines += [f"{r} {c}" for r, c in one_based]
    else:
        lines += [f"{r} {c} {v!r}" for (r, c), v in zip(one_based, values.tolist())]
    text = "\n".join(lines) + "\n"
    with (gzip.open(path, "wt", encoding="ascii") if compress
          else open(path, "w", encoding="ascii")) as fh:
        fh.write(text)
