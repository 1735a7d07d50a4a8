"""Evaluate level-function bodies in Python, vectorized over numpy arrays where possible:
the host's interpreter of the level language's normalised form (body_ir.py), which the
compiler's LLVM emitter walks too.

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

from . import body_ir as bir


class CorruptTensorError(ValueError):
    """A tensor's index arrays are inconsistent with its format."""


class _Return(Exception):
    def __init__(self, values: tuple):
        self.values = values


_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide,
          "%": np.mod}
_COMPARE = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
            ">": np.greater, ">=": np.greater_equal}


class Interpreter:
    """Runs one normalised body (body_ir.py) with ``env`` (scalars or equal-length
    arrays) and ``arrays``."""

    def __init__(self, env: dict[str, Any], arrays: dict[str, np.ndarray], where: str):
        self.vars = dict(env)
        self.arrays = arrays
        self.where = where
        self.active: np.ndarray | None = None  # lanes still in a vectorized while loop

    def expr(self, node: bir.Expr) -> Any:
        if isinstance(node, bir.Const):
            return node.value
        if isinstance(node, bir.Var):
            return self.vars[node.name]
        if isinstance(node, bir.Load):
            return self.load(node.array, node.index)
        if isinstance(node, bir.Arith):
            return self.arith(node.op, self.expr(node.left), self.expr(node.right))
        if isinstance(node, bir.Compare):
            return _COMPARE[node.op](self.expr(node.left), self.expr(node.right))
        if isinstance(node, bir.Negate):
            return np.negative(self.expr(node.operand))
        if isinstance(node, bir.Not):
            return np.logical_not(self.expr(node.operand))
        if isinstance(node, bir.Absolute):
            return np.abs(self.expr(node.operand))
        if isinstance(node, bir.Extreme):
            fold = np.minimum if node.op == "min" else np.maximum
            result = self.expr(node.values[0])
            for value in node.values[1:]:
                result = fold(result, self.expr(value))
            return result
        if isinstance(node, bir.Logic):
            return self.logic(node)
        if isinstance(node, bir.Choose):
            test = self.expr(node.test)
            if np.ndim(test) == 0:
                return self.expr(node.then if bool(test) else node.other)
            test = np.asarray(test, dtype=bool)
            return np.where(test, self.on_lanes(node.then, test),
                            self.on_lanes(node.other, ~test))
        raise TypeError(f"{self.where}: cannot interpret {type(node).__name__}")

    def logic(self, node: bir.Logic) -> Any:
        """``and`` / ``or`` short-circuit: a later operand is read only where the
        earlier ones leave the result open (``p < n and crd[p] == i`` must not read
        ``crd[n]``), lane by lane over arrays."""
        is_and = node.op == "and"
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

    def on_lanes(self, node: bir.Expr, lanes: np.ndarray) -> Any:
        """``node`` where only ``lanes`` take it: the others' reads and divisions are
        not checked (``crd[p] if p < n else 0`` must not fail where ``p == n``)."""
        outer = self.active
        self.active = lanes if outer is None else outer & lanes
        try:
            return self.expr(node)
        finally:
            self.active = outer

    def arith(self, op: str, left: Any, right: Any) -> Any:
        """A compiled kernel's division by zero gives 0 where Python would raise: an
        index array that leads there is corrupt."""
        if op in ("//", "%"):
            divisors = np.asarray(right)
            if self.active is not None:  # only lanes that take the division count
                divisors = divisors[self.active] if divisors.ndim else \
                    divisors[None][:int(self.active.any())]
            if np.any(divisors == 0):
                raise CorruptTensorError(f"{self.where}: divides by zero (the tensor's "
                                         "arrays or parameters give a zero divisor)")
            with np.errstate(divide="ignore"):  # lanes that do not take the division
                return _ARITH[op](left, right)
        return _ARITH[op](left, right)

    def load(self, name: str, index_expr: bir.Expr) -> Any:
        array = self.arrays[name]
        index = np.asarray(self.expr(index_expr))
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

    def run(self, body: tuple[bir.Stmt, ...]) -> tuple:
        try:
            self.stmts(body)
        except _Return as result:
            return result.values
        return ()

    def stmts(self, body: tuple[bir.Stmt, ...]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, node: bir.Stmt) -> None:
        if isinstance(node, bir.Return):
            raise _Return(tuple(self.expr(v) for v in node.values))
        if isinstance(node, bir.SetLocal):
            self.vars[node.name] = self.expr(node.value)
        elif isinstance(node, bir.Store):
            value = self.expr(node.value)
            self.arrays[node.array][int(self.expr(node.index))] = value
        elif isinstance(node, bir.When):
            self.stmts(node.then if bool(self.expr(node.test)) else node.other)
        elif isinstance(node, bir.Repeat):
            test = self.expr(node.test)
            if np.ndim(test):
                self.masked_while(node, np.asarray(test, bool))
                return
            while bool(test):
                self.stmts(node.body)
                test = self.expr(node.test)
        elif isinstance(node, bir.CountUp):
            for q in range(int(self.expr(node.start)), int(self.expr(node.stop))):
                self.vars[node.var] = q
                self.stmts(node.body)
        else:
            raise TypeError(f"{self.where}: cannot interpret {type(node).__name__}")

    def masked_while(self, node: bir.Repeat, active: np.ndarray) -> None:
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


def straight_line(body: tuple[bir.Stmt, ...]) -> bool:
    """Bodies of assignments to locals, while loops over such assignments and a return
    can run vectorized over arrays."""
    return all(isinstance(s, (bir.SetLocal, bir.Return)) or (
        isinstance(s, bir.Repeat) and all(isinstance(t, bir.SetLocal) for t in s.body))
        for s in body)


def run_function(fn, env: dict[str, Any], arrays: dict[str, np.ndarray], where: str,
                 count: int | None = None) -> tuple:
    """Run ``fn`` (a LevelFunction) over ``count`` elements of array-valued ``env``
    entries (or once)."""
    body = bir.normalised(tuple(fn.body))
    if count is None or straight_line(body):
        results = Interpreter(env, arrays, where).run(body)
        if count is None:
            return results
        return tuple(np.broadcast_to(np.asarray(r), (count,)) for r in results)
    columns: list[list] = []
    for n in range(count):
        scalar_env = {k: (v[n] if isinstance(v, np.ndarray) and v.ndim else v)
                      for k, v in env.items()}
        results = Interpreter(scalar_env, arrays, where).run(body)
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
    return int(Interpreter(env, {}, "length").expr(bir.expression(expr)))


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
