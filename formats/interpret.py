"""Evaluate level-function bodies in Python, vectorized over numpy arrays where possible:
the host's one meaning of the YAML level language.

The compiler turns bodies into IR; this interpreter serves the host side: walking a
tensor's levels to unpack or validate it, and sizing output arrays. Array subscripts are
bounds-checked, so corrupt index arrays raise instead of reading garbage.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

import numpy as np


class CorruptTensorError(ValueError):
    """A tensor's index arrays are inconsistent with its format."""


class _Return(Exception):
    def __init__(self, values: tuple):
        self.values = values


_BINOPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply,
           ast.FloorDiv: np.floor_divide, ast.Mod: np.mod}
_CMPS = {ast.Eq: np.equal, ast.NotEq: np.not_equal, ast.Lt: np.less, ast.LtE: np.less_equal,
         ast.Gt: np.greater, ast.GtE: np.greater_equal}


class Interpreter:
    """Runs one body with ``env`` (scalars or equal-length arrays) and ``arrays``."""

    def __init__(self, env: dict[str, Any], arrays: dict[str, np.ndarray], where: str):
        self.vars = dict(env)
        self.arrays = arrays
        self.where = where
        self.active: np.ndarray | None = None  # lanes still in a vectorized while loop

    def expr(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in ("True", "False"):
                return node.id == "True"
            return self.vars[node.id]
        if isinstance(node, ast.BinOp):
            return self.binop(type(node.op), self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.UnaryOp):
            value = self.expr(node.operand)
            return np.negative(value) if isinstance(node.op, ast.USub) else np.logical_not(value)
        if isinstance(node, ast.BoolOp):
            return self.boolop(node)
        if isinstance(node, ast.Compare):
            left = self.expr(node.left)
            result = True
            for op, comp in zip(node.ops, node.comparators):
                right = self.expr(comp)
                result = np.logical_and(result, _CMPS[type(op)](left, right))
                left = right
            return result
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Call):
            args = [self.expr(a) for a in node.args]
            name = node.func.id
            if name == "abs":
                return np.abs(args[0])
            fold = np.minimum if name == "min" else np.maximum
            result = args[0]
            for value in args[1:]:
                result = fold(result, value)
            return result
        if isinstance(node, ast.IfExp):
            test = self.expr(node.test)
            if np.ndim(test) == 0:
                return self.expr(node.body if bool(test) else node.orelse)
            test = np.asarray(test, dtype=bool)
            return np.where(test, self.on_lanes(node.body, test),
                            self.on_lanes(node.orelse, ~test))
        raise TypeError(f"{self.where}: cannot interpret {type(node).__name__}")

    def boolop(self, node: ast.BoolOp) -> Any:
        """``and`` / ``or`` short-circuit, as compiled bodies do: a later operand is read
        only where the earlier ones leave the result open (``p < n and crd[p] == i``
        must not read ``crd[n]``), lane by lane over arrays."""
        is_and = isinstance(node.op, ast.And)
        combine = np.logical_and if is_and else np.logical_or
        result = self.expr(node.values[0])
        for value in node.values[1:]:
            if np.ndim(result) == 0:
                if bool(result) != is_and:  # decided: False for and, True for or
                    return bool(result)
                result = combine(result, self.expr(value))
                continue
            result = np.asarray(result, dtype=bool)
            open_lanes = result if is_and else ~result
            if open_lanes.any():
                result = combine(result, self.on_lanes(value, open_lanes))
        return result

    def on_lanes(self, node: ast.expr, lanes: np.ndarray) -> Any:
        """``node`` where only ``lanes`` take it: the others' reads and divisions are
        not checked (``crd[p] if p < n else 0`` must not fail where ``p == n``)."""
        outer = self.active
        self.active = lanes if outer is None else outer & lanes
        try:
            return self.expr(node)
        finally:
            self.active = outer

    def binop(self, op: type, left: Any, right: Any) -> Any:
        """A compiled kernel's division by zero gives 0 where Python would raise: an
        index array that leads there is corrupt."""
        if op in (ast.FloorDiv, ast.Mod):
            divisors = np.asarray(right)
            if self.active is not None:  # only lanes that take the division count
                divisors = divisors[self.active] if divisors.ndim else \
                    divisors[None][:int(self.active.any())]
            if np.any(divisors == 0):
                raise CorruptTensorError(f"{self.where}: divides by zero (the tensor's "
                                         "arrays or parameters give a zero divisor)")
            with np.errstate(divide="ignore"):  # lanes that do not take the division
                return _BINOPS[op](left, right)
        return _BINOPS[op](left, right)

    def subscript(self, node: ast.Subscript) -> Any:
        name = node.value.id
        array = self.arrays[name]
        index = np.asarray(self.expr(node.slice))
        checked = index
        if self.active is not None and index.ndim:
            checked = index[self.active]  # finished lanes keep values no longer read
        if checked.size and (checked.min() < 0 or checked.max() >= len(array)):
            bad = int(checked.min()) if checked.min() < 0 else int(checked.max())
            raise CorruptTensorError(f"{self.where}: reads {name}[{bad}], but {name} has "
                                     f"{len(array)} entries")
        if checked is not index:
            if not checked.size:  # no lane reads: nothing to look up
                return np.zeros(index.shape, dtype=np.int64)
            index = np.where(self.active, index, checked[0])
        return array[index].astype(np.int64) if index.ndim else int(array[int(index)])

    def run(self, body: tuple[ast.stmt, ...]) -> tuple:
        try:
            self.stmts(body)
        except _Return as result:
            return result.values
        return ()

    def stmts(self, body) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Return):
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            raise _Return(tuple(self.expr(v) for v in values))
        if isinstance(node, ast.Assign):
            target = node.targets[0]
            value = self.expr(node.value)
            if isinstance(target, ast.Name):
                self.vars[target.id] = value
            else:
                self.arrays[target.value.id][int(self.expr(target.slice))] = value
        elif isinstance(node, ast.AugAssign):  # a local or an array entry (pos[p] += 1)
            target = node.target
            if isinstance(target, ast.Name):
                self.vars[target.id] = self.binop(type(node.op), self.vars[target.id],
                                                  self.expr(node.value))
            else:
                current = self.subscript(target)
                self.arrays[target.value.id][int(self.expr(target.slice))] = self.binop(
                    type(node.op), current, self.expr(node.value))
        elif isinstance(node, ast.If):
            self.stmts(node.body if bool(self.expr(node.test)) else node.orelse)
        elif isinstance(node, ast.While):
            test = self.expr(node.test)
            if np.ndim(test):
                self.masked_while(node, np.asarray(test, bool))
                return
            while bool(test):
                self.stmts(node.body)
                test = self.expr(node.test)
        elif isinstance(node, ast.For):
            bounds = [int(self.expr(a)) for a in node.iter.args]
            for q in range(*bounds):
                self.vars[node.target.id] = q
                self.stmts(node.body)
        elif not isinstance(node, ast.Pass):
            raise TypeError(f"{self.where}: cannot interpret {type(node).__name__}")

    def masked_while(self, node: ast.While, active: np.ndarray) -> None:
        """A while loop over all lanes at once: each pass updates the lanes whose test
        still holds (a hashed level's probing, for every stored entry, in numpy)."""
        outer = self.active
        if outer is not None:
            active = active & outer
        while active.any():
            before = dict(self.vars)
            self.active = active
            self.stmts(node.body)
            for name, value in self.vars.items():
                if name in before and value is not before[name]:
                    self.vars[name] = np.where(active, value, before[name])
            active = active & np.asarray(self.expr(node.test), bool)
        self.active = outer


def straight_line(body: tuple[ast.stmt, ...]) -> bool:
    """Bodies of assignments to names, while loops over such assignments and a return
    can run vectorized over arrays."""
    return all(_assigns_a_name(s) or isinstance(s, ast.Return) or (
        isinstance(s, ast.While) and not s.orelse and all(map(_assigns_a_name, s.body)))
        for s in body)


def _assigns_a_name(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Pass) or (
        isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name))


def run_function(fn, env: dict[str, Any], arrays: dict[str, np.ndarray], where: str,
                 count: int | None = None) -> tuple:
    """Run ``fn`` over ``count`` elements of array-valued ``env`` entries (or once)."""
    if count is None or straight_line(fn.body):
        results = Interpreter(env, arrays, where).run(fn.body)
        if count is None:
            return results
        return tuple(np.broadcast_to(np.asarray(r), (count,)) for r in results)
    columns: list[list] = []
    for n in range(count):
        scalar_env = {k: (v[n] if isinstance(v, np.ndarray) and v.ndim else v)
                      for k, v in env.items()}
        results = Interpreter(scalar_env, arrays, where).run(fn.body)
        columns = columns or [[] for _ in results]
        for column, value in zip(columns, results):
            column.append(value)
    return tuple(np.asarray(c) for c in columns) if columns else ()


_SCALAR_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                  ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_SCALAR_CALLS = {"abs": abs, "min": min, "max": max}


def evaluate_expr(expr: ast.expr, env: dict[str, Any]) -> int:
    """A scalar length expression, e.g. ``parent_size + 1``, with Python integers (it
    runs on every kernel call that adopts an output; numpy scalars cost 10x more)."""
    if isinstance(expr, ast.Constant):
        return int(expr.value)
    if isinstance(expr, ast.Name):
        return int(env[expr.id])
    if isinstance(expr, ast.BinOp) and type(expr.op) in _SCALAR_BINOPS:
        return _SCALAR_BINOPS[type(expr.op)](evaluate_expr(expr.left, env),
                                             evaluate_expr(expr.right, env))
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return -evaluate_expr(expr.operand, env)
    if isinstance(expr, ast.Call) and expr.func.id in _SCALAR_CALLS:
        return _SCALAR_CALLS[expr.func.id](*(evaluate_expr(a, env) for a in expr.args))
    return int(Interpreter(env, {}, "length").expr(expr))


def length_function(expr: ast.expr, fixed: dict[str, int]) -> Callable[[int, int], int]:
    """``expr`` as a function of (size, parent_size), with the names that do not change
    between calls (N, level parameters) bound once. Expressions of evaluate_expr's
    scalar subset become a compiled lambda (adopting an output evaluates one per array
    per call: 0.1 us instead of 1); anything else goes through evaluate_expr."""
    names = {"size", "parent_size", *fixed}
    if _scalar_subset(expr, names):
        arguments = ast.arguments(posonlyargs=[], args=[ast.arg("size"), ast.arg("parent_size")],
                                  kwonlyargs=[], kw_defaults=[], defaults=[])
        tree = ast.fix_missing_locations(ast.Expression(ast.Lambda(arguments, expr)))
        scope = {"__builtins__": {}, **_SCALAR_CALLS, **{k: int(v) for k, v in fixed.items()}}
        # Safe: the tree holds only integer arithmetic on these names, min, max, abs.
        return eval(compile(tree, "<length>", "eval"), scope)
    return lambda size, parent_size: evaluate_expr(
        expr, {**fixed, "size": size, "parent_size": parent_size})


def _scalar_subset(expr: ast.expr, names: set[str]) -> bool:
    """Whether evaluate_expr computes ``expr`` without the general interpreter."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, int) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.Name):
        return expr.id in names
    if isinstance(expr, ast.BinOp):
        return type(expr.op) in _SCALAR_BINOPS and _scalar_subset(expr.left, names) \
            and _scalar_subset(expr.right, names)
    if isinstance(expr, ast.UnaryOp):
        return isinstance(expr.op, ast.USub) and _scalar_subset(expr.operand, names)
    if isinstance(expr, ast.Call):
        return isinstance(expr.func, ast.Name) and expr.func.id in _SCALAR_CALLS \
            and not expr.keywords and all(_scalar_subset(a, names) for a in expr.args)
    return False
