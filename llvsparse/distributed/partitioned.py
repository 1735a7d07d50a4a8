"""A tensor kept as a grid of blocks, each an llvsparse Tensor made inside a Dask task.

A block is a recipe, not a value: ``Block(load, arg)`` is turned into a Tensor by
``load(arg)`` inside the task that uses it, where ``arg`` may be a Dask object (a chunk
of a dask array, a block a kernel computed) or a plain value (a file name). A block kept
on disk is therefore read by the task that multiplies it and dropped when that task ends:
no task holds more than its own blocks, which is what lets a matrix larger than a
worker's memory be multiplied within it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..frontend.tensor import Tensor
from ..tensors.coerce import is_foreign_sparse, is_pydata_sparse, is_scipy_sparse
from ..tensors.format import Format, as_format

Bounds = tuple[int, ...]  # block boundaries along one mode: 0 = b[0] < b[1] < ... = extent


@dataclass(frozen=True)
class Block:
    """What a task calls to get a block: ``load(arg)`` gives a Tensor."""

    load: Callable[[object], Tensor]
    arg: object


def tensor_bytes(tensor: Tensor) -> int:
    """The bytes of a tensor's index and value arrays: what Dask's scheduler weighs when
    it decides where a task runs and whether moving its inputs is worth it."""
    arrays = [a for level in tensor.level_arrays for a in level.values()] + [tensor.values]
    return sum(int(getattr(a, "nbytes", 0)) for a in arrays) + 1000


def _register_sizeof() -> None:
    """Dask sizes objects it does not know by ``sys.getsizeof``: about 50 bytes for a
    Tensor. Its scheduler then ran every SpMV task of a LocalCluster on the worker that
    held the 40 MB x and moved the 75 MB blocks there (transfers of 3 s, runs at half
    the speed of one process): a block's size is its arrays'."""
    from dask.sizeof import sizeof  # dask: the optional extra llvsparse[dask]

    sizeof.register(Tensor)(tensor_bytes)


_register_sizeof()


def pack(format: Format, dtype: np.dtype, index_dtype: str | None, chunk: object) -> Tensor:
    """A chunk (scipy.sparse, pydata sparse, numpy or a Tensor) packed into ``format``."""
    if isinstance(chunk, Tensor):
        if chunk.dtype != dtype:
            chunk = Tensor.from_coo(*chunk.to_coo(), chunk.shape, chunk.format, dtype,
                                    index_dtype)
        return chunk.asformat(format)
    if is_scipy_sparse(chunk):
        return Tensor.from_scipy(chunk, format, dtype, index_dtype)
    if is_pydata_sparse(chunk):
        return Tensor.from_pydata(chunk, format, dtype, index_dtype)
    return Tensor.from_numpy(np.asarray(chunk), format, dtype, index_dtype)


def same(tensor: Tensor) -> Tensor:
    """The loader of a block that is already a Tensor (a kernel's result)."""
    return tensor


def merged(format: Format, dtype: np.dtype, index_dtype: str | None, shape: tuple[int, ...],
           parts: Sequence[tuple[tuple[int, ...], Block]]) -> Tensor:
    """One block made of several, each placed at its offset: the coarser partition two
    operands agree on when their boundaries differ."""
    coords, values = [], []
    for offset, block in parts:
        c, v = block.load(block.arg).to_coo()
        coords.append(c + np.asarray(offset, dtype=np.int64)[:, None])
        values.append(v)
    order = len(shape)
    all_coords = np.hstack(coords) if coords else np.zeros((order, 0), np.int64)
    all_values = np.concatenate(values) if values else np.zeros(0, dtype)
    return Tensor.from_coo(all_coords, all_values, shape, format, dtype, index_dtype)


@dataclass(frozen=True)
class Partitioned:
    """A tensor of ``shape`` in blocks: ``bounds[m]`` splits mode ``m``, and
    ``blocks[(b0, b1, ...)]`` is the block between those boundaries. Every block has
    ``format``, ``dtype`` and ``index_dtype`` (None: what packing picks), so one compiled
    kernel serves them all."""

    shape: tuple[int, ...]
    bounds: tuple[Bounds, ...]
    format: Format
    dtype: np.dtype
    index_dtype: str | None
    blocks: dict[tuple[int, ...], Block]

    def __post_init__(self) -> None:
        if len(self.bounds) != len(self.shape):
            raise ValueError(f"{len(self.bounds)} partitions for a tensor of order "
                             f"{len(self.shape)}")
        for mode, (b, extent) in enumerate(zip(self.bounds, self.shape)):
            split = b[0] == 0 and b[-1] == extent and all(lo < hi for lo, hi in
                                                          itertools.pairwise(b))
            if not split and not (extent == 0 and b == (0, 0)):
                raise ValueError(f"mode {mode}: block boundaries {b} do not split "
                                 f"0..{extent} into non-empty blocks")
        missing = set(self.grid_indices()) - set(self.blocks)
        if missing:
            raise ValueError(f"blocks {sorted(missing)[:4]} are missing from the grid")

    @property
    def order(self) -> int:
        return len(self.shape)

    @property
    def grid(self) -> tuple[int, ...]:
        """Blocks per mode."""
        return tuple(len(b) - 1 for b in self.bounds)

    def grid_indices(self) -> list[tuple[int, ...]]:
        return list(itertools.product(*(range(n) for n in self.grid)))

    def block_shape(self, index: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(b[k + 1] - b[k] for b, k in zip(self.bounds, index))

    def coarsened(self, bounds: Sequence[Bounds]) -> Partitioned:
        """The same tensor split only at ``bounds``, a subset of its boundaries per
        mode; a new block is the merge of the old ones it covers (inside its task)."""
        bounds = tuple(tuple(b) for b in bounds)
        if bounds == self.bounds:
            return self
        blocks = {}
        for index in itertools.product(*(range(len(b) - 1) for b in bounds)):
            los = [b[k] for b, k in zip(bounds, index)]
            his = [b[k + 1] for b, k in zip(bounds, index)]
            ranges = [range(old.index(lo), old.index(hi))
                      for old, lo, hi in zip(self.bounds, los, his)]
            parts = [(tuple(old[k] - lo for old, k, lo in zip(self.bounds, sub, los)),
                      self.blocks[sub]) for sub in itertools.product(*ranges)]
            shape = tuple(hi - lo for lo, hi in zip(los, his))
            blocks[index] = Block(functools.partial(merged, self.format, self.dtype,
                                                    self.index_dtype, shape), parts)
        return Partitioned(self.shape, bounds, self.format, self.dtype, self.index_dtype,
                           blocks)

    def to_delayed(self) -> dict[tuple[int, ...], object]:
        """Each block as a ``dask.delayed`` Tensor."""
        import dask  # dask: the optional extra

        return {index: dask.delayed(block.load)(block.arg)
                for index, block in self.blocks.items()}

    def compute(self, **options) -> Tensor:
        """The whole tensor, assembled in this process (it must fit here)."""
        import dask  # dask: the optional extra

        (tensors,) = dask.compute(self.to_delayed(), **options)
        parts = [(tuple(b[k] for b, k in zip(self.bounds, index)), Block(same, t))
                 for index, t in tensors.items()]
        return merged(self.format, self.dtype, self.index_dtype, self.shape, parts)

    def __repr__(self) -> str:
        return (f"Partitioned(shape={self.shape}, grid={self.grid}, format={self.format}, "
                f"dtype={self.dtype})")


def uniform_bounds(extent: int, block: int) -> Bounds:
    """Boundaries every ``block`` along ``extent`` (one block for an empty mode)."""
    if block <= 0:
        raise ValueError(f"a block size is a positive number, not {block}")
    if extent == 0:
        return (0, 0)
    return tuple(range(0, extent, block)) + (extent,)


def partition(value: object, chunks: Sequence[int] | int, format: Format | str = "csr",
              index_dtype: str | None = None) -> Partitioned:
    """A tensor in this process (a Tensor, scipy.sparse or pydata sparse array) split
    into blocks of ``chunks`` (one size per mode, or one for the first mode only)."""
    import dask  # dask: the optional extra

    shape = tuple(int(s) for s in value.shape)
    sizes = [chunks] + list(shape[1:]) if isinstance(chunks, int) else list(chunks)
    if len(sizes) != len(shape):
        raise ValueError(f"{len(sizes)} block sizes for a tensor of order {len(shape)}")
    bounds = tuple(uniform_bounds(n, max(int(c), 1)) for n, c in zip(shape, sizes))
    fmt = as_format(format, len(shape))
    if isinstance(value, Tensor):
        coords, values = value.to_coo()
        dtype = value.dtype
        if fmt.fill != 0 and fmt.with_fill(value.fill_value) != fmt:
            raise ValueError(f"the tensor's fill value is {value.fill_value}, not the "
                             f"format's {fmt.fill}")
        fmt = fmt.with_fill(value.fill_value)  # every block reads the tensor's fill
    elif is_foreign_sparse(value):
        packed = Tensor.from_scipy(value, "coo") if is_scipy_sparse(value) \
            else Tensor.from_pydata(value, "coo")
        (coords, values), dtype = packed.to_coo(), packed.dtype
    else:
        raise TypeError(f"partition takes a Tensor, a scipy.sparse matrix or a pydata "
                        f"sparse COO array, not {type(value).__name__} (a dask array: "
                        "from_dask)")
    dtype = np.dtype(dtype)
    which = np.stack([np.searchsorted(b, c, side="right") - 1
                      for b, c in zip(bounds, coords)]) if len(shape) else coords
    blocks = {}
    for index in itertools.product(*(range(len(b) - 1) for b in bounds)):
        mask = np.all(which == np.asarray(index)[:, None], axis=0)
        lo = np.asarray([b[k] for b, k in zip(bounds, index)], np.int64)[:, None]
        block_shape = tuple(b[k + 1] - b[k] for b, k in zip(bounds, index))
        piece = Tensor.from_coo(coords[:, mask] - lo, values[mask], block_shape, fmt, dtype,
                                index_dtype)
        blocks[index] = Block(same, dask.delayed(piece))  # one key, however many use it
    return Partitioned(shape, bounds, fmt, dtype, index_dtype, blocks)
