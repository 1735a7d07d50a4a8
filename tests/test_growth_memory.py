"""A large output grows without holding two copies of its arrays: a buffer of 4 MiB or
more grows through realloc (its pages remapped), so the first SpGEMM call of 2.6 million
entries, whose arrays last doubled near its end, peaks at 1.24x its inputs and output
(1.74x before, copying as it grew), and what it returns still matches scipy."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import scipy.sparse as sp

import llvsparse as ls

SCRIPT = textwrap.dedent("""
    import ctypes, ctypes.util, gc, json, sys
    from pathlib import Path
    import numpy as np, scipy.sparse as sp
    import llvsparse as ls

    def status(field):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

    def nbytes(m):
        return m.data.nbytes + m.indices.nbytes + m.indptr.nbytes

    rng = np.random.default_rng(0)
    rows, per_row = 40_000, 8
    a = sp.csr_matrix((rng.random(rows * per_row), (rng.integers(0, rows, rows * per_row),
                       rng.integers(0, rows, rows * per_row))), shape=(rows, rows))
    a.sum_duplicates()
    a.indices, a.indptr = a.indices.astype(np.int32), a.indptr.astype(np.int32)
    b = sp.csr_matrix(a.T)
    b.sort_indices()
    b.indices, b.indptr = b.indices.astype(np.int32), b.indptr.astype(np.int32)
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", B="csr", C="csr")
    tiny = sp.random(8, 8, density=0.3, format="csr", random_state=0)
    kernel(A=tiny, B=tiny, threads=1)
    ta, tb = ls.Tensor.from_scipy(a, "csr"), ls.Tensor.from_scipy(b, "csr")
    gc.collect()
    ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)
    before = status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    c = kernel(A=ta, B=tb, threads=1)
    rise = status("VmHWM") - before
    got = c.to_scipy()
    expected = sp.csr_matrix(a @ b)
    expected.sort_indices()
    inputs = nbytes(a) + nbytes(b)
    print(json.dumps({"ratio": (inputs + rise) / (inputs + nbytes(got)),
                      "entries": int(got.nnz), "same": bool((got != expected).nnz == 0)}))
""")


def test_first_spgemm_call_peaks_near_inputs_and_output():
    """Measured in a fresh process (the kernel's allocations are invisible to
    tracemalloc): the high-water mark of the call, reset after the inputs were built."""
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          check=True, timeout=300)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["same"] and result["entries"] > 2_500_000
    assert result["ratio"] < 1.5, result


def test_outputs_grown_past_the_remap_size_keep_their_entries():
    """An outer product of two 1,000-entry vectors: its output, reserved for the 2,000
    entries of its inputs, grows past 4 MiB (through realloc) to a million entries and
    keeps every entry written before."""
    rng = np.random.default_rng(1)
    a = sp.csr_matrix(rng.random((1000, 1)))
    b = sp.csr_matrix(rng.random((1, 1000)))
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", B="csr", C="csr")
    got = sp.csr_matrix(kernel(A=a, B=b, threads=1).to_scipy())
    assert got.nnz * 8 > 4 << 20
    np.testing.assert_array_equal(got.toarray(), (a @ b).toarray())
