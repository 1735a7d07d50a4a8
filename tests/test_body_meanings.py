"""The level language has one meaning: random bodies give the same results and the same
stores when the host interprets them (formats/interpret.py, one lane or all lanes at
once) and when the compiler emits them (backends/llvm/bodies.py) and runs them natively.

Both walk the normalised form (formats/body_ir.py); this checks that the two walks agree
on every construct, guarded reads and flooring division included."""

from __future__ import annotations

import ast
import ctypes

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llvmlite import binding as llvm
from llvmlite import ir
from llvsparse.backends.cpu import host_target_machine
from llvsparse.backends.llvm.bodies import I64, ArrayRef, emit_body
from llvsparse.formats import body_ir
from llvsparse.formats.interpret import Interpreter, run_function, straight_line

ENV = ("p", "n", "k")  # the environment every generated body sees
CRD = np.array([3, -1, 4, 1, -5, 9, 2], dtype=np.int32)  # read only (int32: widened)
OUT_LENGTH = 5  # ``out`` is written (int64)


def _atoms(names: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.one_of(st.integers(-9, 9).map(str), st.sampled_from(names))


def _expressions(names: tuple[str, ...]) -> st.SearchStrategy[str]:
    """Integer expressions of depth at most three, whose reads stay inside ``crd`` (a
    subscript reduced modulo its length, or guarded by an ``and`` / a conditional) and
    whose divisors are never zero: both meanings are then defined everywhere."""
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        pair = st.tuples(inner, inner)
        return st.one_of(
            st.tuples(inner, st.sampled_from("+-*"), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(inner, st.sampled_from(["//", "%"]), inner, st.booleans()).map(
                lambda t: f"({t[0]} {t[1]} {'-' if t[3] else ''}({t[2]} % 4 + 1))"),
            inner.map(lambda e: f"crd[{e} % {len(CRD)}]"),
            pair.map(lambda t: f"(crd[{t[0]}] if 0 <= {t[0]} and {t[0]} < {len(CRD)} "
                               f"else {t[1]})"),
            pair.map(lambda t: f"(1 if {t[0]} < {len(CRD)} and {t[0]} >= 0 and "
                               f"crd[{t[0]}] > {t[1]} else 0)"),
            pair.map(lambda t: f"({t[0]} if {t[0]} >= {t[1]} or crd[{t[1]} % 3] == 4 "
                               f"else -{t[1]})"),
            st.tuples(st.sampled_from(["min", "max"]), inner, inner, inner).map(
                lambda t: f"{t[0]}({t[1]}, {t[2]}, {t[3]})"),
            inner.map(lambda e: f"abs({e})"),
            pair.map(lambda t: f"(1 if not ({t[0]} <= {t[1]} < 3) else 2)"),
        )
    return st.recursive(_atoms(names), extend, max_leaves=4)


@st.composite
def _bodies(draw) -> str:
    """A body of local assignments, augmented ones, stores, ifs, bounded loops and one
    return; every local stays small (reduced modulo 1000) so 64-bit wrapping never
    separates the compiled meaning from Python's integers."""
    names = list(ENV)
    lines: list[str] = []

    def assign(indent: str) -> None:
        fresh = [] if indent else [f"t{len(names)}"]  # new locals only outside branches
        target = draw(st.sampled_from([*names[3:], *fresh]))
        value = draw(_expressions(tuple(names)))
        lines.append(f"{indent}{target} = ({value}) % 1000 - 500")
        if target not in names:
            names.append(target)

    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["assign", "store", "augmented", "if", "for", "while"]))
        if kind == "assign" or (kind == "augmented" and len(names) == 3):
            assign("")
        elif kind == "augmented":
            target = draw(st.sampled_from(names[3:]))
            lines.append(f"{target} {draw(st.sampled_from(['+=', '-=']))} "
                         f"{draw(st.integers(-9, 9))}")
        elif kind == "store":
            index, value = draw(_expressions(tuple(names))), draw(_expressions(tuple(names)))
            lines.append(f"out[{index} % {OUT_LENGTH}] = ({value}) % 1000")
            lines.append(f"out[{index} % {OUT_LENGTH}] += 1")
        elif kind == "if":  # a local first assigned in one branch would be unbound after
            lines.append(f"if {draw(_expressions(tuple(names)))} > 0:")
            if len(names) > 3:
                assign("    ")
            else:
                lines.append(f"    out[{draw(st.integers(0, OUT_LENGTH - 1))}] = 3")
            lines.append("else:")
            lines.append(f"    out[{draw(st.integers(0, OUT_LENGTH - 1))}] = 7")
        elif kind == "for":
            lines.append(f"for q in range({draw(st.integers(-2, 2))}, "
                         f"{draw(_expressions(tuple(names)))} % 4):")
            lines.append(f"    out[q % {OUT_LENGTH}] = q + {draw(_expressions(tuple(names)))} % 9")
        else:
            lines.append("w = 0")
            lines.append(f"while w < {draw(_expressions(tuple(names)))} % 5:")
            lines.append("    w = w + 1")
    results = draw(st.lists(_expressions(tuple(names)), min_size=1, max_size=2))
    lines.append(f"return {', '.join(results)}")
    return "\n".join(lines)


class _Function:
    """What emit_body needs of a LevelFunction."""

    def __init__(self, source: str) -> None:
        self.name = "generated"
        self.body = tuple(ast.parse(source).body)


def _compiled(fn: _Function, returns: int):
    """The body as a native function (p, n, k, crd, out, results) -> void, unoptimized
    (the engine, kept alive by the caller, and the IR text)."""
    module = ir.Module(name="body")
    i32p, i64p = ir.IntType(32).as_pointer(), I64.as_pointer()
    function = ir.Function(module, ir.FunctionType(
        ir.VoidType(), [I64, I64, I64, i32p, i64p, i64p]), name="body")
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    p, n, k, crd, out, results = function.args
    arrays = {"crd": ArrayRef(crd, ir.IntType(32), invariant=True), "out": ArrayRef(out, I64)}
    values = emit_body(builder, fn, {"p": p, "n": n, "k": k}, arrays)
    assert len(values) == returns
    for slot, value in enumerate(values):
        value = builder.zext(value, I64) if value.type != I64 else value
        builder.store(value, builder.gep(results, [ir.Constant(I64, slot)]))
    builder.ret_void()
    text = str(module)
    ref = llvm.parse_assembly(text)
    ref.verify()
    host_target_machine()  # initializes LLVM's native target; the engine owns its own
    engine = llvm.create_mcjit_compiler(
        ref, llvm.Target.from_default_triple().create_target_machine())
    engine.finalize_object()
    c_int64p = ctypes.POINTER(ctypes.c_int64)
    call = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                            ctypes.POINTER(ctypes.c_int32), c_int64p, c_int64p)(
        engine.get_function_address("body"))
    return (engine, text), call


def _run_native(call, lane: tuple[int, int, int], returns: int):
    crd, out = CRD.copy(), np.zeros(OUT_LENGTH, dtype=np.int64)
    results = np.zeros(returns, dtype=np.int64)
    call(*lane, crd.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
         out.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)),
         results.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)))
    return [int(r) for r in results], out.tolist()


def _run_host(fn: _Function, lane: tuple[int, int, int]):
    out = np.zeros(OUT_LENGTH, dtype=np.int64)
    env = dict(zip(ENV, lane))
    values = Interpreter(env, {"crd": CRD.copy(), "out": out}, "test").run(
        body_ir.normalised(fn.body))
    return [int(v) for v in values], out.tolist()


LANES = st.lists(st.tuples(*(st.integers(-12, 12),) * 3), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=_bodies(), lanes=LANES)
def test_host_and_compiled_bodies_agree(source: str, lanes: list[tuple[int, int, int]]):
    fn = _Function(source)
    returns = len(body_ir.normalised(fn.body)[-1].values)
    kernel, call = _compiled(fn, returns)
    for lane in lanes:
        assert _run_native(call, lane, returns) == _run_host(fn, lane), source
    del kernel


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_expressions(ENV), lanes=LANES)
def test_vectorized_host_agrees_with_compiled(value: str, lanes):
    """All lanes at once (what unpacking a tensor runs) agree with each lane natively:
    a guarded read or a division is taken only by the lanes whose branch takes it."""
    fn = _Function(f"t = {value}\nreturn t % 1000")
    assert straight_line(body_ir.normalised(fn.body))
    kernel, call = _compiled(fn, 1)
    env = {name: np.array([lane[k] for lane in lanes]) for k, name in enumerate(ENV)}
    (host,) = run_function(fn, env, {"crd": CRD.copy()}, "test", len(lanes))
    native = [_run_native(call, lane, 1)[0][0] for lane in lanes]
    assert np.asarray(host).tolist() == native, value
    del kernel


def test_a_conditional_reads_only_its_taken_branch_when_compiled():
    """``crd[p] if p < n else -1`` compiled to a select that read ``crd[p]`` on both
    branches; with the read past the array's end it now branches, as the host does."""
    fn = _Function("return crd[p] if p < 7 else -1")
    kernel, call = _compiled(fn, 1)
    for p in range(9):
        assert _run_native(call, (p, 0, 0), 1)[0] == [int(CRD[p]) if p < 7 else -1]
    assert "phi" in kernel[1], "a branch that reads an array must not run speculatively"
