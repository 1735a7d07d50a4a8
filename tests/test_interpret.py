"""The host interpreter of level functions: vectorized runs agree with one element at a time."""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls
from llvsparse.interpret import CorruptTensorError, run_function


def _locate():
    return ls.level_formats()["hashed"].functions["locate"]


@pytest.mark.parametrize("seed", range(4))
def test_masked_while_matches_one_lane_at_a_time(seed):
    """A hashed level's locate (a while loop of linear probing) run over every lane at
    once gives what running it per lane gives, found or not, after long probe chains."""
    rng = np.random.default_rng(seed)
    width, parents = 8, 5
    crd = np.full(width * parents, -1, dtype=np.int32)
    for p in range(parents):  # fill each parent's buckets by linear probing
        for key in rng.choice(40, size=rng.integers(0, width + 1), replace=False):
            q = p * width + key % width
            while crd[q] != -1:
                q = p * width + (q - p * width + 1) % width
            crd[q] = key
    lanes = 60
    env = {"p_parent": rng.integers(0, parents, lanes), "i": rng.integers(0, 40, lanes),
           "W": width, "N": 40}
    at, found = run_function(_locate(), env, {"crd": crd}, "test", lanes)
    for n in range(lanes):
        one = {k: (v[n] if isinstance(v, np.ndarray) else v) for k, v in env.items()}
        assert run_function(_locate(), one, {"crd": crd}, "test") == (at[n], found[n])
        if found[n]:
            assert crd[at[n]] == env["i"][n]


def test_masked_while_checks_bounds_of_running_lanes():
    crd = np.array([5, 5, 5, 5], dtype=np.int32)  # full of another key: probes wrap
    env = {"p_parent": np.array([0, 1]), "i": np.array([1, 2]), "W": 4, "N": 8}
    with pytest.raises(CorruptTensorError, match="reads crd"):
        run_function(_locate(), env, {"crd": crd}, "test", 2)  # parent 1 lies past crd
