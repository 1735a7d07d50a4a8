"""The loop IR (stage 4): its node kinds and ``Program`` (nodes), the passes' vocabulary
(notes), lowering the scheduled concrete statement to it (lower, lower_workspace,
lower_precompute, statement_facts, result_fill), and the decisions read off
a program before a backend is asked: legality, bound, output initialisation, assembly
phases, threads' entry windows and the GPU plan.

Layering: imports only itself, the stages before it (notation, concrete, schedule), ir/'s
shared top and formats/. Backends import from here; nodes imports no lowering module."""
