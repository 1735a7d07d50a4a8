"""Every level array, and the values, against the length its YAML declares, in O(levels).

The walk (walk.py) bounds-checks only what it reads, so an array that no read reaches
passed with the wrong length: an all-zero DCSR whose inner ``pos`` was ``[]`` instead
of ``[0]``, an empty hash tensor one value short. Kernels, conversions and copies take
the declared lengths as given, so they are checked here from the declarations alone.

A level's ``size`` (its number of positions) is known in O(1) where the declarations fix
it: from its ``size`` function (a level that takes inserts); as its parent's size for a
branchless level (one child at each parent's position); as the end of the last parent's
range for a level that appends (children are appended in parent order); and one past the
last parent's last coordinate for a coordinate level whose positions are arithmetic
(``p_parent * N + i``: DIA's rows). Where a size is unknown, the arrays sized by it and
everything below are left to the walk's bounds checks.
"""

from __future__ import annotations

import ast
import functools

import numpy as np

from ..formats.interpret import CorruptTensorError, evaluate_expr, run_function

_COORDS = ("i_parent", "i_grandparent")


def check_lengths(tensor) -> None:
    """Refuse (CorruptTensorError) an array whose length is not the one its declaration
    gives for the tensor's sizes, and values that are not as many as the last level's
    positions."""
    positions = declared_positions(tensor)
    if positions is not None and len(tensor.values) != positions:
        raise CorruptTensorError(f"values has {len(tensor.values)} entries, but the levels "
                                 f"hold {positions} positions")


def declared_positions(tensor) -> int | None:
    """The last level's size, the number of values (None where the declarations do not
    fix it), checking each level's arrays against their declared lengths on the way."""
    parent_size = 1
    extents = tensor.level_extents
    for k, level in enumerate(tensor.tensor_type.levels):
        arrays = tensor.level_arrays[k]
        where = f"level {k} ({level.kind})"
        env = {"N": extents[k], "N_child": extents[k + 1] if k + 1 < len(extents) else 0,
               **tensor.params[k], "parent_size": parent_size}
        _check_arrays(level.definition, arrays, env, where, with_size=False)
        size = _size(level, arrays, env, where)
        if size is None:
            return None
        if size < 0:
            raise CorruptTensorError(f"{where} has the negative size {size}")
        _check_arrays(level.definition, arrays, dict(env, size=size), where, with_size=True)
        parent_size = size
    return parent_size


def _check_arrays(definition, arrays: dict, env: dict, where: str, with_size: bool) -> None:
    """The arrays whose declared length reads ``size`` (``with_size``) or does not."""
    for name, adef in _sized(definition)[with_size]:
        array = arrays.get(name)
        if array is None:
            continue  # a missing array is refused by the descriptor check
        expected = evaluate_expr(adef.length, env)
        if len(array) != expected:
            sizes = ", ".join(f"{n}={env[n]}" for n in ("parent_size", "size") if n in env)
            raise CorruptTensorError(
                f"{where} array {name!r} has {len(array)} entries, but its declared length "
                f"{adef.length_source} is {expected} ({sizes})")


@functools.cache
def _sized(definition) -> tuple[tuple, tuple]:
    """The arrays with a declared length: those it gives without ``size``, and the rest."""
    declared = [(name, adef) for name, adef in definition.arrays.items()
                if adef.length is not None]
    return tuple(item for item in declared if not _reads(item[1].length, ("size",))), \
        tuple(item for item in declared if _reads(item[1].length, ("size",)))


@functools.cache
def _size_rule(definition) -> str | None:
    """How the level's size follows from its declarations (see the module docstring)."""
    functions = definition.functions
    if "size" in functions:
        return "size"
    if definition.iterate == "position":
        bounds = functions["pos_bounds"]
        return "bounds" if definition.can_append and not _reads_any(bounds, _COORDS) else None
    access = functions["coord_access"]
    if _reads_any(access, _COORDS) or any(isinstance(node, ast.Subscript)
                                          for stmt in access.body for node in ast.walk(stmt)):
        return None
    return "access"


def _size(level, arrays: dict, env: dict, where: str) -> int | None:
    """Level positions the declarations fix for ``parent_size`` positions above (None
    where they do not)."""
    definition, parent_size = level.definition, env["parent_size"]
    rule, functions = _size_rule(definition), definition.functions
    if rule == "size":
        body = functions["size"].body
        if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
            return evaluate_expr(body[0].value, env)  # Python integers: no int64 wrap
        return int(run_function(functions["size"], env, arrays, f"{where} size")[0])
    if parent_size == 0:
        return 0
    if level.branchless:
        return parent_size
    last = dict(env, p_parent=np.int64(parent_size - 1))
    if rule == "bounds":
        return int(run_function(functions["pos_bounds"], last, arrays,
                                f"{where} pos_bounds")[1])
    if rule is None:
        return None
    if env["N"] == 0:
        return 0
    last["i"] = np.int64(env["N"] - 1)
    return int(run_function(functions["coord_access"], last, arrays,
                            f"{where} coord_access")[0]) + 1


def _reads(expr: ast.AST, names: tuple[str, ...]) -> bool:
    return any(isinstance(node, ast.Name) and node.id in names for node in ast.walk(expr))


def _reads_any(fn, names: tuple[str, ...]) -> bool:
    return any(_reads(stmt, names) for stmt in fn.body)
