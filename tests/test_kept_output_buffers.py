"""Small sparse outputs are copied out of the kernel's buffers, which the binding's
descriptor keeps for its next call (runtime.DescriptorHolder.copy_out): each result
must still own its arrays, index arrays must stay read-only for good, and a kept
buffer must start each call as the kernel's own allocation would (its level's init)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
from llvsparse.abi import runtime

FORMATS = ["csr", "dcsr", "coo", "hash", ls.Format(["dense", "hashed"])]


def _operands(seed: int):
    a = sp.random(12, 10, density=0.3, format="csr", random_state=seed)
    b = sp.random(10, 9, density=0.3, format="csr", random_state=seed + 1)
    return a, b


@pytest.mark.parametrize("out", FORMATS, ids=str)
def test_repeated_bound_calls_give_separate_exact_results(out):
    a, b = _operands(1)
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", B="csr", out_format=out)
    A, B = ls.Tensor.from_scipy(a, "csr"), ls.Tensor.from_scipy(b, "csr")
    bound = kernel.bind(check=False, A=A, B=B)
    first = bound()
    assert bound.output.kept  # the small result's buffers stayed with the descriptor
    expected = (a @ b).toarray()
    for scale in (2.0, -0.5, 0.0):  # new operand values, same pattern
        A.values[:] = a.data * scale
        result = bound()
        np.testing.assert_allclose(result.to_numpy(), scale * expected, rtol=1e-12,
                                   atol=1e-15)
        assert not np.shares_memory(result.values, first.values)
    np.testing.assert_allclose(first.to_numpy(), expected, rtol=1e-12)


def test_copied_index_arrays_cannot_be_made_writeable():
    a, b = _operands(3)
    kernel = ls.compile("C(i,j) = A(i,k) * B(k,j)", A="csr", B="csr", C="csr")
    bound = kernel.bind(check=False, A=ls.Tensor.from_scipy(a, "csr"),
                        B=ls.Tensor.from_scipy(b, "csr"))
    result = bound()
    for name in ("pos", "crd"):
        array = result.level_arrays[1][name]
        assert not array.flags.writeable
        with pytest.raises(ValueError):
            array.flags.writeable = True
    result.values[:] = -1.0  # values stay the caller's to write, and its alone
    np.testing.assert_allclose(bound().to_numpy(), (a @ b).toarray(), rtol=1e-12)


def _allocated(count: int) -> runtime.DescriptorHolder:
    holder = runtime.DescriptorHolder([count], [None], [])
    holder.reserve(0, count, 8)
    assert holder.pointers[0]
    return holder


@pytest.mark.parametrize("init", [None, 0, -1])
def test_a_kept_buffer_is_refilled_with_its_init(init):
    holder = _allocated(64)
    written = np.arange(64, dtype=np.int64) + 7
    ctypes_view = np.ctypeslib.as_array(
        (runtime.ctypes.c_int64 * 64).from_address(holder.pointers[0]))
    ctypes_view[:] = written
    copy = holder.copy_out(0, np.dtype(np.int64), 10, False, init)
    np.testing.assert_array_equal(copy, written[:10])
    assert not copy.flags.writeable
    address = holder.pointers[0]
    holder.clear()
    assert holder.pointers[0] == address and holder.caps[0] == 64  # kept
    np.testing.assert_array_equal(copy, written[:10])  # the copy is its own
    if init is None:
        np.testing.assert_array_equal(ctypes_view, written)
    else:
        np.testing.assert_array_equal(ctypes_view, np.full(64, init))


def test_a_large_buffer_is_handed_over_not_kept():
    count = runtime.KEEP_BYTES // 8 + 1
    holder = _allocated(count)
    taken = holder.copy_out(0, np.dtype(np.float64), count, True, None)
    assert not holder.kept and not holder.pointers[0]  # numpy owns it now
    assert len(taken) == count and taken.flags.writeable


def test_release_after_a_failed_call_drops_kept_buffers():
    holder = _allocated(16)
    holder.copy_out(0, np.dtype(np.int64), 4, True, None)
    assert holder.kept
    holder.release()
    assert not holder.kept and not holder.pointers[0]
    holder.clear()  # nothing left to refill or free
    assert not holder.pointers[0]


def test_refused_insert_into_a_kept_output_fails_cleanly_every_call():
    """A hashed output of 2 buckets per row refuses a row of 3 entries: a bound call on
    user arrays rewritten in place to such a row raises, its descriptor's kept buffers
    are freed, and once the arrays are restored the next calls are exact again."""
    fmt = ls.Format([ls.Level("dense", 0), ls.Level("hashed", 1, params={"W": 2})])
    kernel = ls.compile("C(i,j) = A(i,j) * 2", A="csr", out_format=fmt)
    packed = ls.Tensor.from_scipy(sp.identity(6, format="csr"), "csr")
    pos, crd = np.arange(7, dtype=packed.index_dtype), np.arange(6, dtype=packed.index_dtype)
    values = np.arange(1.0, 7.0)
    A = ls.Tensor((6, 6), packed.format, np.float64, packed.index_dtype, [6, 6],
                  [{}, {"pos": pos, "crd": crd}], [{}, {}], values)
    bound = kernel.bind(check=False, A=A)
    diagonal = 2 * np.diag(values)
    np.testing.assert_allclose(bound().to_numpy(), diagonal)
    assert bound.output.kept
    pos[:] = [0, 3, 3, 3, 3, 3, 6]  # rows 0 and 5 hold 3 entries each
    for _ in range(2):
        with pytest.raises(ls.KernelRuntimeError, match="refused"):
            bound()
        assert not bound.output.kept
    pos[:] = np.arange(7)
    for _ in range(2):
        np.testing.assert_allclose(bound().to_numpy(), diagonal)
