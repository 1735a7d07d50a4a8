"""Pickling kernels, for multiprocessing, joblib and caches of results (a Tensor
pickles by tensors/tensor_pickle.py).

A Kernel pickles as its specification (expression, formats, options) plus, for each
dtype signature it was specialized to, the object code and metadata the disk cache
keeps, under one SHA-256 as there. Unpickling reloads that object code without running
LLVM when the receiving process computes the same cache key (same host CPU, versions and
compiler sources) and the digest matches (a damaged pickle raises UnpicklingError: a
flipped byte of object code killed the process that ran it), and otherwise leaves the
signature to be compiled again on first use. Bindings hold pointers into their
operands' memory and are not picklable (they say so).
"""

from __future__ import annotations

import contextlib
import hashlib
import pickle
import weakref

from ..backends.cpu import OTHER_FORM_SUFFIX, load_object
from ..caching.disk import digest
from ..caching.memory import KERNELS
from .build import conversion_meta

# The instances each unpickled kernel received, so that pickling it again (a Dask
# scheduler forwarding it to a worker) carries their object code on: they live in the
# process's cache, not in the kernel's own call-path slots.
_RECEIVED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def reduce_kernel(kernel) -> tuple:
    """``(rebuild_kernel, (Kernel, spec, compiled))``: see the module docstring (the class
    travels by name, so this module needs no import of it)."""
    out = kernel.assignment.lhs.tensor
    formats = {n: kernel.formats[n] for n in kernel.assignment.tensors() if n != out}
    # As text, which parses back to the same AST: pickled operators would be copies of
    # the operator objects the compiler tells apart by identity.
    spec = (str(kernel.assignment), formats, kernel.formats[out], kernel.fastmath,
            kernel.out_index_dtype, kernel.convert, kernel.workspace, kernel.precompute,
            kernel.index_extents, kernel.schedule_text)
    instances = {id(inst): inst for inst in (*kernel._signatures.values(), kernel.last,
                                             *_RECEIVED.get(kernel, ()))
                 if inst is not None and inst.jit.object_code}
    compiled = []
    for inst in instances.values():
        dtypes, index_dtypes, fills = _dtypes(kernel, inst)
        key = kernel.disk_key(kernel.instance_keys(dtypes, index_dtypes, fills)[0])
        obj, meta, other = inst.jit.object_code, instance_meta(inst), _other_object(inst.jit)
        compiled.append((dtypes, index_dtypes, key, obj, meta, fills, other,
                         _checksum(obj, meta, other)))
    return rebuild_kernel, (type(kernel), spec, compiled)


def _checksum(obj: bytes, meta: dict, other: bytes | None) -> str | None:
    """SHA-256 of what a signature loads: its object code and metadata (digested as the
    disk cache's are) and its other form's object code; None for metadata that is not
    JSON (only a damaged pickle holds such)."""
    try:
        entry = digest(obj, meta)
    except (TypeError, ValueError, RecursionError):
        return None
    return hashlib.sha256(entry.encode() + b"\0" + (other or b"")).hexdigest()


def _other_object(jit) -> bytes | None:
    """The object code of a kernel's other loop form where it was compiled on its own
    (a binding's probe asked for it), so the receiver's bindings time both forms as this
    process's do; None where that form is not compiled (the receiver then runs the first
    form only, rather than compile with LLVM) or is in the kernel's own object code."""
    other = jit.compiled  # not ``jit.other``: that would compile it now
    if other is None or other.engine is jit.engine:
        return None
    return other.object_code or None


def instance_meta(inst, other_form_key: str | None = None) -> dict:
    """What an instance's object code needs beside it to be loaded again (the disk
    cache's entries and pickled kernels hold it; ``Kernel.from_object`` reads it). A
    kernel whose other loop form is compiled on first use names the disk-cache entry
    that form is stored under (``other_form_key``)."""
    other = other_form_key if inst.jit.has_other else None
    return {"name": inst.jit.name, "other_form_key": other, "concrete": inst.concrete, "lattices": inst.lattices,
            "parallel_mode": inst.parallel_mode, "initializes_output": inst.initializes_output,
            "workspace": inst.workspace, "precomputes": inst.precomputes,
            "other_forms": None if inst.other_forms is None else list(inst.other_forms),
            "conversions": {n: conversion_meta(f, inst.types[n].order)
                            for n, f in inst.conversions.items()}}


def _dtypes(kernel, inst) -> tuple[dict[str, str], dict[str, str], dict[str, float]]:
    """The dtypes and fill values ``Kernel.instance`` was given for ``inst`` (operands by
    the caller's names, hidden patterns by theirs; index dtypes of the output too): an
    instance for fill-1 operands must not come back as the fill-0 one."""
    out = kernel._assignment.lhs.tensor
    names = [n for n in inst.arg_order if n not in kernel.aliases]
    dtypes = {n: inst.types[n].dtype for n in names if n != out}
    fills = {n: inst.types[n].fill for n in names if n != out}
    return dtypes, {n: inst.types[n].index_dtype for n in names}, fills


def rebuild_kernel(kernel_class: type, spec: tuple, compiled: list) -> object:
    """The Kernel of ``spec``, its signatures loaded from object code where this process
    would compile the same code."""
    assignment, formats, out_format, fastmath, out_index_dtype, convert, *rest = spec
    kernel = kernel_class(assignment, formats, out_format, fastmath, out_index_dtype, convert,
                          workspace=rest[0] if rest else None,  # older pickles have no policy
                          precompute=rest[1] if len(rest) > 1 else None,
                          extents=rest[2] if len(rest) > 2 else None,  # affine subscripts' padding
                          schedule=rest[3] if len(rest) > 3 else None)  # a user's schedule
    received = []
    for dtypes, index_dtypes, key, obj, meta, *rest in compiled:
        fills, other, checksum = (rest + [None] * 3)[:3]  # older pickles have none
        types, dtype, memory_key = kernel.instance_keys(dtypes, index_dtypes, fills)
        if kernel.disk_key(types) != key or checksum is None:
            continue  # another host or version, or no digest: compiled again on first use
        if _checksum(obj, meta, other) != checksum:
            raise pickle.UnpicklingError(
                f"pickled kernel {assignment!r}: the object code of its signature "
                f"{dtypes} does not match its SHA-256 (the pickle is damaged)")
        instance = KERNELS.get(memory_key)
        if instance is None:
            instance = kernel.from_object(obj, meta, key, types, dtype)
            if instance is not None:
                _attach_other(instance.jit, other, key)
                instance = KERNELS.setdefault(memory_key, instance)
        if instance is not None:
            received.append(instance)
    _RECEIVED[kernel] = received
    return kernel




def _attach_other(jit, other: bytes | None, key: str) -> None:
    """Give a kernel loaded from a pickle the other form's object code it came with
    (left out where it does not load: the first form runs alone)."""
    if not other or jit.has_other:
        return
    with contextlib.suppress(RuntimeError):
        jit.compiled = load_object(other, jit.name + OTHER_FORM_SUFFIX, key + "-other")
