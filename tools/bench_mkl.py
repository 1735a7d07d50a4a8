"""Where sparse_dot_mkl finds MKL: ``pip install -e ".[bench]"`` installs the ``mkl``
wheel, whose libmkl_rt lies in the environment's lib folder, which the dynamic loader does
not search, so sparse_dot_mkl failed to load (and the benchmark skipped it) unless MKL_RT
named the library. The benchmark names it, before importing sparse_dot_mkl."""

from __future__ import annotations

import os
import re
from importlib import metadata

_RUNTIME = re.compile(r"libmkl_rt\.so(\.\d+)*$")


def mkl_runtime_path() -> str | None:
    """The libmkl_rt shared library the installed ``mkl`` distribution ships (the one with
    the most version parts when several match, e.g. libmkl_rt.so.2 over libmkl_rt.so), or
    None when that distribution is not installed or ships none."""
    try:
        files = metadata.files("mkl") or []
    except metadata.PackageNotFoundError:
        return None
    found = [os.path.abspath(str(f.locate())) for f in files if _RUNTIME.search(f.name)]
    found = [path for path in found if os.path.isfile(path)]
    return max(found, key=lambda path: (path.count("."), path), default=None)


def set_mkl_rt() -> str | None:
    """Set MKL_RT to the installed mkl wheel's libmkl_rt unless it is set already; returns
    the value it now has (None: not set, no wheel found)."""
    if not os.environ.get("MKL_RT"):
        path = mkl_runtime_path()
        if path is not None:
            os.environ["MKL_RT"] = path
    return os.environ.get("MKL_RT")
