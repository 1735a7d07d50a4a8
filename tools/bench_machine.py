"""The machine ``llvsparse bench`` ran on: its memory bandwidth (the SpMV roofline), its
CPU and Python, and the llvsparse commit measured."""

from __future__ import annotations

import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .bench_timing import time_once


def _triad(a: np.ndarray, b: np.ndarray, c: np.ndarray, scalar: float) -> None:
    np.multiply(c, scalar, out=a)
    np.add(a, b, out=a)


def stream(quick: bool, rounds: int = 7) -> dict:
    """STREAM-style triad a = b + s*c (two numpy passes: 5 arrays of traffic per element)
    and add a = b + c (3 arrays), on 1 thread and on 2 numpy threads over halves."""
    n = 2_000_000 if quick else 40_000_000
    a, b, c = np.zeros(n), np.random.default_rng(0).random(n), np.random.default_rng(1).random(n)
    half = n // 2

    def two_threads(body: Callable[[slice], None]) -> float:
        barrier = threading.Barrier(3)
        slices = [slice(0, half), slice(half, n)]

        def work(s: slice) -> None:
            barrier.wait()
            body(s)
            barrier.wait()

        workers = [threading.Thread(target=work, args=(s,)) for s in slices]
        for w in workers:
            w.start()
        barrier.wait()
        start = time.perf_counter()
        barrier.wait()
        elapsed = time.perf_counter() - start
        for w in workers:
            w.join()
        return elapsed

    def triad(s: slice) -> None:
        _triad(a[s], b[s], c[s], 3.0)

    def add(s: slice) -> None:
        np.add(b[s], c[s], out=a[s])

    results: dict[str, Any] = {"array_len": n, "array_mib": n * 8 / 2**20}
    for name, body, traffic in (("triad", triad, 40), ("add", add, 24)):
        body(slice(0, n))
        one = min(time_once(lambda body=body: body(slice(0, n))) for _ in range(rounds))
        two = min(two_threads(body) for _ in range(rounds))
        results[f"{name}_1t_gbs"] = traffic * n / one / 1e9
        results[f"{name}_2t_gbs"] = traffic * n / two / 1e9
    results["bandwidth_gbs"] = {1: max(results["triad_1t_gbs"], results["add_1t_gbs"]),
                                2: max(results["triad_2t_gbs"], results["add_2t_gbs"])}
    results["method"] = (
        "best of 7; triad counts 40 B/element (numpy needs two passes: a=s*c then a+=b), "
        "add counts 24 B/element; the bound uses the larger of the two")
    return results


def llvsparse_revision() -> dict:
    """The git commit of the llvsparse tree being measured, and whether it had local edits."""
    import subprocess

    import llvsparse

    root = os.path.dirname(os.path.dirname(os.path.abspath(llvsparse.__file__)))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, check=True,
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, check=True, capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": head, "local_edits": bool(dirty)}


def machine_info() -> dict:
    info = {"python": sys.version.split()[0], "platform": platform.platform(),
            "processor": platform.processor(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info
