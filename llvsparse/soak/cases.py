"""Random cases for the soak (``llvsparse selftest``): each one a pure function of
``(seed, index)``, so any failure is reproduced by its pair alone.

A case is an expression (sums, products, differences, quotients, literals, explicit and
implicit reductions, repeated, transposed and diagonal uses) over operands in random
formats, shapes, value and index dtypes, sometimes holding inf or NaN; or the same with
one operand corrupted (an ``ls.Tensor`` built from mutated arrays, or a scipy matrix
mutated after construction), which must be refused with one of the project's errors.

The reference is numpy on dense copies with the documented sparse semantics: an entry
an operand does not store (padding counts as stored) annihilates in a product even
against inf or NaN; everything else is computed in numpy's ``result_type`` of the
operands and literals (float64 under a division of integers).
"""

from __future__ import annotations

import operator
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..formats.registry import get_level, level_formats
from ..tensors.format import Format, Level
from ..tensors.level_check import register_level_format

VARS = "ijk"
LITERALS = ("2", "3", "0.5", "1e300", "2147483647")  # the last two rarely: dtype edges
LITERAL_WEIGHTS = (10, 10, 10, 1, 1)
# Binary operators written as calls, and numpy's meaning of each (absent entries are 0).
CALLS = {"min": np.minimum, "max": np.maximum}
COMPARISONS = {"<": operator.lt, "==": operator.eq, "!=": operator.ne}
# Fill values an operand may have besides 0 (an entry not stored reads as it, a plain
# value: it does not annihilate a product), by the operand's value kind.
FILLS = {"f": (np.inf, -np.inf, np.nan, -1.0, 2.0), "i": (-1, 2)}
# Formats that store padding as zeros, so their fill is 0.
PADDED = ("dia", "ell", "ell-rows", "bcsr2x2")
DTYPES = ("float64", "float32", "int64", "int32", "bool")
ANY_ORDER_FORMATS = ("dense", "coo", "csf", "hash", "coo-unordered")
MATRIX_FORMATS = ("csr", "csc", "dcsr", "dcsc", "dia", "ell", "ell-rows", "bcsr2x2")
OUT_FORMATS = ("dense", "csr", "dcsr", "coo", "hash", "csf", "coo-unordered", "csc",
               "plugin-csr", "plugin-dcsr")
# Outputs through plugin levels: copies of the shipped compressed and hashed levels
# under other names (plugin_format), which the compiler knows only by their YAML.
PLUGIN_LEVELS = {"compressed": "soak_compressed", "hashed": "soak_hashed"}
CORRUPTIONS = ("crd-range", "pos-order", "short-array", "short-values", "extents",
               "values-dtype", "index-dtype")
SCIPY_CORRUPTIONS = ("indices-range", "indptr-order", "short-indices")


# -- the expression tree ---------------------------------------------------------------------
@dataclass
class Node:
    """``op`` is "access", "literal", "neg", "sum", a binary symbol or a name in CALLS."""

    op: str
    children: list[Node] = field(default_factory=list)
    tensor: str = ""
    indices: str = ""  # one character per index variable (repeats: a diagonal use)
    text: str = ""  # a literal's text, or a reduction's variable

    def __str__(self) -> str:
        if self.op == "access":
            return f"{self.tensor}({','.join(self.indices)})"
        if self.op == "literal":
            return self.text
        if self.op == "neg":
            return f"-({self.children[0]})"
        if self.op == "sum":
            return f"sum_{self.text}({self.children[0]})"
        left, right = self.children
        if self.op in CALLS:
            return f"{self.op}({left}, {right})"
        return f"({left} {self.op} {right})"

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass
class Operand:
    name: str
    vars: str  # canonical index variables, in mode order
    format_name: str  # how the case describes it
    format: object  # what ls.compile / from_numpy take
    dtype: str
    index_dtype: str
    dense: np.ndarray = None  # type: ignore[assignment]
    as_array: bool = False  # passed as a numpy array (dense operands only)
    fill: float = 0  # the value of every entry not stored


@dataclass
class Case:
    seed: int
    index: int
    kind: str  # "valid", "corrupt" or "scipy"
    extents: dict[str, int]
    operands: dict[str, Operand]
    tree: Node
    out_vars: str
    statement: str
    out_format: object  # a named format, or a Format (the complexity soak's hash outputs)
    threads: bool
    corruption: str = ""
    target: str = ""  # the corrupted operand

    def describe(self) -> str:
        ops = ", ".join(f"{o.name}:{o.format_name}/{o.dtype}/{o.index_dtype}"
                        + ("/ndarray" if o.as_array else "")
                        + (f"/fill={o.fill}" if o.fill != 0 else "")
                        for o in self.operands.values())
        extra = f" corrupt {self.target}:{self.corruption}" if self.corruption else ""
        shape = ",".join(f"{v}={n}" for v, n in self.extents.items())
        return (f"[{self.seed}:{self.index}] {self.kind} '{self.statement}' {ops} -> "
                f"{self.out_format} ({shape}){' threads' if self.threads else ''}{extra}")


# -- generation ------------------------------------------------------------------------------
class CaseGenerator:
    """Draws one case; every draw comes from one generator seeded by (seed, index)."""

    def __init__(self, seed: int, index: int, small: bool = False):
        # small: shallower trees over fewer operands, which compile in a fraction of the
        # time (the CI slice); the draws are the same, only the limits differ
        self.depth, self.most = (1, 2) if small else (3, 4)
        self.rng = np.random.default_rng([seed, index])
        self.seed, self.index = seed, index
        self.operands: dict[str, Operand] = {}
        self.square = False
        self.extents: dict[str, int] = {}

    def pick(self, options, weights=None):
        if weights is not None:
            weights = np.asarray(weights, dtype=float) / sum(weights)
        return options[int(self.rng.choice(len(options), p=weights))]

    def case(self) -> Case:
        rng = self.rng
        kind = self.pick(("valid", "corrupt", "scipy"), (80, 13, 7))
        nvars = 2 if kind == "scipy" else self.pick((1, 2, 3), (2, 5, 3))
        names = VARS[:nvars]
        self.square = kind != "scipy" and rng.random() < 0.4
        sizes = (0, 1, 2, 3, 4, 5, 6, 8)
        weights = (1, 3, 4, 4, 4, 4, 3, 3)
        if rng.random() < 0.08:
            self.extents = {v: 1 for v in names}  # 1x1
        elif self.square:
            n = self.pick(sizes, weights)
            self.extents = {v: n for v in names}
        else:
            self.extents = {v: self.pick(sizes, weights) for v in names}
        self.bool_only = rng.random() < 0.1  # all operands bool (a literal makes it int)
        if kind == "scipy":
            self.operand("ij", force_format=self.pick(("csr", "csc", "coo", "dcsr", "dense")))
            tree = Node("*", [Node("access", tensor="A", indices="ij"),
                              self.operand_access("j")])
            out_vars = "i"
            statement = f"y(i) = {tree}"
        else:
            nout = int(rng.integers(0, nvars + 1)) if rng.random() < 0.3 else nvars
            free = "".join(sorted(rng.permutation(list(names))[:nout]))
            bound = [v for v in names if v not in free]
            tree = self.tree(free, bound, depth=0)
            used = {v for n in tree.walk() if n.op == "access" for v in n.indices}
            sums = {n.text for n in tree.walk() if n.op == "sum"}
            out = "".join(v for v in names if v in used and v not in sums)
            if len(out) > 1 and rng.random() < 0.3:
                out = "".join(rng.permutation(list(out)))  # a transposed output
            implicit = (len(out) > 0 and rng.random() < 0.3
                        and all(n.op in ("*", "access") for n in tree.walk()))
            out_vars = out[:-1] if implicit else out
            name = "Z" if out_vars else "s"
            lhs = f"{name}({','.join(out_vars)})" if out_vars else name
            statement = f"{lhs} = {tree}"
        out_format = "dense"
        if out_vars and rng.random() < 0.35:
            choices = [f for f in OUT_FORMATS if len(out_vars) == 2 or f not in (
                "csr", "csc", "dcsr", "plugin-csr")]
            out_format = self.pick(choices)
        for op in self.operands.values():
            op.dense = self.values(op)
        case = Case(self.seed, self.index, kind, self.extents, self.operands, tree, out_vars,
                    statement, out_format, threads=bool(rng.random() < 0.15))
        if kind == "corrupt" and not self.operands:
            case.kind = "valid"
        elif kind == "corrupt":
            case.target = self.pick(sorted(self.operands))
            case.corruption = self.pick(CORRUPTIONS)
        elif kind == "scipy":
            case.target, case.corruption = "A", self.pick(SCIPY_CORRUPTIONS)
        return case

    def tree(self, free: str, bound: list[str], depth: int) -> Node:
        """An expression over ``free``; each variable of ``bound`` is summed by one
        reduction somewhere in it."""
        rng = self.rng
        if bound and (depth >= self.depth - 1 or rng.random() < 0.5):
            var, rest = bound[0], bound[1:]
            body = self.tree(free + var, rest, depth + 1)
            if var not in {v for n in body.walk() if n.op == "access" for v in n.indices}:
                body = Node(self.pick(("*", "+")), [self.operand_access(free + var, var), body])
            return Node("sum", [body], text=var)
        if not bound and (depth >= self.depth or rng.random() < 0.3 + 0.2 * depth):
            if not free or (depth and rng.random() < 0.15):
                return Node("literal", text="1" if self.bool_only
                            else self.pick(LITERALS, LITERAL_WEIGHTS))
            return self.operand_access(free)
        ops = ("+", "-", "*", "/", "neg", "min", "max", *COMPARISONS)  # bools refuse "-"
        op = self.pick(ops, (4, 0.2, 4, 1, 0.05, 1, 1, 0.3, 0.3, 0.3) if self.bool_only
                       else (4, 2, 4, 1, 0.4, 1, 1, 0.3, 0.3, 0.3))
        if op == "neg":
            return Node("neg", [self.tree(free, bound, depth + 1)])
        split = int(rng.integers(0, len(bound) + 1))
        left = self.tree(free, bound[:split], depth + 1)
        right = self.tree(free, bound[split:], depth + 1)
        return Node(op, [left, right])

    def operand_access(self, free: str, required: str = "") -> Node:
        """A use of an existing operand over ``free`` (canonical, transposed or diagonal)
        or of a new one."""
        rng = self.rng
        fits = [op for op in self.operands.values()
                if set(op.vars) <= set(free) and required in op.vars]
        if self.square and self.operands and rng.random() < 0.4:
            op = self.pick(list(self.operands.values()))
            indices = "".join(self.pick(free) for _ in op.vars)
            if not required or required in indices:
                return Node("access", tensor=op.name, indices=indices)
        if fits and (len(self.operands) >= self.most or rng.random() < 0.5):
            op = self.pick(fits)
            return Node("access", tensor=op.name, indices=op.vars)
        order = int(rng.integers(1, len(free) + 1))
        chosen = list(rng.permutation([v for v in free if v != required])[:order])
        if required:
            chosen = [required, *chosen[:order - 1]]
        vars_ = "".join(sorted(chosen) if rng.random() < 0.8 else chosen)
        op = self.operand(vars_)
        return Node("access", tensor=op.name, indices=op.vars)

    def operand(self, vars_: str, force_format: str | None = None) -> Operand:
        rng = self.rng
        name = "ABCDEFGH"[len(self.operands)]
        shape = [self.extents[v] for v in vars_]
        fmt_name, fmt = force_format or "", force_format
        if fmt is None:
            fmt_name, fmt = self.format(shape)
        dtype = "bool" if self.bool_only else self.pick(DTYPES, (6, 2, 2, 2, 1))
        op = Operand(name, vars_, fmt_name, fmt, dtype, self.pick(("int32", "int64"), (3, 1)))
        op.as_array = fmt_name == "dense" and rng.random() < 0.3
        kind = np.dtype(op.dtype).kind
        if fmt_name not in ("dense", *PADDED) and kind in FILLS and rng.random() < 0.2:
            op.fill = self.pick(FILLS[kind])
        self.operands[name] = op
        return op

    def format(self, shape: list[int]) -> tuple[str, object]:
        rng = self.rng
        named = list(ANY_ORDER_FORMATS)
        if len(shape) == 2:
            named += [f for f in MATRIX_FORMATS
                      if f != "bcsr2x2" or all(n % 2 == 0 for n in shape)]
        if rng.random() > 0.2:
            name = self.pick(named)
            return name, name
        levels, text = [], []
        modes = list(rng.permutation(len(shape)))
        k = 0
        while k < len(modes):
            if k + 1 < len(modes) and rng.random() < 0.25:  # a coordinate pair
                levels += [Level("compressed", int(modes[k]), {"unique": False}),
                           Level("singleton", int(modes[k + 1]))]
                text += [f"compressed(nonunique):{modes[k]}", f"singleton:{modes[k + 1]}"]
                k += 2
                continue
            # a dense level under a sparse one cannot be packed (rarely drawn: a refusal)
            under_sparse = any(level.kind != "dense" for level in levels)
            kind = self.pick(("dense", "compressed", "hashed"),
                             (0.2 if under_sparse else 3, 4, 1))
            levels.append(Level(kind, int(modes[k])))
            text.append(f"{kind}:{modes[k]}")
            k += 1
        return f"Format([{', '.join(text)}])", Format(levels)

    def values(self, op: Operand) -> np.ndarray:
        rng = self.rng
        shape = tuple(self.extents[v] for v in op.vars)
        density = self.pick((0.0, 0.1, 0.3, 0.6, 1.0), (1, 3, 4, 3, 1))
        stored = rng.random(shape) < density
        data = rng.integers(-3, 4, shape) * stored
        if op.dtype == "bool":
            return data != 0
        if op.fill != 0:  # stored values may be 0 then; the rest is the fill
            data = np.where(stored, data, op.fill)
        if op.dtype.startswith("float"):
            data = data.astype(op.dtype)
            if rng.random() < 0.3:
                data = data * rng.random(shape).astype(op.dtype)
            if data.size and rng.random() < 0.15:
                for _ in range(int(rng.integers(1, 3))):
                    data.flat[int(rng.integers(data.size))] = self.pick(
                        (np.inf, -np.inf, np.nan))
            return data
        return data.astype(op.dtype)


def plugin_format(name: str, order: int):
    """The Format an out_format of "plugin-csr" or "plugin-dcsr" stands for (a dense
    level, or a plugin compressed one, over plugin compressed levels), registering the
    plugin copies in this process first."""
    folder = Path(tempfile.gettempdir()) / f"llvsparse-soak-levels-{os.getpid()}"
    folder.mkdir(exist_ok=True)
    for shipped, copy in PLUGIN_LEVELS.items():
        if copy in level_formats():  # registered by an earlier case of this process
            continue
        path = folder / f"{copy}.yaml"
        if not path.exists():
            text = Path(get_level(shipped).path).read_text(encoding="utf-8")
            path.write_text(text.replace(f"name: {shipped}", f"name: {copy}", 1))
        register_level_format(path)
    levels = [PLUGIN_LEVELS["compressed"]] * order
    if name == "plugin-csr":
        levels[0] = "dense"
    return Format(levels)


def build_case(seed: int, index: int, small: bool = False) -> Case:
    """The case numbered ``index`` of the soak seeded ``seed``."""
    return CaseGenerator(seed, index, small).case()


# -- the numpy reference ---------------------------------------------------------------------
def result_dtype(case: Case) -> np.dtype:
    """numpy's dtype of the case's expression, node by node, as README documents (bool
    ``+`` an or, a sum of bools an int64 count, ``/`` a float for integers), int64 for
    an unsigned one."""
    dtypes = {name: np.zeros(1, op.dtype) for name, op in case.operands.items()}
    with np.errstate(all="ignore"):
        result = np.result_type(_typed(placed(case), dtypes))
    return np.dtype("int64") if result.kind == "u" else result


def _typed(node: Node, samples: dict[str, np.ndarray]):
    """A sample value of ``node``'s numpy type (a Python number: a weak literal)."""
    if node.op == "literal":
        return _literal(node.text)
    if node.op == "access":
        return samples[node.tensor]
    values = [_typed(child, samples) for child in node.children]
    if node.op == "sum":
        return _summed(values[0], 0) if isinstance(values[0], np.ndarray) else values[0]
    return _apply(node.op, values)


def _apply(op: str, values: list):
    """numpy's ``op`` on ``values`` (arrays, or Python numbers for literals: a function
    of literals only stays a weak Python number, as the compiler types it)."""
    if op == "neg":
        return -values[0]
    left, right = values
    if op in CALLS:
        result = CALLS[op](left, right)
        weak = not any(isinstance(v, np.ndarray) for v in values)
        return result.item() if weak else result
    if op in COMPARISONS:
        return np.asarray(COMPARISONS[op](left, right))
    return {"+": operator.add, "-": operator.sub, "*": operator.mul,
            "/": operator.truediv}[op](left, right)


def _summed(value: np.ndarray, axis: int) -> np.ndarray:
    """A sum over ``axis`` as README's notation sums: bools counted in int64, any other
    dtype kept (int32 stays int32, as np.einsum and ``@``)."""
    dtype = np.dtype("int64") if value.dtype == np.bool_ else value.dtype
    return value.sum(axis=axis, keepdims=True, dtype=dtype)


def _literal(text: str):
    return float(text) if any(c in text for c in ".eE") else int(text)


def reference(case: Case, masks: dict[str, np.ndarray]) -> np.ndarray:
    """The expected result, each node in its numpy dtype (floats computed in the operands'
    promoted one): ``masks`` are the operands' stored patterns."""
    dtype = result_dtype(case)
    full = tuple(case.extents.values())
    names = "".join(case.extents)
    with np.errstate(all="ignore"):
        value, _ = _evaluate(case, placed(case), masks, names)
        value = np.broadcast_to(np.asarray(value, dtype=dtype),
                                tuple(n if v in case.out_vars else 1
                                      for v, n in zip(names, full)))
        value = value.reshape([n for v, n in zip(names, full) if v in case.out_vars])
        kept = [v for v in names if v in case.out_vars]
        order = [kept.index(v) for v in case.out_vars]
        return np.asarray(np.transpose(value, order), dtype=dtype)


def placed(case: Case) -> Node:
    """The case's expression with the variables the output lacks summed where README
    places them: over the smallest subexpression using them (notation.place_reductions),
    so a factor outside that multiplies the finished sum."""
    pending = [v for v in dict.fromkeys(_free_in_order(case.tree)) if v not in case.out_vars]
    return _place_sums(case.tree, pending)


def _free_in_order(node: Node) -> list[str]:
    """The index variables ``node`` uses outside its own sums, by first appearance."""
    if node.op == "access":
        return list(node.indices)
    found = [v for child in node.children for v in _free_in_order(child)]
    return [v for v in found if not (node.op == "sum" and v == node.text)]


def _place_sums(node: Node, pending: list[str]) -> Node:
    """``node`` with each pending variable summed here unless exactly one child uses it."""
    if not pending:
        return node
    used = [set(_free_in_order(child)) for child in node.children]
    here = [v for v in pending if sum(v in u for u in used) != 1]
    children = [_place_sums(child, [v for v in pending if v not in here and v in u])
                for child, u in zip(node.children, used)]
    result = Node(node.op, children, node.tensor, node.indices, node.text)
    for var in reversed(here):
        result = Node("sum", [result], text=var)
    return result


def _evaluate(case: Case, node: Node, masks, names: str):
    """(values, stored pattern) of ``node`` over every index variable, broadcastable;
    values in numpy's dtype for the node (a Python number for a literal)."""
    full = tuple(case.extents.values())
    if node.op == "literal":
        return _literal(node.text), np.asarray(True)
    if node.op == "access":
        op = case.operands[node.tensor]
        unique = "".join(dict.fromkeys(node.indices))
        spec = f"{node.indices}->{unique}"
        value = np.einsum(spec, op.dense)
        if value.dtype.kind == "f":  # in the operands' promoted dtype, as kernels compute
            value = value.astype(np.result_type(*(o.dtype for o in case.operands.values())))
        mask = np.einsum(spec, masks[node.tensor].astype(np.uint8)).astype(bool)
        shape = [full[names.index(v)] if v in unique else 1 for v in names]
        axes = [unique.index(v) for v in names if v in unique]
        return (np.transpose(value, axes).reshape(shape),
                np.transpose(mask, axes).reshape(shape))
    if node.op == "sum":
        value, mask = _evaluate(case, node.children[0], masks, names)
        axis = names.index(node.text)
        value = np.asarray(value)  # a literal's sum counts it once per coordinate
        shape = list(np.broadcast_shapes(value.shape, mask.shape))
        shape[axis] = full[axis]
        total = _summed(np.broadcast_to(value, shape), axis)
        # A finished sum is a computed value (its identity, 0, over no stored entry, in
        # every format: README), which a factor outside multiplies as IEEE does: inf
        # times an empty row's sum is NaN.
        return total, np.ones(total.shape, dtype=bool)
    parts = [_evaluate(case, c, masks, names) for c in node.children]
    value = _apply(node.op, [v for v, _ in parts])
    if node.op == "neg":
        return value, parts[0][1]
    (_, lmask), (_, rmask) = parts
    if node.op == "*":
        mask = lmask & rmask
        zero = np.zeros((), np.result_type(value))
        return np.where(mask, value, zero).astype(zero.dtype), mask
    if node.op == "/":
        return value, np.ones(np.shape(value), dtype=bool)
    if node.op in COMPARISONS:  # where neither is stored, a true comparison is a value
        return value, lmask | rmask | (np.asarray(value) != 0)
    return value, lmask | rmask
