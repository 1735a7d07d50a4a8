"""What to suggest when the compiler refuses an expression: the compiler (ir/) says
what is structurally missing, and only here are formats named that work around it."""

from __future__ import annotations

from ..ir.errors import ScheduleError
from ..ir.schedule.scheduler import ScatteredOutputError


def advised(error: ScheduleError) -> ScheduleError:
    """``error``, with the formats that work instead where the refusal has known ways
    around it."""
    if isinstance(error, ScatteredOutputError):
        return ScatteredOutputError(
            f"{error}. What works now: a dense output (out_format='dense'), a "
            "'coo-unordered' output converted afterwards (result.asformat('csr')), or a "
            "'hash' output, which take entries in any order")
    return error
