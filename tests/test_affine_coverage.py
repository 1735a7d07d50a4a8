"""Issue 36's coverage claims for ``ls.conv`` in one matrix: every image format (CSR,
DCSR, COO, CSF, dense) with every filter format, so a sparse image, a sparse filter and
both sparse each meet every padding mode and strides 1 and 2, into dense and sparse
outputs; and paper 000's T9 (an NHWC layer at several sparsities) and T10 edge cases
(an empty image, entries at both ends, a fully stored one, a filter of one tap); all
against scipy.signal.correlate (no flip)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.signal as ss

import llvsparse as ls

FORMATS = ["csr", "dcsr", "coo", "csf", "dense"]
PADDINGS = ["valid", "same", "full", [(2, 0), (1, 3)]]
OUTPUTS = ["dense", "csr", "dcsr", "coo", "csf"]
CASES = [(image, filt, PADDINGS[k % len(PADDINGS)], 1 + k % 2, OUTPUTS[k % len(OUTPUTS)])
         for k, (image, filt) in enumerate(itertools.product(FORMATS, FORMATS))]


def _sparse(shape: tuple[int, ...], density: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) * (rng.random(shape) < density)


def _reference(image: np.ndarray, filt: np.ndarray, padding, stride: int) -> np.ndarray:
    if isinstance(padding, str):
        full = ss.correlate(image, filt, mode=padding)
    else:
        full = ss.correlate(np.pad(image, padding), filt, mode="valid")
    return full[tuple(slice(None, None, stride) for _ in full.shape)]


@pytest.mark.parametrize("image_format, filter_format, padding, stride, out_format", CASES)
def test_every_image_and_filter_format(image_format: str, filter_format: str, padding,
                                       stride: int, out_format: str) -> None:
    seed = FORMATS.index(image_format) * 5 + FORMATS.index(filter_format)
    image, filt = _sparse((9, 10), 0.3, seed), _sparse((3, 2), 0.6, seed + 50)
    filt[0, 0] = 1.5  # never an empty filter
    result = ls.conv(ls.Tensor.from_numpy(image, format=image_format),
                     ls.Tensor.from_numpy(filt, format=filter_format), padding=padding,
                     stride=stride, out_format=out_format)
    assert result.format.name == out_format
    np.testing.assert_allclose(result.to_numpy(), _reference(image, filt, padding, stride),
                               atol=1e-12)


def _nhwc_reference(image: np.ndarray, filt: np.ndarray, stride: int) -> np.ndarray:
    n, height, width, _ = image.shape
    rows, cols, _, feats = filt.shape
    out_h, out_w = (height - rows) // stride + 1, (width - cols) // stride + 1
    out = np.zeros((n, out_h, out_w, feats))
    for h in range(out_h):
        for w in range(out_w):
            window = image[:, h * stride:h * stride + rows, w * stride:w * stride + cols, :]
            out[:, h, w, :] = np.einsum("nrqc,rqcf->nf", window, filt)
    return out


@pytest.mark.parametrize("image_format", [
    ls.Format(["dense", "dense", "dense", "compressed"]),
    ls.Format(["dense", "compressed", "compressed", "compressed"]),
    "csf", "dense"])
@pytest.mark.parametrize("stride", [1, 2])
def test_golden_t9_nhwc_layer_at_every_sparsity(image_format, stride: int) -> None:
    """Paper 000's T9: ``O(n,h,w,f) = I(n, s*h+r, s*w+q, c) * F(r,q,c,f)``, a 1x7x7x3
    image at 0%, 50%, 90%, 99% and 100% sparsity, a 3x3x3x4 filter."""
    filt = np.random.default_rng(60).standard_normal((3, 3, 3, 4))
    kernel = ls.compile(f"O(n,h,w,f) = I(n, {stride}*h+r, {stride}*w+q, c) * F(r,q,c,f)",
                        I=image_format)
    for k, density in enumerate([1.0, 0.5, 0.1, 0.01, 0.0]):
        image = _sparse((1, 7, 7, 3), density, 61 + k)
        result = kernel(I=ls.Tensor.from_numpy(image, format=image_format), F=filt)
        np.testing.assert_allclose(result.to_numpy(), _nhwc_reference(image, filt, stride),
                                   atol=1e-12)


@pytest.mark.parametrize("fmt", ["sparse", "dense"])
def test_golden_t10_one_dimensional_edges(fmt: str) -> None:
    """Paper 000's T10 edge cases in 1-D: no entries (the loops run zero times and the
    output stays zero), one entry at index 0 and one at n - 1, every entry stored in a
    compressed level, and a filter of one tap."""
    n, filt = 20, np.array([1.0, -2.0, 3.0])
    kernel = ls.compile("y(i) = x(i+r) * w(r)", x=fmt, counting=fmt == "sparse")
    cases = [np.zeros(n), np.eye(n)[0] * 4.0, np.eye(n)[n - 1] * 5.0,
             np.arange(1.0, n + 1.0)]
    for x in cases:
        result = kernel(x=ls.Tensor.from_numpy(x, format=fmt), w=filt)
        np.testing.assert_allclose(result.to_numpy(), ss.correlate(x, filt, mode="valid"))
        if fmt == "sparse" and not x.any():
            assert kernel.loop_count <= 2  # nothing stored: no tap runs
    one_tap = ls.conv(ls.Tensor.from_numpy(cases[3], format=fmt), np.array([2.0]))
    np.testing.assert_allclose(one_tap.to_numpy(), 2.0 * cases[3])


@pytest.mark.parametrize("image_format", ["csf", ls.Format(["dense", "compressed",
                                                            "compressed"]), "coo"])
def test_golden_t10_three_dimensional(image_format) -> None:
    image = _sparse((9, 9, 9), 0.05, 70)
    filt = np.random.default_rng(71).standard_normal((3, 3, 3))
    for padding in ("valid", "same"):
        result = ls.conv(ls.Tensor.from_numpy(image, format=image_format), filt,
                         padding=padding)
        np.testing.assert_allclose(result.to_numpy(), ss.correlate(image, filt, mode=padding),
                                   atol=1e-12)


@pytest.mark.parametrize("image_format", ["csr", "dcsr"])
def test_a_masked_row_costs_its_window_not_its_entries(image_format: str) -> None:
    """Under a mask (submanifold), each output reads row h + r of the image within the
    window [w - 1, w + 2) through the ``subsection`` capability: two binary searches per
    tap (their steps are counted loop heads), so 30x more entries in each row, far from
    the mask, add a logarithm's worth per tap, not a walk of the row per output (that
    would add about 30,000 loop heads here)."""
    rng = np.random.default_rng(80)
    filt = rng.standard_normal((3, 3))
    mask = np.zeros((8, 400))
    mask[rng.integers(0, 8, 12), rng.integers(0, 40, 12)] = 1.0
    counts = []
    for extra in (10, 300):
        image = _sparse((8, 400), 0.0, 0)
        image[mask != 0] = rng.standard_normal(int(mask.sum()))
        far = np.arange(extra * 8)  # every row, columns 100 and beyond
        image[far % 8, 100 + far // 8] = 1.0
        kernel = ls.compile("O(h,w) = M(h,w) * I(h+r-1, w+s-1) * F(r,s)", I=image_format,
                            M="dcsr", counting=True)
        result = kernel(I=ls.Tensor.from_numpy(image, format=image_format),
                        M=ls.Tensor.from_numpy(mask, format="dcsr"), F=filt)
        np.testing.assert_allclose(result.to_numpy(),
                                   mask * ss.correlate2d(image, filt, mode="same"), atol=1e-12)
        counts.append(kernel.loop_count)
    taps, outputs = 9, int(mask.sum())
    assert counts[1] - counts[0] <= 2 * taps * outputs * (np.log2(8 + 300 + 12) + 1)
