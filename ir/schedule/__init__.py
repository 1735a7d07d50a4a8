"""Scheduling (stage 3): what decides loop orders and temporaries before any loop IR
exists. The scheduling language (directives) and a user's schedule resolved and checked
(resolved, user_*), the scheduler's choices as rewrites of concrete notation (rewrites,
loop_order, scheduler; statement_parts reads a scheduled statement's nests back),
workspaces and their policies, operand precompute, conversions of operands, and which
mode threads may split.

Layering: imports only itself, the stages before it (notation, concrete), ir/'s shared top
and formats/."""
