"""From a kernel's statement and operand types to a compiled instance: lowering (with
operands converted where their storage orders cannot be reconciled), the further phases
and the other form of the kernel, and the JIT. ``api.Kernel`` caches what this builds."""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

from ..backends.cpu import OTHER_FORM_SUFFIX, jit
from ..backends.llvm.codegen import KernelCompiler
from ..backends.llvm.counting import count_loop_heads
from ..calls.instance import Instance
from ..calls.workspaces import precompute_meta, workspace_meta
from ..ir.concrete.statements import concrete_text
from ..ir.loops.from_schedule import statement_of
from ..ir.loops.lattice_text import lattice_text
from ..ir.loops.legality import case_count, variants_within_budget
from ..ir.loops.nodes import Program
from ..ir.loops.output_init import initializes_output
from ..ir.notation import syntax as nt
from ..ir.opt import loop_ir
from ..ir.opt.passes import has_other_form, other_form, other_form_notes
from ..ir.plan.lowering import (
    Lowered,
    Refused,
    Request,
    calling_convention,
    lower_as_stored,
    lower_converting,
    lower_kernel,
    target_of,
)
from ..ir.schedule.parallel import parallel_mode
from ..ir.schedule.user_statements import scheduled_statement
from ..ir.types import TensorType
from ..tensors.format import Format, Level, named_format
from .refusals import advised

if TYPE_CHECKING:
    from llvmlite.ir import Module as LLVMModule


def build_converting(request: Request, types: dict[str, TensorType],
                     patterns: dict[str, nt.Access], formats: dict[str, Format],
                     convert: bool) -> Instance:
    """Build; if the operands' storage orders cannot be reconciled and ``convert``, convert
    operands to sorted coordinate lists (see ``lower_converting``). ``formats``: the
    operands' declared formats; ``patterns``: the hidden diagonal patterns' uses."""
    start = time.perf_counter()
    if not convert:
        lowered = lower_as_stored(request, types)
    else:
        def full_top(name: str) -> TensorType | None:
            fmt = full_top_format(formats[name])
            return None if fmt is None else retyped(types, {name: fmt})[name]

        lowered = lower_converting(
            request, types, patterns,
            lambda n, modes: named_format("coo", len(modes), modes) == formats[n],
            lambda orders: retyped(types, coo_formats(types, orders)), full_top)
    if isinstance(lowered, Refused):
        raise advised(lowered.error) from None
    conversions = coo_formats(types, lowered.conversions)
    for name in lowered.full_tops:
        conversions[name] = full_top_format(formats[name])
    return _finish(lowered, request, conversions, start)


def build(request: Request, types: dict[str, TensorType], conversions: dict[str, Format],
          lazy: bool = True) -> Instance:
    """Lower and compile. ``lazy``: a kernel with two forms compiles its other form
    when first asked for (``JitKernel.other``), in a module of its own; otherwise
    both go in one module (what inspection and export show)."""
    start = time.perf_counter()
    converted = {n: tuple(lv.mode for lv in fmt.levels) for n, fmt in conversions.items()}
    lowered = lower_kernel(request, types, converted)
    if isinstance(lowered, Refused):
        raise lowered.error
    return _finish(lowered, request, conversions, start, lazy)


def _finish(lowered: Lowered, request: Request, conversions: dict[str, Format],
            start: float, lazy: bool = True) -> Instance:
    """The lowered kernel's other phases and form, compiled into an instance computing
    in ``request.dtype`` (its result is of the output's dtype: bool for ``A(i) < 0.5``)."""
    nests, types, builder, module = lowered.nests, lowered.types, lowered.builder, \
        lowered.module
    order = request.order  # the output first, then the inputs
    mode = parallel_mode(nests, types, order[0])
    phases, other_form = variants_within_budget(case_count(lowered.program),
                                                lowered.program.phases,
                                                has_other_form(lowered.program))
    other_form = other_form and not request.counting  # a count is of one form
    abi = calling_convention(request, types)
    for phase in phases:
        KernelCompiler(_phase_program(nests, types, order, request, phase, lowered.program),
                       abi, phase=phase, module=module).compile()
    other = functools.partial(_other_form, nests, types, order, request, lowered.program,
                              phases, builder.entry_name)
    if other_form and not lazy:
        other(module)
    if phases:
        mode = types[order[0]].levels[0].mode
    statement = statement_of(nests, types)
    if request.plan is not None:
        statement = scheduled_statement(statement, request.plan)
    text = concrete_text(statement)
    seconds = time.perf_counter() - start
    if request.counting:
        count_loop_heads(module)
    compiled = jit(module, builder.entry_name)
    compiled.phases = {"lower to IR": seconds, **compiled.phases}
    if other_form and lazy:
        compiled.other_builder = lambda: jit(other(None), builder.entry_name +
                                             OTHER_FORM_SUFFIX)
    emitted = lowered.program  # what the backend translated, rewrites included
    return Instance(types, text, compiled, types[order[0]].dtype, conversions,
                    lattice_text(lowered.program, types), order, mode,
                    initializes_output(lowered.program), workspace_meta(nests, types), lambda: emitted,
                    precompute_meta(nests, types), other_form_notes(lowered.program))


def _phase_program(nests, types: dict[str, TensorType], order: list[str], request: Request,
                   phase: str, whole: Program) -> Program:
    """The loop IR of one phase of a kernel whose whole program is ``whole`` (a count
    phase has no output hooks, so its passes may choose other forms)."""
    if phase == "whole":
        return whole
    return loop_ir(nests, types, order[0], target_of(request, phase))


def _other_form(nests, types: dict[str, TensorType], order: list[str], request: Request,
                whole: Program, phases: tuple[str, ...], entry: str,
                module: LLVMModule | None) -> LLVMModule:
    """A kernel's functions in their other form (each phase's program rewritten by
    ``other_form``), added to ``module`` or a new one."""
    for phase in ("whole", *phases):
        program = other_form(_phase_program(nests, types, order, request, phase, whole))
        module = KernelCompiler(program, calling_convention(request, types), phase=phase,
                                module=module, name=entry + OTHER_FORM_SUFFIX).compile()
    return module


def coo_formats(types: dict[str, TensorType], orders: dict[str, tuple[int, ...]]
                ) -> dict[str, Format]:
    """Each converted operand's format: a sorted coordinate list in its mode order."""
    return {n: named_format("coo", types[n].order, modes) for n, modes in orders.items()}


def full_top_format(fmt: Format) -> Format | None:
    """``fmt`` with its top level dense, where that keeps the levels below valid (its
    child level is not one child per parent) and the top level is a plain one; None
    otherwise. Lowering reads an operand so where its top level would be merged inside
    another loop: the level is then located (a converted copy, O(extent + entries))."""
    levels = fmt.levels
    if len(levels) < 2 or levels[0].mode is None or levels[0].block is not None \
            or levels[0].kind == "dense" or levels[0].properties or levels[0].params:
        return None
    if fmt.tensor_type("float64", "int64").levels[1].branchless:
        return None
    return Format([Level("dense", levels[0].mode), *levels[1:]])


def conversion_meta(fmt: Format, order: int) -> list[int] | str:
    """How a conversion is stored in a kernel's metadata: a sorted coordinate list's
    mode order, or ``"full_top"``."""
    modes = [lv.mode for lv in fmt.levels]
    return modes if named_format("coo", order, modes) == fmt else "full_top"


def conversion_formats(formats: dict[str, Format], meta: dict[str, list[int] | str],
                       types: dict[str, TensorType]) -> dict[str, Format]:
    """The conversions ``conversion_meta`` stored, for operands of ``formats``."""
    coo = coo_formats(types, {n: tuple(m) for n, m in meta.items() if m != "full_top"})
    return {n: coo[n] if m != "full_top" else full_top_format(formats[n])
            for n, m in meta.items()}


def retyped(types: dict[str, TensorType], conversions: dict[str, Format]
            ) -> dict[str, TensorType]:
    """``types`` with each converted operand's type that of its conversion."""
    result = dict(types)
    for n, fmt in conversions.items():
        result[n] = fmt.with_fill(types[n].fill).tensor_type(types[n].dtype,
                                                              types[n].index_dtype)
    return result
