"""Run pydata/sparse's own test files (from the installed wheel) against llvsparse.

    python -m tools.pydata_suite [--files test_coo test_dot ...] [-k EXPR] [--json OUT]

The constructor shim is tools/pydata_shim.py. Prints pass / fail counts by test file, by
failure kind (wrong result, another kind of result than pydata's, missing API with a clear error, unclear error, no error where
one was expected) and the commonest errors. Skipped and xfailed tests are left out of the
rate.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import subprocess
import sys
import tempfile

FILES = ("test_coo", "test_elemwise", "test_dot", "test_einsum", "test_array_function",
         "test_compressed")
KINDS = ("pass", "wrong", "type", "missing", "unclear", "no_raise", "message")


def tests_folder() -> pathlib.Path:
    import sparse

    return pathlib.Path(sparse.__file__).parent / "numba_backend" / "tests"


def run(files=FILES, keyword: str | None = None, extra: tuple[str, ...] = ()) -> list[dict]:
    """One record per test (see tools/pydata_shim.py), from a pytest run in a subprocess."""
    root = pathlib.Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as folder:
        log = pathlib.Path(folder) / "log.jsonl"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "-o", "addopts=", "-p", "no:xdist", "-p", "tools.pydata_shim", "--tb=no", "--no-header",
                   "-rN", "-W", "ignore", "--rootdir", str(tests_folder()),
                   *[str(tests_folder() / f"{name}.py") for name in files], *extra]
        if keyword:
            command += ["-k", keyword]
        env = dict(os.environ, LLVSPARSE_PYDATA_LOG=str(log),
                   PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
        subprocess.run(command, cwd=root, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, check=False)
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]


def summary(records: list[dict]) -> str:
    counted = [r for r in records if r["kind"] != "skip"]
    passed = sum(r["kind"] == "pass" for r in counted)
    lines = [(f"{passed} of {len(counted)} pass ({100 * passed / max(len(counted), 1):.1f}%), "
             f"{len(records) - len(counted)} skipped or xfailed")]
    kinds = collections.Counter(r["kind"] for r in counted)
    lines.append("by kind: " + ", ".join(f"{k} {kinds[k]}" for k in KINDS))
    by_file: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    by_test: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in counted:
        by_file[r["id"].split("::")[0].rsplit("/", 1)[-1]][r["kind"]] += 1
        by_test[r["id"].split("[")[0].rsplit("::", 1)[-1]][r["kind"]] += 1
    lines.append(f"{'file':24}" + "".join(f"{k:>9}" for k in KINDS))
    for name, counts in sorted(by_file.items()):
        lines.append(f"{name:24}" + "".join(f"{counts[k]:>9}" for k in KINDS))
    failing = sorted(by_test.items(), key=lambda kv: kv[1]["pass"] - sum(kv[1].values()))
    lines.append("tests failing most (test: failures by kind):")
    for name, counts in failing[:25]:
        bad = {k: counts[k] for k in KINDS[1:] if counts[k]}
        if bad:
            lines.append(f"  {name}: {bad}")
    errors = collections.Counter((r["kind"], r["error"][:110]) for r in counted
                                 if r["kind"] != "pass")
    lines.append("commonest errors:")
    lines += [f"  {n:5} {kind:8} {text}" for (kind, text), n in errors.most_common(30)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", nargs="*", default=list(FILES))
    parser.add_argument("-k", dest="keyword")
    parser.add_argument("--json", help="write the per-test records here")
    args = parser.parse_args()
    records = run(args.files, args.keyword)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(records, indent=0))
    print(summary(records))


if __name__ == "__main__":
    main()
