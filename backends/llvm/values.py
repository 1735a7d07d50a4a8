"""Values in generated kernels: an expression at a coordinate, an operand's stored value
(a run of duplicates summed), and a scalar temporary of the loop IR (which fills one
with every sum an expression holds, see emit_nodes)."""

from __future__ import annotations

from llvmlite import ir

from ...ir.concrete.expressions import Apply, Const, Expr, Operand, Sum
from ...ir.errors import InternalCompilerError
from . import scalars
from .bodies import ArrayRef, is_true
from .emit_base import ZERO, Ctx


class ValueEmitter:
    """KernelCompiler's value methods (a part of it, kept in a module of its own)."""

    def value(self, expr: Expr, ctx: Ctx) -> ir.Value:
        b = self.b
        if isinstance(expr, Const):
            return scalars.constant(self.dtype, expr.value)
        if isinstance(expr, Apply):
            args = [self.value(a, ctx) for a in expr.args]
            return scalars.apply_op(b, expr.op, args, self.dtype, self.fastmath)
        if isinstance(expr, Sum):  # the loop IR fills a temporary with every sum
            raise InternalCompilerError(f"a sum left in an expression at code generation: {expr}")
        assert isinstance(expr, Operand)
        return self.operand_value(expr, ctx)

    def operand_value(self, op: Operand, ctx: Ctx) -> ir.Value:
        if op.uid == -1:  # a scalar temporary of the loop IR (emit_nodes)
            return self.b.load(self.temps[op.tensor].slot)
        if op.complement:  # the lattice resolves every complement to 1 or to absent
            raise InternalCompilerError(f"{op}: a complement left unresolved at its point of use")
        tensor = self.tensors[op.tensor]
        resolved = ctx.levels.get(op.uid, ())
        if len(resolved) != len(op.vars):
            raise InternalCompilerError(f"{op}: levels left unresolved at the point of use")
        vals = tensor.array_ref(tensor.vals_slot)
        src = tensor.type.dtype
        if not resolved:
            return self._load_val(vals, ZERO, src)
        last = resolved[-1]
        if last.seg_end is None:
            value = self._load_val(vals, last.pos, src)
            found = ctx.found.get(op.uid)
            if found is not None and not is_true(found):
                value = self.b.select(found, value,
                                      scalars.constant(self.dtype, self.fill_of(op)))
            return value
        acc = self.alloca(scalars.compute_type(self.dtype), "dup")
        self.b.store(scalars.sum_start(self.dtype), acc)  # a segment is never empty
        self.counted_loop(last.pos, last.seg_end, lambda q: self.b.store(scalars.apply(
            self.b, "add", [self.b.load(acc), self._load_val(vals, q, src)], self.dtype),
            acc))
        return self.b.load(acc)

    def _load_val(self, vals: ArrayRef, index: ir.Value, src: str) -> ir.Value:
        stored = vals.load_raw(self.b, index)
        return scalars.load_value(self.b, stored, src, self.dtype)
