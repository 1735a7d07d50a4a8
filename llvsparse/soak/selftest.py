"""``llvsparse selftest``: a soak of random cases, each isolated so that a crash or a hang
is counted against its case instead of ending the run.

Worker subprocesses (``python -m llvsparse.soak.selftest --worker``) each run a stream of
cases, so imports and warm caches are paid once per worker. The parent sends a worker one
case at a time (``SEED INDEX``), reads one JSON line back, and enforces the per-case
timeout: a worker past it is killed (a hang) and one that dies (a crash: a signal, or an
exit without an answer) is replaced, and the case it held is the one blamed. A worker
is also replaced after any failing case, since memory that native code damaged may
bring down a later case instead.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from dataclasses import dataclass, field

FAILURES = ("wrong", "crash", "hang", "unexpected", "accepted-corrupt")
STARTUP_SECONDS = 60.0  # added to the first case of a fresh worker (imports, first JIT)
_LABELS = {"passed": "passed", "refused": "refused cleanly", "wrong": "wrong result",
           "crash": "crash", "hang": "hang", "unexpected": "unexpected exception",
           "accepted-corrupt": "accepted corrupt input"}


@dataclass
class Result:
    seed: int
    index: int
    status: str
    kind: str = ""
    detail: str = ""
    description: str = ""

    @property
    def failed(self) -> bool:
        return self.status in FAILURES


@dataclass
class Report:
    """Tallies of a soak and every failing case."""

    seed: int
    small: bool = False
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def tallies(self) -> Counter:
        return Counter(r.status for r in self.results)

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if r.failed]

    def by_kind(self, status: str) -> Counter:
        return Counter(r.kind for r in self.results if r.status == status)

    def summary(self) -> str:
        tallies = self.tallies
        lines = [f"selftest: {len(self.results)} cases, seed {self.seed}, "
                 f"{self.seconds:.0f} s: " + ", ".join(
                     f"{tallies.get(s, 0)} {label}" for s, label in _LABELS.items())]
        for status in ("refused", "unexpected", "crash", "wrong", "accepted-corrupt",
                       "passed"):
            kinds = self.by_kind(status)
            if kinds and any(kinds):
                lines.append(f"  {_LABELS[status]} by kind: " + ", ".join(
                    f"{k or '-'} {n}" for k, n in kinds.most_common()))
        lines += [self.line(r) for r in self.failures]
        return "\n".join(lines)

    def line(self, r: Result) -> str:
        """A failing case: what, where, and how to run it again."""
        return (f"FAIL {_LABELS[r.status]} {r.kind}: {r.description}\n     {r.detail}\n"
                f"     reproduce: llvsparse selftest --case {r.seed}:{r.index}"
                + (" --small" if self.small else ""))


# -- the worker ------------------------------------------------------------------------------
def worker_main() -> int:
    """Answer ``SEED INDEX SMALL`` lines with one JSON outcome line each, on the original
    stdout; anything the library prints goes to stderr instead."""
    import faulthandler  # a worker's own crash report

    # the worker's own modules, loaded in the worker only
    from . import check as soakcheck
    from .cases import build_case

    answers = os.fdopen(os.dup(1), "w", buffering=1)
    soakcheck.report_phase = lambda phase: answers.write(json.dumps({"phase": phase}) + "\n")
    os.dup2(2, 1)
    faulthandler.enable()  # a crash leaves its Python stack on stderr
    for line in sys.stdin:
        seed, index, small = (int(part) for part in line.split())
        try:
            case = build_case(seed, index, bool(small))
        except Exception as error:  # noqa: BLE001 - the generator's own bug, not a crash
            answers.write(json.dumps({"index": index, "status": "unexpected",
                                      "kind": f"generator {type(error).__name__}",
                                      "detail": str(error), "description": ""}) + "\n")
            continue
        outcome = soakcheck.run_case(case)
        answers.write(json.dumps({"index": index, "status": outcome.status,
                                  "kind": outcome.kind, "detail": outcome.detail,
                                  "description": case.describe()}) + "\n")
    return 0


# -- the parent ------------------------------------------------------------------------------
class _Worker:
    def __init__(self, command: list[str], env: dict[str, str]):
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, env=env)
        self.buffer = b""
        self.index: int | None = None
        self.phase = "start"  # what the case was doing, as the worker last said
        self.deadline = 0.0
        self.fresh = True

    def send(self, seed: int, index: int, small: bool, timeout: float) -> None:
        self.index, self.phase = index, "start"
        self.deadline = time.monotonic() + timeout + (STARTUP_SECONDS if self.fresh else 0)
        self.fresh = False
        try:
            self.proc.stdin.write(f"{seed} {index} {int(small)}\n".encode())
            self.proc.stdin.flush()
        except BrokenPipeError:  # it died after its last answer: this case gets the blame
            pass

    def stderr_tail(self, lines: int = 24) -> str:
        """What the worker said last: a native message and faulthandler's stacks."""
        self.log.seek(0)
        text = self.log.read().decode(errors="replace")
        text = text.split("\nExtension modules:")[0].strip().splitlines()
        fatal = max((k for k, t in enumerate(text) if t.startswith("Fatal Python")), default=0)
        tail = text[max(0, fatal - 3):][:lines]
        return " | ".join(t.strip() for t in tail if t.strip())

    def stop(self, kill: bool = False) -> int:
        if kill:
            self.proc.kill()
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        code = self.proc.wait()
        self.proc.stdout.close()
        self.log.close()
        return code


def _death(code: int) -> str:
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"


def soak(cases: int, seed: int = 0, timeout: float = 60.0, jobs: int = 1, first: int = 0,
         small: bool = False, worker: list[str] | None = None, progress=None) -> Report:
    """Run cases ``first .. first + cases - 1`` of ``seed`` on ``jobs`` workers
    (``worker``: another command speaking the worker's protocol, for tests)."""
    # loaded when a soak starts: importing the driver (the CLI) stays light
    from .cases import build_case

    command = worker or [sys.executable, "-m", "llvsparse.soak.selftest", "--worker"]
    env = dict(os.environ)
    scratch = None
    if "LLVSPARSE_CACHE_DIR" not in env:  # no kernel from an earlier run may mask a bug
        scratch = tempfile.TemporaryDirectory(prefix="llvsparse-selftest-")
        env["LLVSPARSE_CACHE_DIR"] = scratch.name
    report, start = Report(seed, small), time.monotonic()
    pending = deque(range(first, first + cases))
    workers: list[_Worker] = []
    selector = selectors.DefaultSelector()

    def spawn() -> None:
        """A fresh worker for the next case, if any is left."""
        if pending:
            w = _Worker(command, env)
            w.send(seed, pending.popleft(), small, timeout)
            workers.append(w)
            selector.register(w.proc.stdout, selectors.EVENT_READ, w)

    def retire(w: _Worker, kill: bool = False) -> int:
        selector.unregister(w.proc.stdout)
        workers.remove(w)
        return w.stop(kill)

    def record(result: Result) -> None:
        report.results.append(result)
        if progress:
            progress(report)

    def blame(w: _Worker, status: str, kind: str, detail: str) -> None:
        try:
            description = build_case(seed, w.index, small).describe()
        except Exception as error:  # noqa: BLE001 - the worker's answer would have said
            description = f"[{seed}:{w.index}] (the generator failed: {error!r})"
        record(Result(seed, w.index, status, kind, detail, description))
        spawn()

    try:
        for _ in range(jobs):
            spawn()
        while workers:
            wait = max(0.0, min(w.deadline for w in workers) - time.monotonic())
            for key, _ in selector.select(timeout=wait):
                w = key.data
                chunk = os.read(w.proc.stdout.fileno(), 1 << 16)
                if not chunk:  # the worker died with this case
                    tail = w.stderr_tail()
                    blame(w, "crash", _death(retire(w)), f"in {w.phase}: {tail}")
                    continue
                *lines, w.buffer = (w.buffer + chunk).split(b"\n")
                answers = [json.loads(line) for line in lines]
                for answer in answers:
                    w.phase = answer.get("phase", w.phase)
                if not answers or "status" not in answers[-1]:
                    continue
                answer = answers[-1]  # one case at a time: its answer comes last
                result = Result(seed, answer["index"], answer["status"], answer["kind"],
                                answer["detail"], answer["description"])
                record(result)
                if result.failed:  # what native code broke may outlive its case
                    retire(w)
                    spawn()
                elif pending:
                    w.send(seed, pending.popleft(), small, timeout)
                else:
                    retire(w)
            now = time.monotonic()
            for w in [w for w in workers if w.deadline <= now]:
                retire(w, kill=True)
                blame(w, "hang", f"over {timeout:g} s", f"killed in {w.phase}")
    finally:
        while workers:
            retire(workers[0], kill=True)
        selector.close()
        if scratch is not None:
            scratch.cleanup()
    report.results.sort(key=lambda r: r.index)
    report.seconds = time.monotonic() - start
    return report


def show_case(seed: int, index: int, small: bool = False) -> str:
    """A case's description and operands, for reproducing it by hand."""
    import numpy as np  # numpy only when a case is shown

    # loaded when a case is shown: importing the driver (the CLI) stays light
    from .cases import build_case

    case = build_case(seed, index, small)
    lines = [case.describe()]
    with np.printoptions(threshold=10_000, linewidth=100):
        for op in case.operands.values():
            lines.append(f"{op.name}({','.join(op.vars)}) = np.{op.dense!r}")
    return "\n".join(lines)


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    sys.exit(worker_main())
