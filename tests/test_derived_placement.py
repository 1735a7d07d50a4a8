"""Derived indices (blocked levels', affine subscripts') are bound, located and guarded
at the loop that completes them, as the loop IR prints, and both backends translate
those nodes where they stand (issue 31): neither binds a derived index on its own."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.signal as ss
from llvsparse.backends.interpret.walker import Walker
from llvsparse.backends.llvm.codegen import KernelCompiler
from llvsparse.ir.concrete.from_notation import to_concrete
from llvsparse.ir.errors import InternalCompilerError
from llvsparse.ir.loops.nodes import Bind, Block, CallingConvention, Locate, Node, Program, Ref
from llvsparse.ir.opt import loop_ir
from llvsparse.ir.schedule.scheduler import schedule

import llvsparse as ls

CONV = "O(h,w) = I(h+r, w+s) * F(r,s)"
TARGETS = ["cpu", "interpret"]


def _sparse(shape, density, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) * (rng.random(shape) < density)


def _dense(result) -> np.ndarray:
    return result.to_numpy() if hasattr(result, "to_numpy") else np.asarray(result)


def test_a_located_image_is_located_at_each_filter_loop() -> None:
    """I's row is located at the loop over r (h + r is complete there), inside its
    range guard, so the taps of a filter row off the image never run."""
    assert ls.compile(CONV, I="dense", F="csr").loops.splitlines() == [
        "for h in coordinates of U:  {thread rows}",
        "  for w in coordinates of U:",
        "    allocate acc: float64",
        "    clear acc = 0.0",
        "    for r in coordinates of F.0:",
        "      let I_0__1 = h + r",
        "      if 0 <= I_0__1 < extent I.0:",
        "        locate I.0 at I_0__1",
        "        for s in positions of F.1:",
        "          let I_1__1 = w + s",
        "          if 0 <= I_1__1 < extent I.1:",
        "            locate I.1 at I_1__1",
        "            acc += I(I_0__1,I_1__1) * F(r,s)",
        "    insert O(h,w) = acc()"]


def test_a_locate_that_may_miss_is_tested_where_it_is_made() -> None:
    loops = ls.compile(CONV, I="hash").loops.splitlines()
    at = loops.index("            locate I.1 at I_1__1")
    assert loops[at + 1] == "            if I.1 found:"
    assert loops[at - 3] == "        for s in coordinates of F.1:"


def test_a_walked_image_derives_the_output_row_at_the_filter_row_loop() -> None:
    assert ls.compile(CONV, I="dcsr").loops.splitlines() == [
        "for I_0__1 in positions of I.0:",
        "  for I_1__1 in positions of I.1:",
        "    for r in coordinates of F.0:",
        "      let h = I_0__1 - r",
        "      if 0 <= h < extent O.0:",
        "        for s in coordinates of F.1:",
        "          let w = I_1__1 - s",
        "          if 0 <= w < extent O.1:",
        "            O(I_0__1 - r, I_1__1 - s) += I(I_0__1,I_1__1) * F(r,s)"]


def test_blocked_indices_are_bound_where_their_block_coordinates_are() -> None:
    """w(i-1) is located at the loop over the block's rows, x(j+1) at its columns; the
    output's row is bound where its write needs it."""
    loops = ls.compile("y(i) = A(i,j) * x(j+1) * w(i-1)", A="bcsr2x2").loops.splitlines()
    assert loops[2:9] == [
        "    for A_2__1 in coordinates of A.2:",
        "      let i = 2*A_0__1 + A_2__1",
        "      let w_0__1 = 2*A_0__1 + A_2__1 - 1",
        "      if 0 <= w_0__1 < extent w.0:",
        "        locate w.0 at w_0__1",
        "        for A_3__1 in coordinates of A.3:",
        "          let x_0__1 = 2*A_1__1 + A_3__1 + 1"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("image_format, filter_format", [
    ("dense", "csr"), ("hash", "dense"), ("dcsr", "dense"), ("coo", "csr")])
def test_convolutions_match_scipy(target, image_format, filter_format) -> None:
    """Random images, one with entries on every border and one that stores nothing."""
    filt = _sparse((3, 2), 0.7, 41)
    filt[0, 0] = 1.5
    border = _sparse((9, 11), 0.3, 42)
    border[[0, -1], :] = 2.0
    border[:, [0, -1]] = -1.0
    for image in (_sparse((9, 11), 0.3, 43), border, np.zeros((9, 11))):
        kernel = ls.compile(CONV, I=image_format, F=filter_format, target=target)
        result = kernel(I=ls.Tensor.from_numpy(image, image_format),
                        F=ls.Tensor.from_numpy(filt, filter_format))
        np.testing.assert_allclose(_dense(result), ss.correlate(image, filt, mode="valid"),
                                   atol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("block", ["bcsr2x2", "bcsr1x3"])
def test_blocked_operand_with_shifted_vectors_matches_numpy(target, block) -> None:
    rng = np.random.default_rng(44)
    for density in (0.4, 0.0):
        M = rng.standard_normal((6, 12)) * (rng.random((6, 12)) < density)
        x, w = rng.standard_normal(13), rng.standard_normal(6)
        kernel = ls.compile("y(i) = A(i,j) * x(j+1) * w(i-1)", A=block, target=target)
        result = kernel(A=ls.Tensor.from_numpy(M, block), x=x, w=w)
        np.testing.assert_allclose(_dense(result), (M @ x[1:]) * np.append(0.0, w[:-1]),
                                   atol=1e-12)


def test_taps_of_filter_rows_off_the_output_do_not_run() -> None:
    """An entry in the image's first row reaches one output row (r = 0): the guard at
    the loop over r skips the other rows' taps, so it costs less than an entry in the
    middle row, whose every filter row reaches the output."""
    counts = []
    for row in (0, 4):
        image = np.zeros((9, 9))
        image[row, 4] = 1.0
        kernel = ls.compile(CONV, I="dcsr", counting=True)
        result = kernel(I=ls.Tensor.from_numpy(image, "dcsr"), F=np.ones((3, 3)))
        np.testing.assert_allclose(_dense(result), ss.correlate(image, np.ones((3, 3)),
                                                                mode="valid"))
        counts.append(kernel.loop_count)
    assert counts[0] < counts[1]


def _without_lets(node: Node) -> Node:
    """``node`` with every ``let`` removed."""
    if isinstance(node, Block):
        return Block(tuple(_without_lets(n) for n in node.items if not isinstance(n, Bind)))
    fields = {name: _without_lets(getattr(node, name)) for name in ("body", "then")
              if hasattr(node, name)}
    if hasattr(node, "cases"):
        fields["cases"] = tuple(replace(c, body=_without_lets(c.body)) for c in node.cases)
    return replace(node, **fields) if fields else node


def test_the_native_backend_binds_no_derived_index_the_program_does_not() -> None:
    types = {n: ls.named_format(f, order).tensor_type("float64", "int32") for n, (f, order)
             in {"O": ("dense", 2), "I": ("dense", 2), "F": ("csr", 2)}.items()}
    program = loop_ir(schedule(to_concrete(ls.parse(CONV), types), types), types, "O")
    abi = CallingConvention(("O", "I", "F"), types)
    KernelCompiler(program, abi).compile()  # as lowered: it compiles
    bare: Program = replace(program, root=_without_lets(program.root))
    with pytest.raises(InternalCompilerError, match="I_0__1 is not bound there"):
        KernelCompiler(bare, abi).compile()


def test_the_interpreter_refuses_a_locate_at_an_unbound_index() -> None:
    program = Program(Block((Locate(Ref("I", 0, 0), "t"),)), "O", (), 1)
    with pytest.raises(InternalCompilerError, match="reads t before a loop or a let"):
        Walker(program, {}, ()).run(program.root)


@pytest.mark.parametrize("target", ["cpu", "interpret"])
@pytest.mark.parametrize("seed", range(3))
def test_a_run_of_duplicates_is_not_located_through_a_derived_index(target, seed) -> None:
    """``A(i,j) * A(k,j)`` over BCSR: planning tries the second use converted to COO with
    its modes swapped, whose first level keeps a run of entries per coordinate. Located
    at the derived j by a search, the run was cut to its first entry and the kernel
    dropped products (C[0,5] was 0 instead of 3); such a level is iterated, not located,
    and planning takes another plan."""
    rng = np.random.default_rng(seed)
    a = np.where(rng.random((6, 6)) < 0.3, rng.integers(-3, 4, (6, 6)), 0).astype(float)
    a[0, [0, 3]], a[5, [0, 3]] = (3.0, -2.0), (3.0, 3.0)  # runs of two in columns 0, 3
    kernel = ls.compile("C(i,k) = A(i,j) * A(k,j)", out_format="dense", A="bcsr2x2",
                        target=target)
    got = kernel(A=ls.Tensor.from_numpy(a, format="bcsr2x2")).to_numpy()
    np.testing.assert_array_equal(got, a @ a.T)
