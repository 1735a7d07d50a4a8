"""The names pydata/sparse's COO users read a tensor by: ``coords``, ``data``,
``to_scipy_sparse``, ``tocsr``/``tocsc``. They read the stored entries (sorted, C order)
and say nothing about the fill: a user of ``data`` must read ``fill_value`` too, as in
pydata/sparse.
"""

from __future__ import annotations

import numpy as np


class PydataNames:
    """Mixed into Tensor (which provides ``to_coo`` and ``to_scipy``)."""

    __slots__ = ()

    @property
    def coords(self) -> np.ndarray:
        """The stored entries' coordinates, (order, nnz), sorted in C order."""
        return self.to_coo()[0]

    @property
    def data(self) -> np.ndarray:
        """The stored entries' values, in the order of ``coords``."""
        return self.to_coo()[1]

    def to_scipy_sparse(self):
        """A scipy.sparse COO matrix (2-d tensors whose fill is 0, as scipy has it)."""
        return self.to_scipy("coo")

    def tocsr(self):
        return self.to_scipy("csr")

    def tocsc(self):
        return self.to_scipy("csc")
