"""Tensor: shape, format, dtypes and the numpy arrays of every level."""

from __future__ import annotations

import operator
from collections.abc import Callable
from functools import partial

import numpy as np

from . import convert
from .backends.cuda.driver import device
from .describe import tensor_repr
from .dlpack_tensor import DLPackOps
from .expr_api import access, make_assignment
from .format import Format, as_format, checked_fill, named_format
from .formats.interpret import CorruptTensorError
from .formats.registry import generation as registry_generation
from .formats.registry import is_shipped
from .gpu_resident import DeviceTensor
from .lengths import check_lengths, declared_positions
from .numpy_protocols import ArrayOps
from .ordering import sorted_unique
from .packers import PACKERS, pack_bcsr
from .pickling import restore_tensor, tensor_state
from .pydata_names import PydataNames
from .runtime import DescriptorHolder, make_read_only
from .scipy_input import scipy_entries
from .tensor_convert import FormatConversions, SameObjects
from .validate import check_descriptor
from .walk import Walk, entries_per_coordinate, walk_levels

VALUE_DTYPES = ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint64",
                "uint32", "uint16", "uint8", "bool", "complex128", "complex64")
INDEX_LIMIT = 2**31 - 1


def checked_index_dtype(requested, *sizes: int) -> np.dtype:
    if requested is not None:
        dtype = np.dtype(requested)
        if dtype not in (np.dtype("int32"), np.dtype("int64")):
            raise TypeError(f"index dtype must be int32 or int64, not {dtype}")
        if dtype == np.dtype("int32") and max(sizes, default=0) > INDEX_LIMIT:
            raise ValueError(f"index dtype int32 cannot hold a size of {max(sizes)}; "
                             "use int64")
        return dtype
    return np.dtype("int64") if max(sizes, default=0) >= INDEX_LIMIT else np.dtype("int32")


def checked_shape(shape) -> tuple[int, ...]:
    """``shape`` as non-negative integers; 2.9 is refused rather than truncated to 2."""
    try:
        extents = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"shape must be a sequence of integers, not {shape!r}") from None
    if any(e < 0 for e in extents):
        raise ValueError(f"shape {extents} has a negative extent")
    return extents


def _coordinate_array(coords, order: int, count: int) -> np.ndarray:
    """``coords`` as an (order, count) int64 array. (count, order) pairs and fractional
    coordinates are refused: reshaping the one scrambles entries, and casting the
    other truncates them, both silently."""
    array = np.asarray(coords)
    if order == 1 and array.ndim == 1:
        array = array.reshape(1, -1)
    if array.size == 0 and count == 0:
        return np.zeros((order, 0), np.int64)
    if array.shape != (order, count):
        raise ValueError(f"coords must have shape (order, nnz) = ({order}, {count}) for "
                         f"{count} values, not {array.shape}")
    if array.size and array.dtype.kind not in "iub":
        raise TypeError(f"coordinates must be integers, not {array.dtype}")
    return array.astype(np.int64)


def checked_value_dtype(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if str(dtype) not in VALUE_DTYPES:
        raise TypeError(f"value dtype must be one of {', '.join(VALUE_DTYPES)}, not {dtype}")
    return dtype


class Tensor(FormatConversions, PydataNames, ArrayOps, DLPackOps):
    """A tensor stored level by level.

    ``level_arrays[k]`` maps the array names declared by level k's YAML definition to
    numpy arrays (a shared array is the same object in every level that declares it).
    Operators, reductions and numpy's protocols come from ``ArrayOps`` (numpy_protocols).
    """

    def __init__(self, shape, format: Format, dtype, index_dtype, level_extents,
                 level_arrays, params, values, fill=None, name: str | None = None):
        self.shape = tuple(int(s) for s in shape)
        self.format = format if fill is None else format.with_fill(fill)
        self.dtype = checked_value_dtype(dtype)
        self.index_dtype = np.dtype(index_dtype)
        self.level_extents = [int(e) for e in level_extents]
        self.level_arrays = level_arrays
        self.params = params
        self.values = values
        self.name = name
        self.generation = registry_generation()  # level definitions it was laid out by

    # -- basics -------------------------------------------------------------------------
    @property
    def fill_value(self) -> float:
        """The value of every entry not stored (the format's ``fill``; 0 by default)."""
        return self.format.fill

    @fill_value.setter
    def fill_value(self, value) -> None:
        raise AttributeError(
            "a tensor's fill value is read-only: its stored entries were chosen against it; "
            f"make a tensor with another one (Tensor.from_numpy(t.to_numpy(), fill={value!r}))")

    fill = fill_value  # the older name, read-only as well

    @property
    def order(self) -> int:
        return len(self.shape)

    @property
    def tensor_type(self):
        key = (self.format, self.dtype, self.index_dtype)
        cached = self.__dict__.get("_type_cache")
        if cached is None or any(a is not b for a, b in zip(cached[0], key)):
            cached = (key, self.format.tensor_type(self.dtype.name, self.index_dtype.name))
            self._type_cache = cached
        return cached[1]

    @property
    def nnz(self) -> int:
        """Stored entries (explicit zeros and padding included)."""
        return len(walk_levels(self, check=False).positions)

    __repr__ = tensor_repr
    __getstate__ = tensor_state
    __setstate__ = restore_tensor

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_coo(cls, coords, values, shape, format="coo", dtype=None, index_dtype=None,
                 name: str | None = None, fill=None) -> Tensor:
        """Pack coordinates ((order, nnz), as in pydata/sparse) and values; sums duplicates.
        ``fill``: the value of every entry not given (default: the format's, 0)."""
        shape = checked_shape(shape)
        order = len(shape)
        values = np.asarray(values).reshape(-1)
        coords = _coordinate_array(coords, order, len(values))
        values = values.astype(checked_value_dtype(dtype if dtype is not None else values.dtype))
        for mode, extent in enumerate(shape):
            if coords.shape[1] and (coords[mode].min() < 0 or coords[mode].max() >= extent):
                raise ValueError(f"coordinates of mode {mode} fall outside [0, {extent})")
        fmt = _filled(as_format(format, order), fill, values.dtype)
        idx = checked_index_dtype(index_dtype, *shape, coords.shape[1])
        modes = [lv.mode for lv in fmt.levels if lv.mode is not None]
        coords, values = sorted_unique(coords, values, modes)
        if fmt.has_hidden_levels:
            return cls._pack_named(fmt, coords, values, shape, idx, name)
        source = cls._coo(coords, values, shape, modes, idx, name, fmt.fill)
        if source.format == fmt:
            return source
        # Sorted, unique and in range: valid by construction, and so is its conversion.
        return source._convert(fmt, check=False, resort=False)._mark_valid()

    @classmethod
    def _coo(cls, coords, values, shape, modes, idx, name, fill: float = 0.0) -> Tensor:
        fmt = named_format("coo", len(shape), modes) if shape else Format([])
        arrays: list[dict] = []
        for k, mode in enumerate(modes):
            crd = coords[mode].astype(idx)
            if k == 0:
                arrays.append({"pos": np.array([0, len(values)], dtype=idx), "crd": crd})
            else:
                arrays.append({"crd": crd})
        if not shape:  # a 0-d tensor holds its one value: the fill where none is given
            values = values if len(values) else np.full(1, fill, values.dtype)
        return cls(shape, fmt, values.dtype, idx, [shape[m] for m in modes], arrays,
                   [{} for _ in modes], values, fill, name=name)._seal()._mark_valid()

    @classmethod
    def _pack_named(cls, fmt: Format, coords, values, shape, idx, name) -> Tensor:
        packer = PACKERS.get(fmt.name or "")
        if (fmt.name or "").startswith("bcsr"):
            block = (fmt.levels[0].block, fmt.levels[1].block)
            packer = partial(pack_bcsr, block=block)
        if packer is None:
            raise ValueError(f"cannot pack into {fmt!r}: it has storage-only levels and no "
                             "packer; pack another format and convert with a kernel")
        if fmt.fill != 0:
            raise ValueError(f"{fmt!r} stores padding as zeros, so its fill value must be 0")
        extents, arrays, vals = packer(coords[0], coords[1], values, shape, idx)
        return cls(shape, fmt, values.dtype, idx, extents, arrays,
                   [{} for _ in fmt.levels], vals, name=name)._seal()._mark_valid()

    @classmethod
    def from_numpy(cls, array, format="dense", dtype=None, index_dtype=None,
                   name: str | None = None, fill=None) -> Tensor:
        """Pack a dense array: entries equal to the fill value (``fill``, else the
        format's, 0 by default; NaN equal to NaN) are not stored."""
        array = np.asarray(array)
        fmt = _filled(as_format(format, array.ndim), fill, array.dtype)
        if fmt.layout_key() == named_format("dense", array.ndim).layout_key() and array.ndim:
            return cls._wrap_dense(array, fmt, dtype, index_dtype, name)
        if array.ndim == 0:
            return cls.from_coo(np.zeros((0, 1), np.int64), array.reshape(1), (), fmt,
                                dtype, index_dtype, name)
        stored = _differs(array, fmt.fill)
        coords = np.array(np.nonzero(stored), dtype=np.int64).reshape(array.ndim, -1)
        return cls.from_coo(coords, array[tuple(coords)], array.shape, fmt, dtype,
                            index_dtype, name)

    @classmethod
    def _wrap_dense(cls, array, fmt: Format, dtype, index_dtype, name) -> Tensor:
        """Row-major dense storage is the array itself: no copy when it is contiguous."""
        values = np.ascontiguousarray(array, dtype=checked_value_dtype(dtype or array.dtype))
        idx = checked_index_dtype(index_dtype, *array.shape)
        return cls(array.shape, fmt, values.dtype, idx, list(array.shape),
                   [{} for _ in fmt.levels], [{} for _ in fmt.levels], values.reshape(-1),
                   name=name)

    @classmethod
    def from_scipy(cls, matrix, format="csr", dtype=None, index_dtype=None,
                   name: str | None = None, fill=None) -> Tensor:
        """From any scipy sparse matrix or array, its arrays checked first (a corrupt
        indptr is refused, not silently dropped entries); a numpy array is packed.
        ``fill``: the value the matrix's entries that are not stored stand for (scipy
        says 0; a distance matrix may mean inf)."""
        if isinstance(matrix, np.ndarray):
            return cls.from_numpy(matrix, format, dtype, index_dtype, name, fill)
        coords, values, shape = scipy_entries(matrix)
        return cls.from_coo(coords, values, shape, format, dtype, index_dtype, name, fill)

    @classmethod
    def from_pydata(cls, array, format="coo", dtype=None, index_dtype=None,
                    name: str | None = None) -> Tensor:
        """From a pydata/sparse array (anything with ``coords``, ``data`` and ``shape``;
        GCXS converts through ``tocoo``, DOK through ``to_coo``), keeping its
        ``fill_value``: the entries it does not store hold it."""
        if not hasattr(array, "coords"):
            to_coo = getattr(array, "tocoo", None) or getattr(array, "to_coo", None)
            array = to_coo() if to_coo is not None else array
        return cls.from_coo(array.coords, array.data, array.shape, format, dtype, index_dtype,
                            name, getattr(array, "fill_value", None))

    def to_pydata(self):
        """A pydata/sparse COO array with this tensor's fill value (needs the ``sparse``
        package)."""
        import sparse

        coords, values = self.to_coo()
        return sparse.COO(coords, values, shape=self.shape, has_duplicates=False,
                          sorted=True, fill_value=self.dtype.type(self.fill_value))

    # -- kernel ABI ---------------------------------------------------------------------
    def _flat_params(self) -> list[int]:
        return [int(self.params[k][p]) for k, p in self.tensor_type.param_slots()]

    def holder(self, check_shallow: bool = True) -> DescriptorHolder:
        """The descriptor of this tensor, reused while its format, dtypes, arrays, params
        and extents are the same objects and values (the O(1) checks run once per such
        state). The key names every level's arrays rather than the format's slots: it
        is built on every call, and looking the slots up would double its cost."""
        key = (self.shape, self.format, self.dtype, self.index_dtype, id(self.values),
               *[(name, id(a)) for level in self.level_arrays for name, a in level.items()],
               *[v for p in self.params for v in p.values()], *self.level_extents)
        cached = self.__dict__.get("_holder")
        if cached is not None and cached[0] == key:
            return cached[1]
        if check_shallow:
            self.validate_shallow()
        levels = self.level_arrays
        arrays = [levels[k].get(name) for k, name in self._slot_names()] + [self.values]
        holder = DescriptorHolder(self.level_extents, arrays, self._flat_params())
        self._holder = (key, holder)
        return holder

    def to_device(self, ordinal: int = 0) -> DeviceTensor:
        """A copy of this tensor's arrays on GPU ``ordinal``, which ``target="cuda"``
        kernels read without copying per call (cuda-python: the ``cuda`` extra)."""
        return DeviceTensor(self, self.holder().arrays, device(ordinal))

    def entries_per_first_coordinate(self) -> np.ndarray:
        """Stored entries under each coordinate of the first level (what evens out threads'
        work), kept while the descriptor is."""
        holder = self.holder()
        cached = self.__dict__.get("_entries")
        if cached is None or cached[0] is not holder:
            cached = (holder, entries_per_coordinate(self))
            self._entries = cached
        return cached[1]

    def _slot_names(self) -> list[tuple[int, str]]:
        ttype = self.tensor_type
        cached = self.__dict__.get("_slots")
        if cached is None or cached[0] is not ttype:
            cached = (ttype, [(s.level, s.name) for s in ttype.array_slots()])
            self._slots = cached
        return cached[1]

    @classmethod
    def dense_outputs(cls, shape, fmt: Format, ttype, extents, params: list[dict]
                      ) -> Callable[[np.ndarray], Tensor]:
        """A maker of outputs whose levels need no arrays, around preallocated values (the
        fast path of a kernel call: no validation, no kernel-owned memory to adopt). The
        fields every such output shares are worked out once, here, not per call; so are
        its level parameters, which no kernel changes."""
        index_dtype = np.dtype(ttype.index_dtype)
        shared = {"shape": shape, "format": fmt, "index_dtype": index_dtype,
                  "level_extents": extents, "name": None,
                  "generation": registry_generation()}
        levels = range(len(extents))

        def make(values: np.ndarray) -> Tensor:
            tensor = cls.__new__(cls)
            fields = tensor.__dict__
            fields.update(shared)
            fields.update(dtype=values.dtype, values=values,
                          level_arrays=[{} for _ in levels], params=params)
            return tensor
        return make

    # -- validation ---------------------------------------------------------------------
    def validate_shallow(self) -> None:
        """O(1) checks that always run before native code (see ``validate.py``)."""
        check_descriptor(self)

    def validate(self) -> None:
        """Full O(nnz) check that every read a kernel makes is in bounds and every property
        the format claims holds. Remembered for sealed tensors (see ``_seal``) while their
        index arrays, values array, parameters, extents, shape and format stay the same
        and read-only: the O(1) checks passed for them too, and are not run again."""
        self._validated_walk()

    def _validated_walk(self) -> Walk | None:
        """``validate``, giving the checked walk's entries where it walked. A sealed
        tensor with plugin levels was assembled by their code, so its refusal says so."""
        state = self._sealed_state()
        if state is not None and self.__dict__.get("_validated") == state:
            return None
        self.validate_shallow()
        if not any(self.level_arrays):
            self._validate_array_free()
            return None
        try:
            check_lengths(self)
            walk = walk_levels(self, check=True)
        except CorruptTensorError as error:
            plugins = sorted({lv.kind for lv in self.format.levels if not is_shipped(lv.kind)})
            if state is None or not plugins:
                raise
            raise CorruptTensorError(
                f"{error} (a tensor made through plugin level format(s) "
                f"{', '.join(map(repr, plugins))}, whose functions do not keep the claims "
                "of their format)") from None
        self._validated = state
        return walk

    def _trusted(self) -> bool:
        """Whether scipy and the unchecked walk may read the arrays as they are: sealed,
        and validated or assembled by shipped level formats only. A plugin's assembly
        code is not known to keep its claims: a compressed copy whose append_finalize
        lacked its prefix sum handed scipy a pos that read out of bounds (SIGSEGV)."""
        state = self._sealed_state()
        return state is not None and (self.__dict__.get("_validated") == state or all(
            is_shipped(level.kind) for level in self.format.levels))

    def _validate_array_free(self) -> None:
        """Without index arrays the walk depends only on the format, extents and
        parameters: walk once per such key and remember how many values it addresses and
        how many its levels declare (a dense vector passed as a numpy array is wrapped, so checked, every call)."""
        key = (self.format, self.dtype, self.index_dtype, *self._shape_key())
        known = _ARRAY_FREE_VALUES.get(key)
        if known is None:
            positions = walk_levels(self, check=True).positions
            known = (int(positions.max()) + 1 if len(positions) else 0,
                     declared_positions(self))
            if len(_ARRAY_FREE_VALUES) >= _ARRAY_FREE_MEMO:
                _ARRAY_FREE_VALUES.clear()
            _ARRAY_FREE_VALUES[key] = known
        needed, declared = known
        if len(self.values) < needed:
            raise CorruptTensorError(f"values has {len(self.values)} entries but the levels "
                                     f"address position {needed - 1}")
        if declared is not None and len(self.values) != declared:
            raise CorruptTensorError(f"values has {len(self.values)} entries, but the levels "
                                     f"hold {declared} positions")

    def _seal(self) -> Tensor:
        """Make the index arrays read-only, with every array they view, so that their
        validation can be remembered (a kernel call on a 4M-entry CSR: 120 ms of
        validation against 8 ms of SpMV). Only for tensors whose arrays llvsparse made:
        no one can hold a writeable view of them yet."""
        for arrays in self.level_arrays:
            for array in arrays.values():
                make_read_only(array)
        self._sealed = True
        return self

    def _mark_valid(self) -> Tensor:
        """Remember a sealed tensor as validated without walking it: for tensors packed
        from coordinates that were range-checked, sorted and deduplicated (the first call
        on a 4M-entry CSR from ``from_scipy`` skipped a 0.1-0.4 s walk). Only for
        shipped level formats: a plugin's assembly code is not known to keep its claims,
        so its tensors are walked before their first checked call."""
        if all(is_shipped(level.kind) for level in self.format.levels):
            self._validated = self._sealed_state()
        return self

    def _sealed_state(self) -> tuple | None:
        """What a remembered validation holds for: the arrays (by identity), shape,
        format, dtypes, parameters and extents; None unless sealed and still read-only."""
        if not self.__dict__.get("_sealed"):
            return None
        arrays = [a for level in self.level_arrays for a in level.values()]
        if any(a.flags.writeable for a in arrays):
            return None
        return (SameObjects((*arrays, self.values)), self.shape, self.format, self.dtype,
                self.index_dtype, *self._shape_key())

    def _shape_key(self) -> tuple[tuple, tuple]:
        """Level extents and parameters, as a comparable value."""
        return tuple(self.level_extents), tuple(tuple(p.items()) for p in self.params)

    # -- unpacking ----------------------------------------------------------------------
    def to_coo(self) -> tuple[np.ndarray, np.ndarray]:
        """Stored entries as ((order, n) coordinates, values), duplicates summed, sorted."""
        coords, positions = self._stored_entries()
        values = self.values[positions] if len(positions) else self.values[:0]
        if self.order == 0:
            return coords[:, :1], self.values[:1]
        return sorted_unique(coords, values, list(range(self.order)))

    def _stored_entries(self) -> tuple[np.ndarray, np.ndarray]:
        """Every stored entry's coordinates ((order, n), in storage order, repeats kept)
        and the position of its value; the walk is checked unless the arrays are trusted
        (a coordinate of -1 reached numpy's raw 'invalid entry in coordinates array')."""
        walk = None if self._trusted() else self._validated_walk()
        if walk is None:
            walk = walk_levels(self, check=False)
        coords = np.zeros((self.order, len(walk.positions)), dtype=np.int64)
        for k, level in enumerate(self.format.levels):
            if level.mode is not None:
                scale = level.block if level.block and not level.inner else 1
                coords[level.mode] += walk.coords[k] * scale
        return coords, walk.positions

    def to_numpy(self) -> np.ndarray:
        """A dense array; a view of the values for dense-laid-out tensors (see convert)."""
        return convert.to_numpy(self)

    def to_scipy(self, format: str = "csr"):
        """A scipy.sparse matrix, on this tensor's own arrays where it is laid out as
        CSR, CSC or COO (see convert)."""
        return convert.to_scipy(self, format)

    def write(self, path) -> None:
        """Write to Matrix Market (.mtx[.gz]), FROSTT (.tns[.gz]), .npy or .npz."""
        from .io import write

        write(self, path)

    # -- index notation -----------------------------------------------------------------
    def __getitem__(self, indices):
        """Index notation (``A[i, j]`` with index variables), or a slice of the tensor
        without a copy (``A[2:10:2, :]``, ``A[:, 5]``, ``A[1, 2]``; see views.py)."""
        from . import fancy_index, views

        if views.is_window_key(indices):
            return views.view(self, indices)
        if fancy_index.is_index_key(indices):
            return fancy_index.getitem(self, indices)
        return access(self, indices)

    def __setitem__(self, indices, value) -> None:
        from .api import Kernel
        from .binding import ShapeError

        assignment, objects = make_assignment(self, indices, value)
        inputs = {n: t for n, t in objects.items() if t is not self}
        formats = {n: t.format for n, t in inputs.items()}
        # Indices only affine subscripts use take the assigned tensor's extents (padding).
        plain = {ix for a in assignment.accesses()[1:] for ix in a.indices}
        extents = {v.name: n for v, n in zip(assignment.lhs.indices, self.shape)
                   if v not in plain}
        result = Kernel(assignment, formats, self.format, extents=extents)(**inputs)
        if result.shape != self.shape:
            raise ShapeError(f"the expression gives shape {result.shape}, but the tensor "
                             f"assigned to has shape {self.shape}")
        if result.dtype != self.dtype:
            if not np.can_cast(result.dtype, self.dtype, "same_kind"):
                raise TypeError(f"cannot assign a {result.dtype} result to a {self.dtype} "
                                "tensor (numpy's same_kind rule)")
            result.values = result.values.astype(self.dtype)
            result.dtype = self.dtype
        self.__dict__.update({k: v for k, v in result.__dict__.items() if k != "name"})


def _differs(array: np.ndarray, fill) -> np.ndarray:
    """Where ``array`` is not ``fill``, NaN equal to NaN (part by part for complex)."""
    if array.dtype.kind == "c":
        fill = complex(fill)
        return _differs(array.real, fill.real) | _differs(array.imag, fill.imag)
    return ~np.isnan(array) if np.isnan(fill) else array != fill


def _filled(fmt: Format, fill, dtype) -> Format:
    """``fmt`` with the fill value ``fill`` (None: the format's own), which values of
    ``dtype`` must be able to hold: an int32 tensor cannot have fill NaN."""
    if fill is not None:
        fmt = fmt.with_fill(checked_fill(fill))
    value = fmt.fill
    kind = np.dtype(dtype).kind
    if isinstance(value, complex) and kind != "c":
        raise ValueError(f"a {np.dtype(dtype)} tensor cannot have fill value {value}")
    if kind in "iub" and not (np.isfinite(value) and value == int(value)):
        raise ValueError(f"a {np.dtype(dtype)} tensor cannot have fill value {value}")
    if kind in "iu" and not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:
        raise ValueError(f"a {np.dtype(dtype)} tensor cannot have fill value {value} "
                         "(out of its range)")
    if np.dtype(dtype).kind == "b" and value not in (0, 1):
        raise ValueError(f"a bool tensor's fill value is 0 or 1, not {value}")
    return fmt


_ARRAY_FREE_VALUES: dict[tuple, tuple[int, int | None]] = {}  # see Tensor._validate_array_free
_ARRAY_FREE_MEMO = 1024
