"""The NumPy API a pydata/sparse user switches to: var/std, nan-reductions, dtype=,
shape functions and any numpy ufunc, each against numpy on the same dense values, in
COO, CSR, CSC, dense, and a sparse format whose fill is not 0."""

import operator
import warnings

import numpy as np
import pytest
import sparse

import llvsparse as ls

# (format, fill): the fill is what the entries not stored hold.
LAYOUTS = [("coo", None), ("csr", None), ("csc", None), ("dense", None), ("coo", 2.0),
           ("csr", -1.5)]


def operand(shape, layout, seed=0, density=0.4, dtype=np.float64):
    """A random array with about ``density`` of its entries off the fill, and the
    tensor holding it in ``layout`` (COO for CSR and CSC beyond matrices)."""
    fmt, fill = layout
    fmt = "coo" if fmt in ("csr", "csc") and len(shape) != 2 else fmt
    rng = np.random.default_rng(seed)
    values = (rng.random(shape) * 10 - 3).astype(dtype)
    values[rng.random(shape) > density] = fill or 0
    tensor = ls.Tensor.from_numpy(values, format=fmt, fill=fill) if fill is not None \
        else ls.Tensor.from_numpy(values, format=fmt)
    return values, tensor


def close(result, expected):
    """Same dense values (NaN where NaN), same shape and dtype."""
    got = np.asarray(result)
    assert got.shape == np.shape(expected)
    assert got.dtype == np.asarray(expected).dtype, (got.dtype, np.asarray(expected).dtype)
    tight = got.dtype != np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-10 if tight else 1e-6,
                               atol=1e-12 if tight else 1e-6, equal_nan=True)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1), -1])
@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std(layout, axis, name):
    values, tensor = operand((5, 7), layout)
    close(getattr(tensor, name)(axis=axis), getattr(np, name)(values, axis=axis))
    close(getattr(np, name)(tensor, axis=axis, ddof=1), getattr(np, name)(values, axis=axis,
                                                                           ddof=1))
    close(getattr(tensor, name)(axis=axis, keepdims=True),
          getattr(np, name)(values, axis=axis, keepdims=True))


def test_var_edge_cases():
    """One entry per cell (ddof=1 divides by 0: NaN as numpy), an empty tensor, an
    infinite value, integers (float64 results)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's "Degrees of freedom"
        values, tensor = operand((3, 1), ("coo", None))
        close(tensor.var(axis=1, ddof=1), np.var(values, axis=1, ddof=1))
        empty = ls.Tensor.from_coo(np.zeros((2, 0), int), np.zeros(0), (3, 4))
        close(empty.std(axis=0), np.zeros(4))
        with_inf = np.array([[np.inf, 0.0], [1.0, 0.0]])
        close(ls.Tensor.from_numpy(with_inf, format="csr").var(axis=0), np.var(with_inf, 0))
    integers = np.array([[1, 0, 3], [0, 0, 7]], np.int32)
    close(ls.Tensor.from_numpy(integers, format="coo").var(), np.var(integers))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", ["nansum", "nanmax", "nanmin", "nanmean", "nanprod"])
def test_nan_reductions(layout, name):
    values, tensor = operand((4, 6), layout, density=0.5)
    values[1, 2] = values[3, 0] = np.nan
    values[:, 5] = np.nan  # a column of NaN only
    fmt, fill = layout
    tensor = ls.Tensor.from_numpy(values, format=fmt, fill=fill) if fill is not None \
        else ls.Tensor.from_numpy(values, format=fmt)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's "All-NaN slice"
        for axis in (None, 0, 1):
            close(getattr(np, name)(tensor, axis=axis), getattr(np, name)(values, axis=axis))
        close(getattr(np, name)(tensor, axis=0, keepdims=True),
              getattr(np, name)(values, axis=0, keepdims=True))


def test_nan_reductions_of_integers_are_plain():
    values = np.array([[2**30, 0], [2**30, 5]], np.int32)
    tensor = ls.Tensor.from_numpy(values, format="csr")
    close(np.nansum(tensor), np.nansum(values))
    close(np.nanmax(tensor, axis=0), np.nanmax(values, axis=0))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reductions_with_dtype(layout):
    values, tensor = operand((4, 5), layout)
    close(tensor.sum(axis=0, dtype=np.float32), values.sum(axis=0, dtype=np.float32))
    close(np.sum(tensor, dtype=np.float32), np.sum(values, dtype=np.float32))
    close(tensor.mean(axis=1, dtype=np.float32), values.mean(axis=1, dtype=np.float32))
    integers = (values * 3).astype(np.int64)
    ints = ls.Tensor.from_numpy(integers, format=layout[0])
    close(ints.prod(axis=1, dtype=np.float64), integers.prod(axis=1, dtype=np.float64))
    close(ints.sum(dtype=np.int32), integers.sum(dtype=np.int32))
    close(tensor.sum(axis=0, dtype=np.float16), values.sum(axis=0, dtype=np.float16))
    with pytest.raises(TypeError, match="object"):
        tensor.sum(dtype=object)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reshape_and_axes(layout):
    values, tensor = operand((4, 6), layout)
    close(tensor.reshape(3, 8), values.reshape(3, 8))
    close(np.reshape(tensor, (-1, 2, 3)), values.reshape(-1, 2, 3))
    close(tensor.reshape(24), values.reshape(24))
    close(tensor.reshape((6, 4), order=None), values.reshape((6, 4), order=None))
    close(np.expand_dims(tensor, 1), np.expand_dims(values, 1))
    close(np.expand_dims(tensor, (0, 3)), np.expand_dims(values, (0, 3)))
    close(np.squeeze(np.expand_dims(tensor, (0, 2))), values)
    close(np.expand_dims(tensor, -1).squeeze(axis=2), values)
    cube, cube_values = tensor.reshape(2, 2, 6), values.reshape(2, 2, 6)
    close(np.moveaxis(cube, 0, -1), np.moveaxis(cube_values, 0, -1))
    close(np.moveaxis(cube, [0, 1], [2, 0]), np.moveaxis(cube_values, [0, 1], [2, 0]))
    close(np.swapaxes(cube, 0, 2), np.swapaxes(cube_values, 0, 2))
    close(cube.transpose((1, 0, 2)), cube_values.transpose((1, 0, 2)))
    close(np.broadcast_to(tensor, (3, 4, 6)), np.broadcast_to(values, (3, 4, 6)))
    column = tensor.reshape(4, 1, 6)
    close(np.broadcast_to(column, (2, 4, 5, 6)),
          np.broadcast_to(values.reshape(4, 1, 6), (2, 4, 5, 6)))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_roll(layout):
    values, tensor = operand((4, 6), layout)
    for shift, axis in ((1, None), (-7, None), (2, 0), (-1, 1), ((1, 2), (0, 1)),
                        (3, (1, 1)), (0, 0)):
        close(np.roll(tensor, shift, axis), np.roll(values, shift, axis))
    empty_values, empty = operand((0, 3), layout)
    close(np.roll(empty, 2, 1), np.roll(empty_values, 2, 1))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_fill_kept_by_shape_functions(layout):
    """A result of a sparse operand keeps its fill (else sums would be off)."""
    values, tensor = operand((4, 6), layout)
    for result, expected in ((tensor.reshape(8, 3), values.reshape(8, 3)),
                             (np.expand_dims(tensor, 0), values[None]),
                             (np.broadcast_to(tensor, (2, 4, 6)),
                              np.broadcast_to(values, (2, 4, 6)))):
        close(result.sum(), expected.sum())
        if layout[0] != "dense":
            assert result.fill_value == (layout[1] or 0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_concatenate_and_stack(layout):
    values, tensor = operand((3, 5), layout)
    other_values, other = operand((3, 5), layout, seed=1)
    close(np.concatenate([tensor, other]), np.concatenate([values, other_values]))
    close(np.concatenate([tensor, other], axis=1), np.concatenate([values, other_values], 1))
    close(np.concatenate([tensor, other], axis=None),
          np.concatenate([values, other_values], axis=None))
    close(np.stack([tensor, other, tensor], axis=2),
          np.stack([values, other_values, values], axis=2))
    close(np.stack([tensor, other], axis=-1), np.stack([values, other_values], axis=-1))


def test_shape_errors_name_the_problem():
    _, tensor = operand((4, 6), ("coo", None))
    with pytest.raises(ValueError, match=r"size 24 into shape \(5, 5\)"):
        tensor.reshape(5, 5)
    with pytest.raises(ValueError, match="only one extent may be -1"):
        tensor.reshape(-1, -1)
    with pytest.raises(ValueError, match="cannot squeeze axis 0"):
        tensor.squeeze(axis=0)
    with pytest.raises(ValueError, match="cannot broadcast shape"):
        np.broadcast_to(tensor, (4, 5))
    with pytest.raises(ValueError, match="differ off that axis"):
        np.concatenate([tensor, tensor.reshape(6, 4)])
    with pytest.raises(ValueError, match="different fill values"):
        np.concatenate([tensor, operand((4, 6), ("coo", 2.0))[1]])
    with pytest.raises(ValueError, match="order must be 'C' or 'F'"):
        tensor.reshape(6, 4, order="K")


@pytest.mark.parametrize("fmt, fill", [("coo", None), ("csr", None), ("coo", 2.0), ("dense", None)])
def test_reshape_in_fortran_order(fmt, fill):
    dense, tensor = operand((4, 6), (fmt, fill))
    for shape in [(6, 4), (2, 3, 4), (24,), (-1, 2)]:
        got = np.reshape(tensor, shape, order="F")
        np.testing.assert_array_equal(np.asarray(got), dense.reshape(shape, order="F"))
    np.testing.assert_array_equal(np.asarray(tensor.flatten(order="F")),
                                  dense.flatten(order="F"))


UNARY = [np.sin, np.tanh, np.expm1, np.log1p, np.conjugate, np.cos, np.floor, np.isnan,
         np.sign, np.arctan, np.square, np.isfinite]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("ufunc", UNARY, ids=lambda u: u.__name__)
def test_unary_ufuncs(layout, ufunc):
    values, tensor = operand((4, 6), layout)
    with np.errstate(all="ignore"):
        result, expected = ufunc(tensor), ufunc(values)
    close(result, expected)
    if layout[0] != "dense":  # paper 004: f(fill) is the result's fill
        fill = np.asarray(layout[1] or 0, values.dtype)
        with np.errstate(all="ignore"):
            np.testing.assert_equal(result.fill_value, ufunc(fill).item())


OPERATORS = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift,
             operator.floordiv, operator.mod]


@pytest.mark.parametrize("fmt", ["coo", "csr", "csc", "dense"])
@pytest.mark.parametrize("op", OPERATORS, ids=lambda o: o.__name__)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_operators(fmt, op, dtype):
    rng = np.random.default_rng(3)
    x = (rng.random((4, 6)) * 9).astype(dtype)
    y = (rng.random((4, 6)) * 5).astype(dtype)
    x[x < 4], y[y < 2] = 0, 0  # different patterns: aligned on their union
    a, b = ls.Tensor.from_numpy(x, format=fmt), ls.Tensor.from_numpy(y, format=fmt)
    with np.errstate(all="ignore"):
        for left, right, dense_left, dense_right in ((a, b, x, y), (a, 3, x, 3), (5, b, 5, y),
                                                     (a, y, x, y)):
            close(op(left, right), op(dense_left, dense_right))
    close(~a, ~x)
    close(np.left_shift(a, 2), np.left_shift(x, 2))


def test_ufunc_with_fill_and_different_patterns():
    """Two operands storing different coordinates, with different fills: every entry is
    f of the two values there, stored or fill."""
    x = np.full((3, 4), 2.0)
    x[0, 1], x[2, 3] = 5.0, -1.0
    y = np.zeros((3, 4))
    y[0, 1], y[1, 0] = 0.5, 3.0
    a = ls.Tensor.from_numpy(x, format="coo", fill=2.0)
    b = ls.Tensor.from_numpy(y, format="csr")
    result = np.arctan2(a, b)
    close(result, np.arctan2(x, y))
    assert result.fill_value == np.arctan2(2.0, 0.0)


def test_ufunc_refusals_name_the_problem():
    values, tensor = operand((3, 3), ("coo", None))
    close(np.log1p(tensor, dtype=np.complex128), np.log1p(values, dtype=np.complex128))
    close(tensor * 1j, values * 1j)
    with pytest.raises(TypeError, match=r"np.modf: where= is not supported"):
        np.modf(tensor, where=np.ones((3, 3), bool))
    with pytest.raises(TypeError, match=r"np.sin\(..., out=\): out must be one Tensor"):
        np.sin(tensor, out=np.zeros((3, 3)))
    with pytest.raises(TypeError, match="where= is not supported"):
        np.sin(tensor, where=np.ones((3, 3), bool))


def test_todense():
    values, tensor = operand((3, 4), ("coo", 2.0))
    dense = tensor.todense()
    assert isinstance(dense, np.ndarray)
    close(dense, values)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_stacked_matmul_broadcasts_stacks(layout):
    """numpy's matmul broadcasts stacks of different depths and extent-1 stacks."""
    a, A = operand((2, 3, 4, 5), layout, seed=4)
    b, B = operand((5, 3), layout, seed=5)
    c, C = operand((3, 5, 2), layout, seed=6)
    d, D = operand((2, 1, 4, 5), layout, seed=7)
    close(A @ B, a @ b)
    close(A @ C, a @ c)
    close(D @ C, d @ c)
    close(np.matmul(A, c), a @ c)
    with pytest.raises(ValueError):
        A @ operand((4, 5, 2), layout)[1]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_einsum_forms(layout):
    """'...', the sublist form, an implicit output and three operands whose storage
    orders conflict in one kernel."""
    a, A = operand((3, 4), layout, seed=1)
    b, B = operand((4, 3), layout, seed=2)
    c, C = operand((5, 2, 3), layout, seed=3)
    close(np.einsum("bd,db,eac->ace", A, B, C), np.einsum("bd,db,eac->ace", a, b, c))
    close(np.einsum("...j,j...->...", A, B), np.einsum("...j,j...->...", a, b))
    close(np.einsum("...ij->...ji", C), np.einsum("...ij->...ji", c))
    close(np.einsum("i...->...", C), np.einsum("i...->...", c))
    close(np.einsum("...j", C), np.einsum("...j", c))
    close(np.einsum(A, [0, 1], B, [1, 2]), np.einsum(a, [0, 1], b, [1, 2]))
    close(np.einsum(A, [0, 1], B, [1, 0], [0]), np.einsum(a, [0, 1], b, [1, 0], [0]))
    close(np.einsum(C, [Ellipsis, 1], [1, Ellipsis]), np.einsum(c, [Ellipsis, 1], [1, Ellipsis]))
    close(np.einsum("ij,jk,kl->il", A, B, A), np.einsum("ij,jk,kl->il", a, b, a))
    close(np.einsum("ij,jk->ik", A, B, dtype=np.float32),
          np.einsum("ij,jk->ik", a, b, dtype=np.float32, casting="unsafe"))


def test_einsum_errors_name_the_part():
    _, A = operand((3, 4), ("coo", None))
    with pytest.raises(ValueError, match="name 2 operands, given 1"):
        np.einsum("ij,jk", A)
    with pytest.raises(ValueError, match="at most one '...'"):
        np.einsum("i.j", A)
    with pytest.raises(ValueError, match="more letters than the 2 axes"):
        np.einsum("ijk...", A)
    with pytest.raises(ValueError, match="sublist item 'x'"):
        np.einsum(A, ["x", 1])


def test_pydata_names():
    values, tensor = operand((4, 5), ("csr", None))
    coords, data = tensor.coords, tensor.data
    rebuilt = np.zeros((4, 5))
    rebuilt[tuple(coords)] = data
    close(rebuilt, values)
    close(tensor.to_scipy_sparse().toarray(), values)
    close(tensor.tocsc().toarray(), values)
    close(tensor.dot(values.T), values @ values.T)
    close(tensor.flatten(), values.ravel())
    filled_values, filled = operand((4, 5), ("coo", 2.0))
    with pytest.raises(ValueError, match=r"fill_value=2.0 but should be in \[0\]"):
        filled.to_scipy_sparse()
    with pytest.raises(ValueError, match=r"should be in \[5\]"):  # pydata's: not 0 too
        tensor.to_scipy_sparse(accept_fv=5)
    stored = filled.to_scipy_sparse(accept_fv=[0, 2.0]).toarray()
    close(stored, np.where(filled_values == 2.0, 0.0, filled_values))


@pytest.mark.parametrize("fill", [4.0, np.nan, 0.0])
def test_a_0d_array_storing_nothing_holds_its_fill(fill):
    """A 0-d pydata array with no stored entry converted to 0.0 whatever its fill."""
    array = sparse.COO.from_numpy(np.array(fill), fill_value=fill)
    assert array.nnz == 0
    got = ls.Tensor.from_pydata(array)
    np.testing.assert_array_equal(got.todense(), np.array(fill))
    np.testing.assert_array_equal(ls.Tensor.from_coo(np.zeros((0, 0), int), [], (), fill=fill)
                                  .todense(), np.array(fill))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4), (0, 3)])
def test_ufuncs_of_two_results(layout, shape):
    """np.divmod, np.modf, np.frexp and divmod() give a tuple of tensors, each with the
    stored entries' results and the fill's."""
    a, A = operand(shape, layout, seed=7)
    b, B = operand(shape, layout, seed=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # x % 0, as numpy warns
        for got, want in [(np.modf(A), np.modf(a)), (np.frexp(A), np.frexp(a)),
                          (np.divmod(A, 3.0), np.divmod(a, 3.0)), (divmod(A, 2.0), divmod(a, 2.0)),
                          (divmod(7.0, A), divmod(7.0, a)), (np.divmod(A, B), np.divmod(a, b))]:
            assert isinstance(got, tuple) and len(got) == len(want) == 2
            for part, expected in zip(got, want):
                assert isinstance(part, ls.Tensor)
                close(part, expected)
    i = np.arange(-6, 6).reshape(3, 4) * (np.arange(12).reshape(3, 4) % 3 > 0)
    I = ls.Tensor.from_numpy(i, format="csr")
    for part, expected in zip(divmod(I, 4), divmod(i, 4)):
        close(part, expected)
