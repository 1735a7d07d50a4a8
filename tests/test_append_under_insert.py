"""Appended levels below a level whose positions do not follow its coordinates.

A compressed level keeps its children in visit order and its edges by parent position.
Below a hashed level the parent positions are buckets, visited in coordinate order, so the
two orders differ: packing [dense, hashed, compressed] once swapped the values of entries.
Such outputs are refused; the same levels below an ordered parent still assemble.
"""

import numpy as np
import pytest
from llvsparse.ir.errors import ScheduleError

import llvsparse as ls


def _sample(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.random((6, 3, 3)) * (rng.random((6, 3, 3)) < 0.15)


def test_packing_below_a_hashed_level_is_refused_not_scrambled() -> None:
    fmt = ls.Format([ls.Level("dense", 1), ls.Level("hashed", 0), ls.Level("compressed", 2)])
    with pytest.raises(ScheduleError, match="appends below level 1 .hashed."):
        ls.Tensor.from_numpy(_sample(7), format=fmt)


def test_kernel_output_below_a_hashed_level_is_refused() -> None:
    fmt = ls.Format([ls.Level("hashed", 0), ls.Level("compressed", 1)])
    A = ls.Tensor.from_numpy(_sample(1)[0], format="csr")
    kernel = ls.compile("C(i,j) = A(i,j)", A="csr", C=fmt)
    with pytest.raises(ScheduleError, match="positions do not follow its coordinates"):
        kernel(A=A)


@pytest.mark.parametrize("seed", range(10))
def test_the_same_levels_below_an_ordered_parent_still_pack(seed: int) -> None:
    fmt = ls.Format([ls.Level("dense", 1), ls.Level("dense", 0), ls.Level("compressed", 2)])
    data = _sample(seed)
    for _ in range(3):
        np.testing.assert_array_equal(ls.Tensor.from_numpy(data, format=fmt).to_numpy(),
                                      data)


@pytest.mark.parametrize("seed", range(10))
def test_all_insert_levels_below_a_hashed_level_still_pack(seed: int) -> None:
    fmt = ls.Format([ls.Level("dense", 1), ls.Level("hashed", 0), ls.Level("dense", 2)])
    data = _sample(seed)
    np.testing.assert_array_equal(ls.Tensor.from_numpy(data, format=fmt).to_numpy(), data)
