"""The numba column of ``llvsparse bench``: plain nested loops over the same storage, as a
numba user would write them (one thread, no prange)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import scipy.sparse as sp

from .bench_kernels import Case, Impl, Prepared, as_dia

_NUMBA: list[SimpleNamespace] = []


def numba_loops(numba: Any) -> SimpleNamespace:
    """Plain nested loops, compiled on first use, as a numba user would write them."""
    if _NUMBA:
        return _NUMBA[0]
    njit = numba.njit

    @njit
    def spmv_csr(indptr, indices, data, x, rows):
        y = np.empty(rows)
        for i in range(rows):
            total = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                total += data[p] * x[indices[p]]
            y[i] = total
        return y

    @njit
    def spmv_coo(row, col, data, x, rows):
        y = np.zeros(rows)
        for p in range(len(data)):
            y[row[p]] += data[p] * x[col[p]]
        return y

    @njit
    def spmv_dia(offsets, data, x, rows):
        y = np.zeros(rows)
        width = data.shape[1]
        cols = x.shape[0]
        for d in range(len(offsets)):
            k = offsets[d]
            lo = max(0, -k)
            hi = min(rows, min(cols, width) - k)
            for i in range(lo, hi):
                y[i] += data[d, i + k] * x[i + k]
        return y

    @njit
    def spmv_ell(cols, vals, x):
        rows, width = cols.shape
        y = np.empty(rows)
        for i in range(rows):
            total = 0.0
            for w in range(width):
                total += vals[i, w] * x[cols[i, w]]
            y[i] = total
        return y

    @njit
    def spmm_csr(indptr, indices, data, B, rows):
        C = np.zeros((rows, B.shape[1]))
        for i in range(rows):
            for p in range(indptr[i], indptr[i + 1]):
                a = data[p]
                j = indices[p]
                for c in range(B.shape[1]):
                    C[i, c] += a * B[j, c]
        return C

    @njit
    def merge(ap, ai, ax, bp, bi, bx, rows, union):
        cp = np.empty(rows + 1, np.int32)
        cp[0] = 0
        for i in range(rows):
            pa, pb, ea, eb = ap[i], bp[i], ap[i + 1], bp[i + 1]
            count = 0
            while pa < ea and pb < eb:
                if ai[pa] == bi[pb]:
                    pa += 1
                    pb += 1
                    count += 1
                elif ai[pa] < bi[pb]:
                    pa += 1
                    count += union
                else:
                    pb += 1
                    count += union
            if union:
                count += (ea - pa) + (eb - pb)
            cp[i + 1] = cp[i] + count
        ci = np.empty(cp[rows], np.int32)
        cx = np.empty(cp[rows])
        for i in range(rows):
            pa, pb, ea, eb = ap[i], bp[i], ap[i + 1], bp[i + 1]
            q = cp[i]
            while pa < ea and pb < eb:
                if ai[pa] == bi[pb]:
                    ci[q] = ai[pa]
                    cx[q] = ax[pa] + bx[pb] if union else ax[pa] * bx[pb]
                    q += 1
                    pa += 1
                    pb += 1
                elif ai[pa] < bi[pb]:
                    if union:
                        ci[q] = ai[pa]
                        cx[q] = ax[pa]
                        q += 1
                    pa += 1
                else:
                    if union:
                        ci[q] = bi[pb]
                        cx[q] = bx[pb]
                        q += 1
                    pb += 1
            if union:
                while pa < ea:
                    ci[q] = ai[pa]
                    cx[q] = ax[pa]
                    q += 1
                    pa += 1
                while pb < eb:
                    ci[q] = bi[pb]
                    cx[q] = bx[pb]
                    q += 1
                    pb += 1
        return cp, ci, cx

    @njit
    def sddmm(indptr, indices, data, U, V):
        out = np.empty(len(data))
        for i in range(len(indptr) - 1):
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                total = 0.0
                for k in range(U.shape[1]):
                    total += U[i, k] * V[j, k]
                out[p] = data[p] * total
        return out

    @njit
    def ttv_csf(i_crd, pos1, pos2, k_crd, vals, c, rows):
        indptr = np.zeros(rows + 1, np.int32)
        for a in range(len(i_crd)):
            indptr[i_crd[a] + 1] = pos1[a + 1] - pos1[a]
        for r in range(rows):
            indptr[r + 1] += indptr[r]
        out = np.empty(len(pos2) - 1)
        for f in range(len(pos2) - 1):
            total = 0.0
            for p in range(pos2[f], pos2[f + 1]):
                total += vals[p] * c[k_crd[p]]
            out[f] = total
        return indptr, out

    @njit
    def ttv_coo(i, j, k, vals, c, rows):
        indptr = np.zeros(rows + 1, np.int32)
        count = 0
        for p in range(len(vals)):
            if p == 0 or i[p] != i[p - 1] or j[p] != j[p - 1]:
                indptr[i[p] + 1] += 1
                count += 1
        for r in range(rows):
            indptr[r + 1] += indptr[r]
        cols = np.empty(count, np.int32)
        out = np.zeros(count)
        q = -1
        for p in range(len(vals)):
            if p == 0 or i[p] != i[p - 1] or j[p] != j[p - 1]:
                q += 1
                cols[q] = j[p]
            out[q] += vals[p] * c[k[p]]
        return indptr, cols, out

    @njit
    def mttkrp_csf(i_crd, pos1, k_crd, pos2, l_crd, vals, C, D, rows):
        rank = C.shape[1]
        out = np.zeros((rows, rank))
        tmp = np.empty(rank)
        for a in range(len(i_crd)):
            i = i_crd[a]
            for f in range(pos1[a], pos1[a + 1]):
                tmp[:] = 0.0
                for p in range(pos2[f], pos2[f + 1]):
                    v = vals[p]
                    lrow = l_crd[p]
                    for r in range(rank):
                        tmp[r] += v * D[lrow, r]
                k = k_crd[f]
                for r in range(rank):
                    out[i, r] += tmp[r] * C[k, r]
        return out

    @njit
    def mttkrp_coo(i, k, l, vals, C, D, rows):
        rank = C.shape[1]
        out = np.zeros((rows, rank))
        for p in range(len(vals)):
            v = vals[p]
            for r in range(rank):
                out[i[p], r] += v * C[k[p], r] * D[l[p], r]
        return out

    loops = SimpleNamespace(**{f.__name__: f for f in (
        spmv_csr, spmv_coo, spmv_dia, spmv_ell, spmm_csr, merge, sddmm, ttv_csf, ttv_coo,
        mttkrp_csf, mttkrp_coo)})
    _NUMBA.append(loops)
    return loops


def csf_arrays(coords: np.ndarray) -> tuple[np.ndarray, ...]:
    """CSF of sorted unique coordinates: (i_crd, pos1, j_crd, pos2, k_crd)."""
    nnz = coords.shape[1]
    fiber = np.ones(nnz, dtype=bool)
    fiber[1:] = (coords[0, 1:] != coords[0, :-1]) | (coords[1, 1:] != coords[1, :-1])
    fiber_starts = np.flatnonzero(fiber)
    fiber_i = coords[0, fiber_starts]
    slice_new = np.ones(len(fiber_starts), dtype=bool)
    slice_new[1:] = fiber_i[1:] != fiber_i[:-1]
    slice_starts = np.flatnonzero(slice_new)
    i32 = np.int32
    return (fiber_i[slice_starts].astype(i32),
            np.append(slice_starts, len(fiber_starts)).astype(i32),
            coords[1, fiber_starts].astype(i32), np.append(fiber_starts, nnz).astype(i32),
            coords[2].astype(i32))


def ell_arrays(A: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Row-major ELLPACK: (rows, width) columns and values, padded with (0, 0.0)."""
    counts = np.diff(A.indptr)
    width = int(counts.max()) if A.nnz else 0
    rows = np.repeat(np.arange(A.shape[0]), counts)
    slot = np.arange(A.nnz) - A.indptr[rows]
    cols = np.zeros((A.shape[0], width), np.int32)
    vals = np.zeros((A.shape[0], width))
    cols[rows, slot] = A.indices
    vals[rows, slot] = A.data
    return cols, vals


def numba_impl(numba: Any) -> Impl:
    """Hand-written numba loops over the same storage (one thread, no prange)."""

    def loops() -> SimpleNamespace:
        return numba_loops(numba)

    def spmv_csr(case: Case) -> Prepared:
        A, x, f = case.ops["A"], case.ops["x"], loops().spmv_csr
        return Prepared(lambda: f(A.indptr, A.indices, A.data, x, A.shape[0]), lambda r: r)

    def spmv_coo(case: Case) -> Prepared:
        A, x, f = case.ops["A"].tocoo(), case.ops["x"], loops().spmv_coo
        row, col = A.row.astype(np.int32), A.col.astype(np.int32)
        return Prepared(lambda: f(row, col, A.data, x, A.shape[0]), lambda r: r)

    def spmv_dia(case: Case) -> Prepared:
        A, x, f = as_dia(case.ops["A"]), case.ops["x"], loops().spmv_dia
        offsets = A.offsets.astype(np.int64)
        data = np.ascontiguousarray(A.data)
        return Prepared(lambda: f(offsets, data, x, A.shape[0]), lambda r: r)

    def spmv_ell(case: Case) -> Prepared:
        cols, vals = ell_arrays(case.ops["A"])
        x, f = case.ops["x"], loops().spmv_ell
        return Prepared(lambda: f(cols, vals, x), lambda r: r)

    def spmm(case: Case) -> Prepared:
        A, B, f = case.ops["A"], case.ops["B"], loops().spmm_csr
        return Prepared(lambda: f(A.indptr, A.indices, A.data, B, A.shape[0]), lambda r: r)

    def elementwise(union: int) -> Callable[[Case], Prepared]:
        def prepare(case: Case) -> Prepared:
            A, B, f = case.ops["A"], case.ops["B"], loops().merge

            def call() -> tuple:
                return f(A.indptr, A.indices, A.data, B.indptr, B.indices, B.data,
                         A.shape[0], union)

            return Prepared(call, lambda r: sp.csr_matrix((r[2], r[1], r[0]), shape=A.shape))
        return prepare

    def sddmm(case: Case) -> Prepared:
        S, U, V, f = case.ops["S"], case.ops["U"], case.ops["V"], loops().sddmm
        return Prepared(lambda: f(S.indptr, S.indices, S.data, U, V),
                        lambda r: sp.csr_matrix((r, S.indices, S.indptr), shape=S.shape))

    def ttv_csf(case: Case) -> Prepared:
        ops = case.ops
        i_crd, pos1, j_crd, pos2, k_crd = csf_arrays(ops["coords"])
        shape, vals, c, f = ops["shape"], ops["values"], ops["c"], loops().ttv_csf

        def call() -> tuple:
            indptr, out = f(i_crd, pos1, pos2, k_crd, vals, c, shape[0])
            return indptr, j_crd, out  # the output's columns are the CSF's j level

        return Prepared(call, lambda r: sp.csr_matrix((r[2], r[1], r[0]), shape=shape[:2]))

    def ttv_coo(case: Case) -> Prepared:
        ops = case.ops
        i, j, k = (ops["coords"][m].astype(np.int32) for m in range(3))
        shape, vals, c, f = ops["shape"], ops["values"], ops["c"], loops().ttv_coo
        return Prepared(lambda: f(i, j, k, vals, c, shape[0]),
                        lambda r: sp.csr_matrix((r[2], r[1], r[0]), shape=shape[:2]))

    def mttkrp_csf(case: Case) -> Prepared:
        ops = case.ops
        i_crd, pos1, k_crd, pos2, l_crd = csf_arrays(ops["coords"])
        vals, C, D, rows, f = ops["values"], ops["C"], ops["D"], ops["shape"][0], \
            loops().mttkrp_csf
        return Prepared(lambda: f(i_crd, pos1, k_crd, pos2, l_crd, vals, C, D, rows),
                        lambda r: r)

    def mttkrp_coo(case: Case) -> Prepared:
        ops = case.ops
        i, k, l = (ops["coords"][m].astype(np.int32) for m in range(3))
        vals, C, D, rows, f = ops["values"], ops["C"], ops["D"], ops["shape"][0], \
            loops().mttkrp_coo
        return Prepared(lambda: f(i, k, l, vals, C, D, rows), lambda r: r)

    kernels = {"spmv_csr": spmv_csr, "spmv_coo": spmv_coo, "spmv_dia": spmv_dia,
               "spmv_ell": spmv_ell, "spmm": spmm, "spadd": elementwise(1),
               "hadamard": elementwise(0), "sddmm": sddmm, "ttv_csf": ttv_csf,
               "ttv_coo": ttv_coo, "mttkrp_csf": mttkrp_csf, "mttkrp_coo": mttkrp_coo}
    return Impl("numba", "numba", 1, kernels)
