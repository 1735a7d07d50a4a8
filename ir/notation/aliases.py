"""Repeated inputs as operands of their own: a pass over index notation."""

from __future__ import annotations

from . import syntax as nt


def separate_repeated_uses(assignment: nt.Assignment) -> tuple[nt.Assignment, dict[str, str]]:
    """``assignment`` with each use of a repeated input at other indices than its first
    renamed (``A(i,j) * A(j,i)`` becomes ``A(i,j) * A__1(j,i)``; so do ``x(i) * x(j)``
    and ``A(i,k) * A(k,j)``), and the new names' originals.

    Each use then is an operand of its own, so the compiler may store one in another
    order (a CSR ``A`` read as ``A(j,i)`` is converted to column-major order); both
    receive the same tensor on every call.
    """
    taken = nt.names_in_use(assignment)
    first_use: dict[str, tuple[nt.IndexVar, ...]] = {}
    renamed: dict[tuple[str, tuple[nt.IndexVar, ...]], str] = {}
    for access in nt.iter_accesses(assignment.rhs):
        key = (access.tensor, access.indices)
        if first_use.setdefault(access.tensor, access.indices) != access.indices \
                and key not in renamed:
            renamed[key] = nt.fresh_name(access.tensor, taken)
    if not renamed:
        return assignment, {}
    rhs = nt.map_accesses(assignment.rhs, lambda a: nt.Access(
        renamed.get((a.tensor, a.indices), a.tensor), a.indices, a.complement))
    return nt.Assignment(assignment.lhs, rhs), {alias: t for (t, _), alias in renamed.items()}
