"""Every descriptor field a kernel trusts is checked before native code: a corrupted
field is refused with CorruptTensorError (or ValueError for out=), never a crash or a
wrong answer. Reproductions that crashed the process run in a subprocess."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls

MATRIX = sp.random(6, 8, density=0.4, format="csr", random_state=0)


def _rebuilt(tensor: ls.Tensor, **fields) -> ls.Tensor:
    """A tensor from the constructor with ``tensor``'s fields, some replaced."""
    args = {"shape": tensor.shape, "format": tensor.format, "dtype": tensor.dtype,
            "index_dtype": tensor.index_dtype, "level_extents": list(tensor.level_extents),
            "level_arrays": [dict(a) for a in tensor.level_arrays],
            "params": [dict(p) for p in tensor.params], "values": tensor.values}
    args.update(fields)
    return ls.Tensor(**args)


def _run_isolated(body: str) -> subprocess.CompletedProcess:
    script = textwrap.dedent("""
        import numpy as np, scipy.sparse as sp, llvsparse as ls
        A = sp.random(6, 8, density=0.4, format="csr", random_state=0)
        T = ls.Tensor.from_scipy(A)
        arrays = [dict(a) for a in T.level_arrays]
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=False)


def test_fewer_rows_in_shape_than_stored_is_refused_not_a_segfault():
    done = _run_isolated("""
        B = ls.Tensor((2, 8), T.format, "float64", T.index_dtype, T.level_extents, arrays,
                      T.params, T.values)
        for check in (True, False):  # the O(1) checks hold for trusted calls too
            try:
                ls.evaluate("y(i) = A(i,j) * x(j)", A=B, x=np.ones(8), check=check)
            except ls.CorruptTensorError as error:
                print("refused:", error)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("refused: level 0 (dense) has extent 6") == 2, done.stdout


def test_extent_past_the_shape_is_refused_not_read_past_x():
    crd = MATRIX.indices.astype(np.int32)
    crd[MATRIX.indptr[1] - 1] = 9  # the last entry of row 0: still increasing
    T = ls.Tensor.from_scipy(MATRIX)
    B = _rebuilt(T, level_extents=[6, 10],
                 level_arrays=[{}, {"pos": T.level_arrays[1]["pos"], "crd": crd}])
    with pytest.raises(ls.CorruptTensorError, match="level 1 .* extent 10, but shape"):
        ls.evaluate("y(i) = A(i,j) * x(j)", A=B, x=np.ones(8))
    # With a shape that agrees, the stored column 9 is the walk's to refuse.
    C = _rebuilt(T, shape=(6, 10), level_extents=[6, 10],
                 level_arrays=[{}, {"pos": T.level_arrays[1]["pos"], "crd": crd}])
    y = ls.evaluate("y(i) = A(i,j) * x(j)", A=C, x=np.ones(10)).to_numpy()
    expected = sp.csr_matrix((MATRIX.data, crd, MATRIX.indptr), shape=(6, 10)) @ np.ones(10)
    np.testing.assert_allclose(y, expected)


@pytest.mark.parametrize("fmt, extents, match", [
    ("bcsr2x2", [3, 4, 2, 1], "level 3 .* extent 1, but shape"),
    ("bcsr2x2", [4, 4, 2, 2], "level 0 .* extent 4, but shape"),
    ("dia", None, "level 1 \\(range\\) has extent 7"),
    ("ell", None, "level 1 \\(dense\\) has extent 7"),
    ("ell-rows", None, "level 0 \\(dense\\) has extent 7"),
    ("csc", [9, 6], "level 0 .* extent 9, but shape .* \\(mode 1\\)"),
])
def test_extents_follow_the_shape_through_mode_order_and_blocks(fmt, extents, match):
    T = ls.Tensor.from_scipy(MATRIX, format=fmt)
    if extents is None:  # the level of mode 0 gets 7 rows
        extents = list(T.level_extents)
        extents[next(k for k, lv in enumerate(T.format.levels) if lv.mode == 0)] = 7
    with pytest.raises(ls.CorruptTensorError, match=match):
        _rebuilt(T, level_extents=extents).validate()
    _rebuilt(T).validate()  # the fields as packed pass


def test_shape_that_is_not_whole_blocks_is_refused():
    T = ls.Tensor.from_scipy(MATRIX, format="bcsr2x2")
    with pytest.raises(ls.CorruptTensorError, match="whole number of blocks"):
        _rebuilt(T, shape=(7, 8)).validate()


def test_storage_only_extent_must_not_be_negative():
    T = ls.Tensor.from_scipy(MATRIX, format="dia")
    extents = list(T.level_extents)
    extents[0] = -1
    with pytest.raises(ls.CorruptTensorError, match="negative extent"):
        _rebuilt(T, level_extents=extents).validate()


@pytest.mark.parametrize("fields, match", [
    ({"level_extents": [6]}, "level_extents has 1 entries"),
    ({"level_arrays": [{}]}, "level_arrays has 1 entries"),
    ({"params": [{}, {}, {}]}, "params has 3 entries"),
    ({"shape": (6,)}, "shape \\(6,\\) has 1 modes"),
    ({"shape": (6, -8), "level_extents": [6, -8]}, "negative"),
    ({"index_dtype": np.int16}, "index dtype must be int32 or int64"),
])
def test_counts_and_dtypes_are_checked(fields, match):
    T = ls.Tensor.from_scipy(MATRIX)
    if fields.get("index_dtype") is np.int16:
        fields["level_arrays"] = [{}, {k: v.astype(np.int16)
                                       for k, v in T.level_arrays[1].items()}]
    with pytest.raises(ls.CorruptTensorError, match=match):
        _rebuilt(T, **fields).validate()


def test_int32_indices_cannot_carry_a_wider_extent():
    T = ls.Tensor.from_scipy(MATRIX)
    with pytest.raises(ls.CorruptTensorError, match="more than int32 indices hold"):
        _rebuilt(T, shape=(6, 2**31), level_extents=[6, 2**31]).validate()


@pytest.mark.parametrize("params, match", [
    ([{}], "missing \\['W'\\]"),
    ([{"W": 4, "V": 2}], "unknown \\['V'\\]"),
    ([{"W": 1.5}], "parameter W is 1.5"),
    ([{"W": True}], "parameter W is True"),
    ([{"W": 2**40}], "at most"),
])
def test_level_parameters_are_checked(params, match):
    T = ls.Tensor.from_numpy(np.arange(4.0), format=ls.Format([ls.Level("hashed", 0)]))
    with pytest.raises(ls.CorruptTensorError, match=match):
        _rebuilt(T, params=params).validate()


def _unaligned(array: np.ndarray) -> np.ndarray:
    raw = np.zeros(array.nbytes + 1, dtype=np.uint8)
    view = raw[1:].view(array.dtype)
    view[:] = array
    assert not view.flags.aligned
    return view


@pytest.mark.parametrize("corrupt", [
    lambda a: a.astype(a.dtype.newbyteorder()),  # same values, swapped bytes
    _unaligned,
    lambda a: np.repeat(a, 2)[::2],  # not contiguous
    lambda a: a.reshape(1, -1),  # not 1-d
    list,  # not an array
])
def test_index_arrays_layout_is_checked(corrupt):
    T = ls.Tensor.from_scipy(MATRIX)
    arrays = [{}, dict(T.level_arrays[1])]
    arrays[1]["crd"] = corrupt(np.array(arrays[1]["crd"]))
    with pytest.raises(ls.CorruptTensorError, match="array 'crd' must be a contiguous"):
        _rebuilt(T, level_arrays=arrays).validate()


@pytest.mark.parametrize("corrupt", [
    lambda a: a.astype(a.dtype.newbyteorder()), _unaligned,
    lambda a: a.reshape(1, -1), lambda a: np.repeat(a, 2)[::2],
])
def test_values_layout_is_checked(corrupt):
    T = ls.Tensor.from_scipy(MATRIX)
    with pytest.raises(ls.CorruptTensorError, match="values must be"):
        _rebuilt(T, values=corrupt(np.array(T.values))).validate()


def test_values_shorter_than_the_levels_address_are_refused():
    T = ls.Tensor.from_scipy(MATRIX)
    with pytest.raises(ls.CorruptTensorError, match="values has"):
        _rebuilt(T, values=np.array(T.values[:-1])).validate()


@pytest.mark.parametrize("corrupt", [
    _unaligned, lambda a: a.astype(a.dtype.newbyteorder()),
    lambda a: np.lib.stride_tricks.as_strided(a, writeable=False),
])
def test_out_array_layout_is_checked(corrupt):
    kernel = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    A = ls.Tensor.from_scipy(MATRIX)
    out = corrupt(np.zeros(6))
    with pytest.raises(ValueError, match="out= must be a writable, aligned"):
        kernel(A=A, x=np.ones(8), out=out)
    np.testing.assert_allclose(kernel(A=A, x=np.ones(8), out=np.zeros(6)).to_numpy(),
                               MATRIX @ np.ones(8))
