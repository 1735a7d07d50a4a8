"""Every code block of README.md and formats/README.md runs (issue 21: the README's
operator example crashed at its first line, and formats/README.md used a plugin file
that did not exist).

Each file's blocks run in document order in one temporary directory, the ```python
blocks sharing one namespace (later ones build on earlier ones); shell commands run
there too. ```yaml blocks that define a level (they have a ``name``) load with the
loader, and fragments must parse as YAML; ```c blocks compile with ``cc -fsyntax-only``.
Plain ``` blocks are either commands or a sample of an error line (``path:line:
problem``). The README's indented commands that are not run are listed in NOT_RUN
with the reason, so a new command cannot go unnoticed.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from llvsparse.formats.loader import load_level_text

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "llvsparse" / "data"

NOT_RUN = {
    "python -m pip install -e . && llvsparse demo":
        "installs the package (the tests run on the installed one); README runs the demo "
        "alone at its end",
    'python -m pip install -e ".[test]" && python -m pytest -q':
        "installs packages and runs this whole suite",
    "llvsparse bench --quick --json bench.json --png bench.png":
        "times every installed peer library for minutes (tests/test_bench.py covers bench)",
}


def _blocks(text: str) -> list[tuple[str, str]]:
    """(kind, body) in document order: fenced blocks by their language ('' for none),
    and each indented line that is a command as kind 'shell'."""
    found = []
    pattern = re.compile(r"^```(\w*)\n(.*?)^```|^\n((?: {4}[^\n]*\n)+)", re.DOTALL | re.MULTILINE)
    for match in pattern.finditer(text):
        if match.group(3) is not None:
            for line in match.group(3).splitlines():
                command = line.strip()
                if command.startswith(("llvsparse ", "python ")):
                    found.append(("shell", command))
        else:
            found.append((match.group(1), match.group(2)))
    return found


def _run_command(command: str, where: Path) -> None:
    argv = shlex.split(command)
    assert argv[0] == "llvsparse", command
    done = subprocess.run([sys.executable, "-m", "llvsparse", *argv[1:]], cwd=where,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{command}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def _run_file(name: str, where: Path, monkeypatch) -> list[str]:
    """Run every block of ``name``; returns the indented commands it found."""
    monkeypatch.chdir(where)
    namespace: dict = {"__name__": f"{name} example"}
    commands = []
    for kind, body in _blocks((ROOT / name).read_text()):
        if kind == "python":
            with contextlib.redirect_stdout(io.StringIO()):  # prints IR and assembly
                exec(compile(body, name, "exec"), namespace)  # noqa: S102 (the docs, on purpose)
        elif kind == "yaml":
            if re.match(r"name:", body):
                load_level_text(body, path=f"{name} example")
            else:
                assert isinstance(yaml.safe_load(body), dict), body
        elif kind == "c":
            _check_c(body, where)
        elif kind == "shell":
            commands.append(body)
            if body not in NOT_RUN:
                _run_command(body, where)
        elif kind == "" and body.startswith(("llvsparse ", "python ")):
            _run_command(body.strip(), where)
        else:
            assert kind == "" and re.fullmatch(r"\S+:\d+: .+\n", body), (kind, body)
    return commands


def _check_c(body: str, where: Path) -> None:
    compiler = shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler (cc) to check README's C block with")
    source = where / "abi.c"
    source.write_text("#include <stdint.h>\n" + body)
    done = subprocess.run([compiler, "-fsyntax-only", "-Wall", "-Werror", str(source)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_readme_blocks_run(tmp_path, monkeypatch):
    # The matrices README's commands name are the bundled ones: here, in the working
    # directory, as a user who runs them has them.
    for matrix in DATA.glob("*.mtx.gz"):
        shutil.copy(matrix, tmp_path)
    # `llvsparse formats --check my_level.yaml` checks the user's own level file.
    shutil.copy(ROOT / "formats" / "dense.yaml", tmp_path / "my_level.yaml")
    commands = _run_file("README.md", tmp_path, monkeypatch)
    assert set(NOT_RUN) <= set(commands)


def test_formats_readme_blocks_run(tmp_path, monkeypatch):
    assert _run_file("formats/README.md", tmp_path, monkeypatch) == []
    assert (tmp_path / "plugins" / "dense_rows.yaml").exists()


def test_the_sample_error_line_is_the_loaders(tmp_path, monkeypatch):
    """formats/README.md's sample error is what the loader says for its plugin with a
    float constant put in."""
    text = (ROOT / "formats" / "README.md").read_text()
    sample = re.search(r"^```\n(plugins/\S+:\d+: .+)\n```", text, re.MULTILINE).group(1)
    plugin = re.search(r'write_text\("""\\\n(.*?)"""\)', text, re.DOTALL).group(1)
    broken = plugin.replace("coord_access: return p_parent * N + i, True",
                            "coord_access: return p_parent * N + i * 1.5, True")
    from llvsparse.formats.loader import FormatFileError

    with pytest.raises(FormatFileError) as info:
        load_level_text(broken, path="plugins/dense_rows.yaml")
    assert str(info.value) == sample
