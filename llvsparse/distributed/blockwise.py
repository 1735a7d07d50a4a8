"""Index notation over partitioned tensors: one kernel call per tile, as Dask tasks.

Each index variable is split where the partitioned operands that use it are split
(where two disagree, at the boundaries they share: blocks are merged, never cut). A
tile is one block of every split variable; its task calls the kernel on the operands'
blocks (dense operands are rechunked to match). A variable of the left-hand side keeps
tiles apart; one summed over is a reduction: the tiles that differ only in it give
partial results, added pairwise in a tree of tasks. That is exact where the sum
distributes over the right-hand side (a product of factors and sums); any other
expression keeps its summed variables in one block, which is always exact.

The kernel is compiled here, once, for the blocks' formats and dtypes (where an output
format cannot be produced yet, as CSR from SpGEMM, into ``coo-unordered`` and converted
in the task), and enters the graph as one key: a worker receives it once, as the object
code it pickles with (``llvsparse.kernel.pickling``), and runs it without LLVM.
"""

from __future__ import annotations

import functools
import itertools
import operator
import uuid
import weakref
from collections.abc import Callable

import numpy as np

from ..calls.binding import ShapeError
from ..frontend.tensor import Tensor
from ..ir.errors import ScheduleError
from ..ir.notation import operators as ops
from ..ir.notation import syntax as nt
from ..kernel.api import Kernel
from ..kernel.api import evaluate as evaluate_here
from ..notation.parse import parse
from ..tensors.coerce import is_foreign_sparse
from ..tensors.format import Format, as_format
from .partitioned import Block, Partitioned, merged, same

FALLBACK_FORMAT = "coo-unordered"  # what a scattered sparse output is produced in


def _distributes(expr: nt.Expr) -> bool:
    """Whether a sum around ``expr`` may be split into sums of parts: a product (and
    negation, and inner sums) of accesses and literals is linear in every factor."""
    if isinstance(expr, (nt.Access, nt.Literal)):
        return True
    if isinstance(expr, nt.Call):
        return expr.op in (ops.MUL, ops.NEG) and all(_distributes(a) for a in expr.args)
    if isinstance(expr, nt.Reduction):
        return expr.op is ops.ADD and _distributes(expr.body)
    return False


def _is_dask(value: object) -> bool:
    return hasattr(value, "dask") and hasattr(value, "chunks") and hasattr(value, "rechunk")


def _uses(assignment: nt.Assignment) -> dict[str, tuple[str, ...]]:
    """The index variables each input is read at; one access pattern per input."""
    uses: dict[str, tuple[str, ...]] = {}
    for access in assignment.accesses()[1:]:
        names = tuple(v.name for v in access.indices)
        if uses.setdefault(access.tensor, names) != names:
            raise ValueError(f"{access.tensor} is read as {access.tensor}"
                             f"({','.join(uses[access.tensor])}) and as {access}; pass it "
                             "under two names to read it both ways")
    return uses


def _sorted_operands(uses: dict[str, tuple[str, ...]], operands: dict
                     ) -> tuple[dict[str, Partitioned], dict[str, object]]:
    """Partitioned operands, and the dense ones as dask arrays; a sparse operand that
    is not partitioned is refused (which blocks would it have?)."""
    import dask.array as da  # dask: the optional extra llvsparse[dask]

    parts, dense = {}, {}
    for name, value in operands.items():
        if isinstance(value, Partitioned):
            if len(set(uses[name])) != len(uses[name]):
                raise ValueError(f"a partitioned operand read with a repeated index: "
                                 f"{name}({','.join(uses[name])})")
            parts[name] = value
        elif isinstance(value, Tensor) or is_foreign_sparse(value):
            raise TypeError(f"{name}: a sparse operand is partitioned first "
                            f"(llvsparse.distributed.partition or from_dask)")
        else:
            dense[name] = value if _is_dask(value) else \
                da.from_array(np.asarray(value), name=False)  # no hash of its bytes
    return parts, dense


def _extents(uses: dict[str, tuple[str, ...]], shapes: dict[str, tuple[int, ...]]
             ) -> dict[str, int]:
    extents: dict[str, int] = {}
    for name, names in uses.items():
        if len(shapes[name]) != len(names):
            raise ShapeError(f"{name} has shape {shapes[name]} but is read with "
                             f"{len(names)} indices")
        for var, extent in zip(names, shapes[name]):
            if extents.setdefault(var, extent) != extent:
                raise ShapeError(f"index {var} has extent {extents[var]} elsewhere but "
                                 f"{extent} in {name} (shape {shapes[name]})")
    return extents


def _var_bounds(uses: dict[str, tuple[str, ...]], parts: dict[str, Partitioned],
                extents: dict[str, int], summed: set[str], split_sums: bool
                ) -> dict[str, tuple[int, ...]]:
    """Each variable's boundaries: those every partitioned operand using it shares."""
    bounds: dict[str, tuple[int, ...]] = {}
    for var, extent in extents.items():
        shared = None
        for name, part in parts.items():
            for mode, v in enumerate(uses[name]):
                if v == var:
                    here = set(part.bounds[mode])
                    shared = here if shared is None else shared & here
        whole = (0, extent) if extent else (0, 0)
        if shared is None or (var in summed and not split_sums):
            bounds[var] = whole
        else:
            bounds[var] = tuple(sorted(shared)) if extent else whole
    return bounds


# Aligned copies of the dense chunks that arrived unaligned, by the chunk's id, while it
# lives: every tile of a worker reads the same chunk (a 107 MB vector was copied again
# by each task, 0.3 to 1 s of its 1.5).
_ALIGNED: dict[int, np.ndarray] = {}


def _aligned(array: object) -> np.ndarray:
    """``array`` as a C-contiguous, aligned numpy array, copied once per chunk."""
    if not isinstance(array, np.ndarray):
        return np.require(array, requirements="CA")
    if array.flags.aligned and array.flags.c_contiguous:
        return array
    key = id(array)
    copy = _ALIGNED.get(key)
    if copy is None:
        copy = _ALIGNED[key] = np.require(array, requirements="CA")
        weakref.finalize(array, _ALIGNED.pop, key, None)
    return copy


def _apply(kernel: Kernel, names: tuple[str, ...], loaders: tuple, finish: object,
           dense: bool, threads: int | None, *args: object) -> object:
    """One tile: load the blocks, run the kernel; a dense result as a numpy array. The
    operands come as separate arguments: in a tuple, Dask did not see a distributed
    future inside one (a dask array of a scattered x), which was then released before
    the task ran ('lost dependencies').

    The blocks are validated here (once: packed ones are sealed), the dense chunks not:
    the kernel wraps them from numpy arrays of their own shape, so their layout holds by
    construction, and validating one walked all its positions (8 s for a 13.4M vector,
    in every worker). A dense chunk may arrive unaligned (dask.distributed slices arrays
    out of messages), which kernels refuse: it is copied aligned, once (``_aligned``)."""
    tensors = {}
    for name, load, arg in zip(names, loaders, args):
        if load is None:
            tensors[name] = _aligned(arg)
        else:
            tensors[name] = load(arg)
            tensors[name].validate()
    result = kernel(check=False, threads=threads, **tensors)
    if dense:
        return result.to_numpy()
    return result.asformat(finish) if finish is not None else result


def _add_sparse(shape: tuple[int, ...], a: Tensor, b: Tensor) -> Tensor:
    """Two partial results added (coordinates joined, repeats summed). Where their fill
    is not 0, an entry one stores and the other does not is a sum with that fill (inf
    partials: inf), which a kernel computes."""
    if a.fill_value != 0:
        idx = nt.index_vars(" ".join(f"i{k}" for k in range(len(shape))))
        total = nt.Assignment(nt.Access("C", idx), nt.Call(ops.ADD, (nt.Access("A", idx),
                                                                   nt.Access("B", idx))))
        return evaluate_here(total, out_format=a.format, A=a, B=b)
    return merged(a.format, a.dtype, str(a.index_dtype), shape,
                  [((0,) * len(shape), Block(same, a)), ((0,) * len(shape), Block(same, b))])


def _tree(parts: list, combine: Callable) -> object:
    """The partial results added pairwise, level by level (depth log2 of their count)."""
    import dask  # dask: the optional extra

    while len(parts) > 1:
        pairs = [dask.delayed(combine)(a, b) for a, b in zip(parts[::2], parts[1::2])]
        parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


def _compiled(assignment: nt.Assignment, out_format: object, formats: dict,
              dtypes: dict, index_dtypes: dict, dense: bool) -> tuple[Kernel, object]:
    """The kernel, specialized now, and the format its results are converted to in the
    task (None: none). A sparse output the compiler refuses to produce in order is
    produced as ``coo-unordered`` and converted; once it can, the format is used as is."""
    kernel = Kernel(assignment, formats, out_format)
    fills = {n: f.fill for n, f in formats.items() if isinstance(f, Format)}
    try:
        kernel.instance(dtypes, index_dtypes, fills)
        return kernel, None
    except ScheduleError:
        if dense:
            raise
        fallback = Kernel(assignment, formats, FALLBACK_FORMAT)
        fallback.instance(dtypes, index_dtypes, fills)
        return fallback, out_format


def evaluate(assignment: str | nt.Assignment, out_format: object = "dense",
             threads: int | None = 1, **operands):
    """``assignment`` over partitioned tensors (``Partitioned``), dense numpy or dask
    arrays, lazily. A dense result is a dask array; a sparse one a ``Partitioned``
    (``.compute()`` assembles it). ``threads``: the kernel's threads per task (Dask
    runs tasks in parallel already)."""
    import dask  # dask: the optional extra
    import dask.array as da  # dask: the optional extra

    parsed = parse(assignment) if isinstance(assignment, str) else assignment
    uses = _uses(parsed)
    missing = sorted(set(uses) - set(operands))
    extra = sorted(set(operands) - set(uses))
    if missing or extra:
        raise ValueError(f"operands missing: {missing}; not in the expression: {extra}")
    parts, dense = _sorted_operands(uses, operands)
    shapes = {n: tuple(int(s) for s in v.shape) for n, v in {**parts, **dense}.items()}
    extents = _extents(uses, shapes)
    out_vars = tuple(v.name for v in parsed.lhs.indices)
    summed = set(extents) - set(out_vars)
    bounds = _var_bounds(uses, parts, extents, summed, _distributes(parsed.rhs))
    parts = {n: p.coarsened([bounds[v] for v in uses[n]]) for n, p in parts.items()}
    # Not optimized here (the whole graph is, when computed): optimizing each chunk's
    # graph alone dropped a scattered future it held, and the task lost its input.
    chunks = {n: d.rechunk(tuple(tuple(np.diff(bounds[v])) for v in uses[n]))
              .to_delayed(optimize_graph=False) for n, d in dense.items()}

    wants_dense = isinstance(out_format, str) and out_format.lower() == "dense"
    formats = {n: (parts[n].format if n in parts else "dense") for n in uses}
    dtypes = {n: str(np.dtype(v.dtype)) for n, v in {**parts, **dense}.items()}
    index_dtypes = {n: str(p.index_dtype) for n, p in parts.items() if p.index_dtype}
    kernel, finish = _compiled(parsed, out_format, formats, dtypes, index_dtypes, wants_dense)
    out_dtype = np.dtype(kernel.last.dtype)
    kernel_key = dask.delayed(kernel, name=f"llvsparse-kernel-{uuid.uuid4().hex}")

    partials = _tile_tasks(kernel_key, uses, parts, chunks, bounds, out_vars,
                           (finish, wants_dense, threads))

    def block_shape(key: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(bounds[v][k + 1] - bounds[v][k] for v, k in zip(out_vars, key))

    out_shape = tuple(extents[v] for v in out_vars)
    if wants_dense:
        arrays = {key: da.from_delayed(_tree(tasks, operator.add), block_shape(key), out_dtype)
                  for key, tasks in partials.items()}
        if not out_vars:
            return arrays[()]
        grid = tuple(len(bounds[v]) - 1 for v in out_vars)
        return da.block(_nested(grid, arrays, ()))
    out_type = kernel.last.types[kernel.last.arg_order[0]]
    fmt = as_format(out_format, len(out_vars)).with_fill(out_type.fill)  # the blocks' fill
    blocks = {key: Block(same, _tree(tasks, functools.partial(_add_sparse, block_shape(key))))
              for key, tasks in partials.items()}
    return Partitioned(out_shape, tuple(bounds[v] for v in out_vars), fmt, out_dtype, None,
                       blocks)


def _tile_tasks(kernel_key: object, uses: dict[str, tuple[str, ...]],
                parts: dict[str, Partitioned], chunks: dict, bounds: dict[str, tuple[int, ...]],
                out_vars: tuple[str, ...], options: tuple) -> dict[tuple[int, ...], list]:
    """One ``_apply`` task per tile of the split variables, grouped by the block of the
    result it contributes to (several where a summed variable is split)."""
    import dask  # dask: the optional extra

    names = tuple(uses)
    split = [v for v in bounds if len(bounds[v]) > 2]
    partials: dict[tuple[int, ...], list] = {}
    for combo in itertools.product(*(range(len(bounds[v]) - 1) for v in split)):
        at = dict(zip(split, combo))
        loaders, args = [], []
        for n in names:
            index = tuple(at.get(v, 0) for v in uses[n])
            if n in parts:
                block = parts[n].blocks[index]
                loaders.append(block.load)
                args.append(block.arg)
            else:
                loaders.append(None)
                args.append(chunks[n][index])
        task = dask.delayed(_apply)(kernel_key, names, tuple(loaders), *options, *args)
        partials.setdefault(tuple(at.get(v, 0) for v in out_vars), []).append(task)
    return partials


def _nested(grid: tuple[int, ...], items: dict, prefix: tuple[int, ...]) -> list:
    """``items`` by grid index as nested lists, as ``dask.array.block`` takes them."""
    if len(prefix) == len(grid):
        return items[prefix]
    return [_nested(grid, items, (*prefix, k)) for k in range(grid[len(prefix)])]
