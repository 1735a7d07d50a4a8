"""The loop IR: lowering concrete notation and lattices to loops, its printer, the
optimization passes that rewrite it with fast forms (each fires where legal and nowhere
else), and
``kernel.loops`` / ``llvsparse dump --emit loops``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from llvsparse.backends.llvm.codegen import KernelCompiler
from llvsparse.ir.concrete.from_notation import to_concrete
from llvsparse.ir.loops.from_schedule import statement_of
from llvsparse.ir.loops.lower import lower
from llvsparse.ir.loops.nodes import Block, CallingConvention, Case, Loop, Merge, loops_of, show
from llvsparse.ir.loops.notes import JAM, Forms, changed, forms_text, jam_text
from llvsparse.ir.opt import loop_ir
from llvsparse.ir.opt import passes as opt
from llvsparse.ir.schedule.scheduler import schedule

import llvsparse as ls
from llvsparse.commands.main import main

SPMV = "y(i) = A(i,j) * x(j)"
SPADD = "C(i,j) = A(i,j) + B(i,j)"
SPMUL = "C(i,j) = A(i,j) * B(i,j)"
SPMM = "C(i,k) = A(i,j) * B(j,k)"


def _types(**formats: tuple[str, int]):
    return {n: ls.named_format(f, order).tensor_type("float64", "int32")
            for n, (f, order) in formats.items()}


def _nests(statement: str, types):
    concrete = to_concrete(ls.parse(statement), types)
    try:
        return schedule(concrete, types)
    except ls.ScheduleError:
        return schedule(concrete, types, split=True)


def _program(statement: str, fastmath: bool = False, **formats: tuple[str, int]):
    types = _types(**formats)
    return loop_ir(_nests(statement, types), types, statement.split("(")[0],
                   opt.Target(fastmath=fastmath))


def _notes(program) -> dict[str, tuple[str, ...]]:
    """Each loop's forms as the loop IR prints them (a jammed loop's lanes first; those
    of the kernel's other form as ``other: ...``)."""
    return {node.index: (*((jam_text(node.jam),) if node.jam else ()), *forms_text(node.forms),
                         *(f"other: {text}" for text in
                           forms_text(changed(node.forms, node.other or node.forms))))
            for node in loops_of(program.root)}


def test_spmv_csr_loops() -> None:
    program = _program(SPMV, y=("dense", 1), A=("csr", 2), x=("dense", 1))
    assert show(program.root).splitlines() == [
        "for i in coordinates of A.0:  [other form: pairs]  {thread rows}",
        "  allocate acc: float64",
        "  clear acc = 0.0",
        "  for j in positions of A.1:",
        "    locate x.0 at j",
        "    acc += A(i,j) * x(j)",
        "  insert y(i) = acc()"]


def test_spadd_is_a_merge_with_cases() -> None:
    program = _program(SPADD, C=("csr", 2), A=("csr", 2), B=("csr", 2))
    assert show(program.root).splitlines() == [
        "for i in coordinates of A.0:  {thread rows}",
        "  locate B.0 at i",
        "  merge j over A.1, B.1:  [other form: select cases]",
        "    case A.1, B.1:",
        "      append C(i,j) = A(i,j) + B(i,j)",
        "    case A.1:",
        "      append C(i,j) = A(i,j)",
        "    case B.1:",
        "      append C(i,j) = B(i,j)",
        "  for j in positions of A.1, resuming:",
        "    append C(i,j) = A(i,j)",
        "  for j in positions of B.1, resuming:",
        "    append C(i,j) = B(i,j)"]
    merge = next(n for n in loops_of(program.root) if isinstance(n, Merge))
    assert [str(r) for r in merge.iterators] == ["A.1", "B.1"]


def test_a_locate_that_may_miss_is_tested() -> None:
    """A hashed vector located at each stored column: the loop tests that it holds it."""
    program = _program(SPMV, y=("dense", 1), A=("csr", 2), x=("hash", 1))
    text = show(program.root)
    assert "    locate x.0 at j\n    if x.0 found:\n      acc += A(i,j) * x(j)" in text


def test_a_sum_left_in_an_expression_fills_a_temporary() -> None:
    program = _program("y(i) = A(i,j) * x(j) + z(i)", y=("dense", 1), A=("csr", 2),
                       x=("dense", 1), z=("dense", 1))
    text = show(program.root)
    assert "  allocate t: float64\n  clear t = 0" in text
    assert "    t += A(i,j) * x(j)\n  insert y(i) = t() + z(i)" in text


def test_jam_fires_on_spmm_not_on_spmv() -> None:
    spmm = _notes(_program(SPMM, C=("dense", 2), A=("csr", 2), B=("dense", 2)))
    assert JAM in spmm["j"] and JAM not in spmm["i"] + spmm["k"]
    spmv = _notes(_program(SPMV, y=("dense", 1), A=("csr", 2), x=("dense", 1)))
    assert all(JAM not in notes for notes in spmv.values())
    # a sparse B: its inner loop iterates and may miss, so nothing to jam
    sparse_b = _notes(_program(SPMM, C=("dense", 2), A=("csr", 2), B=("csr", 2)))
    assert all(JAM not in notes for notes in sparse_b.values())


def test_pairs_fire_on_row_wise_spmv_only() -> None:
    assert _notes(_program(SPMV, y=("dense", 1), A=("csr", 2), x=("dense", 1)))["i"] == \
        ("other: pairs",)  # the kernel's other form only
    fast = _notes(_program(SPMV, True, y=("dense", 1), A=("csr", 2), x=("dense", 1)))
    assert all("other: pairs" not in notes for notes in fast.values())  # fastmath reassociates
    coo = _notes(_program(SPMV, y=("dense", 1), A=("coo", 2), x=("dense", 1)))
    assert all("other: pairs" not in notes for notes in coo.values())


def test_gallop_fires_on_an_intersection_not_a_union() -> None:
    product = _notes(_program(SPMUL, C=("csr", 2), A=("csr", 2), B=("csr", 2)))
    assert product["j"] == ("gallop when skewed 8x", "lockstep when equal",
                            "other: gallop always")
    union = _program(SPADD, C=("csr", 2), A=("csr", 2), B=("csr", 2))
    assert all(n.forms.gallop is None and (n.other is None or n.other.gallop is None)
               for n in loops_of(union.root))


def test_no_lockstep_test_on_a_loop_threads_split() -> None:
    """Two sparse vectors' intersection: its merge is the loop threads split, whose
    thread-range test the lockstep form would skip; it gallops all the same."""
    product = _notes(_program("z(i) = x(i) * w(i)", z=("dense", 1), x=("coo", 1),
                              w=("coo", 1)))
    assert product["i"] == ("gallop when skewed 8x", "other: gallop always")


def test_running_sums_fire_on_coordinate_lists_only() -> None:
    coo = _program(SPMV, y=("dense", 1), A=("coo", 2), x=("dense", 1))
    assert _notes(coo)["i"] == ("running sums",)
    assert [n.unroll for n in loops_of(coo.root)] == [opt.RUN_UNROLL, 1]  # its own count
    csr = _notes(_program(SPMV, y=("dense", 1), A=("csr", 2), x=("dense", 1)))
    assert all("running sums" not in notes for notes in csr.values())


def test_case_selection_fires_on_a_union_not_an_intersection() -> None:
    union = _program(SPADD, C=("csr", 2), A=("csr", 2), B=("csr", 2))
    assert [(n.forms, n.other) for n in loops_of(union.root) if isinstance(n, Merge)] == \
        [(Forms(), Forms(select=True))]  # the other form selects; the first branches
    product = _program(SPMUL, C=("csr", 2), A=("csr", 2), B=("csr", 2))
    assert all(not n.forms.select and (n.other is None or not n.other.select)
               for n in loops_of(product.root))


def test_row_clearing_fires_on_scattered_dense_rows_only() -> None:
    assert "clear rows" in _notes(_program(SPMM, C=("dense", 2), A=("csr", 2),
                                           B=("dense", 2)))["i"]
    spmv = _notes(_program(SPMV, y=("dense", 1), A=("csr", 2), x=("dense", 1)))
    assert all("clear rows" not in notes for notes in spmv.values())
    into_csr = _notes(_program(SPMM, C=("csr", 2), A=("csr", 2), B=("dense", 2)))
    assert all("clear rows" not in notes for notes in into_csr.values())


KERNELS = [
    (SPMV, {"y": ("dense", 1), "A": ("csr", 2), "x": ("dense", 1)}),
    (SPMV, {"y": ("dense", 1), "A": ("coo", 2), "x": ("dense", 1)}),
    (SPMV, {"y": ("dense", 1), "A": ("dia", 2), "x": ("dense", 1)}),
    (SPMV, {"y": ("dense", 1), "A": ("ell", 2), "x": ("dense", 1)}),
    (SPMM, {"C": ("dense", 2), "A": ("csr", 2), "B": ("dense", 2)}),
    (SPMM, {"C": ("dense", 2), "A": ("csr", 2), "B": ("csr", 2)}),
    (SPADD, {"C": ("csr", 2), "A": ("csr", 2), "B": ("csr", 2)}),
    (SPMUL, {"C": ("csr", 2), "A": ("csr", 2), "B": ("csr", 2)}),
    ("C(i,j) = S(i,j) * A(i,k) * B(j,k)", {"C": ("csr", 2), "S": ("csr", 2),
                                           "A": ("dense", 2), "B": ("dense", 2)}),
]


@pytest.mark.parametrize("statement,formats", KERNELS)
def test_emitter_forms_agree_with_the_passes(statement: str, formats) -> None:
    """Where the emitted code of the kernel's other form has a jammed or paired loop,
    the passes chose it, and no more (the emitter names those loops' blocks after their
    form)."""
    types = _types(**formats)
    nests = _nests(statement, types)
    order = list(formats)
    program = loop_ir(nests, types, order[0])
    noted = {note for notes in _notes(program).values() for note in notes}
    other = KernelCompiler(opt.other_form(program), CallingConvention(tuple(order), types))
    code = str(other.compile())
    assert (".jam8.head" in code) == (JAM in noted)
    assert (".pairs" in code) == ("other: pairs" in noted)


def test_the_emitter_reads_the_forms() -> None:
    """With no pass run, the emitter emits no fast form: it reads the loops' forms
    instead of deciding itself."""
    formats = {"C": ("dense", 2), "A": ("csr", 2), "B": ("dense", 2)}
    types = _types(**formats)
    nests = _nests(SPMM, types)
    bare = lower(statement_of(nests, types), types, "C", nests)

    def forms(program) -> tuple[bool, bool]:  # (jammed, rows cleared)
        module = KernelCompiler(program, CallingConvention(tuple(formats), types)).compile()
        code = str(module.get_global("llvsparse_kernel_range"))
        return ".jam8.head" in code, 'call void @"llvm.memset' in code

    assert forms(loop_ir(nests, types, "C")) == (True, True)
    assert forms(bare) == (False, False)


def test_a_second_form_is_read_off_the_program() -> None:
    """Whether a kernel is compiled in two forms (timed against each other) is a fact
    of its program: a union's case selection has one, a row-wise SpMM none."""
    union = _types(C=("csr", 2), A=("csr", 2), B=("csr", 2))
    assert opt.has_other_form(loop_ir(_nests(SPADD, union), union, "C"))
    bare_nests = _nests(SPADD, union)
    assert not opt.has_other_form(lower(statement_of(bare_nests, union), union, "C", bare_nests))
    spmm = _types(C=("dense", 2), A=("csr", 2), B=("dense", 2))
    assert not opt.has_other_form(loop_ir(_nests(SPMM, spmm), spmm, "C"))


def test_kernel_loops_and_dump(capsys: pytest.CaptureFixture[str]) -> None:
    kernel = ls.compile(SPMV, A="csr", x="dense")
    a = sp.random(7, 5, density=0.4, format="csr", random_state=3)
    x = np.arange(5.0)
    np.testing.assert_allclose(kernel(A=a, x=x).to_numpy(), a @ x)
    assert kernel.loops.splitlines()[0] == \
        "for i in coordinates of A.0:  [other form: pairs]  {thread rows}"
    assert main(["dump", SPMV, "-f", "A:csr", "--emit", "loops", "--no-color"]) == 0
    assert kernel.loops in capsys.readouterr().out


def test_every_loop_node_is_a_loop_or_merge() -> None:
    program = _program(SPADD, C=("csr", 2), A=("csr", 2), B=("csr", 2))
    assert all(isinstance(n, (Loop, Merge)) and n.site is not None
               for n in loops_of(program.root))


def test_thread_rows_tag_the_output_first_index_loop_only() -> None:
    """Threads split the output's first index: its loop is tagged, wherever it runs
    (inside the loop over i of the transposed product), and no other loop is."""
    spmv = _program(SPMV, y=("dense", 1), A=("csr", 2), x=("dense", 1))
    assert {n.index: n.tags for n in loops_of(spmv.root)} == {"i": (opt.THREAD_ROWS,),
                                                               "j": ()}
    ttv = _program("y(j) = A(i,j) * x(i)", y=("dense", 1), A=("csr", 2), x=("dense", 1))
    assert {n.index: n.tags for n in loops_of(ttv.root)} == {"i": (), "j": (opt.THREAD_ROWS,)}


def test_the_emitter_clamps_only_tagged_loops() -> None:
    """The thread range [lo, hi) reaches the code only through the tag: without it the
    range function never reads its bounds."""

    formats = {"y": ("dense", 1), "A": ("csr", 2), "x": ("dense", 1)}
    types = _types(**formats)
    nests = _nests(SPMV, types)

    def bounds_read(program) -> int:
        module = KernelCompiler(program, CallingConvention(tuple(formats), types)).compile()
        function = module.get_global("llvsparse_kernel_range")
        lo, hi = function.args[1], function.args[2]
        body = "\n".join(str(block) for block in function.blocks)
        return body.count(lo.get_reference()) + body.count(hi.get_reference())

    def untagged(node):
        if isinstance(node, Block):
            return Block(tuple(untagged(item) for item in node.items))
        if isinstance(node, Loop):
            return replace(node, tags=(), body=untagged(node.body))
        if isinstance(node, Merge):
            return replace(node, tags=(), cases=tuple(Case(c.present, untagged(c.body))
                                                      for c in node.cases))
        return node

    program = loop_ir(nests, types, "y")
    assert bounds_read(program) > 0
    assert bounds_read(replace(program, root=untagged(program.root))) == 0


def test_duplicate_runs_and_merge_tails_are_written_out() -> None:
    """A non-unique level's loop says it steps over runs of duplicates, and a merge's
    tails say they resume where the merge stopped: an interpreter of the program needs
    both, and neither was in the program before."""
    program = _program("C(i,j) = A(i,j) + B(i,j)", C=("coo", 2), A=("coo", 2), B=("coo", 2))
    text = show(program.root).splitlines()
    assert text[0] == "merge i over A.0 runs, B.0 runs:  {thread rows}"
    assert "for i in runs of positions of A.0, resuming:  {thread rows}" in text
    assert "    for j in positions of A.1, resuming:" in text
    spmv = _program(SPMV, y=("dense", 1), A=("coo", 2), x=("dense", 1))
    assert show(spmv.root).splitlines()[0].startswith("for i in runs of positions of A.0:")


ASSEMBLY_CASES = [  # statement, operands' formats, output format, phases (loops/assembly_phases)
    ("C(i,j) = A(i,j) * U(i,k) * V(j,k)", {"A": "csr", "U": "dense", "V": "dense"}, "csr",
     ("setup", "count", "fill", "finish")),
    (SPADD, {"A": "csr", "B": "csr"}, "csr", ("setup", "append", "finish")),
    (SPADD, {"A": "csr", "B": "csr"}, "dcsr", ()),  # the row level is not full
    (SPADD, {"A": "csr", "B": "csr"}, "coo", ()),  # a non-unique level starts the group
    (SPMV, {"A": "csr", "x": "dense"}, "dense", ()),  # nothing assembled
    ("C(i,j) = A(i,k) * B(k,j)", {"A": "csr", "B": "csr"}, "csr",  # a workspace kernel
     ("setup", "append", "finish")),
]


@pytest.mark.parametrize(("statement", "formats", "out", "phases"), ASSEMBLY_CASES)
def test_assembly_phases_are_decided_on_the_program(statement, formats, out, phases):
    """How threads assemble an output is in the program (and its printout), and the
    compiled kernel has exactly those phase entries."""
    kernel = ls.compile(statement, out_format=out, **formats)
    program = kernel.program(kernel._default())
    assert program.phases == phases
    printed = kernel.loops.splitlines()[-1]
    assert printed.startswith("threads assemble in phases: setup, ") == bool(phases)
    rng = np.random.default_rng(3)
    operands = {n: (ls.Tensor.from_scipy(sp.random(40, 40, 0.1, "csr", random_state=rng), f)
                    if f != "dense" else rng.random((40, 40) if n != "x" else 40))
                for n, f in formats.items()}
    kernel(**operands)
    assert tuple(kernel.last.jit.assembly) == phases


INITIALIZING_CASES = [  # statement, operands' formats, whether the kernel sets every entry
    (SPMM, {"A": "csr", "B": "dense"}, True),  # each row cleared before it is scattered
    (SPMV, {"A": "csr", "x": "dense"}, True),  # a sum stored at every row
    (SPMV, {"A": "coo", "x": "dense"}, False),  # rows without entries are skipped
    (SPMV, {"A": "dcsr", "x": "dense"}, False),
    ("y(j) = max(i, A(i,j))", {"A": "csc"}, True),  # a max stored at every column
    ("y(j) = min(i, A(i,j) + x(i))", {"A": "csr", "x": "dense"}, False),  # a merge per j
    ("C(i,k) = A(i,j) * B(j,k) * 0", {"A": "csr", "B": "dense"}, False),  # computes nothing
]


@pytest.mark.parametrize(("statement", "formats", "sets_all"), INITIALIZING_CASES)
def test_whether_a_kernel_sets_its_whole_output_is_read_off_its_program(
        statement, formats, sets_all):
    """ir/loops/output_init.py decides on the program whether the caller must zero ``out=``;
    either way a buffer full of NaN comes back holding exactly numpy's result."""
    from llvsparse.ir.loops.output_init import initializes_output

    kernel = ls.compile(statement, **formats)
    assert initializes_output(kernel.program(kernel._default())) is sets_all
    rng = np.random.default_rng(11)
    a = sp.random(30, 20, 0.15, "csr", random_state=rng).toarray()
    a[4] = 0  # an empty row
    dense = {"B": rng.random((20, 6)), "x": rng.random(20 if "B" in formats or "max" in statement
                                                    or statement == SPMV else 30)}
    operands = {n: ls.Tensor.from_numpy(a, f) if n == "A" else dense[n] for n, f in formats.items()}
    expected = {SPMM: lambda: a @ dense["B"], SPMV: lambda: a @ dense["x"],
                "y(j) = max(i, A(i,j))": lambda: a.max(axis=0),
                "y(j) = min(i, A(i,j) + x(i))":
                    lambda: (a + dense["x"][:, None]).min(axis=0),
                "C(i,k) = A(i,j) * B(j,k) * 0": lambda: 0 * (a @ dense["B"])}[statement]()
    out = np.full(expected.shape, np.nan)
    kernel(**operands, out=out)
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_the_lattice_stage_is_printed_from_the_program() -> None:
    """``--emit lattice``: one line per lattice of the program's loop nodes (a merge and
    its tails share one), then the forms that change a step's width; no code emitted."""
    from llvsparse.ir.loops.lattice_text import lattice_text

    union = _types(C=("csr", 2), A=("csr", 2), B=("csr", 2))
    assert lattice_text(loop_ir(_nests(SPADD, union), union, "C"), union).splitlines() == [
        "i: {A.0, B.0}    over (A(i,j) + B(i,j))    region A ∪ B",
        "j: {A.1, B.1} > {A.1} > {B.1}    over (A(i,j) + B(i,j))    region A ∪ B"]
    spmm = _types(C=("dense", 2), A=("csr", 2), B=("dense", 2))
    assert lattice_text(loop_ir(_nests(SPMM, spmm), spmm, "C"), spmm).splitlines()[1:3] == [
        "j: {A.1, B.0}    over (A(i,j) * B(j,k))    region A ∩ B",
        "j: 8, then 4 positions per step (jammed)"]


def test_the_lattice_dump_names_the_paired_other_form() -> None:
    """The ``lattice`` stage reads paired rows off the loop's other form, as it prints."""
    spmv = ls.compile(SPMV, A="csr", x="dense")
    assert "i: the two halves side by side, their sums in step (paired, other form)" in \
        spmv.lattices.splitlines()
    coo = ls.compile(SPMV, A="coo", x="dense")
    assert "paired" not in coo.lattices
