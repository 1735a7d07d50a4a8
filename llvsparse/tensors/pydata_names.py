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
        """The stored entries' coordinates, (order, nnz), sorted in C order; read-only,
        as writing them would not change the tensor."""
        return _read_only(self.to_coo()[0])

    @property
    def data(self) -> np.ndarray:
        """The stored entries' values, in the order of ``coords``; read-only."""
        return _read_only(self.to_coo()[1])

    def to_scipy_sparse(self, accept_fv=None):
        """A scipy.sparse COO matrix of a 2-d tensor. scipy's fill is 0: the tensor's
        fill must be one ``accept_fv`` names (a value or a list; 0 where None, as
        pydata/sparse's), and where it is not 0 only the stored entries go."""
        accepted = [0] if accept_fv is None else np.atleast_1d(accept_fv).tolist()
        fill = self.fill_value
        if not any(fill == v or (np.isnan(fill) and np.isnan(v)) for v in accepted):
            raise ValueError(f"fill_value={fill} but should be in {accepted}. (scipy.sparse "
                             "reads entries not stored as 0; name the fill in accept_fv= "
                             "to convert the stored entries anyway)")
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


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view
