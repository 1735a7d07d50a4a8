"""numpy's indexing beyond views (issue 33): integer and boolean arrays, None, '...',
negative steps, each checked against numpy on several formats and fill values; bad
keys raise IndexError naming the element. Before, each raised "tensors are indexed with
IndexVar objects ..." naming the first element, whatever was wrong."""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls

KEYS = [
    (slice(None, None, -1),), (slice(2, 0, -1), slice(None), -1), (slice(None), slice(1000, -1000, -2)),
    (Ellipsis, None), (None, Ellipsis), (1, Ellipsis, None), (Ellipsis, 1, None), (None, slice(1, 3), 0),
    ([0, 1],) * 2, ([0, 1], [0, 2]), ([0, 0, 0], [0, 1, 2], [1, 2, 1]), ([1, 0], 0), (1, [0, 2]),
    (0, [1, 0], 0), (1, [], 0), ([True, False], slice(1, None), slice(-2, None)),
    (slice(1, None), slice(-2, None), [True, False, True, False]), (Ellipsis, [2, 1, 3]),
    (slice(None), [2, 1, 2]), (1, slice(None), [0, 2]), ([1, 0], slice(None), [0, 2]),
    (1, None, [0, 2]), (slice(None), 1, Ellipsis, [0, 2]), ([True, False], slice(1, None), 2),
    (np.array([[0, 1], [1, 0]]), slice(None), np.array([1, 2])), (True,), (False, 1),
    (None, [1, 0], None, [2, 1]), (np.int64(1), [0, -2]), ([-1, -2],),
]


def _array(seed: int, fill: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, 3, 4))
    x[rng.random(x.shape) < 0.5] = fill
    return x


@pytest.mark.parametrize("fill", [0.0, 2.5])
@pytest.mark.parametrize("fmt", ["coo", None])
def test_keys_match_numpy(fmt, fill):
    x = _array(1, fill)
    X = ls.Tensor.from_numpy(x, format=fmt, fill=fill) if fmt else \
        ls.Tensor.from_numpy(x, fill=fill)
    for key in KEYS:
        got = X[key]
        np.testing.assert_array_equal(np.asarray(got), x[key], err_msg=repr(key))
        if isinstance(got, ls.Tensor) and got.order:
            assert got.fill_value == fill
    mask = x > 0.3
    np.testing.assert_array_equal(np.asarray(X[mask]), x[mask])


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_matrix_formats_and_repeats(fmt):
    x = _array(2, 0.0)[0]
    X = ls.Tensor.from_numpy(x, format=fmt)
    for key in [([2, 0, 2, 2],), (slice(None), [3, 3, 0]), ([[0, 1], [1, 1]], [[3, 0], [0, 3]]),
                (slice(None, None, -2), [1, 0])]:
        np.testing.assert_array_equal(np.asarray(X[key]), x[key])


@pytest.mark.parametrize("key, message", [
    ((Ellipsis, Ellipsis), "single ellipsis"), ((1, 1, 1, 1), "too many indices"),
    (5, "index 5 is out of bounds"), ("foo", "index 0 \\('foo'\\)"),
    ((0, 0.5), "index 1 \\(0.5\\)"), ([0.5], "integer or boolean type"),
    ([True, False, False], "boolean index of shape"), ((0, [0, 9]), "9 is out of bounds"),
])
def test_bad_keys_name_the_element(key, message):
    X = ls.Tensor.from_numpy(_array(3, 0.0), format="coo")
    with pytest.raises(IndexError, match=message):
        X[key]


def test_index_notation_still_works():
    i, j = ls.index_vars("i j")
    X = ls.Tensor.from_numpy(_array(4, 0.0)[0], format="csr")
    y = ls.Tensor.from_numpy(np.zeros(3))
    y[i] = X[i, j]
    np.testing.assert_allclose(y.to_numpy(), _array(4, 0.0)[0].sum(axis=1))
