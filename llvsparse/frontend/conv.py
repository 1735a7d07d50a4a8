"""``ls.conv`` and ``ls.pool``: an n-D correlation, and pooling, written as index notation
with affine subscripts.

The notation says the whole kernel (``O(i0,i1) = I(i0+r0-1, i1+r1-1) * F(r0,r1)``); this
helper only turns a padding mode and a stride into the subscripts' constants and the
output's extents (``ls.compile(..., extents=)``), which depend on the operands' shapes.
The compiler decides the rest from the operands' levels (ir/concrete/affine.py): a sparse image
is walked and the output index derived from its coordinates, a dense one is located.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from ..kernel.api import Kernel
from ..tensors.coerce import natural_format
from ..tensors.made_as import tensor_class
from ..tensors.tensor import StoredTensor

Padding = str | int | Sequence[int | tuple[int, int]]

_KERNELS: dict[tuple, Kernel] = {}  # the most recently added last
_KERNELS_KEPT = 64  # the compiled code is shared by the instance cache; these are small
_LOCK = threading.Lock()


def pads(padding: Padding, filter_shape: tuple[int, ...]) -> list[tuple[int, int]]:
    """(before, after) per mode: 'valid' none, 'full' ``K - 1`` on both sides, 'same'
    centred as scipy.signal.correlate's (``K // 2`` before; correlate2d puts an even
    filter's window one place earlier), or given: one int for every
    side, or per mode an int or a pair."""
    if padding == "valid":
        return [(0, 0) for _ in filter_shape]
    if padding == "full":
        return [(k - 1, k - 1) for k in filter_shape]
    if padding == "same":
        return [(k // 2, (k - 1) // 2) for k in filter_shape]
    if isinstance(padding, int) and not isinstance(padding, bool):
        given: Sequence = [padding] * len(filter_shape)
    elif isinstance(padding, Sequence) and not isinstance(padding, str) \
            and len(padding) == len(filter_shape):
        given = padding
    else:
        raise ValueError(f"padding must be 'valid', 'same', 'full', an int or one int or "
                         f"(before, after) pair per mode ({len(filter_shape)}), not {padding!r}")
    result = []
    for p in given:
        pair = (p, p) if isinstance(p, int) else tuple(p)
        if len(pair) != 2 or any(not isinstance(v, int) or isinstance(v, bool) or v < 0
                                 for v in pair):
            raise ValueError(f"a pad is a non-negative int or a (before, after) pair of them, "
                             f"not {p!r}")
        result.append(pair)
    return result


def notation(order: int, before: Sequence[int], stride: int | Sequence[int],
             fold: str = "sum") -> str:
    """``O(i0,..) = I(s*i0+r0-p0, ..) * F(r0, ..)``, summed over the taps r (a
    correlation) or folded by max or min (a pool, F its window)."""
    strides = [stride] * order if isinstance(stride, int) else list(stride)
    outs = [f"i{d}" for d in range(order)]
    subs = []
    for d in range(order):
        sub = f"{strides[d]}*i{d}+r{d}" if strides[d] != 1 else f"i{d}+r{d}"
        subs.append(sub + (f"-{before[d]}" if before[d] else ""))
    taps = ",".join(f"r{d}" for d in range(order))
    body = f"I({', '.join(subs)}) * F({taps})"
    if fold != "sum":
        for d in reversed(range(order)):
            body = f"{fold}(r{d}, {body})"
    return f"O({','.join(outs)}) = {body}"


def _kernel(text: str, extents: dict[str, int], formats: dict, out_format: object,
            target: str) -> Kernel:
    """The compiled kernel of ``text`` (kept: conv and pool compile once per shape)."""
    key = (text, tuple(sorted(extents.items())), repr(formats), repr(out_format), target)
    with _LOCK:
        kernel = _KERNELS.get(key)
        if kernel is None:
            kernel = _KERNELS[key] = Kernel(text, formats, out_format, target=target,
                                            extents=extents)
            if len(_KERNELS) > _KERNELS_KEPT:
                del _KERNELS[next(iter(_KERNELS))]
    return kernel


def _extents(shapes: list[tuple[int, ...]], sides: list[tuple[int, int]],
             strides: Sequence[int]) -> dict[str, int]:
    return {f"i{d}": max((n + lo + hi - k) // s + 1, 0)
            for d, (n, k, (lo, hi), s) in enumerate(zip(*shapes, sides, strides))}


def conv(image: object, filter: object, padding: Padding = "valid", stride: int = 1,
         out_format: object = "dense", target: str = "cpu") -> StoredTensor:
    """The correlation of ``image`` with ``filter`` (no flip, as scipy.signal.correlate
    and deep learning's convolutions): ``O[i] = sum_r I[stride*i + r - pad] * F[r]``,
    where a coordinate outside the image reads its fill. Both operands have one order;
    each keeps its format (a scipy matrix its own, a Tensor its own)."""
    if not isinstance(stride, int) or isinstance(stride, bool) or stride < 1:
        raise ValueError(f"stride must be a positive int, not {stride!r}")
    shapes = [tuple(getattr(x, "shape", ())) for x in (image, filter)]
    if len(shapes[0]) != len(shapes[1]) or not shapes[0]:
        raise ValueError(f"image and filter need one order (at least 1): shapes "
                         f"{shapes[0]} and {shapes[1]}")
    sides = pads(padding, shapes[1])
    extents = _extents(shapes, sides, [stride] * len(sides))
    text = notation(len(shapes[0]), [lo for lo, _ in sides], stride)
    formats = {name: x.format if isinstance(x, StoredTensor) else natural_format(x)
               for name, x in (("I", image), ("F", filter))}
    return _kernel(text, extents, formats, out_format, target)(I=image, F=filter)


def pool(image: object, window: Sequence[int], op: str = "max",
         stride: int | Sequence[int] | None = None, padding: Padding = "valid",
         out_format: object = "dense", target: str = "cpu") -> StoredTensor:
    """Pooling: ``O[i] = op over r in the window of I[stride*i + r - pad]`` (``op``
    'max', 'min' or 'sum'; ``stride`` defaults to the window, as deep learning's pools).
    An entry the image does not store, and a window position in the padding, reads the
    image's fill (as in ``conv``): an image with fill 0 pools its zeros too, one with
    fill -inf only its stored entries (an empty window gives -inf; so deep learning
    pads a max pool). The window is a
    dense operand of ones (fill 1), so that it multiplies the image exactly."""
    if op not in ("max", "min", "sum"):
        raise ValueError(f"op must be 'max', 'min' or 'sum', not {op!r}")
    shape = tuple(getattr(image, "shape", ()))
    sizes = tuple(window) if isinstance(window, Sequence) else ()
    if len(sizes) != len(shape) or not shape or any(
            not isinstance(k, int) or isinstance(k, bool) or k < 1 for k in sizes):
        raise ValueError(f"window must be one positive int per mode of the image "
                         f"({len(shape)}), not {window!r}")
    strides = list(sizes) if stride is None else [stride] * len(sizes) \
        if isinstance(stride, int) else list(stride)
    if len(strides) != len(sizes) or any(
            not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in strides):
        raise ValueError(f"stride must be a positive int or one per mode, not {stride!r}")
    sides = pads(padding, sizes)
    extents = _extents([shape, sizes], sides, strides)
    text = notation(len(shape), [lo for lo, _ in sides], strides, op)
    ones = tensor_class().from_numpy(np.ones(sizes), format="dense", fill=1.0)
    formats = {"I": image.format if isinstance(image, StoredTensor) else natural_format(image),
               "F": ones.format}
    return _kernel(text, extents, formats, out_format, target)(I=image, F=ones)
