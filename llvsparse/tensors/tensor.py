"""StoredTensor: shape, format, dtypes and the numpy arrays of every level, and all a
tensor does without compiling a kernel. The public Tensor (frontend/tensor.py) adds
operators, indexing and item assignment, writing files and conversions by a compiled
copy kernel; tensors are made as it (made_as.py) wherever a layer beneath builds one."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from ..abi.runtime import DescriptorHolder
from ..backends.cuda.driver import device
from ..formats.registry import generation as registry_generation
from . import convert
from .describe import tensor_repr
from .dlpack_tensor import DLPackOps
from .format import Format, as_format, checked_fill, named_format
from .gpu_resident import DeviceTensor
from .ordering import sorted_unique
from .packers import PACKERS, pack_bcsr
from .pydata_names import PydataNames
from .scipy_input import scipy_entries
from .tensor_convert import FormatConversions
from .tensor_pickle import restore_tensor, tensor_state
from .tensor_validation import ValidationState
from .value_types import checked_index_dtype, checked_shape, checked_value_dtype
from .walk import entries_per_coordinate, walk_levels


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


class StoredTensor(ValidationState, FormatConversions, PydataNames, DLPackOps):
    """A tensor stored level by level.

    ``level_arrays[k]`` maps the array names declared by level k's YAML definition to
    numpy arrays (a shared array is the same object in every level that declares it).
    Instances are the public Tensor (frontend/tensor.py), which adds what computes.
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
                 name: str | None = None, fill=None) -> StoredTensor:
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
    def _coo(cls, coords, values, shape, modes, idx, name, fill: float = 0.0) -> StoredTensor:
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
    def _pack_named(cls, fmt: Format, coords, values, shape, idx, name) -> StoredTensor:
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
                   name: str | None = None, fill=None) -> StoredTensor:
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
    def _wrap_dense(cls, array, fmt: Format, dtype, index_dtype, name) -> StoredTensor:
        """Row-major dense storage is the array itself: no copy when it is contiguous."""
        values = np.ascontiguousarray(array, dtype=checked_value_dtype(dtype or array.dtype))
        idx = checked_index_dtype(index_dtype, *array.shape)
        return cls(array.shape, fmt, values.dtype, idx, list(array.shape),
                   [{} for _ in fmt.levels], [{} for _ in fmt.levels], values.reshape(-1),
                   name=name)

    @classmethod
    def from_scipy(cls, matrix, format="csr", dtype=None, index_dtype=None,
                   name: str | None = None, fill=None) -> StoredTensor:
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
                    name: str | None = None) -> StoredTensor:
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
        import sparse  # pydata/sparse: an optional package

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
                      ) -> Callable[[np.ndarray], StoredTensor]:
        """A maker of outputs whose levels need no arrays, around preallocated values (the
        fast path of a kernel call: no validation, no kernel-owned memory to adopt). The
        fields every such output shares are worked out once, here, not per call; so are
        its level parameters, which no kernel changes."""
        index_dtype = np.dtype(ttype.index_dtype)
        shared = {"shape": shape, "format": fmt, "index_dtype": index_dtype,
                  "level_extents": extents, "name": None,
                  "generation": registry_generation()}
        levels = range(len(extents))

        def make(values: np.ndarray) -> StoredTensor:
            tensor = cls.__new__(cls)
            fields = tensor.__dict__
            fields.update(shared)
            fields.update(dtype=values.dtype, values=values,
                          level_arrays=[{} for _ in levels], params=params)
            return tensor
        return make

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

