"""The interpreter backend (target="interpret") against numpy and the LLVM backend.

It walks a kernel's loop IR in Python and reads nothing else, so a kernel it computes
right is one whose program says all the kernel does: every merge tail, duplicate run,
derived index, workspace and precomputed copy written out as nodes.
"""

from __future__ import annotations

import numpy as np
import pytest
from llvsparse.backends.interpret.walker import Walker
from llvsparse.ir.concrete.expressions import Const
from llvsparse.ir.errors import InternalCompilerError
from llvsparse.ir.loops.nodes import Accumulate, Loop, Program, Ref
from llvsparse.ir.notation.operators import ADD

import llvsparse as ls


def _array(shape, density, seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(1, 10, size=shape) * (rng.random(shape) < density)
    if shape[0] > 2:
        values[1] = 0  # an empty row
    return values.astype(float)


A, B = _array((7, 9), 0.3, 1), _array((7, 9), 0.3, 2)
M, x, z = _array((9, 6), 0.3, 3), _array((9,), 0.8, 4), _array((7,), 0.8, 5)
S, T = _array((7, 7), 0.4, 6), _array((4, 5, 6), 0.3, 7)
U, V = _array((3, 6), 0.9, 8), _array((5, 3), 0.9, 9)
Q, q = _array((8, 6), 0.4, 11), _array((6,), 0.9, 12)

MATRICES = ["dense", "csr", "csc", "coo", "dcsr", "dia", "ell", "hash"]
CATALOG = [
    *[("y(i) = A(i,j) * x(j)", {"A": f}, None, None, lambda: A @ x) for f in MATRICES],
    ("y(i) = Q(i,j) * q(j)", {"Q": "bcsr2x2"}, None, None, lambda: Q @ q),
    *[(e, {"A": f, "B": g}, o, None, ref)
      for f in ["csr", "coo", "dcsr", "hash", "csc"] for o in ["dense", "csr", "coo", "hash"]
      for e, g, ref in [("C(i,j) = A(i,j) + B(i,j)", "csr", lambda: A + B),
                        ("C(i,j) = A(i,j) * B(i,j)", f, lambda: A * B)]],
    *[("C(i,j) = A(i,k) * M(k,j)", {"A": f, "M": f}, "csr", w, lambda: A @ M)
      for f in ["csr", "dcsr"] for w in [None, "dense", "hash", "sort", "bucket"]],
    ("y(j) = A(i,j) * z(i)", {"A": "csr"}, None, None, lambda: z @ A),
    ("y(i) = A(i,j) + x(j)", {"A": "csr"}, None, None, lambda: (A + x).sum(1)),
    ("a = A(i,j) * B(i,j)", {"A": "csr", "B": "coo"}, None, None, lambda: (A * B).sum()),
    ("y(i) = max(j, A(i,j))", {"A": "csr"}, None, None, lambda: A.max(1)),
    ("y(i) = min(j, A(i,j))", {"A": "coo"}, None, None, lambda: A.min(1)),
    ("C(i,j) = A(i,j) * !B(i,j)", {"A": "csr", "B": "csr"}, "csr", None,
     lambda: A * (B == 0)),
    ("C(i,j) = A(i,j) < B(i,j)", {"A": "csr", "B": "csr"}, "dense", None, lambda: A < B),
    ("Y(i,j,r) = T(i,j,k) * U(r,k)", {"T": "csf"}, "dense", None,
     lambda: np.einsum("ijk,rk->ijr", T, U)),
    *[("Y(i,r) = T(i,j,k) * V(j,r) * U(r,k)", {"T": f}, "dense", None,
       lambda: np.einsum("ijk,jr,rk->ir", T, V, U)) for f in ["csf", "coo"]],
    ("t = S(i,j) * S(j,k) * S(i,k)", {"S": "csr"}, None, None,
     lambda: np.einsum("ij,jk,ik->", S, S, S)),
    ("y(i) = S(i,i)", {"S": "csr"}, None, None, lambda: np.diag(S)),
    ("C(i,j) = A(i,j) * sum_k(M(j,k))", {"A": "csr", "M": "csr"}, "csr", None,
     lambda: A * M.sum(1)),
]
ARRAYS = {"A": A, "B": B, "M": M, "x": x, "z": z, "S": S, "T": T, "U": U, "V": V, "Q": Q,
          "q": q}


def _label(case) -> str:
    statement, formats, out, workspace, _ = case
    shown = ",".join(f"{n}:{f}" for n, f in formats.items())
    return f"{statement} [{shown}] -> {out or 'dense'}" + (f" ws={workspace}" if workspace else "")


@pytest.mark.parametrize("case", CATALOG, ids=_label)
def test_interpreted_kernel_matches_numpy_and_native_code(case) -> None:
    statement, formats, out, workspace, reference = case
    operands = {n: ls.Tensor.from_numpy(ARRAYS[n], formats[n]) if n in formats else ARRAYS[n]
                for n in ls.parse(statement).tensors()[1:]}
    interpreted = ls.compile(statement, out_format=out, workspace=workspace,
                             target="interpret", **formats)(**operands)
    native = ls.compile(statement, out_format=out, workspace=workspace, **formats)(**operands)
    expected = np.asarray(reference())
    assert np.allclose(interpreted.to_numpy(), expected)
    assert np.array_equal(interpreted.to_numpy(), native.to_numpy())


def test_random_inputs_and_empty_edges() -> None:
    """Random patterns with fills other than 0 and operands that store nothing."""
    rng = np.random.default_rng(3)
    for trial in range(6):
        a = _array((6, 5), 0.1 + 0.15 * trial, 20 + trial)
        b = np.zeros((6, 5)) if trial == 0 else _array((6, 5), 0.4, 30 + trial)
        fill = float(rng.choice([0.0, -1.0, 2.0]))
        fa = ls.Tensor.from_numpy(np.where(a == 0, fill, a), "csr", fill=fill)
        fb = ls.Tensor.from_numpy(b, "coo")
        for statement, reference in [
                ("C(i,j) = A(i,j) + B(i,j)", np.where(a == 0, fill, a) + b),
                ("C(i,j) = A(i,j) * B(i,j)", np.where(a == 0, fill, a) * b),
                ("y(i) = A(i,j) * B(i,j)", (np.where(a == 0, fill, a) * b).sum(1))]:
            for out in ["dense", "csr"] if "C" in statement else [None]:
                kernel = ls.compile(statement, out_format=out, target="interpret",
                                    A="csr", B="coo")
                assert np.allclose(kernel(A=fa, B=fb).to_numpy(), reference), (statement, out)


def test_a_program_that_leaves_something_out_is_refused_by_name() -> None:
    """A loop over an index's universe whose extent nothing in the program gives."""
    universe = Ref("", 0, 0)
    body = Accumulate("acc", "+", Const(1.0), ADD)
    program = Program(Loop("k", "coordinates", universe, body), "y", (), 1)
    walker = Walker(program, {}, ())
    walker.scalars["acc"] = 0.0
    with pytest.raises(InternalCompilerError, match="k's universe"):
        walker.run(program.root)


def test_unknown_target_is_refused() -> None:
    with pytest.raises(ValueError, match="target must be one of"):
        ls.compile("y(i) = A(i,j) * x(j)", A="csr", target="gpu-please")


@pytest.mark.parametrize("key", [(slice(2, 6), slice(None)), (slice(1, 7, 3), slice(2, 9, 2)),
                                 (slice(None), slice(None, None, 2)), (3, slice(None))])
def test_views_are_read_through_their_windows(key) -> None:
    """A view's levels are windows of its base's (start, step, count as runtime
    parameters): the interpreter maps view coordinates as the native kernel does."""
    base_a, base_b = ls.Tensor.from_numpy(A, "csr"), ls.Tensor.from_numpy(B, "coo")
    view_a, view_b = base_a[key], base_b[key]
    dense_a, dense_b = A[key], B[key]
    vector = np.arange(dense_a.shape[-1], dtype=float)
    two = dense_a.ndim == 2
    cases = [("y(i) = V(i,j) * x(j)" if two else "y = V(j) * x(j)", {"x": vector},
              dense_a @ vector, None),
             ("C(i,j) = V(i,j) + W(i,j)" if two else "C(j) = V(j) + W(j)", {"W": view_b},
              dense_a + dense_b, "csr" if two else "coo")]
    for statement, more, reference, out in cases:
        formats = {"V": view_a.format, **({"W": view_b.format} if "W" in more else {})}
        interpreted = ls.compile(statement, out_format=out, target="interpret", **formats)
        native = ls.compile(statement, out_format=out, **formats)
        result = interpreted(V=view_a, **more).to_numpy()
        assert np.allclose(result, reference), statement
        assert np.array_equal(result, np.asarray(native(V=view_a, **more).to_numpy()))


def _fill(values: np.ndarray, fill: float) -> np.ndarray:
    return np.where(values == 0, fill, values)


def test_a_case_whose_cascaded_locate_misses_falls_through() -> None:
    """A hash operand read across its storage order: the case that locates A.0 also
    locates A.1 below it, and where that misses, the fill's case applies (review of
    the interpreter: it skipped the write and gave 1 for a column whose fill is 3)."""
    a = _fill(np.array([[0.0, 5.0], [1.0, 0.0]]), 3.0)
    hashed = ls.Tensor.from_numpy(a, "hash", fill=3.0)
    kernel = ls.compile("y(j) = max(i, A(i,j))", A="hash", target="interpret")
    assert np.array_equal(kernel(A=hashed).to_numpy(), a.max(axis=0))
    for fill in (-1.0, 3.0):
        left, right = _fill(A[:4, :4], fill), _fill(B[:4, :4], fill)
        kernel = ls.compile("y(j) = min(i, A(i,j) * B(i,j))", A="hash", B="csr",
                            target="interpret")
        result = kernel(A=ls.Tensor.from_numpy(left, "hash", fill=fill),
                        B=ls.Tensor.from_numpy(right, "csr", fill=fill))
        assert np.allclose(result.to_numpy(), (left * right).min(axis=0)), fill


def test_a_windowed_parent_gives_its_children_base_coordinates() -> None:
    """DIA's row level reads its parent's coordinate (the diagonal) and the offset
    level its grandparent's: through a view's window, the base coordinates."""
    a = np.zeros((4, 5))
    a[0, 1], a[1, 2], a[2, 0], a[3, 4], a[2, 3] = 1, 2, 3, 4, 5
    view = ls.Tensor.from_numpy(a, "dia")[1:3, :]
    x5, z2 = np.arange(1.0, 6.0), np.array([2.0, 7.0])
    kernel = ls.compile("y(i) = V(i,j) * x(j)", V=view.format, target="interpret")
    assert np.allclose(kernel(V=view, x=x5).to_numpy(), a[1:3] @ x5)
    kernel = ls.compile("y(j) = V(i,j) * z(i)", V=view.format, target="interpret")
    assert np.allclose(kernel(V=view, z=z2).to_numpy(), z2 @ a[1:3])


def test_a_complement_alone_still_gives_its_index_an_extent() -> None:
    """``!B(i,j)`` leaves B out of every case; its levels still give j's extent (the
    static legality check once refused it with "no operand gives the extent")."""
    b = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0]])
    for target in ("cpu", "interpret"):
        kernel = ls.compile("y(i) = !B(i,j)", B="csr", target=target)
        assert np.array_equal(kernel(B=ls.Tensor.from_numpy(b, "csr")).to_numpy(),
                              (b == 0).sum(axis=1))


def test_a_precomputed_copy_can_be_iterated() -> None:
    c = _fill(S, 1.0)
    kernel = ls.compile("t = A(i,j) * B(i,k) * C(k,j)", A="csr", C="csr", precompute=True,
                        target="interpret")
    got = kernel(A=ls.Tensor.from_numpy(S, "csr"), B=S,
                 C=ls.Tensor.from_numpy(c, "csr", fill=1.0)).to_numpy()
    assert np.allclose(got, np.einsum("ij,ik,kj->", S, S, c))
