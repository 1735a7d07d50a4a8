"""The package's layers read downwards (issue 31 item 6): each sub-package of llvsparse/
imports only the ones beneath it, by any kind of import (at the top of a module, inside a
function, or for type checkers only), and every module of the API package imports on its
own in a fresh interpreter. The imports that still go up, and the imports inside
functions that hide a cycle, are listed here with why: the lists must only shrink."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from test_ir_imports import imported_alone

import llvsparse

# Bottom to top. The folders of the design card install as llvsparse.ir, .backends,
# .formats and .tools; the rest are the API package's own sub-packages (and graphs.py).
LAYERS = ("formats", "ir", "backends", "abi", "notation", "tensors", "caching", "calls",
          "kernel", "frontend", "graphs", "distributed", "soak", "tools", "commands", "__main__")

# Imports that go up a layer, each (importer, imported): none left, type checkers'
# included; keep it so.
KNOWN_UPWARD: dict[tuple[str, str], str] = {}

# Imports inside functions that close a cycle of modules (the rest inside functions
# load heavy or optional code on first use, and close none).
KNOWN_HIDDEN_CYCLES: set[tuple[str, str]] = set()  # none left: keep it so

ROOT = Path(llvsparse.__file__).parent
_FOLDERS = {"llvsparse": ROOT, **{f"llvsparse.{name}": Path(getattr(llvsparse, name).__file__)
                                   .parent for name in ("ir", "backends", "formats", "tools")}}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    inside_function: bool
    type_checking: bool
    line: int


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in _FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> list[Import]:
    """Every import of a module of llvsparse that ``name`` makes, wherever it stands."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            targets: list[str] = []
            if isinstance(child, ast.ImportFrom):
                module = child.module or ""
                if child.level:
                    parts = package.split(".")
                    module = ".".join(parts[:len(parts) - child.level + 1] + ([module] if module
                                                                               else []))
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module
                           for a in child.names]
            elif isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            found.extend(Import(name, t, in_function, type_checking, child.lineno)
                         for t in targets if t in MODULES and t != name)
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)),
                  type_checking or (isinstance(child, ast.If)
                                    and "TYPE_CHECKING" in ast.unparse(child.test)))

    visit(ast.parse(path.read_text()), False, False)
    return found


IMPORTS = [i for name, path in MODULES.items() for i in _imports(name, path)]


def _layer(module: str) -> str | None:
    """The layer of a module: its sub-package (or module) under llvsparse; None for the
    package itself, the facade every layer may name (``import llvsparse as ls``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_module_has_a_layer() -> None:
    assert sorted({_layer(m) for m in MODULES} - set(LAYERS) - {None}) == []


def test_imports_go_down_the_layers() -> None:
    """Every import, of any kind, of one layer by another goes downwards, but the known
    ones; a known one gone must leave the list too."""
    upward = {(i.importer, i.imported) for i in IMPORTS
              if None not in (_layer(i.importer), _layer(i.imported))
              and _layer(i.importer) != _layer(i.imported)
              and LAYERS.index(_layer(i.importer)) < LAYERS.index(_layer(i.imported))}
    assert sorted(upward - set(KNOWN_UPWARD)) == [], "imports that go up a layer"
    assert sorted(set(KNOWN_UPWARD) - upward) == [], "gone: take them off KNOWN_UPWARD"


# ir/'s folders in pipeline order (issue 31 item 6); beneath them its shared top
# (errors.py, types.py), which every stage may import and which imports none.
IR_STAGES = ("notation", "concrete", "schedule", "loops", "opt", "plan")
IR_SHARED = {"errors", "types"}


def _ir_stage(module: str) -> int | None:
    """A module's place in ir/'s pipeline: 0 for the shared top (and the package),
    1 + its folder's index for a folder's modules; None outside ir/."""
    parts = module.split(".")
    if parts[:2] != ["llvsparse", "ir"]:
        return None
    if len(parts) == 2 or parts[2] in IR_SHARED:
        return 0
    return IR_STAGES.index(parts[2]) + 1 if parts[2] in IR_STAGES else -1


def _ir_upward(imports: list[Import]) -> list[str]:
    """Imports of ir/ that go up its pipeline (into a later folder, or from the shared top
    into a folder), of any kind: at the top, inside functions, for type checkers."""
    return sorted(f"{i.importer}:{i.line} imports {i.imported}" for i in imports
                  if None not in (_ir_stage(i.importer), _ir_stage(i.imported))
                  and _ir_stage(i.importer) < _ir_stage(i.imported))


def test_every_ir_module_has_a_stage() -> None:
    """Each module of ir/ sits in one of the pipeline's folders or is shared vocabulary: a
    module a branch added flat under ir/ needs a home (/work/briefs/irlayout_apply.py
    NAME=folder.NAME moves it and rewrites its importers)."""
    homeless = sorted(m for m in MODULES if _ir_stage(m) == -1)
    assert homeless == []
    assert {m.split(".")[2] for m in MODULES
            if _ir_stage(m) is not None and m.count(".") >= 2} == set(IR_STAGES) | IR_SHARED


def test_ir_folders_read_downwards() -> None:
    """notation -> concrete -> schedule -> loops -> opt -> plan: a module of ir/ imports
    only its own folder, the folders before it and the shared top, by any kind of import
    (module level, inside a function, for type checkers)."""
    assert _ir_upward(IMPORTS) == []


def test_ir_folder_docstrings_say_their_layering() -> None:
    for stage in IR_STAGES:
        doc = ast.get_docstring(ast.parse(MODULES[f"llvsparse.ir.{stage}"].read_text()))
        assert doc and "Layering" in doc, stage


def test_the_stage_check_sees_every_kind_of_upward_import() -> None:
    imports = [Import("llvsparse.ir.concrete.lattice", "llvsparse.ir.loops.nodes", False, False, 1),
               Import("llvsparse.ir.loops.nodes", "llvsparse.ir.plan.lowering", True, False, 2),
               Import("llvsparse.ir.errors", "llvsparse.ir.notation.syntax", False, True, 3),
               Import("llvsparse.ir.loops.lower", "llvsparse.ir.schedule.scheduler", True, True, 4),
               Import("llvsparse.ir.opt", "llvsparse.ir.opt.passes", False, False, 5),
               Import("llvsparse.ir.plan.lowering", "llvsparse.ir.types", False, False, 6)]
    assert [u.split(":")[1].split()[0] for u in _ir_upward(imports)] == ["1", "3", "2"]


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def _hidden_cycles(imports: list[Import]) -> set[tuple[str, str]]:
    graph: dict[str, set[str]] = {}
    for i in imports:
        if not i.type_checking:
            graph.setdefault(i.importer, set()).add(i.imported)
    # a package's __init__ importing its own modules is not a cycle by itself
    for name, targets in graph.items():
        targets -= {p for p in graph if name.startswith(p + ".")}
    return {(i.importer, i.imported) for i in imports if i.inside_function
            and not i.type_checking and i.imported in graph.get(i.importer, ())
            and _reaches(graph, i.imported, i.importer)}


def test_no_new_cycle_hides_inside_a_function() -> None:
    """An import inside a function that closes a cycle of modules is a cycle deferred,
    not resolved; the known ones are listed, and no other may appear."""
    found = _hidden_cycles(IMPORTS)
    assert sorted(found - KNOWN_HIDDEN_CYCLES) == [], "new cycles hidden in functions"
    assert sorted(KNOWN_HIDDEN_CYCLES - found) == [], "gone: take them off the list"


def test_the_cycle_finder_sees_a_deferred_cycle() -> None:
    imports = [Import("a", "b", False, False, 1), Import("b", "a", True, False, 2),
               Import("b", "c", True, False, 3), Import("c", "a", False, True, 4)]
    assert _hidden_cycles(imports) == {("b", "a")}


def test_the_import_reader_reads_every_kind(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("from typing import TYPE_CHECKING\nfrom .format import Format\n"
                      "if TYPE_CHECKING:\n    from ..kernel.api import Kernel\n"
                      "def f():\n    from ..frontend import lazy_tensor\n")
    found = {(i.imported, i.inside_function, i.type_checking)
             for i in _imports("llvsparse.tensors.probe", source)}
    assert found == {("llvsparse.tensors.format", False, False),
                     ("llvsparse.kernel.api", False, True),
                     ("llvsparse.frontend.lazy_tensor", True, False)}


def _said(lines: list[str], line: int) -> bool:
    """Whether the import on ``line`` (1-based) has a comment on its line, or above the
    run of import lines it belongs to."""
    if "#" in lines[line - 1]:
        return True
    above = line - 2
    while above >= 0 and lines[above].strip().startswith(("from ", "import ")):
        if "#" in lines[above]:
            return True
        above -= 1
    return above >= 0 and lines[above].strip().startswith("#")


def test_imports_inside_functions_say_why() -> None:
    """An import inside a function of the API package is there on purpose (an optional
    extra, a heavy module a light path should not load, a subcommand's own modules) and
    says so in a comment, or it is a known hidden cycle (listed above)."""
    silent = []
    for name, path in MODULES.items():
        if _layer(name) in ("ir", "backends", "formats", "tools"):
            continue
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if not isinstance(inner, (ast.Import, ast.ImportFrom)):
                    continue
                known = {(i.importer, i.imported) for i in IMPORTS
                         if i.importer == name and i.line == inner.lineno}
                if known and known <= KNOWN_HIDDEN_CYCLES:
                    continue
                if not _said(lines, inner.lineno):
                    silent.append(f"{path.relative_to(ROOT.parent)}:{inner.lineno}")
    assert sorted(set(silent)) == []


def test_a_comment_above_a_run_of_imports_covers_it() -> None:
    lines = ["def f():", "    # optional", "    import a", "    import b", "", "    import c"]
    assert [_said(lines, n) for n in (3, 4, 6)] == [True, True, False]


def test_each_module_of_the_api_package_imports_alone() -> None:
    """Each module, imported first in a fresh interpreter state (every llvsparse module
    forgotten before it), needs no other import order."""
    names = [m for m in MODULES if _layer(m) not in ("ir", "backends", "formats", "tools",
                                                     "__main__")]
    done = imported_alone(names, 600)
    assert done.returncode == 0, done.stderr
