"""Partitioned tensors whose kernels run on Dask (``pip install llvsparse[dask]``).

A ``Partitioned`` tensor is a grid of blocks (row blocks or tiles), each an llvsparse
Tensor in any format, made inside the task that uses it: from a dask array of
scipy.sparse or pydata sparse chunks (``from_dask``), a tensor in this process
(``partition``), a folder of ``.npz``/``.mtx`` blocks (``from_files``, read block by
block, so a matrix larger than a worker's memory works) or one Matrix Market file read
in byte ranges (``from_mtx``). ``evaluate`` runs index notation over them, one kernel
call per tile, with reductions across blocks as trees of tasks; it returns a lazy dask
array (dense results) or a ``Partitioned`` (sparse results). Any Dask scheduler runs
them: the threaded one, or a ``dask.distributed`` cluster.

``import llvsparse`` never imports this module (nor Dask).
"""

from __future__ import annotations

try:
    import dask.array  # noqa: F401  (what every function here builds on)
except ImportError as error:
    raise ImportError("llvsparse.distributed needs Dask: pip install 'llvsparse[dask]'"
                      ) from error

from .blockwise import evaluate
from .partitioned import Partitioned, partition
from .sources import from_dask, from_files, from_mtx, save_blocks

__all__ = ["Partitioned", "evaluate", "from_dask", "from_files", "from_mtx", "partition",
           "save_blocks"]
