"""A level format defined only in a test YAML file works with no compiler change,
and the compiler core never names a level format."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from llvsparse.formats.registry import level_formats, unregister_level_format

import llvsparse as ls

ROOT = Path(__file__).resolve().parents[1]
BITMAP = Path(__file__).with_name("data") / "bitmap.yaml"


@pytest.fixture(scope="module")
def bitmap_format():
    ls.register_level_format(BITMAP, replace=True)
    yield ls.Format([ls.Level("dense", 0), ls.Level("bitmap", 1)])
    unregister_level_format("bitmap")


def _random(rng, shape, density):
    array = rng.random(shape)
    array[rng.random(shape) > density] = 0
    return array


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("other", ["dense", "csr", "coo", "hash"])
def test_bitmap_level_in_kernels(bitmap_format, seed, other):
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 9)), int(rng.integers(1, 9)))
    B, C = _random(rng, shape, 0.4), _random(rng, shape, 0.5)
    x = rng.random(shape[1])
    Bt = ls.Tensor.from_numpy(B, format=bitmap_format)
    Ct = ls.Tensor.from_numpy(C, format=other)
    np.testing.assert_array_equal(Bt.to_numpy(), B)
    y = ls.evaluate("y(i) = B(i,j) * x(j)", B=Bt, x=x)
    np.testing.assert_allclose(y.to_numpy(), B @ x)
    for out in ("dense", bitmap_format):
        s = ls.evaluate("A(i,j) = B(i,j) + C(i,j)", out_format=out, B=Bt, C=Ct)
        np.testing.assert_allclose(s.to_numpy(), B + C)
        h = ls.evaluate("A(i,j) = B(i,j) * C(i,j)", out_format=out, B=Bt, C=Ct)
        np.testing.assert_allclose(h.to_numpy(), B * C)


def test_bitmap_validation_catches_corrupt_flags(bitmap_format):
    Bt = ls.Tensor.from_numpy(np.eye(3), format=bitmap_format)
    Bt.level_arrays[1]["bits"] = Bt.level_arrays[1]["bits"][:4].copy()
    with pytest.raises(ls.CorruptTensorError, match="bits"):
        ls.evaluate("y(i) = B(i,j) * x(j)", B=Bt, x=np.ones(3))


def test_core_never_names_a_level_format():
    names = "|".join(sorted(level_formats()))
    pattern = re.compile(rf"['\"]({names})['\"]", re.IGNORECASE)
    offenders = []
    for folder in ("ir", "backends"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == ROOT / "ir" / "schedule" / "workspace_policies.py":
                continue  # it names workspace policies; one is "dense" as a level is
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []
