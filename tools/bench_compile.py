"""The compile section of ``llvsparse bench``: a cold SpMV compile, one served by the disk
cache, and the call overhead of a 10x10 SpMV against peers."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from .bench_llvsparse import llvsparse_supports_threads
from .bench_numba import numba_loops
from .bench_timing import time_once, time_per_call


def compile_costs(quick: bool) -> dict:
    """Cold SpMV compile (fresh Kernel, in-memory and disk caches bypassed), a compile served
    by the disk cache, and the call overhead of a 10x10 SpMV against peers."""
    import tempfile

    import llvsparse as ls
    from llvsparse.kernel import api

    expr = "y(i) = A(i,j) * x(j)"
    small = sp.random(10, 10, density=0.3, format="csr", random_state=3)
    A10 = ls.Tensor.from_scipy(small, format="csr")
    x10 = np.ones(10)
    saved = dict(api._CACHE)
    saved_env = {k: os.environ.get(k) for k in ("LLVSPARSE_CACHE", "LLVSPARSE_CACHE_DIR")}
    out: dict[str, Any] = {}
    extra = {"threads": 1} if llvsparse_supports_threads() else {}
    try:
        def first_call() -> float:
            api._CACHE.clear()
            kernel = ls.compile(expr, A="csr", x="dense")
            return time_once(lambda: kernel(check=False, A=A10, x=x10, **extra))

        os.environ["LLVSPARSE_CACHE"] = "0"
        cold = [first_call() for _ in range(3 if quick else 5)]
        out["cold_compile_s"] = {"median": statistics.median(cold), "min": min(cold)}
        with tempfile.TemporaryDirectory() as folder:
            os.environ["LLVSPARSE_CACHE"] = "1"
            os.environ["LLVSPARSE_CACHE_DIR"] = folder
            first_call()
            disk = [first_call() for _ in range(3 if quick else 5)]
        out["disk_cached_compile_s"] = {"median": statistics.median(disk), "min": min(disk)}
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        api._CACHE.clear()
        api._CACHE.update(saved)
    kernel = ls.compile(expr, A="csr", x="dense")
    kernel(A=A10, x=x10)
    xt = ls.Tensor.from_numpy(x10, format="dense")
    # A Tensor around the caller's own (writeable) arrays: validated in full every call.
    own = ls.Tensor(A10.shape, A10.format, A10.dtype, A10.index_dtype, A10.level_extents,
                    [{k: np.array(a) for k, a in level.items()} for level in A10.level_arrays],
                    A10.params, A10.values.copy())
    calls: dict[str, Callable[[], Any]] = {
        "llvsparse check=False": lambda: kernel(check=False, A=A10, x=xt, **extra),
        "llvsparse check=False, numpy x": lambda: kernel(check=False, A=A10, x=x10, **extra),
        "llvsparse check=True (validation remembered)":
            lambda: kernel(check=True, A=A10, x=xt, **extra),
        "llvsparse check=True, caller's arrays (full validation)":
            lambda: kernel(check=True, A=own, x=xt, **extra),
        "scipy A @ x": lambda: small @ x10,
    }
    try:
        import numba

        f = numba_loops(numba).spmv_csr
        calls["numba loop"] = lambda: f(small.indptr, small.indices, small.data, x10, 10)
    except ImportError:
        pass
    try:
        import graphblas as gb

        gA, gx = gb.io.from_scipy_sparse(small), gb.Vector.from_dense(x10)
        calls["graphblas mxv"] = lambda: gA.mxv(gx).new()
    except ImportError:
        pass
    overhead = {}
    number = 200 if quick else 2000
    for name, call in calls.items():
        call()
        samples = [time_per_call(call, number) for _ in range(7)]
        overhead[name] = {"median_us": statistics.median(samples) * 1e6,
                          "min_us": min(samples) * 1e6}
    out["call_overhead_10x10_spmv"] = overhead
    return out
