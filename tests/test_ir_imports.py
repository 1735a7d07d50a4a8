"""ir/ and backends/ have no import cycles: the graph of their modules' imports (those
that run) is acyclic, and the imports only type checkers read close no cycle but the
known ones; every module imports on its own and has at most 500 lines, and ir/ (the
compiler's front and middle) never imports a backend when it runs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import llvsparse.backends
import llvsparse.ir

PACKAGES = (llvsparse.ir, llvsparse.backends)


def _modules(packages=PACKAGES) -> dict[str, Path]:
    found = {}
    for package in packages:
        folder = Path(package.__file__).parent
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package.__name__, *parts))] = path
    return found


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
        and node.test.id == "TYPE_CHECKING"


def _imports(name: str, path: Path, modules: dict[str, Path] | None = None,
             type_checking: bool = False) -> set[str]:
    """The modules ``name`` imports when it runs (at the top or inside functions), and
    with ``type_checking`` those only type checkers read too: those of ``modules``, or
    every one it names when that is None."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    skipped = set() if type_checking else {id(n) for top in ast.walk(tree)
                                           if _type_checking_only(top) for n in ast.walk(top)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        found |= {t for t in targets if (modules is None or t in modules) and t != name}
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_ir_import_graph_is_acyclic() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # a package's __init__ importing its own submodules is not a cycle by itself
    for name in graph:
        graph[name] -= {p for p in graph if name.startswith(p + ".")}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


# Imports only type checkers read that close a cycle of modules, (importer, imported):
# the target is none (issue 31: "no import cycle, type-checking imports included"). The
# list must only shrink. ir/: a Nest names its precomputes' and workspace's plans, whose
# modules build on the scheduler; a loop node's forms name their loop. backends/llvm:
# the KernelCompiler's mixins name the compiler they are mixed into.
KNOWN_TYPE_CHECKING_CYCLES = {
    ("llvsparse.ir.loops.notes", "llvsparse.ir.loops.nodes"),
    ("llvsparse.ir.schedule.scheduler", "llvsparse.ir.schedule.precompute"),
    ("llvsparse.ir.schedule.scheduler", "llvsparse.ir.schedule.workspace_schedule"),
    ("llvsparse.ir.schedule.workspace_policy", "llvsparse.ir.schedule.workspace_schedule"),
    *((f"llvsparse.backends.llvm.{mixin}", "llvsparse.backends.llvm.codegen")
      for mixin in ("assembly", "emit_base", "emit_nodes", "jam", "pairs", "point",
                    "precompute_lower", "scatter_reduce", "tensor_ir", "workspace_bucket",
                    "workspace_dense", "workspace_lower", "workspace_store")),
    ("llvsparse.backends.llvm.assembly", "llvsparse.backends.llvm.emit_base"),
    ("llvsparse.backends.llvm.assembly", "llvsparse.backends.llvm.tensor_ir"),
    ("llvsparse.backends.llvm.cases", "llvsparse.backends.llvm.point"),
    ("llvsparse.backends.llvm.jam", "llvsparse.backends.llvm.emit_base"),
    ("llvsparse.backends.llvm.prefetch", "llvsparse.backends.llvm.point"),
    ("llvsparse.backends.llvm.window", "llvsparse.backends.llvm.tensor_ir"),
}


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def _type_checking_cycles(modules: dict[str, Path]) -> set[tuple[str, str]]:
    """The imports only type checkers read that close a cycle of the graph of every
    import (the graph without them is acyclic: test_ir_import_graph_is_acyclic)."""
    running = {name: _imports(name, path, modules) for name, path in modules.items()}
    every = {name: _imports(name, path, modules, type_checking=True)
             for name, path in modules.items()}
    for graph in (running, every):
        for name in graph:
            graph[name] -= {p for p in graph if name.startswith(p + ".")}
    return {(name, target) for name in every for target in every[name] - running[name]
            if _reaches(every, target, name)}


def test_no_new_import_cycle_through_type_checking_imports() -> None:
    found = _type_checking_cycles(_modules())
    assert sorted(found - KNOWN_TYPE_CHECKING_CYCLES) == [], "new cycles"
    assert sorted(KNOWN_TYPE_CHECKING_CYCLES - found) == [], "gone: take them off the list"


def test_the_type_checking_cycle_finder_finds_one(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from . import b\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\n"
                                   "if TYPE_CHECKING:\n    from . import a\n")
    modules = {"p.a": tmp_path / "a.py", "p.b": tmp_path / "b.py"}
    assert _type_checking_cycles(modules) == {("p.b", "p.a")}


def test_no_module_over_500_lines_in_ir_and_backends() -> None:
    """Issue 31's target: small modules with one job."""
    long = sorted(f"{name}: {len(path.read_text().splitlines())}"
                  for name, path in _modules().items()
                  if len(path.read_text().splitlines()) > 500)
    assert long == []


def test_ir_never_imports_a_backend() -> None:
    """ir/ lowers to the loop IR; backends/ turn it into code. An ir module importing a
    backend when it runs would tie the front to one target (a type checker's import is
    no import)."""
    offenders = sorted(f"{name} imports {target}"
                       for name, path in _modules((llvsparse.ir,)).items()
                       for target in _imports(name, path)
                       if target.split(".")[:2] == ["llvsparse", "backends"])
    assert offenders == []


def test_the_import_reader_sees_a_backend_import(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from ..backends.llvm import codegen\n")
    assert "llvsparse.backends.llvm" in _imports("llvsparse.ir.probe", source)


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


IMPORT_ALONE = """
import importlib, sys
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.split('.')[0] == 'llvsparse']:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as error:
        sys.exit(f'{name}: {error!r}')
"""


def imported_alone(names, timeout: int) -> subprocess.CompletedProcess:
    """Each module of ``names`` imported first in one fresh interpreter, every llvsparse
    module forgotten before it (test_layering checks the API package so too)."""
    return subprocess.run([sys.executable, "-c", IMPORT_ALONE, *names], capture_output=True,
                          text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)


def test_each_ir_module_imports_alone() -> None:
    """Each module, imported first (every llvsparse module forgotten before it), needs
    no other import order."""
    done = imported_alone(_modules(), 300)
    assert done.returncode == 0, done.stderr


def test_importing_ir_loads_no_backend() -> None:
    """Importing any module of ir/ first, in a fresh interpreter state, loads no module
    of backends/ by any path (indirect imports count: ir/workspace_schedule once reached
    the backend's workspace stores through the API package's policy registry)."""
    script = """
import importlib, sys
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.split('.')[0] == 'llvsparse']:
        del sys.modules[loaded]
    importlib.import_module(name)
    backends = sorted(m for m in sys.modules if m.startswith('llvsparse.backends'))
    if backends:
        sys.exit(f'{name} loads {backends}')
"""
    ir_modules = [name for name in _modules((llvsparse.ir,))]
    done = subprocess.run([sys.executable, "-c", script, *ir_modules], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr


def test_ir_imports_nothing_from_the_api_package() -> None:
    """The layering reads downwards: importing any module of ir/ first loads no module of
    the API package (llvsparse/ itself: the tensor type, the front end, the runtime),
    only ir/ and formats/ (the level language) beneath it; type checkers' imports
    included, so none hides there either."""
    script = """
import importlib, sys
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.split('.')[0] == 'llvsparse']:
        del sys.modules[loaded]
    importlib.import_module(name)
    above = sorted(m for m in sys.modules if m.startswith('llvsparse.')
                   and m.split('.')[1] not in ('ir', 'formats'))
    if above:
        sys.exit(f'{name} loads {above}')
"""
    ir_modules = list(_modules((llvsparse.ir,)))
    done = subprocess.run([sys.executable, "-c", script, *ir_modules], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    hidden = sorted(f"{path.name}: {line.strip()}" for path in _modules((llvsparse.ir,)).values()
                    for line in path.read_text().splitlines()
                    if line.strip().startswith(("from llvsparse.", "import llvsparse"))
                    and not line.strip().startswith(("from llvsparse.ir", "from llvsparse.formats")))
    assert hidden == []


# Planning: the scheduler and a user's schedule, the lattices, loop lowering, the passes
# and the planning loop. The backend translates the loop IR they produce and never
# reaches back into them.
PLANNING = ("llvsparse.ir.schedule.scheduler", "llvsparse.ir.schedule.resolved",
            "llvsparse.ir.schedule.user_loops", "llvsparse.ir.schedule.user_plan",
            "llvsparse.ir.schedule.user_statements", "llvsparse.ir.concrete.lattice",
            "llvsparse.ir.loops.lower", "llvsparse.ir.loops.from_schedule", "llvsparse.ir.opt",
            "llvsparse.ir.plan", "llvsparse.ir.notation.aliases",
            "llvsparse.ir.notation.diagonals")


def test_the_llvm_backend_loads_no_planning_module() -> None:
    """Importing any module of backends/llvm first, in a fresh interpreter state, loads
    none of planning's modules by any path: the backend is given a program of the loop
    IR and its calling convention (``KernelCompiler(program, abi)``), nothing else."""
    script = """
import importlib, sys
planning = tuple(sys.argv[1].split(','))
for name in sys.argv[2:]:
    for loaded in [m for m in sys.modules if m.split('.')[0] == 'llvsparse']:
        del sys.modules[loaded]
    importlib.import_module(name)
    reached = sorted(m for m in sys.modules if m.startswith(planning))
    if reached:
        sys.exit(f'{name} loads {reached}')
"""
    backend = [name for name in _modules((llvsparse.backends,))
               if name.startswith("llvsparse.backends.llvm")]
    done = subprocess.run([sys.executable, "-c", script, ",".join(PLANNING), *backend],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
