"""Bad input raises a specific Python exception before any native code runs."""

from __future__ import annotations

import numpy as np
import pytest

import llvsparse as ls
from llvsparse.abi.runtime import KernelRuntimeError

B = np.array([[5, 1, 0, 0], [7, 3, 0, 0], [0, 0, 0, 0], [8, 0, 4, 9]], dtype=float)


def _csr():
    return ls.Tensor.from_numpy(B, format="csr")


def _spmv(A, x=None):
    return ls.evaluate("y(i) = A(i,j) * x(j)", A=A, x=np.ones(4) if x is None else x)


def test_pos_not_monotone():
    A = _csr()
    A.level_arrays[1]["pos"] = np.array([0, 2, 1, 4, 7], dtype=np.int32)
    with pytest.raises(ls.CorruptTensorError, match="decreasing"):
        _spmv(A)


def test_pos_past_crd():
    A = _csr()
    A.level_arrays[1]["pos"] = np.array([0, 2, 4, 4, 70], dtype=np.int32)
    with pytest.raises(ls.CorruptTensorError, match="crd"):
        _spmv(A)


def test_crd_out_of_range():
    A = _csr()
    A.level_arrays[1]["crd"] = A.level_arrays[1]["crd"].copy()
    A.level_arrays[1]["crd"][0] = 17
    with pytest.raises(ls.CorruptTensorError, match="outside"):
        _spmv(A)


def test_unsorted_crd_in_ordered_level():
    A = _csr()
    crd = A.level_arrays[1]["crd"].copy()
    crd[0], crd[1] = crd[1], crd[0]
    A.level_arrays[1]["crd"] = crd
    with pytest.raises(ls.CorruptTensorError, match="increasing"):
        _spmv(A)


def test_duplicate_in_unique_unordered_level():
    fmt = ls.Format([ls.Level("dense", 0), ls.Level("compressed", 1, {"ordered": False})])
    A = ls.Tensor.from_numpy(B, format=fmt)
    crd = A.level_arrays[1]["crd"].copy()
    crd[1] = crd[0]
    A.level_arrays[1]["crd"] = crd
    with pytest.raises(ls.CorruptTensorError, match="duplicates"):
        _spmv(A)


def test_values_too_short():
    A = _csr()
    A.values = A.values[:3].copy()
    with pytest.raises(ls.CorruptTensorError, match="values"):
        _spmv(A)


def test_wrong_index_dtype_is_caught_even_without_checks():
    A = _csr()
    A.level_arrays[1]["crd"] = A.level_arrays[1]["crd"].astype(np.int64)
    with pytest.raises(ls.CorruptTensorError, match="int32"):
        ls.compile("y(i) = A(i,j) * x(j)", A="csr")(check=False, A=A, x=np.ones(4))


def test_shape_mismatch_names_the_index():
    with pytest.raises(ls.ShapeError, match="index j"):
        _spmv(_csr(), np.ones(5))


def test_order_mismatch():
    with pytest.raises((ls.ShapeError, ls.FormatError), match="order"):
        ls.evaluate("y(i) = A(i,j,k) * x(j)", A=_csr(), x=np.ones(4))


def test_syntax_error_points_at_column():
    with pytest.raises(ls.NotationSyntaxError) as info:
        ls.compile("y(i) = A(i,j) * * x(j)", A="csr")
    assert info.value.column == 16


def test_unknown_format_name():
    with pytest.raises(ls.FormatError, match="unknown format"):
        ls.Tensor.from_numpy(B, format="csrr")


def test_fixed_property_cannot_be_overridden():
    with pytest.raises(ls.FormatError, match="fixed"):
        ls.Format([ls.Level("dense", 0), ls.Level("hashed", 1, {"ordered": True})])


def test_matrix_format_for_a_vector():
    with pytest.raises(ls.FormatError, match="matrices"):
        ls.Tensor.from_numpy(np.ones(3), format="csr")


def test_output_without_assembly_capability():
    with pytest.raises(ls.ScheduleError, match="storage-only|cannot be an output"):
        ls.evaluate("C(i,j) = A(i,j)", out_format="dia", A=_csr())


def test_append_output_needing_workspace_gets_one():
    """Refused until workspaces (ScheduleError naming the missing workspace)."""
    C = ls.evaluate("C(i,j) = A(i,k) * D(k,j)", out_format="csr", A=_csr(),
                    D=ls.Tensor.from_numpy(B, format="csr"))
    np.testing.assert_array_equal(C.to_numpy(), B @ B)


def test_coordinates_out_of_shape():
    with pytest.raises(ValueError, match="outside"):
        ls.Tensor.from_coo([[0, 5], [0, 0]], [1.0, 2.0], (4, 4), format="csr")


def test_unregistered_level_format():
    with pytest.raises(KeyError, match="known"):
        ls.Format([ls.Level("bitmapz", 0)])


def test_zero_hash_width_is_rejected_before_native_code():
    tensor = ls.Tensor.from_numpy(np.arange(4.0), format=ls.Format([ls.Level("hashed", 0)]))
    tensor.params[0]["W"] = 0
    with pytest.raises(ls.CorruptTensorError, match="positive"):
        ls.evaluate("y(i) = t(i) * 2", t=tensor)
    with pytest.raises(ls.FormatError, match="positive"):
        ls.Format([ls.Level("hashed", 0, params={"W": 0})])


def test_packing_into_a_format_no_kernel_can_assemble_is_a_clear_error():
    """A dense level below an appended one cannot be an output; packing into it once
    recursed between from_coo and the host-sorting fallback until the stack ran out."""
    dense = np.zeros((3, 4, 5))
    dense[0, 1, 2] = 1.0
    with pytest.raises(ls.ScheduleError, match="cannot pack a tensor into"):
        ls.Tensor.from_numpy(dense, format=ls.Format(["compressed", "dense", "compressed"]))


@pytest.mark.parametrize("levels", [["dense", "singleton"], ["compressed", "singleton"],
                                    ["hashed", "singleton"],
                                    ["compressed", "singleton", "singleton"],
                                    ["dense", "compressed", "singleton"]])
def test_one_child_below_a_unique_level_is_no_output(levels):
    """A branchless level below a unique one stores one entry per coordinate there.
    Assembled anyway, [dense, singleton] put entries under the wrong rows and
    [compressed, singleton] repeated a unique coordinate (sums over it came out wrong),
    both silently; packing into them went through the same copy kernel."""
    dense = np.zeros((3, 3, 3)[:len(levels)])
    dense[(0,) * len(levels)] = 1.0
    dense[(0, 1, 1)[:len(levels)]] = 2.0
    fmt = ls.Format(levels)
    with pytest.raises(ls.ScheduleError, match="one child per position"):
        ls.Tensor.from_numpy(dense, format=fmt)
    with pytest.raises(ls.ScheduleError, match="one child per position"):
        ls.Tensor.from_numpy(dense, format="coo").asformat(fmt)
    indices = "ijk"[:len(levels)]
    statement = f"Z({','.join(indices)}) = A({','.join(indices)}) * 2"
    with pytest.raises(ls.ScheduleError, match="one child per position"):
        ls.evaluate(statement, out_format=fmt, A=ls.Tensor.from_numpy(dense, format="coo"))
    coo = ls.evaluate(statement, out_format="coo", A=ls.Tensor.from_numpy(dense, format="csf"))
    np.testing.assert_array_equal(coo.to_numpy(), dense * 2)


@pytest.mark.parametrize("fmt, level, name, index, value", [
    ("csr", 1, "pos", 4, 2**31 - 1), ("dcsr", 0, "pos", 0, -2**31),
    ("dcsr", 1, "pos", 2, 2**31 - 1), ("bcsr2x2", 1, "pos", 1, 2**31 - 1),
    ("coo", 0, "pos", 1, 2**31 - 1)])
def test_huge_or_negative_pos_is_refused_before_expanding(fmt, level, name, index, value):
    """A pos entry of 2**31 - 1 asked validation for a 16 GiB array of positions: a
    MemoryError, or the process killed for memory. Ranges, and the lengths they give
    the arrays below, are checked first."""
    A = ls.Tensor.from_numpy(B, format=fmt)
    array = A.level_arrays[level][name].copy()
    array[index] = value
    A.level_arrays[level][name] = array
    with pytest.raises(ls.CorruptTensorError, match="range|declared length"):
        _spmv(A)


def test_hashed_key_outside_its_probe_sequence():
    """Iterated, the key is there; located (SpMV iterates x and locates into A), it is
    not: the two disagreed silently. Validation now locates every stored key."""
    A = ls.Tensor.from_numpy(B, format=ls.Format(["dense", "hashed"]))
    width = int(A.params[1]["W"])
    crd = A.level_arrays[1]["crd"].copy()
    row = crd[3 * width:4 * width]  # row 3 holds 0, 2 and 3
    home = 2 % width
    row[home], row[home - 1] = row[home - 1], row[home]  # 2 one bucket before its home
    A.level_arrays[1]["crd"] = crd
    with pytest.raises(ls.CorruptTensorError, match="locate does not find"):
        _spmv(A)


def test_shared_array_held_twice_must_be_one_array():
    """DIA's offsets are shared by two levels; kernels read the first level's copy and
    a walk read each level's own, so two different arrays gave two answers."""
    A = ls.Tensor.from_numpy(B, format="dia")
    shared = [(k, name) for k, arrays in enumerate(A.level_arrays) for name in arrays]
    k, name = shared[-1]
    A.level_arrays[k][name] = A.level_arrays[k][name].copy()
    with pytest.raises(ls.CorruptTensorError, match="share array"):
        _spmv(A)


def test_duplicate_coordinates_in_coo():
    """(0, 0) twice sits under two positions of COO's non-unique row level; a merge took
    one of them. The unique column level is checked across equal rows."""
    A = ls.Tensor.from_numpy(B, format="coo")
    crd = A.level_arrays[1]["crd"].copy()
    crd[1] = crd[0]  # row 0: columns 0, 1 -> 0, 0
    A.level_arrays[1]["crd"] = crd
    with pytest.raises(ls.CorruptTensorError, match="unique"):
        ls.evaluate("C(i,j) = A(i,j) + D(i,j)", A=A, D=_csr())


CORRUPTIBLE = ["csr", "csc", "dcsr", "coo", "coo-unordered", "hash", "ell", "ell-rows", "dia",
               "bcsr2x2", ls.Format(["dense", "hashed"])]


@pytest.mark.parametrize("seed", range(60))
def test_one_corrupt_index_entry_raises_or_reads_as_stored(seed):
    """Any one index entry set to a wild or a near value: validation raises, or what a
    kernel computes agrees with what to_numpy reads from the same arrays (never a third
    reading, a crash or a huge allocation)."""
    rng = np.random.default_rng(seed)
    dense = (rng.integers(-3, 4, (8, 6)) * (rng.random((8, 6)) < 0.4)).astype(float)
    packed = ls.Tensor.from_numpy(dense, format=CORRUPTIBLE[seed % len(CORRUPTIBLE)])
    arrays = [dict(level) for level in packed.level_arrays]
    slots = [(k, name) for k, level in enumerate(arrays) for name in level]
    k, name = slots[rng.integers(len(slots))]
    array = arrays[k][name].copy()
    where = rng.integers(len(array))
    array[where] = rng.choice([-1, -2**31, 2**31 - 1, array[where] + 1, array[where] - 1, 7])
    arrays[k][name] = array
    tensor = ls.Tensor(packed.shape, packed.format, packed.dtype, packed.index_dtype,
                       packed.level_extents, arrays, packed.params, packed.values.copy())
    x, z = rng.integers(-3, 4, 6).astype(float), rng.integers(-3, 4, 8).astype(float)
    try:
        tensor.validate()
    except ls.CorruptTensorError:
        with pytest.raises(ls.CorruptTensorError):
            _spmv(tensor, x)
        return
    stored = tensor.to_numpy()
    np.testing.assert_array_equal(_spmv(tensor, x).to_numpy(), stored @ x)
    np.testing.assert_array_equal(
        ls.evaluate("y(j) = A(i,j) * z(i)", A=tensor, z=z).to_numpy(), z @ stored)
    np.testing.assert_array_equal(
        ls.evaluate("C(i,j) = A(i,j) + D(i,j)", A=tensor, D=_csr_of(dense)).to_numpy(),
        stored + dense)


def _csr_of(dense: np.ndarray) -> ls.Tensor:
    return ls.Tensor.from_numpy(dense, format="csr")


@pytest.mark.parametrize("sm", ["sm_999", "garbage", "", "sm_80\n"])
def test_unknown_gpu_architecture(sm):
    """LLVM would emit PTX for a target ptxas rejects, or abort the process."""
    spmv = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    with pytest.raises(ValueError, match="sm_NN|not a recognized processor"):
        spmv.ptx(sm)


@pytest.mark.parametrize(("dtypes", "index_dtypes", "error", "match"), [
    ({"A": "object"}, None, TypeError, "value dtype must be one of"),
    ({"A": "complex128"}, None, TypeError, "kernels on complex128 values are not supported"),
    (None, {"A": "int16"}, TypeError, "index dtype must be int32 or int64"),
    (None, {"A": "float64"}, TypeError, "index dtype must be int32 or int64"),
    ({"Z": "float32"}, None, ValueError, r"not in the expression: \['Z'\]"),
])
def test_instance_dtypes_are_checked(dtypes, index_dtypes, error, match):
    """Kernel.instance (what `llvsparse dump --dtype` uses) compiled any dtype asked for."""
    spmv = ls.compile("y(i) = A(i,j) * x(j)", A="csr", x="dense")
    with pytest.raises(error, match=match):
        spmv.instance(dtypes, index_dtypes)


@pytest.mark.parametrize(("coords", "values", "shape", "error", "match"), [
    ([[0, 1], [1, 2], [2, 0]], [1., 2., 3.], (3, 3), ValueError, r"\(2, 3\) for 3 values"),
    ([[0, 1, 2]], [1., 2.], (3,), ValueError, r"\(1, 2\) for 2 values"),
    ([[0.9, 1.5]], [1., 2.], (3,), TypeError, "coordinates must be integers"),
    ([[0], [1]], [1.], (2.9, 3), TypeError, "sequence of integers"),
    ([[0], [1]], [1.], (2, -3), ValueError, "negative extent"),
    ([[0], [1]], [1.], "ab", TypeError, "sequence of integers"),
])
def test_from_coo_refuses_what_it_would_scramble(coords, values, shape, error, match):
    """(nnz, order) pairs were reshaped, not transposed, and fractional coordinates and
    extents truncated: all silently."""
    with pytest.raises(error, match=match):
        ls.Tensor.from_coo(coords, values, shape)


def test_explicit_int32_indices_refuse_large_extents():
    with pytest.raises(ValueError, match="int32 cannot hold a size of 4000000000"):
        ls.Tensor.from_coo([[0], [3_000_000_000]], [1.0], (1, 4_000_000_000), format="csr",
                           index_dtype="int32")


def test_from_coo_accepts_its_documented_forms():
    one_d = ls.Tensor.from_coo([2, 0], [5.0, 7.0], (3,))
    np.testing.assert_array_equal(one_d.to_numpy(), [7.0, 0.0, 5.0])
    empty = ls.Tensor.from_coo([], [], (2, 2), format="csr")
    assert empty.nnz == 0 and empty.shape == (2, 2)
    scalar = ls.Tensor.from_coo(np.zeros((0, 1)), [4.0], ())
    assert scalar.to_numpy() == 4.0


@pytest.mark.parametrize(("make", "match"), [
    (lambda: ls.Level("compressed", 1, {"unique": "false"}), "must be True or False"),
    (lambda: ls.Level("dense", 0.0), "mode of level 'dense' must be a non-negative integer"),
    (lambda: ls.Level("dense", True), "mode of level 'dense' must be a non-negative integer"),
    (lambda: ls.Level("dense", -1), "non-negative integer, not -1"),
    (lambda: ls.Level(["dense"], 0), "must be a string"),
    (lambda: ls.Level("dense", 0, properties=["ordered"]), "must be a mapping"),
    (lambda: ls.Level("dense", 0, block=0), "block of level 'dense' must be a positive integer"),
    (lambda: ls.Level("dense", 0, block=1.5), "block of level 'dense' must be a positive integer"),
    (lambda: ls.Level("dense", 0, inner=True), "True only with a block"),
    (lambda: ls.Format([ls.Level("dense", 0), ls.Level("compressed", 0)]),
     "2 levels store mode 0"),
    (lambda: ls.Format([ls.Level("dense", 0), ls.Level("hashed", 1, params={"W": True})]),
     "parameter W of level 'hashed' must be a positive integer"),
    (lambda: ls.Format([ls.Level("dense", 0), ls.Level("hashed", 1, params={"W": 2**64})]),
     "more than the 2147483647"),
])
def test_level_settings_are_not_coerced(make, match):
    """'false' read as True, W = 2**64 wrapped to 0 (a division by zero in the kernel),
    and two unblocked levels on one mode read past their arrays."""
    with pytest.raises(ls.FormatError, match=match):
        make()


def test_largest_parameter_fails_cleanly():
    """Sizes derived from the largest W need more memory than there is: refused before
    the kernel (48 GiB of buckets, more than the machine has) or out of memory in it,
    not a wrapped size and writes past a small buffer."""
    fmt = ls.Format([ls.Level("dense", 0), ls.Level("hashed", 1, params={"W": 2**31 - 1})])
    with pytest.raises((MemoryError, KernelRuntimeError),
                       match="more than this machine's|out of memory"):
        ls.Tensor.from_numpy(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]), format=fmt)


@pytest.mark.parametrize(("call", "match"), [
    (lambda k, A, x: k(A=A, x=x, X=x), "tensors not in the expression: X"),
    (lambda k, A, x: k(A=A, x=x, y=np.zeros(4)), "y is the kernel's output"),
    (lambda k, A, x: k.bind(A=A, x=x, y=np.zeros(4)), "y is the kernel's output"),
    (lambda k, A, x: k(A, x), "positional argument"),
    (lambda k, A, x: k(A=A, x=x, check="no"), "check must be True or False"),
    (lambda k, A, x: ls.evaluate("y(i) = A(i,j) * x(j)", A=A, x=x, y=np.zeros(4)),
     "y is the kernel's output"),
])
def test_kernel_call_refuses_operands_it_would_ignore(call, match):
    """An unknown name, or an array under the output's name, was silently ignored."""
    spmv = ls.compile("y(i) = A(i,j) * x(j)", A="csr")
    A = ls.Tensor.from_numpy(B, format="csr")
    with pytest.raises(TypeError, match=match):
        call(spmv, A, np.ones(4))


@pytest.mark.parametrize(("expression", "dtype"), [
    ("y(i) = x(i) * 3000000000", np.int32), ("y(i) = x(i) + 9223372036854775808", np.int64),
    ("y(i) = x(i) - -2147483649", np.int32)])
def test_integer_literal_outside_the_result_dtype(expression, dtype):
    """It wrapped silently (x * 3000000000 over int32 gave -1294967296 for x = 1);
    numpy raises OverflowError for the same literal."""
    x = np.arange(3, dtype=dtype)
    with pytest.raises(OverflowError):
        x * int(expression.split()[-1])  # numpy's behaviour, the reference
    with pytest.raises(OverflowError, match="does not fit the result dtype"):
        ls.evaluate(expression, x=x)



@pytest.mark.parametrize("literal", ["9223372036854775808", "-9223372036854775809",
                                     "18446744073709551616", "9223372036854775808 + 1"])
def test_integer_literal_outside_int64_without_operands(literal):
    """With no operand, A = 9223372036854775808 gave 0 (computed in float64, stored as
    int64) and A = -9223372036854775809 a TypeError about dtype object, where the same
    literal beside an int64 operand is refused: integer literals alone are int64, as
    numpy types a Python int, and refused alike."""
    with pytest.raises(OverflowError, match="does not fit the result dtype int64"):
        ls.evaluate(f"A = {literal}")
    with pytest.raises(OverflowError, match="does not fit the result dtype int64"):
        ls.evaluate(f"y(i) = x(i) * 0 + {literal}", x=np.arange(2))


@pytest.mark.parametrize(("literal", "value"), [
    ("9223372036854775807", np.int64(2**63 - 1)), ("-9223372036854775808", np.int64(-2**63)),
    ("1.7976931348623157e308", np.float64(1.7976931348623157e308)),
    ("9223372036854775808 * 1.0", np.float64(2.0**63)), ("5e-324", np.float64(5e-324))])
def test_literals_at_the_edges_of_their_dtype_alone_and_beside_an_operand(literal, value):
    alone = ls.evaluate(f"A = {literal}").to_numpy()
    beside = ls.evaluate(f"y(i) = x(i) * 0 + {literal}", x=np.zeros(2, value.dtype))
    assert alone.dtype == beside.dtype == value.dtype
    assert alone == value and (beside.to_numpy() == value).all()
    with pytest.raises(ls.NotationError, match="too large for a float"):
        ls.evaluate("A = -1e309")  # not read as -inf, with or without operands

def test_operator_assignment_keeps_the_tensor_assigned_to():
    """out[i] = ... replaced out's shape (5 became 2) and dtype (int32 became float64)."""
    i, j = ls.index_vars("i j")
    A = ls.Tensor.from_numpy(B, format="csr")
    x = ls.Tensor.from_numpy(np.arange(4.0))
    with pytest.raises(ls.ShapeError, match=r"shape \(4,\).*shape \(5,\)"):
        out = ls.Tensor.from_numpy(np.zeros(5))
        out[i] = A[i, j] * x[j]
    with pytest.raises(TypeError, match="float64 result to a int32 tensor"):
        out = ls.Tensor.from_numpy(np.zeros(4, np.int32))
        out[i] = A[i, j] * x[j]
    out = ls.Tensor.from_numpy(np.zeros(4, np.float32))
    out[i] = A[i, j] * x[j]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.to_numpy(), B @ np.arange(4.0), rtol=1e-6)


@pytest.mark.parametrize(("text", "error", "match"), [
    ("y(i) = " + "(" * 250 + "x(i)" + ")" * 250, ls.NotationError, "nested more than 64"),
    ("y(i) = " + " * ".join(["x(i)"] * 300), ls.NotationError, "more than 256 operators"),
    ("y(i) = " + "x" * 1020 + "(i)", ls.NotationError, "longer than 256 characters"),
    (None, TypeError, "must be a string, not NoneType"),
    (b"y(i) = x(i)", TypeError, "must be a string, not bytes"),
])
def test_expression_too_large_or_not_text(text, error, match):
    """Deep nesting and long products exhausted Python's stack (RecursionError), and a
    1020-character name reached LLVM, which refused it."""
    with pytest.raises(error, match=match):
        ls.parse(text)


@pytest.mark.parametrize(("make", "match"), [
    (lambda: ls.compile("a = A(i,j) * B(i,j)", out_format="garbage"), "unknown format"),
    (lambda: ls.Tensor.from_numpy(np.array(3.0), format="nonsense"), "unknown format"),
    (lambda: ls.compile("y(i) = x(i)", x="bcsr"), "'bcsr' is for matrices"),
    (lambda: ls.compile("y(i) = x(i)", x=5), "not 5"),
    (lambda: ls.compile("y(i) = x(i)", x=b"dense"), "not b'dense'"),
])
def test_format_specs_that_name_nothing(make, match):
    """A scalar took any name (its format has no levels to look up), and 'bcsr' at the
    wrong order said it was unknown while listing it as known."""
    with pytest.raises(ls.FormatError, match=match):
        make()


def test_sum_of_many_dense_vectors_compiles():
    """Every subset of the 20 operands was a lattice point (2**20) before dense ones
    were pruned; it never finished."""
    vectors = {f"x{k}": np.arange(4.0) * (k + 1) for k in range(20)}
    expression = "y(i) = " + " + ".join(f"{name}(i)" for name in vectors)
    np.testing.assert_array_equal(ls.evaluate(expression, **vectors).to_numpy(),
                                  sum(vectors.values()))


def test_union_of_too_many_sparse_operands_is_refused():
    vectors = {f"x{k}": ls.Tensor.from_numpy(np.eye(9)[k], format="coo") for k in range(9)}
    expression = "y(i) = " + " + ".join(f"{name}(i)" for name in vectors)
    with pytest.raises(ls.ScheduleError, match=r"\d+ cases .* more than 128"):
        ls.compile(expression, out_format="coo", **{n: "coo" for n in vectors}).instance()


@pytest.mark.parametrize(("x", "error", "match"), [
    (np.eye(4), ls.ShapeError, "x is used with 1 index but has 2 dimensions"),
    (3.0, ls.ShapeError, "x is used with 1 index but has 0 dimensions"),
    (ls.Tensor.from_numpy(np.eye(4), format="csr"), ls.FormatError,
     r"x \(used with 1 index\): format Format\('csr'\) describes order-2"),
])
def test_operand_of_the_wrong_order_is_named(x, error, match):
    """The message said a format describes order-1 tensors, without naming x."""
    A = ls.Tensor.from_numpy(B, format="csr")
    with pytest.raises(error, match=match):
        ls.evaluate("y(i) = A(i,j) * x(j)", A=A, x=x)


@pytest.mark.parametrize(("subscripts", "error"), [
    (5, TypeError), ("ij,j->i->i", ValueError), ("...j,j->...", ValueError),
    ("i1,1->i", ValueError), ("ij,j", ValueError)])
def test_einsum_subscripts_are_checked_first(subscripts, error):
    """They raised 'too many values to unpack', or a caret into the internal rewrite."""
    with pytest.raises(error, match="einsum subscripts"):
        ls.einsum(subscripts, B, np.ones(4))


def test_infinite_literal_points_at_its_column():
    with pytest.raises(ls.NotationError, match="too large for a float") as info:
        ls.parse("y(i) = x(i) * 1e400")
    assert info.value.column == 14


@pytest.mark.parametrize("expression", ["C(i,j) = A(i,j) - B(i,j)",
                                        "C(i,j) = -A(i,j) + B(i,j)",
                                        "C(i,j) = A(i,j) + B(i,j) - B(i,j)"])
def test_bool_subtraction_is_refused_like_numpy(expression):
    """Its value depended on the formats: True - True was False when computed whole and
    True when the statement was split into C = A; C += -B (-True is True)."""
    A = np.array([[True, False]])
    with pytest.raises(TypeError):
        A - A  # numpy's behaviour, the reference
    for fmt in ("dense", "hash"):
        with pytest.raises(TypeError, match="bool tensors are refused"):
            ls.evaluate(expression, A=ls.Tensor.from_numpy(A, format=fmt), B=A)
