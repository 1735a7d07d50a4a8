"""Compile level-function bodies (validated Python ``ast``) straight into llvmlite IR.

A body is inlined at each use site: the caller supplies the environment (positions,
coordinates, extents, params) as IR values and the level's arrays. Integers are i64,
conditions i1. A ``return True`` stays an IR constant, so callers can drop ``found``
checks that can never fail.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

I1 = ir.IntType(1)
I64 = ir.IntType(64)
TRUE = ir.Constant(I1, 1)


class BodyCompileError(ValueError):
    """A body uses something the compiler cannot provide at this use site."""


@dataclass
class ArrayRef:
    """A level array seen by a body: a typed pointer to its first element.

    ``before_store`` lets the lowering grow an output array before a body writes past
    its capacity.
    """

    pointer: ir.Value | Callable[[ir.IRBuilder], ir.Value]
    element: ir.Type
    before_store: Callable[[ir.IRBuilder, ir.Value], None] | None = None
    invariant: bool = False  # an input: never written while the kernel runs

    def address(self, builder: ir.IRBuilder, index: ir.Value) -> ir.Value:
        base = self.pointer(builder) if callable(self.pointer) else self.pointer
        return builder.gep(base, [index], inbounds=True)

    def load_raw(self, builder: ir.IRBuilder, index: ir.Value) -> ir.Value:
        """The element as stored; inputs are marked invariant so stores to the output
        cannot keep LLVM from hoisting or vectorizing their loads."""
        value = builder.load(self.address(builder, index))
        if self.invariant:
            value.set_metadata("invariant.load", builder.module.add_metadata([]))
        mark_access(value, builder.module, self.invariant)
        return value

    def load(self, builder: ir.IRBuilder, index: ir.Value) -> ir.Value:
        value = self.load_raw(builder, index)
        return value if self.element.width == 64 else builder.sext(value, I64)

    def store(self, builder: ir.IRBuilder, index: ir.Value, value: ir.Value) -> None:
        if self.before_store is not None:
            self.before_store(builder, index)
        if self.element.width != 64:
            value = builder.trunc(value, self.element)
        mark_access(builder.store(value, self.address(builder, index)), builder.module,
                   self.invariant)


def mark_access(access: ir.Instruction, module: ir.Module, is_input: bool) -> None:
    """Scoped alias metadata: input arrays are one scope, and output accesses never
    alias it (outputs are always freshly allocated), so LLVM needs no runtime overlap
    checks before vectorizing a loop that reads inputs and writes the output."""
    domain = module.add_metadata(["llvsparse.arrays"])
    inputs = module.add_metadata([module.add_metadata(["llvsparse.inputs", domain])])
    access.set_metadata("alias.scope" if is_input else "noalias", inputs)


def is_true(value: ir.Value) -> bool:
    """Whether a condition is the constant true (so its check can be omitted)."""
    return isinstance(value, ir.Constant) and value.type == I1 and value.constant in (1, True)


class _BodyCompiler:
    def __init__(self, builder: ir.IRBuilder, env: dict[str, ir.Value],
                 arrays: dict[str, ArrayRef], name: str):
        self.b = builder
        self.env = env
        self.arrays = arrays
        self.name = name
        self.locals: dict[str, ir.AllocaInstr] = {}
        self.results: list[ir.AllocaInstr] = []
        self.constant_results: list[ir.Value | None] = []
        self.exit_block: ir.Block | None = None

    # -- expressions -----------------------------------------------------------------
    def as_int(self, value: ir.Value) -> ir.Value:
        return self.b.zext(value, I64) if value.type == I1 else value

    def as_bool(self, value: ir.Value) -> ir.Value:
        if value.type == I1:
            return value
        return self.b.icmp_signed("!=", value, ir.Constant(I64, 0))

    def expr(self, node: ast.expr) -> ir.Value:
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise BodyCompileError(f"{self.name}: cannot compile {type(node).__name__}")
        return method(node)

    def expr_Constant(self, node: ast.Constant) -> ir.Value:
        if isinstance(node.value, bool):
            return ir.Constant(I1, int(node.value))
        return ir.Constant(I64, int(node.value))

    def expr_Name(self, node: ast.Name) -> ir.Value:
        if node.id in self.locals:
            return self.b.load(self.locals[node.id])
        if node.id in self.env:
            return self.env[node.id]
        raise BodyCompileError(f"{self.name}: {node.id!r} is not available here")

    def expr_Subscript(self, node: ast.Subscript) -> ir.Value:
        array = self.array(node.value)
        return array.load(self.b, self.as_int(self.expr(node.slice)))

    def array(self, node: ast.expr) -> ArrayRef:
        assert isinstance(node, ast.Name)
        if node.id not in self.arrays:
            raise BodyCompileError(f"{self.name}: array {node.id!r} is not available here")
        return self.arrays[node.id]

    def expr_BinOp(self, node: ast.BinOp) -> ir.Value:
        left = self.as_int(self.expr(node.left))
        right = self.as_int(self.expr(node.right))
        op = type(node.op)
        if op is ast.Add:
            return self.b.add(left, right)
        if op is ast.Sub:
            return self.b.sub(left, right)
        if op is ast.Mult:
            return self.b.mul(left, right)
        if op is ast.FloorDiv:
            return self._floordiv(left, right)
        if op is ast.Mod:
            return self._mod(left, right)
        raise BodyCompileError(f"{self.name}: operator {op.__name__} is not supported")

    def _trap_free(self, left: ir.Value, right: ir.Value) -> tuple[ir.Value, ...]:
        """``sdiv`` and ``srem`` of ``left`` by ``right`` that cannot trap (a hardware
        fault kills the process): a zero divisor gives 0 and 0, as numpy's integer
        ``//`` and ``%`` do, and -1 gives ``-left`` and 0 without the overflow of the
        smallest integer. A checked call refuses an input whose level functions divide
        by zero when they are run on the host to check it (interpret.py); constant
        divisors fold these selects away."""
        b, zero, minus_one = self.b, ir.Constant(I64, 0), ir.Constant(I64, -1)
        is_zero, is_minus_one = b.icmp_signed("==", right, zero), \
            b.icmp_signed("==", right, minus_one)
        safe = b.select(b.or_(is_zero, is_minus_one), ir.Constant(I64, 1), right)
        quotient = b.select(is_zero, zero, b.select(is_minus_one, b.neg(left),
                                                    b.sdiv(left, safe)))
        remainder = b.select(b.or_(is_zero, is_minus_one), zero, b.srem(left, safe))
        return quotient, remainder

    def _rounds_down(self, remainder: ir.Value, right: ir.Value) -> ir.Value:
        """Whether truncating division differs from Python's flooring one."""
        zero = ir.Constant(I64, 0)
        return self.b.and_(self.b.icmp_signed("!=", remainder, zero),
                           self.b.icmp_signed("!=", self.b.icmp_signed("<", remainder, zero),
                                              self.b.icmp_signed("<", right, zero)))

    def _floordiv(self, left: ir.Value, right: ir.Value) -> ir.Value:
        quotient, remainder = self._trap_free(left, right)
        return self.b.sub(quotient, self.b.zext(self._rounds_down(remainder, right), I64))

    def _mod(self, left: ir.Value, right: ir.Value) -> ir.Value:
        remainder = self._trap_free(left, right)[1]
        return self.b.select(self._rounds_down(remainder, right),
                             self.b.add(remainder, right), remainder)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> ir.Value:
        operand = self.expr(node.operand)
        if isinstance(node.op, ast.USub):
            return self.b.neg(self.as_int(operand))
        if isinstance(node.op, ast.Not):
            return self.b.not_(self.as_bool(operand))
        raise BodyCompileError(f"{self.name}: unary {type(node.op).__name__} not supported")

    def expr_BoolOp(self, node: ast.BoolOp) -> ir.Value:
        # Short-circuit, because later operands may read arrays the earlier ones guard.
        result = self.b.alloca(I1)
        done = self.b.append_basic_block("boolop.done")
        is_and = isinstance(node.op, ast.And)
        for value_node in node.values[:-1]:
            value = self.as_bool(self.expr(value_node))
            self.b.store(value, result)
            nxt = self.b.append_basic_block("boolop.next")
            if is_and:
                self.b.cbranch(value, nxt, done)
            else:
                self.b.cbranch(value, done, nxt)
            self.b.position_at_end(nxt)
        self.b.store(self.as_bool(self.expr(node.values[-1])), result)
        self.b.branch(done)
        self.b.position_at_end(done)
        return self.b.load(result)

    def expr_Compare(self, node: ast.Compare) -> ir.Value:
        ops = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
               ast.GtE: ">="}
        left = self.as_int(self.expr(node.left))
        result: ir.Value | None = None
        for op, comparator in zip(node.ops, node.comparators):
            right = self.as_int(self.expr(comparator))
            cmp = self.b.icmp_signed(ops[type(op)], left, right)
            result = cmp if result is None else self.b.and_(result, cmp)
            left = right
        assert result is not None
        return result

    def expr_Call(self, node: ast.Call) -> ir.Value:
        assert isinstance(node.func, ast.Name)
        args = [self.as_int(self.expr(a)) for a in node.args]
        if node.func.id == "abs":
            (value,) = args
            return self.b.select(self.b.icmp_signed("<", value, ir.Constant(I64, 0)),
                                 self.b.neg(value), value)
        pick = "<" if node.func.id == "min" else ">"
        result = args[0]
        for value in args[1:]:
            result = self.b.select(self.b.icmp_signed(pick, value, result), value, result)
        return result

    def expr_IfExp(self, node: ast.IfExp) -> ir.Value:
        cond = self.as_bool(self.expr(node.test))
        then, other = self.expr(node.body), self.expr(node.orelse)
        if then.type != I1 or other.type != I1:  # two conditions stay one
            then, other = self.as_int(then), self.as_int(other)
        return self.b.select(cond, then, other)

    # -- statements ------------------------------------------------------------------
    def stmts(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if self.b.block.is_terminated:
                return
            method = getattr(self, "stmt_" + type(stmt).__name__, None)
            if method is None:
                raise BodyCompileError(f"{self.name}: cannot compile {type(stmt).__name__}")
            method(stmt)

    def local(self, name: str, type_: ir.Type) -> ir.AllocaInstr:
        if name not in self.locals:
            entry = self.b.function.entry_basic_block
            with self.b.goto_block(entry):
                if entry.instructions:
                    self.b.position_before(entry.instructions[0])
                self.locals[name] = self.b.alloca(type_, name=name)
        return self.locals[name]

    def stmt_Pass(self, node: ast.Pass) -> None:
        return None

    def stmt_Assign(self, node: ast.Assign) -> None:
        (target,) = node.targets
        value = self.expr(node.value)
        self.assign(target, value)

    def assign(self, target: ast.expr, value: ir.Value) -> None:
        if isinstance(target, ast.Subscript):
            array = self.array(target.value)
            array.store(self.b, self.as_int(self.expr(target.slice)), self.as_int(value))
            return
        assert isinstance(target, ast.Name)
        # A local holds one type (the loader checks it): conditions stay i1, so that
        # ``found = crd[q] == i; return q, found`` returns a condition.
        slot = self.local(target.id, I1 if value.type == I1 else I64)
        self.b.store(self.as_bool(value) if slot.type.pointee == I1 else self.as_int(value),
                     slot)

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        load_target = ast.copy_location(type(node.target)(**{
            f: getattr(node.target, f) for f in node.target._fields}), node.target)
        load_target.ctx = ast.Load()
        value = self.expr_BinOp(ast.BinOp(left=load_target, op=node.op, right=node.value))
        self.assign(node.target, value)

    def stmt_If(self, node: ast.If) -> None:
        cond = self.as_bool(self.expr(node.test))
        with self.b.if_else(cond) as (then, otherwise):
            with then:
                self.stmts(node.body)
            with otherwise:
                self.stmts(node.orelse)

    def stmt_While(self, node: ast.While) -> None:
        head = self.b.append_basic_block("while.head")
        body = self.b.append_basic_block("while.body")
        done = self.b.append_basic_block("while.done")
        self.b.branch(head)
        self.b.position_at_end(head)
        self.b.cbranch(self.as_bool(self.expr(node.test)), body, done)
        self.b.position_at_end(body)
        self.stmts(node.body)
        if not self.b.block.is_terminated:
            self.b.branch(head)
        self.b.position_at_end(done)

    def stmt_For(self, node: ast.For) -> None:
        assert isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Call)
        args = [self.as_int(self.expr(a)) for a in node.iter.args]
        start, stop = (ir.Constant(I64, 0), args[0]) if len(args) == 1 else args
        counter = self.local(node.target.id, I64)
        self.b.store(start, counter)
        head = self.b.append_basic_block("for.head")
        body = self.b.append_basic_block("for.body")
        done = self.b.append_basic_block("for.done")
        self.b.branch(head)
        self.b.position_at_end(head)
        self.b.cbranch(self.b.icmp_signed("<", self.b.load(counter), stop), body, done)
        self.b.position_at_end(body)
        self.stmts(node.body)
        if not self.b.block.is_terminated:
            self.b.store(self.b.add(self.b.load(counter), ir.Constant(I64, 1)), counter)
            self.b.branch(head)
        self.b.position_at_end(done)

    def stmt_Return(self, node: ast.Return) -> None:
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        compiled = [self.expr(v) for v in values]
        if not self.results:
            for k, value in enumerate(compiled):
                self.results.append(self.local(f"{self.name}.ret{k}", value.type))
                self.constant_results.append(value if isinstance(value, ir.Constant) else None)
        for k, value in enumerate(compiled):
            slot = self.results[k]
            if slot.type.pointee != value.type:
                value = self.as_int(value) if slot.type.pointee == I64 else self.as_bool(value)
            if not (isinstance(value, ir.Constant) and self.constant_results[k] is not None
                    and value.constant == self.constant_results[k].constant):
                self.constant_results[k] = None
            self.b.store(value, slot)
        if self.exit_block is None:
            self.exit_block = self.b.append_basic_block(f"{self.name}.exit")
        self.b.branch(self.exit_block)


def emit_body(builder: ir.IRBuilder, function, env: dict[str, ir.Value],
              arrays: dict[str, ArrayRef]) -> list[ir.Value]:
    """Inline ``function`` (a LevelFunction) at the builder's position; return its results.

    A result that is the same constant on every return path is returned as that constant.
    """
    compiler = _BodyCompiler(builder, env, arrays, function.name)
    compiler.stmts(list(function.body))
    if compiler.exit_block is None:
        return []
    if not builder.block.is_terminated:
        builder.branch(compiler.exit_block)
    builder.position_at_end(compiler.exit_block)
    results = []
    for slot, constant in zip(compiler.results, compiler.constant_results):
        results.append(constant if constant is not None else builder.load(slot))
    return results
