"""The compiler between index notation and a backend, one folder per stage, read downwards:

- notation/: index notation as every front end produces it, operators, subscripts;
- concrete/: concrete index notation, fill algebra and iteration lattices;
- schedule/: loop orders, workspaces, precompute, a user's schedule;
- loops/: the loop IR's nodes, lowering to them, and what is decided off a program;
- opt/: the passes that rewrite loop-IR programs with fast forms;
- plan/: the planning loop that drives the stages, the cost model, the autoscheduler.

errors.py and types.py are the vocabulary every stage shares. A module imports only its
own folder, the folders before it and that shared top (and formats/, the level
language); never a backend or the API package (tests/test_layering.py,
tests/test_ir_imports.py). Backends translate what loops/ (after opt/) produces."""
