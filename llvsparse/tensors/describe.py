"""Short reprs of kernels, their instances, bindings and tensors: what a user needs to
know at a prompt (expression, formats, dtypes, threads, loop form, conversions), not the
IR and descriptors the default dataclass reprs printed (about 10 KB)."""

from __future__ import annotations

import math

from .format import Format


def format_name(fmt: Format) -> str:
    return fmt.name or str(fmt)


def _named_formats(formats: dict[str, Format], names) -> str:
    return ", ".join(f"{n}={format_name(formats[n])!r}" for n in names)


def kernel_repr(kernel) -> str:
    """``Kernel('y(i) = ...', A='csr', x='dense', out='dense')``, then what its last
    binding chose (dtypes, threads, loop form, conversions) once it was called."""
    out = kernel.assignment.lhs.tensor
    inputs = [n for n in kernel.assignment.tensors() if n != out]
    text = (f"Kernel({str(kernel.assignment)!r}, {_named_formats(kernel.formats, inputs)}"
            f"{', ' if inputs else ''}out={format_name(kernel.formats[out])!r}"
            f"{', fastmath=True' if kernel.fastmath else ''})")
    bound = kernel._last_bound
    if bound is not None:
        text += f"; last call: {bound_summary(bound)}"
    elif kernel.last is not None:
        text += f"; {_dtypes(kernel.last)}"
    return text


def _dtypes(inst) -> str:
    names = inst.arg_order
    inputs = ", ".join(f"{n}: {inst.types[n].dtype}" for n in names[1:])
    return f"dtypes {inputs} -> {names[0]}: {inst.dtype}"


def bound_summary(bound) -> str:
    """Dtypes, threads, the loop form the binding runs (or that it is still timing
    them) and conversions."""
    threads = bound.plan.threads if bound.plan is not None else 1
    parts = [_dtypes(bound.inst), f"threads={threads}"]
    if len(bound.code) > 1 or len(bound.probe.assemblies) > 1:
        way = bound.way
        parts.append("loop form: still timing" if way is None else
                     f"loop form: {way.form}, assembly: {way.assembly}")
    parts.append(_conversions(bound.inst))
    return "; ".join(parts)


def _conversions(inst) -> str:
    if not inst.conversions:
        return "no conversions"
    return "converts " + ", ".join(
        f"{n} to {_named(fmt)}" for n, fmt in inst.conversions.items())


def _named(fmt) -> str:
    """A conversion's format: coo in a mode order, or its levels."""
    if fmt.name:
        return f"{fmt.name}{tuple(lv.mode for lv in fmt.levels)}"
    return "[" + ", ".join(f"{lv.kind}:{lv.mode}" for lv in fmt.levels) + "]"


def instance_repr(inst) -> str:
    """One line per thing a user asks about a specialized kernel."""
    names = inst.arg_order
    operands = ", ".join(f"{n}: {_levels_of(inst, n)} {inst.types[n].dtype}"
                         f"/{inst.types[n].index_dtype}" for n in names[1:])
    out = inst.types[names[0]]
    threads = "one thread" if inst.parallel_mode is None else \
        f"rows of mode {inst.parallel_mode} split over threads (large inputs)"
    forms = "two loop forms, chosen per binding by timing" if inst.jit.has_other \
        else "one loop form"
    return (f"<Instance {'; '.join(inst.concrete.splitlines())}\n"
            f"  operands {operands} -> {names[0]}: {_levels_of(inst, names[0])} "
            f"{out.dtype}/{out.index_dtype}\n"
            f"  {threads}; {forms}; {_conversions(inst)}>")


def _levels_of(inst, name: str) -> str:
    """The operand's levels as the compiler sees them (``[dense:0, compressed:1]``): an
    instance is shared by every format with the same levels, so it knows no name."""
    return "[" + ", ".join(f"{lv.kind}:{'-' if lv.mode is None else lv.mode}"
                           for lv in inst.types[name].levels) + "]"


def tensor_repr(tensor) -> str:
    """Like pydata/sparse's: ``<Tensor: shape=(3, 4), dtype=float64, nnz=5, format=csr,
    fill_value=0.0>``; an array-free (dense) tensor's nnz is its size, without walking it."""
    nnz = math.prod(tensor.shape) if not any(tensor.level_arrays) else tensor.nnz
    return (f"<Tensor: shape={tensor.shape}, dtype={tensor.dtype}, nnz={nnz}, "
            f"format={format_name(tensor.format)}, fill_value={tensor.fill_value!r}>")
