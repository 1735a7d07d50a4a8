"""Every loop form makes progress: intersections of vectors whose coordinates are
disjoint, equal, interleaved or of very different lengths, over hashed, unordered and
sorted levels, called often enough that a binding runs both loop forms (probe.py).

A loop that stops advancing hangs in native code, where neither a timeout in Python nor
Ctrl-C reaches it, so each case runs in a subprocess that the test kills after a time:
a hang fails the test instead of blocking the suite.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CASES_SCRIPT = r"""
import json, sys
import numpy as np
import llvsparse as ls

text, formats = json.loads(sys.argv[1])
n = 24
PATTERNS = {  # (A's coordinates, B's coordinates)
    "disjoint": ([0, 2, 4, 6], [1, 3, 5, 7, 9]),
    "equal": ([1, 5, 9, 23], [1, 5, 9, 23]),
    "interleaved": ([0, 3, 4, 8, 20], [2, 3, 5, 8, 9, 10, 20, 23]),
    "skewed": ([7], list(range(n))),  # one range over 8x the other: the galloping merge
    "skewed-miss": ([0], [1] + list(range(2, n))),
}
rng = np.random.default_rng(3)
c = rng.integers(1, 5, (3, n)).astype(float)
kernel = ls.compile(text, **formats)
for name, (ca, cb) in PATTERNS.items():
    for a_coords, b_coords in ((ca, cb), (cb, ca)):
        a, b = np.zeros(n), np.zeros(n)
        a[a_coords] = np.arange(1, len(a_coords) + 1)
        b[b_coords] = np.arange(11, len(b_coords) + 11)
        env = {"A": a, "B": b, "C": c}
        expected = {"y(k) = C(k,i) * B(i) * A(i)": lambda: c @ (a * b),
                    "y(i) = A(i) * B(i)": lambda: a * b,
                    "s = A(i) * B(i)": lambda: np.array(a @ b)}[text]()
        operands = {op: ls.Tensor.from_numpy(env[op], format=fmt)
                    for op, fmt in formats.items()}
        bound = kernel.bind(**operands)
        for call in range(4):  # a binding's calls alternate the loop forms
            for how, run in (("kernel", lambda: kernel(**operands)), ("binding", bound)):
                got = run().to_numpy()
                if not np.allclose(got, expected):
                    sys.exit(f"{name}, {how} call {call}: {got} != {expected}")
print("ok")
"""

CASES = [
    ("y(k) = C(k,i) * B(i) * A(i)", {"A": "csf", "B": "hash", "C": "csr"}),
    ("y(k) = C(k,i) * B(i) * A(i)", {"A": "coo-unordered", "B": "hash", "C": "csr"}),
    ("y(k) = C(k,i) * B(i) * A(i)", {"A": "csf", "B": "coo", "C": "csr"}),
    ("y(k) = C(k,i) * B(i) * A(i)", {"A": "csf", "B": "hash", "C": "dcsr"}),
    ("y(k) = C(k,i) * B(i) * A(i)", {"A": "hash", "B": "coo-unordered", "C": "csr"}),
    ("y(i) = A(i) * B(i)", {"A": "csf", "B": "coo"}),
    ("y(i) = A(i) * B(i)", {"A": "hash", "B": "csf"}),
    ("y(i) = A(i) * B(i)", {"A": "coo-unordered", "B": "csf"}),
    ("s = A(i) * B(i)", {"A": "csf", "B": "coo"}),
    ("s = A(i) * B(i)", {"A": "hash", "B": "coo-unordered"}),
    ("y(k) = C(k,i) * B(i) * A(i)", {"A": "csf", "B": "coo", "C": "hash"}),
]


@pytest.mark.parametrize("text,formats", CASES)
def test_every_loop_form_terminates(text, formats):
    try:
        done = subprocess.run([sys.executable, "-c", CASES_SCRIPT, json.dumps([text, formats])],
                              check=False, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{text} with {formats}: a call did not return in 240 s (a loop that "
                    "does not advance)")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
