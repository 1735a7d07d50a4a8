"""The host interpreter of level functions: vectorized runs agree with one element at a time."""

from __future__ import annotations

import numpy as np
import pytest
from llvsparse.formats.interpret import CorruptTensorError, run_function

import llvsparse as ls


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


def _vectorized(text: str, env: dict, arrays: dict):
    import ast

    from llvsparse.formats import body_ir
    from llvsparse.formats.interpret import Interpreter

    tree = ast.parse(text, mode="eval").body
    return Interpreter(env, arrays, "test").expr(body_ir.expression(tree))


def test_a_conditional_checks_only_the_lanes_that_take_each_branch():
    """``crd[p] if p < 3 else -1`` read crd[3] for the lane that takes the else branch
    and reported a corrupt tensor; a guarded division reported a zero divisor."""
    crd = np.array([7, 8, 9], dtype=np.int32)
    p = np.array([0, 2, 3])
    got = _vectorized("crd[p] if p < 3 else -1", {"p": p}, {"crd": crd})
    assert got.tolist() == [7, 9, -1]
    d = np.array([2, 0, -3])
    got = _vectorized("7 // d if d != 0 else 0", {"d": d}, {})
    assert got.tolist() == [3, 0, -3]
    with pytest.raises(CorruptTensorError, match="reads crd"):
        _vectorized("crd[p] if p < 4 else -1", {"p": p}, {"crd": crd})


@pytest.mark.parametrize("text", ["7 // d", "7 % d", "(7 // d) if d > -5 else 1"])
def test_a_zero_divisor_is_a_corrupt_tensor(text):
    """The compiled kernel gives 0 for a zero divisor (it cannot trap); a checked call
    must therefore refuse data that divides by zero."""
    with pytest.raises(CorruptTensorError, match="divides by zero"):
        _vectorized(text, {"d": np.array([2, 0, 1])}, {})
    divisors = [2, -1, -4, 1]
    assert _vectorized(text, {"d": np.array(divisors)}, {}).tolist() == \
        [eval(text, {"d": d}) for d in divisors]  # Python's flooring // and %


def test_lanes_that_take_no_branch_read_and_divide_nothing():
    """An empty array read only where ``p < n`` (none here), and a zero scalar divisor
    on a branch no lane takes, are not errors."""
    got = _vectorized("crd[p] if p < n else 0", {"p": np.array([0, 0]), "n": 0},
                      {"crd": np.zeros(0, dtype=np.int32)})
    assert got.tolist() == [0, 0]
    got = _vectorized("p // N if p < 0 else p", {"p": np.array([4, 6]), "N": 0}, {})
    assert got.tolist() == [4, 6]
    with pytest.raises(CorruptTensorError, match="divides by zero"):
        _vectorized("p // N if p > 5 else p", {"p": np.array([4, 6]), "N": 0}, {})


GUARDED = {  # a body's guarded read, and what Python computes for one lane
    "p < n and crd[p] == k": lambda p, n, k, crd: p < n and crd[p] == k,
    "p >= n or crd[p] != k": lambda p, n, k, crd: p >= n or crd[p] != k,
    "p < n and crd[p] >= 0 and crd[p] < k": lambda p, n, k, crd: p < n and 0 <= crd[p] < k,
    "(p >= n or crd[p] == k) and p > 0": lambda p, n, k, crd: (p >= n or crd[p] == k) and p > 0,
}


@pytest.mark.parametrize("text", sorted(GUARDED))
@pytest.mark.parametrize("seed", range(3))
def test_and_or_read_only_where_the_result_is_open(text, seed):
    """``and`` / ``or`` short-circuit as compiled bodies do (backends/llvm/bodies.py
    branches around the later operands): ``p < n and crd[p] == k`` read crd[n] for the
    lane past the end and reported a corrupt tensor. One lane and all lanes at once
    agree with Python's own evaluation."""
    rng = np.random.default_rng(seed)
    crd = rng.integers(-2, 6, 7).astype(np.int32)
    n, k = len(crd), int(rng.integers(0, 6))
    p = rng.integers(0, n + 1, 40)
    p[:2] = (n, 0)  # a lane past the end, always
    expected = [bool(GUARDED[text](int(q), n, k, crd)) for q in p]
    got = _vectorized(text, {"p": p, "n": n, "k": k}, {"crd": crd})
    assert np.asarray(got, dtype=bool).tolist() == expected
    for q, want in zip(p, expected):
        assert bool(_vectorized(text, {"p": int(q), "n": n, "k": k}, {"crd": crd})) == want


def test_an_array_entry_updated_in_place():
    """``pos[p] += 1`` (the body checker allows it where a level function stores; the
    compiled bodies run it) raised AttributeError on the host instead of updating."""
    import ast

    from llvsparse.formats import body_ir
    from llvsparse.formats.interpret import Interpreter

    pos = np.array([0, 2, 5], dtype=np.int64)
    body = body_ir.statements(
        ast.parse("pos[p + 1] += n\npos[p] -= 1\nq = 3\nq += pos[p]\nreturn q").body)
    result = Interpreter({"p": 1, "n": 4}, {"pos": pos}, "test").run(body)
    assert pos.tolist() == [0, 1, 9]
    assert result == (4,)
