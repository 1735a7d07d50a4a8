"""thread_calls.run_phases: phases in order, each ``after`` once between them, and no thread
ever waiting for a helper that has not started (two calls sharing the pool deadlocked
at a barrier over all their threads, each holding workers the other waited for)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.sparse as sp

import llvsparse as ls
from llvsparse.abi import thread_calls
from llvsparse.abi.thread_calls import Phase, Split

PLAN = Split(((0, 1), (1, 2), (2, 3), (3, 4), (4, 5)), (4, 0, 1, 2, 3), 4, (1,) * 5)


class _Helpers:
    """A pool whose jobs never run, or run only when ``release`` is called."""

    def __init__(self) -> None:
        self.jobs: list = []

    def submit(self, job, *args) -> None:
        self.jobs.append((job, args))

    def release(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=job, args=args) for job, args in self.jobs]
        for thread in threads:
            thread.start()
        return threads


def _recorded_phases(log: list) -> list[Phase]:
    def chunk(name: str):
        return lambda k: log.append((name, k)) or 0
    return [Phase(chunk("count"), lambda: log.append(("after", None))), Phase(chunk("fill"))]


def test_the_caller_finishes_alone_when_no_helper_starts(monkeypatch):
    helpers = _Helpers()
    monkeypatch.setattr(thread_calls, "_pool", lambda workers: helpers)
    log: list = []
    thread_calls.run_phases([], PLAN, _recorded_phases(log))
    assert len(helpers.jobs) == 3  # asked for, never started
    assert log == [("count", k) for k in PLAN.order] + [("after", None)] + \
        [("fill", k) for k in PLAN.order]


def test_late_helpers_leave_a_finished_call_alone(monkeypatch):
    helpers = _Helpers()
    monkeypatch.setattr(thread_calls, "_pool", lambda workers: helpers)
    log: list = []
    thread_calls.run_phases([], PLAN, _recorded_phases(log))
    before = list(log)
    for thread in helpers.release():
        thread.join(timeout=10)
        assert not thread.is_alive()
    assert log == before


def test_a_failing_chunk_stops_the_call_and_is_raised(monkeypatch):
    helpers = _Helpers()
    monkeypatch.setattr(thread_calls, "_pool", lambda workers: helpers)

    def count(k: int) -> int:
        if k == 1:
            raise RuntimeError("chunk 1 broke")
        return 0
    fills: list = []
    with pytest.raises(RuntimeError, match="chunk 1 broke"):
        thread_calls.run_phases([], PLAN, [Phase(count), Phase(lambda k: fills.append(k) or 0)])
    assert fills == []


@pytest.mark.slow
def test_two_python_threads_share_the_pool_without_deadlock():
    """Each call asks for more helpers than the pool has free while the other runs."""
    rng = np.random.default_rng(3)
    A = ls.Tensor.from_scipy(sp.random(3000, 3000, 0.04, format="csr", random_state=rng))
    B = ls.Tensor.from_scipy(sp.random(3000, 3000, 0.04, format="csr", random_state=rng))
    add = ls.compile("C(i,j) = A(i,j) + B(i,j)", A="csr", B="csr", out_format="csr")
    expected = (A.to_scipy() + B.to_scipy()).toarray()
    failures: list = []

    def calls() -> None:
        for _ in range(15):
            got = add(A=A, B=B, threads=6).to_numpy()
            if not np.array_equal(got, expected):
                failures.append("wrong result")
    threads = [threading.Thread(target=calls) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
        assert not thread.is_alive(), "deadlocked"
    assert failures == []
