"""Compile level-function bodies into llvmlite IR, from the level language's normalised
form (formats/body_ir.py), which the host's interpreter (formats/interpret.py) walks too.

A body is inlined at each use site: the caller supplies the environment (positions,
coordinates, extents, params) as IR values and the level's arrays. Integers are i64,
conditions i1. A ``return True`` stays an IR constant, so callers can drop ``found``
checks that can never fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from llvmlite import ir

from ...formats import body_ir as bir

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


@contextmanager
def while_loop(b: ir.IRBuilder, name: str, test: Callable[[], ir.Value]) -> Iterator[ir.Block]:
    """``while test(): <the with-block>``, in blocks ``name``.head, .body and .done (the
    one loop shape every emitter shares); yields the head, which a ``continue`` (or a
    back edge the block closes itself) branches to."""
    head, body, done = (b.append_basic_block(f"{name}.{part}") for part in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    b.cbranch(test(), body, done)
    b.position_at_end(body)
    yield head
    if not b.block.is_terminated:
        b.branch(head)
    b.position_at_end(done)


def is_true(value: ir.Value) -> bool:
    """Whether a condition is the constant true (so its check can be omitted)."""
    return isinstance(value, ir.Constant) and value.type == I1 and value.constant in (1, True)


_COMPARE_OPS = frozenset({"==", "!=", "<", "<=", ">", ">="})


class _BodyCompiler:
    """Emits one normalised body (formats/body_ir.py) at the builder's position."""

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

    def expr(self, node: bir.Expr) -> ir.Value:
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise BodyCompileError(f"{self.name}: cannot compile {type(node).__name__}")
        return method(node)

    def expr_Const(self, node: bir.Const) -> ir.Value:
        if isinstance(node.value, bool):
            return ir.Constant(I1, int(node.value))
        return ir.Constant(I64, int(node.value))

    def expr_Var(self, node: bir.Var) -> ir.Value:
        if node.name in self.locals:
            return self.b.load(self.locals[node.name])
        if node.name in self.env:
            return self.env[node.name]
        raise BodyCompileError(f"{self.name}: {node.name!r} is not available here")

    def expr_Load(self, node: bir.Load) -> ir.Value:
        return self.array(node.array).load(self.b, self.as_int(self.expr(node.index)))

    def array(self, name: str) -> ArrayRef:
        if name not in self.arrays:
            raise BodyCompileError(f"{self.name}: array {name!r} is not available here")
        return self.arrays[name]

    def expr_Arith(self, node: bir.Arith) -> ir.Value:
        left = self.as_int(self.expr(node.left))
        right = self.as_int(self.expr(node.right))
        if node.op == "+":
            return self.b.add(left, right)
        if node.op == "-":
            return self.b.sub(left, right)
        if node.op == "*":
            return self.b.mul(left, right)
        if node.op == "//":
            return self._floordiv(left, right)
        if node.op == "%":
            return self._mod(left, right)
        raise BodyCompileError(f"{self.name}: operator {node.op} is not supported")

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

    def expr_Negate(self, node: bir.Negate) -> ir.Value:
        return self.b.neg(self.as_int(self.expr(node.operand)))

    def expr_Not(self, node: bir.Not) -> ir.Value:
        return self.b.not_(self.as_bool(self.expr(node.operand)))

    def expr_Absolute(self, node: bir.Absolute) -> ir.Value:
        value = self.as_int(self.expr(node.operand))
        return self.b.select(self.b.icmp_signed("<", value, ir.Constant(I64, 0)),
                             self.b.neg(value), value)

    def expr_Extreme(self, node: bir.Extreme) -> ir.Value:
        args = [self.as_int(self.expr(a)) for a in node.values]
        pick = "<" if node.op == "min" else ">"
        result = args[0]
        for value in args[1:]:
            result = self.b.select(self.b.icmp_signed(pick, value, result), value, result)
        return result

    def expr_Logic(self, node: bir.Logic) -> ir.Value:
        # Short-circuit, because later operands may read arrays the earlier ones guard.
        result = self.b.alloca(I1)
        done = self.b.append_basic_block("boolop.done")
        is_and = node.op == "and"
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

    def expr_Compare(self, node: bir.Compare) -> ir.Value:
        if node.op not in _COMPARE_OPS:
            raise BodyCompileError(f"{self.name}: comparison {node.op} is not supported")
        return self.b.icmp_signed(node.op, self.as_int(self.expr(node.left)),
                                  self.as_int(self.expr(node.right)))

    def expr_Choose(self, node: bir.Choose) -> ir.Value:
        """A select where neither branch reads an array (both run, as cheap arithmetic
        that cannot trap); branches where one does, so that ``crd[p] if p < n else 0``
        never reads ``crd[n]``, as on the host."""
        cond = self.as_bool(self.expr(node.test))
        if not (bir.reads_arrays(node.then) or bir.reads_arrays(node.other)):
            then, other = self.expr(node.then), self.expr(node.other)
            if then.type != I1 or other.type != I1:  # two conditions stay one
                then, other = self.as_int(then), self.as_int(other)
            return self.b.select(cond, then, other)
        with self.b.if_else(cond) as (taken, otherwise):
            with taken:
                then, then_block = self.expr(node.then), self.b.block
            with otherwise:
                other, other_block = self.expr(node.other), self.b.block
        if then.type != I1 or other.type != I1:
            with self.b.goto_block(then_block):
                then = self.as_int(then)
            with self.b.goto_block(other_block):
                other = self.as_int(other)
        phi = self.b.phi(then.type)
        phi.add_incoming(then, then_block)
        phi.add_incoming(other, other_block)
        return phi

    # -- statements ------------------------------------------------------------------
    def stmts(self, body: tuple[bir.Stmt, ...]) -> None:
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

    def stmt_SetLocal(self, node: bir.SetLocal) -> None:
        value = self.expr(node.value)
        # A local holds one type (the loader checks it): conditions stay i1, so that
        # ``found = crd[q] == i; return q, found`` returns a condition.
        slot = self.local(node.name, I1 if value.type == I1 else I64)
        self.b.store(self.as_bool(value) if slot.type.pointee == I1 else self.as_int(value),
                     slot)

    def stmt_Store(self, node: bir.Store) -> None:
        value = self.expr(node.value)
        self.array(node.array).store(self.b, self.as_int(self.expr(node.index)),
                                     self.as_int(value))

    def stmt_When(self, node: bir.When) -> None:
        cond = self.as_bool(self.expr(node.test))
        with self.b.if_else(cond) as (then, otherwise):
            with then:
                self.stmts(node.then)
            with otherwise:
                self.stmts(node.other)

    def stmt_Repeat(self, node: bir.Repeat) -> None:
        with while_loop(self.b, "while", lambda: self.as_bool(self.expr(node.test))):
            self.stmts(node.body)

    def stmt_CountUp(self, node: bir.CountUp) -> None:
        start, stop = self.as_int(self.expr(node.start)), self.as_int(self.expr(node.stop))
        counter = self.local(node.var, I64)
        self.b.store(start, counter)
        with while_loop(self.b, "for", lambda: self.b.icmp_signed("<", self.b.load(counter),
                                                                  stop)):
            self.stmts(node.body)
            if not self.b.block.is_terminated:
                self.b.store(self.b.add(self.b.load(counter), ir.Constant(I64, 1)), counter)

    def stmt_Return(self, node: bir.Return) -> None:
        compiled = [self.expr(v) for v in node.values]
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
    compiler.stmts(bir.normalised(tuple(function.body)))
    if compiler.exit_block is None:
        return []
    if not builder.block.is_terminated:
        builder.branch(compiler.exit_block)
    builder.position_at_end(compiler.exit_block)
    results = []
    for slot, constant in zip(compiler.results, compiler.constant_results):
        results.append(constant if constant is not None else builder.load(slot))
    return results
