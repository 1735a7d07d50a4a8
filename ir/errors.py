"""The compiler's two kinds of failure, shared by every stage and backend: a refusal of
what the user asked for (``ScheduleError``), which lowering may answer with another
plan, and a disagreement between the compiler's own stages (``InternalCompilerError``),
which it never retries around."""

from __future__ import annotations


class ScheduleError(ValueError):
    """No loop order can evaluate the statement with the given formats."""


class InternalCompilerError(RuntimeError):
    """A disagreement between the compiler's own stages (a bug to report): never a
    refusal of the user's input, so no caller retries another lowering around it."""

    def __str__(self) -> str:
        return f"internal compiler error (a bug in llvsparse: please report it): {self.args[0]}"
