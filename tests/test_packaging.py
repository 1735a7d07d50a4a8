"""pyproject.toml lists its packages by hand (the repository's folders are mapped onto
llvsparse.*), so a new sub-package that is not listed installs without its modules under
a plain ``pip install .``: the editable install the tests use would never notice."""

from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the test extra installs tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    folders = {package: ROOT / folder for package, folder in config["package-dir"].items()}
    found = set()
    for package, folder in folders.items():
        for init in folder.rglob("__init__.py"):
            if ".venv" in init.parts or "build" in init.relative_to(ROOT).parts[:1]:
                continue
            parts = init.parent.relative_to(folder).parts
            found.add(".".join((package, *parts)) if parts else package)
    assert found - listed == set(), f"not in pyproject's packages: {sorted(found - listed)}"
    assert listed - found == set(), f"listed without a folder: {sorted(listed - found)}"
