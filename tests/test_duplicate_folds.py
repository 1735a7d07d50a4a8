"""A level that may repeat a whole coordinate (a plugin's non-unique last level): a
reduction other than + folds the sum of a run of duplicates, not each duplicate on its
own (max of 1 and 2 stored at one coordinate is 3, not 2)."""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls

REPEATING = ls.Format([ls.Level("compressed", 0, properties={"unique": False}),
                       ls.Level("singleton", 1, properties={"unique": False})])


def _with_duplicates(seed: int) -> ls.Tensor:
    """A random matrix whose stored entries are relabelled so that some repeat the
    coordinate stored just before them in their row."""
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((6, 5)) < 0.6, rng.integers(-4, 5, (6, 5)), 0).astype(float)
    tensor = ls.Tensor.from_numpy(dense, format=REPEATING)
    rows = tensor.level_arrays[0]["crd"]
    cols = tensor.level_arrays[1]["crd"].copy()
    for k in range(1, cols.size):
        if rows[k] == rows[k - 1] and rng.random() < 0.5:
            cols[k] = cols[k - 1]
    tensor.level_arrays[1]["crd"] = cols
    return tensor


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("statement, reduce", [
    ("y(i) = max(j, A(i,j))", lambda d: d.max(axis=1)),
    ("y(i) = min(j, A(i,j))", lambda d: d.min(axis=1)),
    ("y(j) = max(i, A(i,j))", lambda d: d.max(axis=0)),
    ("y(i) = max(j, A(i,j)) + sum_j(A(i,j))", lambda d: d.max(axis=1) + d.sum(axis=1)),
])
def test_a_fold_takes_the_sum_of_duplicates(seed: int, statement: str, reduce) -> None:
    a = _with_duplicates(seed)
    dense = a.to_numpy()  # duplicates summed, as the format defines its value
    np.testing.assert_array_equal(ls.evaluate(statement, A=a).to_numpy(), reduce(dense))
