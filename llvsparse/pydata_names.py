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

    def to_scipy_sparse(self, accept_fv=None):
        """A scipy.sparse COO matrix of a 2-d tensor. scipy's fill is 0: another fill
        is refused unless ``accept_fv`` names it, and then only the stored entries go."""
        accepted = [0, *np.atleast_1d(accept_fv if accept_fv is not None else [])]
        if not any(self.fill_value == v or (np.isnan(self.fill_value) and np.isnan(v))
                   for v in accepted):
            raise ValueError(f"this tensor's fill value is {self.fill_value}, not 0; pass "
                             "accept_fv= to convert its stored entries anyway")
        if self.fill_value == 0:
            return self.to_scipy("coo")
        import scipy.sparse  # loaded on first use, as convert.to_scipy does

        if len(self.shape) != 2:
            raise ValueError(f"scipy.sparse holds matrices, not order {len(self.shape)}")
        return scipy.sparse.coo_matrix((self.data, tuple(self.coords)), shape=self.shape)

    def tocsr(self):
        return self.to_scipy("csr")

    def tocsc(self):
        return self.to_scipy("csc")
