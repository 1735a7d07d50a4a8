"""A large output grows without holding two copies of its arrays: llvsparse_realloc copies
a buffer of 1 MiB or more 2 MiB at a time and releases each copied step of the old one, so
the first SpGEMM call of 2.6 million entries, whose arrays last doubled near its end, peaks
at 1.09x its inputs and output (1.74x copying as it grew, 1.24x through glibc's realloc,
which copied posix_memalign's blocks whole), and what it returns still matches scipy."""

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
    assert result["ratio"] < 1.2, result


def test_outputs_grown_past_the_stepwise_size_keep_their_entries():
    """An outer product of two 1,000-entry vectors: its output, reserved for the 2,000
    entries of its inputs, grows past 4 MiB (copied step by step, see llvsparse_realloc)
    to a million entries and keeps every entry written before."""
    rng = np.random.default_rng(1)
    a = sp.csr_matrix(rng.random((1000, 1)))
    b = sp.csr_matrix(rng.random((1, 1000)))
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", B="csr", C="csr")
    got = sp.csr_matrix(kernel(A=a, B=b, threads=1).to_scipy())
    assert got.nnz * 8 > 4 << 20
    np.testing.assert_array_equal(got.toarray(), (a @ b).toarray())


GROW = textwrap.dedent("""
    import ctypes, json, sys
    from pathlib import Path
    import numpy as np
    from llvsparse.backends.cpu import host_allocator, host_runtime_function

    old_bytes, new_bytes = int(sys.argv[1]), int(sys.argv[2])
    libc = ctypes.CDLL(None)
    if sys.argv[3] == "heap":  # as once glibc raised its mmap threshold (up to 32 MiB)
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
    libc.malloc.restype = ctypes.c_void_p
    alloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64)(host_allocator())
    grow = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                            ctypes.c_int64)(host_runtime_function("llvsparse_realloc"))

    def status(field):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

    def advised(lo, hi):
        \"\"\"Bytes of [lo, hi) in mappings advised as huge pages (VmFlags hg).\"\"\"
        total, start, end = 0, 0, 0
        for line in Path("/proc/self/smaps").read_text().splitlines():
            head = line.split()[0]
            if "-" in head and ":" not in head:
                start, end = (int(x, 16) for x in head.split("-"))
            elif line.startswith("VmFlags:") and "hg" in line.split()[1:]:
                total += max(0, min(end, hi) - max(start, lo))
        return total

    count = old_bytes // 8
    old = alloc(old_bytes)
    fence = libc.malloc(4096)  # a heap block cannot grow in place into the heap's top
    view = np.ctypeslib.as_array((ctypes.c_int64 * count).from_address(old))
    view[:] = 1
    view.cumsum(out=view)  # 1, 2, ..., count, written in place
    del view
    before = status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the high-water mark starts here
    new = grow(old, old_bytes, new_bytes)
    peak, after = status("VmHWM") - before, status("VmRSS") - before
    got = np.ctypeslib.as_array((ctypes.c_int64 * count).from_address(new))
    print(json.dumps({"same": bool((got == np.arange(1, count + 1)).all()), "peak": peak,
                      "after": after, "advised": advised(new, new + new_bytes)}))
""")


def _grow(old_bytes: int, new_bytes: int, where: str) -> dict:
    done = subprocess.run([sys.executable, "-c", GROW, str(old_bytes), str(new_bytes), where],
                          capture_output=True, text=True, check=True, timeout=120)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_large_buffer_grows_without_two_resident_copies():
    """A 24 MiB buffer of llvsparse_alloc (posix_memalign: glibc's realloc copied it
    whole, a 24 MiB rise) grows to 48 MiB with its entries kept, the old pages released
    step by step (the rise stays near one 2 MiB step), and only the copied 24 MiB of the
    new buffer advised as huge pages: its other half may never be written."""
    mib = 1 << 20
    result = _grow(24 * mib, 48 * mib, "mmap")
    assert result["same"], result
    assert result["peak"] < 8 * mib, result
    assert result["advised"] == 24 * mib, result


def test_a_heap_buffer_is_released_once_grown():
    """A 3 MiB buffer on the heap (below glibc's raised mmap threshold, where free()
    keeps a block resident) grows to 6 MiB: afterwards the resident set has grown by
    about nothing (the new buffer's 3 MiB of copied pages, less the old block's; 4 MiB
    when the freed block stayed resident), and only the copied data's whole 2 MiB are
    advised as huge pages."""
    mib = 1 << 20
    result = _grow(3 * mib, 6 * mib, "heap")
    assert result["same"], result
    assert result["after"] < mib, result
    assert result["advised"] == 2 * mib, result
