"""Affine subscripts (paper 000): notation, located and walked operands, padding and
strides, sparse images and filters, sparse outputs, loop counts; against scipy.signal
and numpy, natively and under the loop-IR interpreter."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal as ss
import scipy.sparse as sp
from llvsparse.ir.notation import syntax as nt
from llvsparse.tools import bench_submanifold

import llvsparse as ls
from llvsparse.notation.parse import parse

CONV = "O(h,w) = I(h+r, w+s) * F(r,s)"
TARGETS = ["cpu", "interpret"]


def _dense(result) -> np.ndarray:
    return result.to_numpy()


def _image(shape, density, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape)
    return values * (rng.random(shape) < density)


def _operand(array: np.ndarray, fmt: str):
    return ls.Tensor.from_numpy(array, format=fmt)


# ----------------------------------------------------------------------------- notation

@pytest.mark.parametrize("text", [
    "O(h,w) = I(h+r,w+s) * F(r,s)",
    "y(i) = x(2*i+r-1) * w(r)",
    "y(i) = x(i-r+3) * w(r)",
    "y(i) = x(-i+4) * w(i)",
])
def test_affine_subscripts_round_trip(text: str) -> None:
    parsed = parse(text)
    assert parse(str(parsed)) == parsed
    assert any(isinstance(ix, nt.AffineIndex) for a in parsed.accesses() for ix in a.indices)


def test_index_arithmetic_builds_affine_subscripts() -> None:
    i, r = ls.index_vars("i r")
    index = 2 * i + r - 1
    assert isinstance(index, nt.AffineIndex)
    assert str(index) == "2*i+r-1"
    assert (i + r) - r == i  # what cancels is a plain variable again
    with pytest.raises(nt.NotationError, match="affine"):
        i * r


@pytest.mark.parametrize("text, fragment", [
    ("y(i) = x(i*j) * w(j)", "multiplied only by an integer"),
    ("y(i) = x(i/2)", "division"),
    ("y(i) = x(i+0.5)", "integers"),
    ("y(i) = x(i+1-1+j*0) + z(i)", None),  # simplifies to x(i)
])
def test_what_is_not_affine_is_refused_clearly(text: str, fragment: str | None) -> None:
    if fragment is None:
        assert parse(text).rhs.args[0].indices == (nt.IndexVar("i"),)
        return
    with pytest.raises(nt.NotationError, match=fragment):
        parse(text)


def test_left_hand_side_stays_plain() -> None:
    with pytest.raises(nt.NotationError):
        parse("y(i+1) = x(i)")


# ----------------------------------------------------------------------------- 1-D, dense

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fmt", ["dense", "sparse", "coo", "hash"])
def test_1d_correlation_valid(target: str, fmt: str) -> None:
    rng = np.random.default_rng(1)
    x, w = _image(17, 0.4, 2), rng.standard_normal(4)
    kernel = ls.compile("y(i) = x(i+r) * w(r)", x=fmt, target=target)
    y = _dense(kernel(x=_operand(x, fmt), w=w))
    np.testing.assert_allclose(y, ss.correlate(x, w, mode="valid"), atol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_1d_offsets_strides_and_subtraction(target: str) -> None:
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(20), rng.standard_normal(3)
    full = ss.correlate(x, w, mode="full")
    kernel = ls.compile("y(i) = x(i+r-2) * w(r)", target=target, extents={"i": 22})
    np.testing.assert_allclose(_dense(kernel(x=x, w=w)), full)
    strided = ls.compile("y(i) = x(2*i+r) * w(r)", x="sparse", target=target)
    np.testing.assert_allclose(_dense(strided(x=_operand(x, "sparse"), w=w)),
                               ss.correlate(x, w, mode="valid")[::2])
    flipped = ls.compile("y(i) = x(i-r+2) * w(r)", x="coo", target=target)  # convolution
    np.testing.assert_allclose(_dense(flipped(x=_operand(x, "coo"), w=w)),
                               np.convolve(x, w, mode="valid"))


# ----------------------------------------------------------------------------- 2-D

IMAGE_FORMATS = ["dense", "csr", "dcsr", "coo", "csf"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("image_format", IMAGE_FORMATS)
@pytest.mark.parametrize("mode", ["valid", "same", "full"])
def test_2d_padding_modes(target: str, image_format: str, mode: str) -> None:
    image, filt = _image((9, 12), 0.25, 5), np.random.default_rng(6).standard_normal((3, 4))
    result = ls.conv(_operand(image, image_format), filt, padding=mode, target=target)
    # scipy.signal.correlate's centring: correlate2d puts an even filter's 'same'
    # window one place earlier
    np.testing.assert_allclose(_dense(result), ss.correlate(image, filt, mode=mode),
                               atol=1e-12)


@pytest.mark.parametrize("image_format", IMAGE_FORMATS)
@pytest.mark.parametrize("stride", [1, 2, 3])
def test_2d_strides_and_explicit_pads(image_format: str, stride: int) -> None:
    image, filt = _image((11, 10), 0.3, 7), np.random.default_rng(8).standard_normal((3, 3))
    padded = np.pad(image, ((2, 1), (0, 3)))
    expected = ss.correlate2d(padded, filt, mode="valid")[::stride, ::stride]
    result = ls.conv(_operand(image, image_format), filt, padding=[(2, 1), (0, 3)],
                     stride=stride)
    np.testing.assert_allclose(_dense(result), expected, atol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("image_format, filter_format", [
    ("dense", "csr"), ("dense", "coo"), ("dcsr", "coo"), ("coo", "csr"), ("csf", "dcsr")])
def test_sparse_filters_and_both_sparse(target: str, image_format: str,
                                        filter_format: str) -> None:
    image, filt = _image((10, 9), 0.3, 9), _image((4, 3), 0.5, 10)
    kernel = ls.compile(CONV, I=image_format, F=filter_format, target=target)
    result = kernel(I=_operand(image, image_format), F=_operand(filt, filter_format))
    np.testing.assert_allclose(_dense(result), ss.correlate2d(image, filt, mode="valid"),
                               atol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("image_format", ["dense", "dcsr", "coo"])
@pytest.mark.parametrize("out_format", ["csr", "coo", "dcsr"])
def test_sparse_outputs(target: str, image_format: str, out_format: str) -> None:
    image, filt = _image((9, 8), 0.2, 11), np.random.default_rng(12).standard_normal((2, 3))
    kernel = ls.compile(CONV, I=image_format, out_format=out_format, target=target)
    result = kernel(I=_operand(image, image_format), F=filt)
    assert result.format.name == out_format
    np.testing.assert_allclose(_dense(result), ss.correlate2d(image, filt, mode="valid"),
                               atol=1e-12)


def test_nchw_convolution_with_channels() -> None:
    rng = np.random.default_rng(13)
    image, filt = _image((2, 3, 8, 7), 0.3, 14), rng.standard_normal((4, 3, 3, 2))
    kernel = ls.compile("O(n,f,h,w) = I(n,c,h+r,w+s) * F(f,c,r,s)", I="csf")
    result = _dense(kernel(I=_operand(image, "csf"), F=filt))
    expected = np.zeros((2, 4, 6, 6))
    for n in range(2):
        for f in range(4):
            for c in range(3):
                expected[n, f] += ss.correlate2d(image[n, c], filt[f, c], mode="valid")
    np.testing.assert_allclose(result, expected, atol=1e-12)


@pytest.mark.parametrize("image_format", ["dense", "dcsr", "coo"])
def test_edges(image_format: str) -> None:
    filt = np.arange(1.0, 7.0).reshape(2, 3)
    empty = np.zeros((5, 6))
    np.testing.assert_array_equal(
        _dense(ls.conv(_operand(empty, image_format), filt, padding="full")),
        np.zeros((6, 8)))
    corner = np.zeros((4, 4))
    corner[0, 0], corner[3, 3] = 2.0, -1.0  # entries whose windows hang over every edge
    for mode in ["valid", "same", "full"]:
        np.testing.assert_allclose(_dense(ls.conv(_operand(corner, image_format), filt,
                                                  padding=mode)),
                                   ss.correlate(corner, filt, mode=mode))
    small = np.ones((1, 2))  # a filter larger than the image: 'valid' is empty
    assert _dense(ls.conv(_operand(small, image_format), filt)).shape == (0, 0)


def test_operator_api() -> None:
    h, w, r, s = ls.index_vars("h w r s")
    image, filt = _image((7, 9), 0.3, 15), np.random.default_rng(16).standard_normal((3, 3))
    out = ls.Tensor.from_numpy(np.zeros((7, 9)), format="dense")
    out[h, w] = ls.asarray(sp.coo_matrix(image))[h + r - 1, w + s - 1] * ls.asarray(filt)[r, s]
    np.testing.assert_allclose(out.to_numpy(), ss.correlate2d(image, filt, mode="same"),
                               atol=1e-12)


# ----------------------------------------------------------------------------- the loop IR

def test_a_sparse_image_is_walked_and_the_output_index_derived() -> None:
    loops = ls.compile(CONV, I="dcsr").loops
    assert "for I_0__1 in positions of I.0:" in loops
    assert "let h = I_0__1 - r" in loops and "let w = I_1__1 - s" in loops
    assert "if 0 <= h < extent O.0:" in loops and "if 0 <= w < extent O.1:" in loops


def test_a_dense_image_is_located_at_the_sum() -> None:
    loops = ls.compile(CONV, I="dense", F="csr").loops
    assert "let I_0__1 = h + r" in loops and "locate I.0 at I_0__1" in loops
    assert "if 0 <= I_0__1 < extent I.0:" in loops
    assert "positions of F.1" in loops  # the sparse filter's taps are walked


@pytest.fixture
def scattered():
    """``make(seed, count)``: a 3x3 filter and ``count`` entries scattered over a 64²
    and over a 512² image; a loop count bounded by the stored entries is about the same
    for both."""
    def make(seed: int, count: int) -> tuple[np.ndarray, list[np.ndarray]]:
        rng = np.random.default_rng(seed)
        filt = rng.standard_normal((3, 3))
        images = []
        for n in (64, 512):
            rows, cols = rng.choice(n, count, replace=False), rng.choice(n, count, replace=False)
            images.append(sp.coo_matrix((rng.standard_normal(count), (rows, cols)),
                                        shape=(n, n)).toarray())
        return filt, images
    return make


@pytest.mark.parametrize("image_format", ["dcsr", "coo", "csf"])
def test_loop_count_is_bounded_by_stored_entries(image_format: str, scattered) -> None:
    filt, images = scattered(17, 40)
    counts = []
    for image in images:
        n = len(image)
        kernel = ls.compile("O(h,w) = I(h+r-1, w+s-1) * F(r,s)", I=image_format,
                            counting=True, extents={"h": n, "w": n})
        result = kernel(I=_operand(image, image_format), F=filt)
        np.testing.assert_allclose(_dense(result), ss.correlate2d(image, filt, mode="same"),
                                   atol=1e-12)
        counts.append(kernel.loop_count)
    assert counts[1] <= counts[0] * 1.1  # 64x the pixels, the same stored entries


# ----------------------------------------------------------------------------- submanifold

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("image_format, mask_format", [
    ("dcsr", "hash"), ("coo", "dense"), ("csr", "csr"), ("dense", "dcsr")])
def test_submanifold_output_keeps_the_input_pattern(target: str, image_format: str,
                                                    mask_format: str) -> None:
    image, filt = _image((8, 9), 0.3, 18), np.random.default_rng(19).standard_normal((3, 3))
    mask = (image != 0).astype(float)
    kernel = ls.compile("O(h,w) = M(h,w) * I(h+r-1, w+s-1) * F(r,s)", I=image_format,
                        M=mask_format, target=target)
    result = _dense(kernel(I=_operand(image, image_format), M=_operand(mask, mask_format),
                           F=filt))
    np.testing.assert_allclose(result, mask * ss.correlate2d(image, filt, mode="same"),
                               atol=1e-12)


# ----------------------------------------------------------------------------- refusals

def test_an_affine_operand_added_to_the_rest_is_refused() -> None:
    with pytest.raises(ls.ScheduleError, match="affine subscripts outside a product"):
        ls.compile("y(i) = x(i+r) + w(r)").instance()


def test_one_operand_at_two_subscripts() -> None:
    x = np.random.default_rng(28).standard_normal(9)
    product = ls.compile("y(i) = x(i+1) * x(i)")(x=x)  # x(9) is outside: its fill, 0
    np.testing.assert_allclose(_dense(product), np.append(x[1:] * x[:-1], 0.0))
    sparse = _image(9, 0.6, 38)
    sparse[-1] = 1.0  # x(8 + 1) is outside
    walked = ls.compile("y(i) = x(i+1) * x(i)", x="sparse")  # x(i+1) by a subsection
    np.testing.assert_allclose(_dense(walked(x=_operand(sparse, "sparse"))),
                               np.append(sparse[1:] * sparse[:-1], 0.0))
    with pytest.raises(ls.ScheduleError, match="cannot be walked"):  # singleton: no search
        ls.compile("y(i,j) = A(i,j+1) * A(i,j)", A="coo").instance()


@pytest.mark.parametrize("target", TARGETS)
def test_a_stride_is_inverted_by_an_exact_division(target: str) -> None:
    x, z = _image(15, 0.5, 25), np.random.default_rng(26).standard_normal(8)
    kernel = ls.compile("y(i) = x(2*i) * z(i)", x="sparse", target=target)
    assert "let i = (x_0__1) / 2" in kernel.loops
    np.testing.assert_allclose(_dense(kernel(x=_operand(x, "sparse"), z=z)), x[::2] * z)


@pytest.mark.parametrize("image_format", ["dcsr", "coo"])
def test_strided_loop_count_is_bounded_by_stored_entries(image_format: str,
                                                        scattered) -> None:
    filt, images = scattered(27, 30)
    counts = []
    for image in images:
        kernel = ls.compile("O(h,w) = I(2*h+r, 2*w+s) * F(r,s)", I=image_format,
                            counting=True)
        result = kernel(I=_operand(image, image_format), F=filt)
        np.testing.assert_allclose(_dense(result),
                                   ss.correlate(image, filt, mode="valid")[::2, ::2],
                                   atol=1e-12)
        counts.append(kernel.loop_count)
    # Per stored entry, at most: its levels' loop heads (a row's two and its own), the
    # filter rows' (3 and the exit), the taps' (3 rows x (3 and the exit)); nothing
    # grows with the image. A filter row whose output row is off the stride or out of
    # range skips its taps (the guard sits at the loop over r), so fewer run, and
    # more of them near a small image's edges.
    assert max(counts) <= 1 + (3 + 4 + 3 * 4) * 30


@pytest.mark.parametrize("image_format", ["dia", "ell", "csc", "dcsc", "coo-unordered",
                                          "bcsr"])  # blocked: converted first
def test_other_image_formats(image_format: str) -> None:
    image, filt = _image((12, 12), 0.3, 23), np.random.default_rng(24).standard_normal((3, 2))
    kernel = ls.compile(CONV, I=image_format)
    np.testing.assert_allclose(_dense(kernel(I=_operand(image, image_format), F=filt)),
                               ss.correlate(image, filt, mode="valid"), atol=1e-12)


def test_conv_rejects_bad_padding_and_stride() -> None:
    image, filt = np.ones((4, 4)), np.ones((2, 2))
    with pytest.raises(ValueError, match="padding"):
        ls.conv(image, filt, padding="middle")
    with pytest.raises(ValueError, match="stride"):
        ls.conv(image, filt, stride=0)
    with pytest.raises(ValueError, match="one order"):
        ls.conv(image, np.ones(2))


# ----------------------------------------------------------------------------- paper 000's
# worked examples (the digest's acceptance tests T1-T3, T5-T7), exact expected values

def _vector(length: int, entries: dict[int, float], fmt: str = "sparse"):
    values = np.zeros(length)
    for at, value in entries.items():
        values[at] = value
    return ls.Tensor.from_numpy(values, format=fmt)


@pytest.mark.parametrize("target", TARGETS)
def test_golden_t1_figure_3(target: str) -> None:
    kernel = ls.compile("A(i) = C(i+j) * B(j)", C="sparse", target=target, counting=True)
    result = kernel(C=_vector(10, {2: 1, 8: 2, 9: 3}), B=np.array([10.0, 20.0]))
    np.testing.assert_array_equal(_dense(result), [0, 20, 10, 0, 0, 0, 0, 40, 80])


PAPER_T2_IMAGE = np.array(
    [[1, 2, 3, 4, 0, 6, 7, 8], [2, 2, 4, 4, 0, 0, 6, 8], [2, 2, 4, 4, 0, 0, 6, 8],
     [2, 2, 3, 4, 0, 0, 7, 8], [1, 3, 3, 4, 0, 0, 6, 8], [3, 2, 3, 4, 0, 0, 7, 8],
     [1, 3, 3, 4, 3, 6, 6, 8], [1, 3, 3, 4, 3, 0, 7, 8]], dtype=float)
PAPER_T2_RESULT = np.array(
    [[0, 0, -1, -6, -1, 6], [-1, 0, 1, 0, 1, 0], [0, -1, 1, 0, 0, 0],
     [-1, 0, 0, 0, 0, 0], [0, 0, 3, 6, -3, -6], [2, -1, 3, 0, -3, 0]], dtype=float)


@pytest.mark.parametrize("image_format", ["dense", "csr", "dcsr", "csc", "coo"])
@pytest.mark.parametrize("out_format", ["dense", "dcsr", "csr"])
def test_golden_t2_edge_filter(image_format: str, out_format: str) -> None:
    filt = np.array([[1.0, 0, -1], [0, 0, 0], [-1, 0, 1]])
    kernel = ls.compile(CONV, I=image_format, out_format=out_format)
    result = kernel(I=_operand(PAPER_T2_IMAGE, image_format), F=filt)
    np.testing.assert_array_equal(_dense(result), PAPER_T2_RESULT)


@pytest.mark.parametrize("image_format", ["csr", "dcsr", "coo"])
def test_golden_t3_very_sparse(image_format: str) -> None:
    image = np.zeros((8, 8))
    image[0, 0], image[3, 4], image[3, 5], image[7, 7] = 1, 2, 3, 4
    kernel = ls.compile(CONV, I=image_format, out_format="dcsr")
    result = kernel(I=_operand(image, image_format), F=np.array([[1.0, 2], [3, 4]]))
    expected = np.zeros((7, 7))
    expected[0, 0], expected[2, 3:6], expected[3, 3:6], expected[6, 6] = 1, [8, 18, 9], \
        [4, 8, 3], 16
    np.testing.assert_array_equal(_dense(result), expected)
    assert result.nnz == 8


@pytest.mark.parametrize("target", TARGETS)
def test_golden_t5_coefficients_and_intercepts(target: str) -> None:
    c, f = _vector(12, {1: 1, 4: 2, 5: 3, 11: 4}), np.array([1.0, 10, 100])
    strided = ls.compile("A(i) = C(2*i+p) * F(p)", C="sparse", target=target,
                         extents={"i": 5})
    np.testing.assert_array_equal(_dense(strided(C=c, F=f)), [10, 200, 32, 0, 0])
    shifted = ls.compile("A(i) = C(2*i+p+1) * F(p)", C="sparse", target=target,
                         extents={"i": 5})
    np.testing.assert_array_equal(_dense(shifted(C=c, F=f)), [1, 320, 3, 0, 400])


@pytest.mark.parametrize("target", TARGETS)
def test_golden_t6_three_term_subscript(target: str) -> None:
    kernel = ls.compile("X(i) = B(i+j+k) * F(j) * G(k)", B="sparse", target=target,
                        extents={"i": 7})
    result = kernel(B=_vector(10, {3: 1, 9: 2}), F=np.array([1.0, 2]),
                    G=np.array([1.0, 10, 100]))
    np.testing.assert_array_equal(_dense(result), [200, 120, 12, 1, 0, 0, 400])


def test_golden_t7_two_walked_operands() -> None:
    kernel = ls.compile("X(j,k) = A(i+j) * B(i+k) * U(i)", A="sparse", B="sparse")
    result = kernel(A=_vector(6, {1: 1, 4: 2}), B=_vector(6, {0: 3, 3: 4, 5: 5}),
                    U=np.ones(4))  # U gives i its range [0, 4)
    np.testing.assert_array_equal(_dense(result), [[0, 0, 4], [11, 0, 10], [0, 8, 0]])
    with pytest.raises(ls.ScheduleError, match="extent of index i"):
        ls.compile("X(j,k) = A(i+j) * B(i+k)", A="sparse", B="sparse",
                   extents={"i": 4, "j": 3, "k": 3}).instance()


@pytest.mark.parametrize("image_format", ["dense", "csf", "coo"])
def test_3d_correlation(image_format: str) -> None:
    image, filt = _image((6, 7, 5), 0.3, 20), np.random.default_rng(21).standard_normal((3, 2, 3))
    for mode in ["valid", "same"]:
        result = ls.conv(_operand(image, image_format), filt, padding=mode)
        np.testing.assert_allclose(_dense(result), ss.correlate(image, filt, mode=mode),
                                   atol=1e-12)


@pytest.mark.parametrize("mask_format, image_format, out_format", [
    ("coo", "hash", "coo"), ("hash", "coo", "dense"), ("hash", "csf", "csf")])
def test_3d_submanifold_point_cloud_with_channels(mask_format: str, image_format: str,
                                                  out_format: str) -> None:
    rng = np.random.default_rng(22)
    n, channels = 6, 2
    points = np.unique(rng.integers(0, n, (30, 3)), axis=0)
    image = np.zeros((n, n, n, channels))
    image[points[:, 0], points[:, 1], points[:, 2]] = rng.standard_normal((len(points),
                                                                            channels))
    mask = np.zeros((n, n, n))
    mask[points[:, 0], points[:, 1], points[:, 2]] = 1.0
    filt = rng.standard_normal((3, 3, 3, channels, channels))
    expected = np.zeros_like(image)
    for f in range(channels):
        for c in range(channels):
            expected[..., f] += ss.correlate(image[..., c], filt[..., c, f], mode="same")
    expected *= mask[..., None]
    kernel = ls.compile("O(h,w,d,f) = M(h,w,d) * I(h+r-1, w+s-1, d+t-1, c) * F(r,s,t,c,f)",
                        M=mask_format, I=image_format, out_format=out_format)
    result = kernel(M=_operand(mask, mask_format), I=_operand(image, image_format), F=filt)
    np.testing.assert_allclose(_dense(result), expected, atol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_channels_under_a_hashed_image_loop_inside_the_taps(target: str) -> None:
    """A plain index below an affine-located level (the channel c of a hashed NHWC
    image) is looped over inside the taps, not outside the walk of the mask, so each
    output point is visited once; its output keeps a dense channel level."""
    rng = np.random.default_rng(29)
    n, channels = 5, 3
    points = np.unique(rng.integers(0, n, (12, 3)), axis=0)
    image = np.zeros((n, n, n, channels))
    image[tuple(points.T)] = rng.standard_normal((len(points), channels))
    mask = np.zeros((n, n, n))
    mask[tuple(points.T)] = 1.0
    filt = rng.standard_normal((3, 3, 3, channels, channels))
    hashed = ["hashmap"] * 3 + ["dense"]
    rows = ["compressed"] * 3 + ["dense"]
    kernel = ls.compile("O(h,w,d,f) = M(h,w,d) * I(h+r-1, w+s-1, d+t-1, c) * F(r,s,t,c,f)",
                        M="csf", I=hashed, out_format=rows, target=target)
    loops = [line.strip() for line in kernel.loops.splitlines()]
    heads = [line.split()[1] for line in loops if line.startswith("for ")]
    assert heads == ["h", "w", "d", "f", "r", "s", "t", "c"]
    result = kernel(M=ls.Tensor.from_numpy(mask, format="csf"),
                    I=ls.Tensor.from_numpy(image, format=hashed), F=filt)
    expected = np.einsum("hwdrstc,rstcf->hwdf", _windows(np.pad(image, [(1, 1)] * 3 + [(0, 0)])),
                         filt) * mask[..., None]
    np.testing.assert_allclose(_dense(result), expected, atol=1e-12)
    assert result.nnz == len(points) * channels


def _windows(padded: np.ndarray) -> np.ndarray:
    """Every 3x3x3 window of ``padded`` (its last mode kept): (h, w, d, r, s, t, c)."""
    view = np.lib.stride_tricks.sliding_window_view(padded, (3, 3, 3), axis=(0, 1, 2))
    return np.moveaxis(view, 3, -1)


@pytest.mark.parametrize("channels", [4, 8])
def test_a_missed_tap_skips_its_channel_loop(channels: int) -> None:
    """Isolated points of a hashed image: of each point's 27 taps only its own is
    found, and only that one runs the channel loop (counted loop heads)."""
    n = 9
    points = np.array([[1, 1, 1], [7, 4, 2]])
    rng = np.random.default_rng(30)
    image = np.zeros((n, n, n, channels))
    image[tuple(points.T)] = rng.standard_normal((len(points), channels))
    mask = np.zeros((n, n, n))
    mask[tuple(points.T)] = 1.0
    filt = rng.standard_normal((3, 3, 3, channels, channels))
    hashed = ["hashmap"] * 3 + ["dense"]
    kernel = ls.compile("O(h,w,d,f) = M(h,w,d) * I(h+r-1, w+s-1, d+t-1, c) * F(r,s,t,c,f)",
                        M="csf", I=hashed, out_format=["compressed"] * 3 + ["dense"],
                        counting=True)
    result = kernel(M=ls.Tensor.from_numpy(mask, format="csf"),
                    I=ls.Tensor.from_numpy(image, format=hashed), F=filt)
    expected = mask[..., None] * (image @ filt[1, 1, 1])  # only the centre tap is stored
    np.testing.assert_allclose(_dense(result), expected, atol=1e-12)
    per_output = 1 + 3 + 9 + 27  # the f iteration and the tap loops' heads
    channel_loops = 1 + channels  # the found tap's
    assert kernel.loop_count <= len(points) * channels * (per_output + channel_loops) + 20


def test_the_point_cloud_bench_checks_against_a_dense_reference(capsys) -> None:
    """tools/bench_submanifold.py at a size numpy holds dense: its gather reference is
    the dense correlation on the points, and its run checks llvsparse against it."""
    size, channels = 7, 3
    coords, feats, filt = bench_submanifold.cloud(40, size, channels, seed=31)
    image = np.zeros((size,) * 3 + (channels,))
    image[tuple(coords)] = feats
    padded = np.pad(image, [(1, 1)] * 3 + [(0, 0)])
    dense = np.einsum("hwdrstc,rstcf->hwdf", _windows(padded), filt)
    np.testing.assert_allclose(bench_submanifold.gather_reference(coords, feats, filt, size),
                               dense[tuple(coords)], atol=1e-12)
    for levels in (bench_submanifold.HASHED, bench_submanifold.DENSE2):
        bench_submanifold.point_cloud(40, size, channels, 1, levels)
    assert capsys.readouterr().out.count("40 points in 7³") == 2


# ----------------------------------------------------------------------------- subsections

MASKED = "O(h,w) = M(h,w) * I(h+r-1, w+s-1) * F(r,s)"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("image_format, mask_format", [
    ("csr", "csr"), ("dcsr", "csr"), ("csr", "dcsr"), ("dcsr", "coo"), ("csf", "csr")])
def test_a_masked_sparse_image_is_located_by_subsections(target: str, image_format: str,
                                                         mask_format: str) -> None:
    """Under a mask stored sparse (it iterates the output's indices), the image's
    ordered levels are located through one-wide subsections, not walked whole per
    output entry."""
    image, filt = _image((9, 11), 0.35, 32), np.random.default_rng(33).standard_normal((3, 3))
    image[0, 0], image[-1, -1] = 1.5, -2.0  # windows hanging over the corners
    mask = ((image != 0) | (np.random.default_rng(34).random(image.shape) < 0.1)).astype(float)
    kernel = ls.compile(MASKED, I=image_format, M=mask_format, target=target)
    assert "locate I.1 at I_1__1" in kernel.loops
    assert "positions of I" not in kernel.loops
    result = kernel(I=_operand(image, image_format), M=_operand(mask, mask_format), F=filt)
    np.testing.assert_allclose(_dense(result), mask * ss.correlate2d(image, filt, mode="same"),
                               atol=1e-12)
    empty = kernel(I=_operand(np.zeros_like(image), image_format),
                   M=_operand(mask, mask_format), F=filt)
    np.testing.assert_array_equal(_dense(empty), np.zeros_like(image))


def test_subsection_loop_count_grows_with_the_entries_not_their_square(scattered) -> None:
    """Submanifold (the mask is the image's pattern), both DCSR: 4x the entries,
    about 4x the loop heads (walking the image once per mask entry was 15x)."""
    counts = []
    for count in (16, 64):
        filt, (_, image) = scattered(35, count)
        mask = (image != 0).astype(float)
        kernel = ls.compile(MASKED, I="dcsr", M="dcsr", counting=True)
        result = kernel(I=_operand(image, "dcsr"), M=_operand(mask, "dcsr"), F=filt)
        np.testing.assert_allclose(_dense(result),
                                   mask * ss.correlate2d(image, filt, mode="same"), atol=1e-12)
        counts.append(kernel.loop_count)
    assert counts[1] <= counts[0] * 6  # 4116 against 859; walked, 12560 against 844


SORTED_ROWS_YAML = """\
name: sorted_rows
doc: A plugin level stored as compressed is, whose subsection walks the row linearly.
params: {}
arrays:
  pos: {type: pos, length: parent_size + 1, init: 0}
  crd: {type: crd, length: size}
properties: {full: [false, configurable], ordered: true, unique: true, branchless: false,
             compact: true}
capabilities:
  iterate: position
  pos_bounds: return pos[p_parent], pos[p_parent + 1]
  pos_access: return crd[p], True
  subsection: |
    lo = pos[p_parent]
    end = pos[p_parent + 1]
    first = end
    last = end
    for q in range(lo, end):
        if crd[q] >= i_lo and first == end:
            first = q
        if crd[q] >= i_hi and last == end:
            last = q
    return first, max(first, last)
  append:
    append_init: pos[0] = 0
    append_coord: crd[p] = i
    append_edges: pos[p_parent + 1] = p_end - p_begin
    append_finalize: |
      total = pos[0]
      for q in range(1, parent_size + 1):
          total = total + pos[q]
          pos[q] = total
"""


@pytest.mark.parametrize("target", TARGETS)
def test_a_plugin_level_offers_subsections(tmp_path, monkeypatch, target: str) -> None:
    """A YAML level added in a temporary directory declares ``subsection``; the
    compiler asks the capability, never the format, so a masked image stored in it is
    located through it. A wrong subsection is refused when the file is registered."""
    from llvsparse.formats import registry

    monkeypatch.setattr(registry, "_user", {})
    monkeypatch.setenv("LLVSPARSE_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "sorted_rows.yaml"
    path.write_text(SORTED_ROWS_YAML)
    ls.register_level_format(path)
    fmt = ls.Format([ls.Level("dense", 0), ls.Level("sorted_rows", 1)])
    image, filt = _image((7, 8), 0.4, 36), np.random.default_rng(37).standard_normal((3, 3))
    mask = (image != 0).astype(float)
    kernel = ls.compile(MASKED, I=fmt, M="csr", target=target)
    assert "locate I.1 at I_1__1" in kernel.loops
    result = kernel(I=ls.Tensor.from_numpy(image, format=fmt), M=_operand(mask, "csr"), F=filt)
    np.testing.assert_allclose(_dense(result), mask * ss.correlate2d(image, filt, mode="same"),
                               atol=1e-12)
    wrong = tmp_path / "wrong_rows.yaml"  # its window ends one coordinate early
    wrong.write_text(SORTED_ROWS_YAML.replace("sorted_rows", "wrong_rows")
                     .replace("crd[q] >= i_hi", "crd[q] >= i_hi - 1"))
    with pytest.raises(ls.FormatFileError, match="subsection disagrees with iteration"):
        ls.register_level_format(wrong)


def test_a_subsection_needs_positions() -> None:
    from llvsparse.formats.loader import load_level_text

    text = SORTED_ROWS_YAML.replace("iterate: position", "iterate: coordinate").replace(
        "  pos_bounds:", "  coord_bounds: return 0, N\n  coord_access: return i, False\n"
        "  pos_bounds:")
    with pytest.raises(ls.FormatFileError, match="subsection returns positions"):
        load_level_text(text, "coordinates.yaml")


# ----------------------------------------------------------------------------- pooling

def _pooled(image: np.ndarray, window, op: str, stride, sides, fill: float) -> np.ndarray:
    """numpy's pool: unstored entries and padding read ``fill``."""
    full = np.where(image != 0, image, fill) if fill != 0 else image
    view = np.lib.stride_tricks.sliding_window_view(
        np.pad(full, sides, constant_values=fill), window)
    view = view[tuple(slice(None, None, s) for s in stride)]
    view = view.reshape(*view.shape[:len(window)], -1)
    return {"max": np.max, "min": np.min, "sum": np.sum}[op](view, axis=-1)


def _with_fill(image: np.ndarray, fmt: str, fill: float):
    if fmt == "dense" and fill == 0:
        return image
    at = np.nonzero(image)
    return ls.Tensor.from_coo(at, image[at], image.shape, format=fmt, fill=fill)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("image_format", ["dense", "csr", "dcsr", "csf", "hash"])
@pytest.mark.parametrize("op", ["max", "min", "sum"])
def test_pooling_against_numpy(target: str, image_format: str, op: str) -> None:
    image = _image((7, 9), 0.3, 39)
    image[0, 0], image[-1, -1] = -4.0, -5.0  # negative corners: padding's fill shows
    fills = [0.0, -np.inf] if op == "max" and image_format != "dense" else [0.0]
    for fill in fills:
        for window, stride, padding in [((2, 2), None, "valid"), ((3, 2), 1, "same"),
                                        ((2, 3), (2, 1), [(1, 0), (2, 1)]),
                                        ((1, 1), 1, "full")]:
            steps = window if stride is None else (stride,) * 2 if isinstance(stride, int) \
                else stride
            sides = ls.conv.__globals__["pads"](padding, window)
            result = ls.pool(_with_fill(image, image_format, fill), window, op, stride,
                             padding, target=target)
            expected = _pooled(image, window, op, steps, sides, fill)
            np.testing.assert_allclose(_dense(result), expected, atol=1e-12)


@pytest.mark.parametrize("image_format", ["dense", "csr", "dcsr"])
def test_golden_t4_pooling(image_format: str) -> None:
    """Paper 000's digest, T4: sum pooling of NHWC rows [1, 2, 1, 2] (2x2, stride 1)
    into CCCC stores nine 6s; max pooling with stride 2, implicit zeros taking part."""
    nhwc = np.tile(np.array([1.0, 2, 1, 2]), (1, 4, 1)).reshape(1, 4, 4, 1)
    summed = ls.pool(_operand(nhwc, "csf"), (1, 2, 2, 1), "sum", stride=1, out_format="csf")
    np.testing.assert_array_equal(_dense(summed), np.full((1, 3, 3, 1), 6.0))
    assert summed.nnz == 9
    image = np.zeros((6, 6))
    image[0, 1], image[2, 2], image[2, 3], image[5, 5] = 5, -3, 7, 1
    maxed = ls.pool(_operand(image, image_format), (2, 2), stride=2)
    np.testing.assert_array_equal(_dense(maxed), [[5, 0, 0], [0, 7, 0], [0, 0, 1]])
    if image_format != "dense":  # fill -inf: only the stored entries take part
        stored = ls.pool(_with_fill(image, image_format, -np.inf), (2, 2), stride=2)
        np.testing.assert_array_equal(_dense(stored), [[5, -np.inf, -np.inf],
                                                       [-np.inf, 7, -np.inf],
                                                       [-np.inf, -np.inf, 1]])


@pytest.mark.parametrize("image_format", ["csr", "dcsr"])
def test_pooling_edges(image_format: str) -> None:
    empty = np.zeros((5, 4))
    np.testing.assert_array_equal(_dense(ls.pool(_operand(empty, image_format), (2, 2))),
                                  np.zeros((2, 2)))
    nothing = ls.Tensor.from_coo(np.zeros((2, 0), int), np.zeros(0), (5, 4),
                                 format=image_format, fill=-np.inf)
    np.testing.assert_array_equal(_dense(ls.pool(nothing, (2, 2), padding="same")),
                                  np.full((3, 2), -np.inf))
    corner = np.zeros((5, 4))
    corner[4, 3] = -2.0
    result = ls.pool(_with_fill(corner, image_format, -np.inf), (2, 2), stride=1,
                     padding="full")
    expected = np.full((6, 5), -np.inf)
    expected[4:, 3:] = -2.0
    np.testing.assert_array_equal(_dense(result), expected)


def test_pooling_refusals() -> None:
    image = np.ones((4, 4))
    with pytest.raises(ValueError, match="op must be"):
        ls.pool(image, (2, 2), op="mean")
    with pytest.raises(ValueError, match="window"):
        ls.pool(image, (2,))
    with pytest.raises(ValueError, match="stride"):
        ls.pool(image, (2, 2), stride=0)
    with pytest.raises(ls.ScheduleError, match="must be located"):  # singleton: no search
        ls.pool(_operand(image, "coo"), (2, 2))



# ----------------------------------------------------------------------------- constants

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fmt", ["dense", "csr", "dcsr", "hash", "csc"])
def test_constant_subscripts(target: str, fmt: str) -> None:
    """``A(i, 2)`` fixes a mode: located (through subsections where the level cannot
    locate); a constant outside the extent reads the fill."""
    matrix = _image((6, 5), 0.5, 40)
    matrix[0, 2], matrix[5, 0] = 3.0, -1.0
    x = np.random.default_rng(41).standard_normal(6)
    stored = _operand(matrix, fmt)
    cases = [("y(i) = A(i,2)", {}, matrix[:, 2]),
             ("y(i) = A(i,2) * x(i)", {"x": x}, matrix[:, 2] * x),
             ("y(j) = A(5,j)", {}, matrix[5]),
             ("y(i) = A(i,4) * A(i,0)", {}, matrix[:, 4] * matrix[:, 0]),
             ("y(i) = A(i,7) * x(i)", {"x": x}, np.zeros(6)),  # outside: the fill
             ("y(i) = A(i+1,1) * x(i)", {"x": x}, np.append(matrix[1:, 1], 0.0) * x)]
    for text, others, expected in cases:
        kernel = ls.compile(text, A=fmt, target=target)
        np.testing.assert_allclose(_dense(kernel(A=stored, **others)), expected, atol=1e-12,
                                   err_msg=text)
    assert parse("y(i) = A(i,2)").rhs.indices[1] == nt.AffineIndex((), 2)


def test_constant_subscripts_refused_clearly() -> None:
    with pytest.raises(ls.ScheduleError, match="cannot be walked"):  # singleton: no search
        ls.compile("y(i) = A(i,2)", A="coo").instance()
    with pytest.raises(ls.ScheduleError, match="without index variables"):
        ls.compile("a = x(2)").instance()
