"""A Tensor's validation and what it remembers of it: the O(1) checks before native
code, the O(nnz) walk, and the memo that lets sealed tensors skip both while their
arrays, shape, format, dtypes, parameters and extents stay the same (a mixin of
Tensor, kept apart from its construction and layout)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..abi.runtime import make_read_only
from ..formats.interpret import CorruptTensorError
from ..formats.registry import is_shipped
from .lengths import check_lengths, declared_positions
from .tensor_convert import SameObjects
from .validate import check_descriptor
from .walk import Walk, walk_levels

if TYPE_CHECKING:
    from .tensor import StoredTensor


class ValidationState:
    """Validation of a Tensor (its ``format``, ``level_arrays``, ``values``, ...)."""

    __slots__ = ()

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

    def _seal(self) -> StoredTensor:
        """Make the index arrays read-only, with every array they view, so that their
        validation can be remembered (a kernel call on a 4M-entry CSR: 120 ms of
        validation against 8 ms of SpMV). Only for tensors whose arrays llvsparse made:
        no one can hold a writeable view of them yet."""
        for arrays in self.level_arrays:
            for array in arrays.values():
                make_read_only(array)
        self._sealed = True
        return self

    def _mark_valid(self) -> StoredTensor:
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
        format, dtypes, parameters and extents; None unless sealed and still read-only.
        (On every kernel call and eager result: read from the fields directly.)"""
        fields = self.__dict__
        if not fields.get("_sealed"):
            return None
        arrays = [a for level in fields["level_arrays"] for a in level.values()]
        for array in arrays:
            if array.flags.writeable:
                return None
        arrays.append(fields["values"])
        return (SameObjects(arrays), fields["shape"], fields["format"], fields["dtype"],
                fields["index_dtype"], tuple(fields["level_extents"]),
                tuple(tuple(p.items()) for p in fields["params"]))

    def _shape_key(self) -> tuple[tuple, tuple]:
        """Level extents and parameters, as a comparable value."""
        return tuple(self.level_extents), tuple(tuple(p.items()) for p in self.params)


_ARRAY_FREE_VALUES: dict[tuple, tuple[int, int | None]] = {}  # see _validate_array_free
_ARRAY_FREE_MEMO = 1024
