"""Tensor's conversions between formats (``asformat``): scipy's sorts for CSR, CSC and
COO, a compiled copy kernel for other layouts (the public Tensor's ``_kernel_copy``,
frontend/tensor.py: kernels are compiled above this layer), a host sort where storage
orders differ, and the gather plans that let a sealed tensor convert again by gathering
its values; and between value dtypes (``astype``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..formats.interpret import evaluate_expr
from ..formats.registry import get_level
from ..ir.errors import ScheduleError
from ..ir.types import fill_key
from .convert import scipy_conversion, scipy_pair
from .format import Format, Level, as_format
from .made_as import tensor_class
from .ordering import most_children
from .value_types import checked_value_dtype

if TYPE_CHECKING:
    from .tensor import StoredTensor


class FormatConversions:
    """Tensor's conversion methods (a part of it, kept in a module of its own)."""

    def asformat(self, format) -> StoredTensor:
        """Convert through a compiled copy kernel (or a named packer)."""
        return self._convert(as_format(format, self.order), check=True)

    def astype(self, dtype, copy: bool = True) -> StoredTensor:
        """The values cast to ``dtype`` as numpy casts them, the fill value too, in the
        same format (the index arrays shared); this tensor where ``copy=False`` and the
        dtype is its own."""
        dtype = checked_value_dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        if dtype.kind != "f" and not np.isfinite(self.fill_value):
            raise ValueError(f"the fill value {self.fill_value} cannot be cast to {dtype}")
        fill = np.asarray(self.fill_value, self.dtype).astype(dtype).item()
        cast = tensor_class()(self.shape, self.format.with_fill(fill), dtype,
                              self.index_dtype, self.level_extents, self.level_arrays,
                              self.params, self.values.astype(dtype), name=self.name)
        return cast._seal()._mark_valid() if self.__dict__.get("_sealed") else cast

    def _convert(self, fmt: Format, check: bool, resort: bool = True) -> StoredTensor:
        """``asformat``; ``check=False`` skips validating this tensor's arrays (for
        tensors packed here, whose validation cost more than the copy: 1.1 s of a 1.5 s
        CSR conversion of 4M entries). ``resort=False``: this tensor's entries are
        already in ``fmt``'s order, so a copy that cannot be scheduled is final."""
        if fmt.layout_key() == self.format.layout_key() and fmt.fill == 0:
            return self  # (a conversion keeps the fill value)
        if fmt.fill != 0 and fill_key(fmt.fill) != fill_key(self.fill_value):
            raise ValueError(f"asformat keeps the fill value ({self.fill_value}); to store "
                             f"against {fmt.fill}, use Tensor.from_numpy(t.to_numpy(), "
                             f"format, fill={fmt.fill!r})")
        fmt = fmt.with_fill(self.fill_value)
        if fmt == self.format:
            return self
        layouts = scipy_pair(self, fmt)
        if layouts is not None:  # CSR, CSC, COO: scipy's counting sorts
            if check:
                self.validate()
            if layouts[0].canonical and self._sealed_state() is not None:
                return self._sorted_into(fmt)  # a gather of the values, once planned
            return scipy_conversion(self, fmt, *layouts)
        if fmt.has_hidden_levels or self.order == 0 or self.dtype.kind == "c":
            return self._sorted_into(fmt)  # (complex values: no copy kernel holds them)
        try:
            result = self._kernel_copy(self._with_packed_params(fmt), check)
        except ScheduleError as error:
            if not resort:
                raise ScheduleError(f"cannot pack a tensor into {fmt}: {error}") from None
            # The storage orders differ (e.g. row-major to column-major): sort on the host.
            return self._sorted_into(fmt)
        result.name = self.name
        result.format = fmt  # parameters chosen from the data are the tensor's, not the format's
        return result

    def _kernel_copy(self, fmt: Format, check: bool) -> StoredTensor:
        """This tensor copied into ``fmt`` by a compiled kernel (ScheduleError where none
        can be scheduled): the public Tensor's, which sits above the kernel layer."""
        raise TypeError(f"a {type(self).__name__} cannot compile the copy into {fmt!r}; "
                        "tensors are made as llvsparse.Tensor, which can")

    def _sorted_into(self, fmt: Format) -> StoredTensor:
        """``fmt`` packed from this tensor's entries sorted on the host. A sealed tensor's
        index arrays cannot change, so where each entry of the result takes its value
        from is remembered, and converting it again (a transposed operand, on every
        call) gathers its current values: 2M entries in 15 ms rather than 250."""
        template, sources = self._remembered_plan(fmt) or (None, None)
        if template is None and self.dtype.kind == "c" and self.order:
            return self._padded_gather(fmt)
        if template is None:
            coords, values = self.to_coo()
            return tensor_class().from_coo(coords, values, self.shape, fmt, self.dtype,
                                           self.index_dtype, self.name, self.fill_value)
        return self._gathered(template, sources)

    def _remembered_plan(self, fmt: Format) -> tuple[StoredTensor | None, np.ndarray | None] | None:
        """``_gather_plan(fmt)``, remembered while this tensor is sealed (keyed by its
        index arrays, not its values, plus extents, parameters and ``fmt``); None when
        nothing can be kept."""
        state = self._sealed_state()
        if state is None or self.order == 0:
            return None
        key = (SameObjects(tuple(state[0])[:-1]), state[1:], fmt)
        memo = self.__dict__.get("_sorted_memo")
        if memo is None or memo[0] != key:
            memo = self._sorted_memo = (key, *self._gather_plan(fmt))
        return memo[1], memo[2]

    def _padded_gather(self, fmt: Format) -> StoredTensor:
        """``fmt`` holding this tensor's (unique) entries where the format pads with
        entries it was not given (a dense level): their positions packed by a kernel
        (int64, which kernels hold, unlike complex), each padded entry the fill."""
        coords, positions = self._stored_entries()
        template = tensor_class().from_coo(coords, positions.astype(np.int64) + 1, self.shape,
                                           fmt.with_fill(0.0), "int64", self.index_dtype)
        sources = template.values - 1
        values = np.full(len(sources), np.asarray(self.fill_value, self.dtype))
        values[sources >= 0] = self.values[sources[sources >= 0]]
        return tensor_class()(self.shape, template.format, self.dtype, self.index_dtype,
                              template.level_extents, template.level_arrays, template.params,
                              values, fill=self.fill,
                              name=self.name)._seal()._mark_valid()

    def _gathered(self, template: StoredTensor, sources: np.ndarray) -> StoredTensor:
        """``template``'s layout holding this tensor's values at ``sources``."""
        return tensor_class()(self.shape, template.format, self.dtype, self.index_dtype,
                              template.level_extents, template.level_arrays, template.params,
                              self.values[sources], fill=self.fill,
                              name=self.name)._seal()._mark_valid()

    def _gather_plan(self, fmt: Format) -> tuple[StoredTensor | None, np.ndarray | None]:
        """``fmt``'s index arrays for this tensor's entries, and the value position each
        of its entries reads; (None, None) where entries are summed or padded, so that a
        result is not a plain gather."""
        layouts = scipy_pair(self, fmt)
        if layouts is not None and layouts[0].canonical:  # no entries summed
            template = scipy_conversion(self, fmt, *layouts, positions=True)
            return template, template.values
        coords, positions = self._stored_entries()
        # Positions plus one (so that none is 0) packed in place of the values: where no
        # two entries share coordinates, each packed value says where its value is.
        template = tensor_class().from_coo(coords, positions.astype(np.int64) + 1, self.shape,
                                           fmt.with_fill(0.0), "int64", self.index_dtype,
                                           self.name)
        if len(template.values) != len(positions):
            return None, None
        return template, template.values - 1

    def _with_packed_params(self, fmt: Format) -> Format:
        """``fmt`` with each parameter it leaves open, and whose level says how to choose
        it from data (``packed`` in the YAML), set from this tensor's entries."""
        open_params = {k: {p: expr for p, (expr, _) in get_level(lv.kind).packed_params.items()
                           if p not in lv.params} for k, lv in enumerate(fmt.levels)}
        if not any(open_params.values()):
            return fmt
        children = most_children(self.to_coo()[0], [lv.mode for lv in fmt.levels])
        levels = list(fmt.levels)
        for k, packed in open_params.items():
            level = levels[k]
            env = {"N": self.shape[level.mode], "max_children": children[k]}
            chosen = {p: evaluate_expr(expr, env) for p, expr in packed.items()}
            levels[k] = Level(level.kind, level.mode, level.properties,
                              {**level.params, **chosen}, level.block, level.inner)
        return Format(levels, name=fmt.name)


class SameObjects(tuple):
    """A tuple of objects that compares equal only to one holding the same objects."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SameObjects) and len(self) == len(other) and \
            all(a is b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]
