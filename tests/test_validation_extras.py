"""Smaller validation gaps: DIA's shared offset array missing from one level, and the
hidden diagonal pattern of a trace sized by stored entries rather than rows."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import llvsparse as ls

DIAGONALS = np.eye(4) + 2 * np.eye(4, k=1) - np.eye(4, k=-2)


@pytest.mark.parametrize("levels, match", [
    ([1], "level 1 \\(range\\) is missing array 'offset'"),
    ([2], "levels 1 and 2 \\(offset\\) share array 'offset', but level 2 lacks it"),
    ([1, 2], "level 1 \\(range\\) is missing array 'offset'"),
])
def test_dia_without_its_shared_offset_array_names_it(levels, match):
    T = ls.Tensor.from_numpy(DIAGONALS, format="dia")
    arrays = [dict(a) for a in T.level_arrays]
    for k in levels:
        del arrays[k]["offset"]
    B = ls.Tensor(T.shape, T.format, T.dtype, T.index_dtype, T.level_extents, arrays,
                  T.params, T.values)
    with pytest.raises(ls.CorruptTensorError, match=match):
        B.validate()
    with pytest.raises(ls.CorruptTensorError, match=match):
        ls.evaluate("y(i) = A(i,j) * x(j)", A=B, x=np.ones(4), check=False)


def test_dia_levels_holding_different_offset_arrays_are_refused():
    T = ls.Tensor.from_numpy(DIAGONALS, format="dia")
    arrays = [dict(a) for a in T.level_arrays]
    arrays[2]["offset"] = arrays[2]["offset"].copy()
    B = ls.Tensor(T.shape, T.format, T.dtype, T.index_dtype, T.level_extents, arrays,
                  T.params, T.values)
    with pytest.raises(ls.CorruptTensorError, match="holds a different array"):
        B.validate()


def test_trace_of_a_matrix_with_two_to_the_31_rows():
    """The hidden diagonal pattern had one coordinate per row: 2**31 of them, minutes of
    work and then numpy's MemoryError. It now holds the stored diagonal only. Run in a
    subprocess, with its memory capped, so that a regression cannot take the machine."""
    script = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
        import numpy as np, llvsparse as ls
        n = 2**31 + 5
        coords = np.array([[0, 5, n - 1, n - 1], [0, 7, 3, n - 1]])
        for fmt in ("dcsr", "coo"):
            A = ls.Tensor.from_coo(coords, np.array([1.0, 2.0, 4.0, 8.0]), (n, n), format=fmt)
            print(fmt, ls.evaluate("t = A(i,i)", A=A).to_numpy())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["dcsr", "9.0", "coo", "9.0"]  # 1 + 8: the stored (i, i)


def test_trace_follows_entries_moved_in_place_between_calls():
    """The pattern now depends on the operand's entries: a binding reused for a tensor
    whose (writeable) index arrays moved an entry onto the diagonal builds it again."""
    M = np.array([[1.0, 0, 0], [0, 0, 5], [0, 0, 2]])
    base = ls.Tensor.from_numpy(M, format="dcsr")
    arrays = [{k: np.array(a) for k, a in level.items()} for level in base.level_arrays]
    A = ls.Tensor(base.shape, base.format, base.dtype, base.index_dtype, base.level_extents,
                  arrays, base.params, np.array(base.values))
    kernel = ls.compile("t = A(i,i)", A="dcsr")
    assert kernel(A=A).to_numpy() == np.trace(M)
    crd = arrays[1]["crd"]
    assert crd.tolist() == [0, 2, 2]
    crd[1] = 1  # (1, 2) moves to (1, 1)
    moved = np.array([[1.0, 0, 0], [0, 5, 0], [0, 0, 2]])
    np.testing.assert_array_equal(A.to_numpy(), moved)
    assert kernel(A=A).to_numpy() == np.trace(moved)


def test_sealed_tensors_reuse_their_pattern():
    A = ls.Tensor.from_numpy(DIAGONALS, format="dcsr")
    kernel = ls.compile("t = A(i,i)", A="dcsr")
    assert kernel(A=A).to_numpy() == np.trace(DIAGONALS)
    pattern = A._diagonal_memo[2]
    A.values[0] = 10.0  # values are not the pattern's concern
    assert kernel(A=A).to_numpy() == np.trace(A.to_numpy())
    assert A._diagonal_memo[2] is pattern


def _hashed_rows(pos: list[int]) -> ls.Tensor:
    """Rows 1 and 2 stored in one 4-bucket hash segment (buckets 0 and 3 empty), columns
    compressed below it."""
    fmt = ls.Format([ls.Level("hashed", 0, params={"W": 4}), ls.Level("compressed", 1)])
    return ls.Tensor((4, 3), fmt, np.float64, np.int64, [4, 3],
                     [{"crd": np.array([-1, 1, 2, -1], np.int64)},
                      {"pos": np.array(pos, np.int64), "crd": np.array([0, 2, 1], np.int64)}],
                     [{"W": 4}, {}], np.array([1.0, 2.0, 3.0]))


def test_children_under_empty_hash_buckets_are_checked() -> None:
    """pos under an empty bucket was never read, so a decreasing range or orphan children
    there passed validation."""
    good = _hashed_rows([0, 0, 2, 3, 3])
    good.validate()
    np.testing.assert_array_equal(good.to_numpy(),
                                  [[0, 0, 0], [1, 0, 2], [0, 3, 0], [0, 0, 0]])
    with pytest.raises(ls.CorruptTensorError, match="decreasing range"):
        _hashed_rows([3, 0, 2, 3, 3]).validate()
    with pytest.raises(ls.CorruptTensorError, match="holds no entry but has children"):
        _hashed_rows([0, 1, 2, 3, 3]).validate()
