"""Partitioned tensors from a dask array, from files of blocks, or from one Matrix
Market file read in byte ranges; and partitioned matrices saved as a folder of blocks."""

from __future__ import annotations

import functools
import gzip
import itertools
import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..frontend.tensor import Tensor
from ..tensors.convert import adopt_scipy
from ..tensors.format import Format, as_format
from ..tensors.io import load_npz, read
from ..tensors.matrix_market import FIELDS, _expand_symmetry, _load_rows, _parse_header
from .partitioned import Block, Partitioned, merged, pack, same, uniform_bounds

PathLike = str | os.PathLike
HEADER_BYTES = 1 << 16  # the banner, comments and size line of a Matrix Market file


def _bounds_of(chunks: Sequence[int]) -> tuple[int, ...]:
    return (0, *np.cumsum(chunks).tolist()) if len(chunks) else (0, 0)


def from_dask(array, format: Format | str = "csr", index_dtype: str | None = None
              ) -> Partitioned:
    """The blocks of a dask array whose chunks are scipy.sparse, pydata sparse or numpy
    arrays, each packed into ``format`` inside the task that first uses it."""
    if not (hasattr(array, "chunks") and hasattr(array, "to_delayed")):
        raise TypeError(f"from_dask takes a dask array, not {type(array).__name__}")
    if any(0 in sizes for sizes in array.chunks if sum(sizes)):
        raise ValueError(f"the dask array has empty chunks {array.chunks}; rechunk it")
    shape = tuple(int(s) for s in array.shape)
    fmt = as_format(format, len(shape))
    dtype = np.dtype(array.dtype)
    delayed = array.to_delayed()
    loader = functools.partial(pack, fmt, dtype, index_dtype)
    blocks = {tuple(index): Block(loader, delayed[tuple(index)])
              for index in np.ndindex(*delayed.shape)}
    bounds = tuple(_bounds_of(sizes) if sum(sizes) else (0, 0) for sizes in array.chunks)
    return Partitioned(shape, bounds, fmt, dtype, index_dtype, blocks)


def _read_block(format: Format, dtype: np.dtype, index_dtype: str | None, path: str
                ) -> Tensor:
    """A block file as a Tensor; a ``.npz`` of the wanted dtype is packed from scipy's
    arrays directly, or adopts them where they are laid out as ``format`` wants (no
    one else holds them); ``read`` casts others exactly, or says why it cannot."""
    if path.lower().endswith(".npz"):
        matrix = load_npz(path)
        if matrix.dtype == dtype:
            adopted = adopt_scipy(matrix, format, index_dtype)
            return adopted if adopted is not None else \
                Tensor.from_scipy(matrix, format, dtype, index_dtype)
    return read(path, format, dtype, index_dtype)


def _natural_key(path: Path) -> list:
    """``block-10`` after ``block-9``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]


def _file_shape(path: Path) -> tuple[int, int]:
    """A block file's shape from its header, without reading its entries."""
    name = path.name.lower()
    if name.endswith(".npz"):
        with np.load(path, allow_pickle=False) as npz:
            if "shape" not in npz.files:
                raise ValueError(f"{path}: not a scipy.sparse .npz file (no 'shape')")
            return tuple(int(s) for s in npz["shape"])
    if name.endswith((".mtx", ".mtx.gz")):
        return _mtx_header(str(path)).shape
    raise ValueError(f"{path}: a block file is .npz, .mtx or .mtx.gz")


def from_files(paths: PathLike | Sequence[PathLike], format: Format | str = "csr",
               dtype=np.float64, index_dtype: str | None = None) -> Partitioned:
    """Row blocks, one per file (a folder's ``.npz``/``.mtx``/``.mtx.gz`` files in
    natural name order, or the files given, top to bottom). Only the headers are read
    here; each block is read by the task that uses it, so the matrix never needs to fit
    in one process."""
    if isinstance(paths, (str, os.PathLike)) and Path(paths).is_dir():
        files = sorted((p for p in Path(paths).iterdir()
                        if p.name.lower().endswith((".npz", ".mtx", ".mtx.gz"))),
                       key=_natural_key)
        if not files:
            raise ValueError(f"{paths}: no .npz, .mtx or .mtx.gz files in this folder")
    elif isinstance(paths, (str, os.PathLike)):
        files = [Path(paths)]
    else:
        files = [Path(p) for p in paths]
    shapes = [_file_shape(p) for p in files]
    columns = {s[1] for s in shapes}
    if len(columns) != 1:
        raise ValueError("row blocks disagree on the number of columns: "
                         + ", ".join(f"{p.name}: {s}" for p, s in zip(files, shapes)))
    empty = [p.name for p, s in zip(files, shapes) if s[0] == 0]
    if empty:
        raise ValueError(f"row blocks without rows: {', '.join(empty)}")
    fmt = as_format(format, 2)
    dtype = np.dtype(dtype)
    loader = functools.partial(_read_block, fmt, dtype, index_dtype)
    blocks = {(k, 0): Block(loader, str(p)) for k, p in enumerate(files)}
    ncols = columns.pop()
    shape = (sum(s[0] for s in shapes), ncols)
    bounds = (_bounds_of([s[0] for s in shapes]), (0, ncols) if ncols else (0, 0))
    return Partitioned(shape, bounds, fmt, dtype, index_dtype, blocks)


def save_blocks(matrix: Partitioned, folder: PathLike, **compute_options) -> list[Path]:
    """Write each row block of ``matrix`` (a matrix split by rows only) as
    ``block-K.npz`` in ``folder``, each by its own task; ``from_files(folder)`` reads
    them back."""
    import dask  # dask: the optional extra llvsparse[dask]

    if matrix.order != 2 or matrix.grid[1] != 1:
        raise ValueError(f"save_blocks writes row blocks of a matrix, not {matrix!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"block-{k}.npz" for k in range(matrix.grid[0])]
    tasks = [dask.delayed(_save_block)(str(paths[k]), matrix.blocks[(k, 0)])
             for k in range(matrix.grid[0])]
    dask.compute(*tasks, **compute_options)
    return paths


def _save_block(path: str, block: Block) -> None:
    import scipy.sparse as sp  # loaded on first use: import llvsparse stays light

    sp.save_npz(path, block.load(block.arg).to_scipy("csr"), compressed=False)


# -- one Matrix Market file, read in byte ranges -----------------------------------------
def _mtx_header(path: str):
    opener = gzip.open if path.lower().endswith(".gz") else open
    with opener(path, "rb") as fh:
        head = fh.read(HEADER_BYTES)
    return _parse_header(path, head.decode("ascii", errors="replace"))


def _entries_between(path: str, header, start: int, end: int
                     ) -> tuple[np.ndarray, np.ndarray, int]:
    """Coordinates (0-based, symmetry expanded) and values of the lines starting in
    bytes ``[start, end)`` of the file, and how many lines those were."""
    with open(path, "rb") as fh:
        fh.seek(start - 1)
        if fh.read(1) != b"\n":
            fh.readline()  # the line under way belongs to the range before
        if fh.tell() >= end:
            raw = b""
        else:
            raw = fh.read(end - fh.tell())
            if raw and not raw.endswith(b"\n"):
                raw += fh.readline()
    field = [] if header.field == "pattern" else [("v", FIELDS[header.field])]
    text = raw.decode("ascii", errors="replace")
    if text.strip():
        try:
            rows = _load_rows(text, np.dtype([("c", np.int64, (2,))] + field))
        except ValueError as err:
            raise ValueError(f"{path}, bytes {start}..{end}: {err}") from None
    else:
        rows = np.zeros(0, np.dtype([("c", np.int64, (2,))] + field))
    coords = np.ascontiguousarray(rows["c"].T) - 1
    values = np.ones(len(rows)) if header.field == "pattern" else np.asarray(rows["v"])
    for axis, extent in enumerate(header.shape):
        if ((coords[axis] < 0) | (coords[axis] >= extent)).any():
            raise ValueError(f"{path}, bytes {start}..{end}: a {['row', 'column'][axis]} "
                             f"outside 1..{extent}")
    return (*_expand_symmetry(path, header.symmetry, coords, values), len(rows))


def _bucket(path: str, header, bounds: tuple[int, ...], start: int, end: int) -> dict:
    """The entries of one byte range, by row block (rows relative to the block), and
    how many lines it held."""
    coords, values, lines = _entries_between(path, header, start, end)
    which = np.searchsorted(bounds, coords[0], side="right") - 1
    order = np.argsort(which, kind="stable")
    cuts = np.searchsorted(which[order], np.arange(len(bounds)))
    pieces = {}
    for b in range(len(bounds) - 1):
        take = order[cuts[b]:cuts[b + 1]]
        pieces[b] = (coords[:, take] - np.array([[bounds[b]], [0]]), values[take])
    return {"pieces": pieces, "lines": lines}


def _line_count(path: str, declared: int, buckets: list[dict]) -> int:
    """The file's entry count, checked against its size line (a cut file fails here
    rather than giving a matrix with entries missing)."""
    found = sum(b["lines"] for b in buckets)
    if found != declared:
        raise ValueError(f"{path}: the size line declares {declared} entries but the file "
                         f"holds {found}")
    return found


def _assemble(format: Format, dtype: np.dtype, index_dtype: str | None,
              shape: tuple[int, int], block: int, inputs: tuple) -> object:
    _, buckets = inputs
    parts = [((0, 0), Block(same, _Entries(*b["pieces"][block]))) for b in buckets]
    return merged(format, dtype, index_dtype, shape, parts)


class _Entries:
    """Coordinates and values that ``merged`` reads as it reads a Tensor's."""

    def __init__(self, coords: np.ndarray, values: np.ndarray) -> None:
        self.coords, self.values = coords, values

    def to_coo(self) -> tuple[np.ndarray, np.ndarray]:
        return self.coords, self.values


def from_mtx(path: PathLike, rows_per_block: int, format: Format | str = "csr",
             dtype=None, index_dtype: str | None = None,
             chunk_bytes: int = 64 << 20) -> Partitioned:
    """Row blocks of one Matrix Market coordinate file, read by tasks each parsing
    ``chunk_bytes`` of it (entries may come in any order, so every row block gathers
    its entries from every range: the whole matrix passes through the workers' memory;
    for a matrix larger than that, ``save_blocks`` pieces of it and use ``from_files``).
    A gzipped file cannot be read from an offset: decompress it, or use ``ls.read``."""
    import dask  # dask: the optional extra

    name = os.fspath(path)
    if name.lower().endswith(".gz"):
        raise ValueError(f"{name}: a gzipped file cannot be read in byte ranges; "
                         "decompress it first (or read it whole with ls.read)")
    header = _mtx_header(name)
    if header.layout != "coordinate":
        raise ValueError(f"{name}: an 'array' (dense) Matrix Market file; read it with "
                         "ls.read")
    if header.symmetry not in ("general", "symmetric", "skew-symmetric"):
        raise ValueError(f"{name}: {header.symmetry} files are not read in chunks")
    if chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes is a positive number of bytes, not {chunk_bytes}")
    size = os.path.getsize(name)
    bounds = uniform_bounds(header.shape[0], rows_per_block)
    edges = list(range(header.data_offset, size, chunk_bytes)) + [size]
    buckets = [dask.delayed(_bucket)(name, header, bounds, lo, hi)
               for lo, hi in itertools.pairwise(edges)]
    counted = dask.delayed(_line_count)(name, header.entries, buckets)
    value_dtype = np.dtype(dtype) if dtype is not None else np.dtype(FIELDS[header.field])
    fmt = as_format(format, 2)
    blocks = {}
    for b in range(len(bounds) - 1):
        shape = (bounds[b + 1] - bounds[b], header.shape[1])
        blocks[(b, 0)] = Block(functools.partial(_assemble, fmt, value_dtype, index_dtype,
                                                 shape, b), (counted, buckets))
    cols = (0, header.shape[1]) if header.shape[1] else (0, 0)
    return Partitioned(header.shape, (bounds, cols), fmt, value_dtype, index_dtype, blocks)
