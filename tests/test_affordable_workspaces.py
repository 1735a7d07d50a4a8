"""Workspaces sized by a dimension are chosen only where they are affordable (issue
37): a 3-entry SpMV with a 3-entry sparse x at n = 2**31 - 2 allocated a 19 GB operand
workspace (a value and a mark per coordinate of x) and failed with "out of memory".
Where the rule chose it and it would exceed the operands' stored values many times
over, the kernel merges the operands' slices instead; a workspace the caller asked for
is bounded by the machine's memory only.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from llvsparse.calls.workspaces import AFFORDABLE_FLOOR, AFFORDABLE_PER_VALUE, affordable


def test_affordable_is_in_proportion_to_the_stored_values() -> None:
    assert affordable(AFFORDABLE_FLOOR, 0)
    assert not affordable(AFFORDABLE_FLOOR + 1, 3)
    assert affordable(AFFORDABLE_PER_VALUE * 10**7, 10**7)
    assert affordable(2**40, None)  # asked for: only the machine's memory bounds it


_SCRIPT = textwrap.dedent("""
    import resource, sys
    import numpy as np
    import llvsparse as ls
    n = 2**31 - 2
    A = ls.Tensor.from_coo(np.array([[0, 5, n - 1], [1, n - 2, 7]]), np.array([1., 2., 3.]),
                           (n, n), format=sys.argv[1])
    x = ls.Tensor.from_coo(np.array([[1, 7, n - 2]]), np.array([1., 2., 3.]), (n,),
                           format=ls.Format(["compressed"]))
    y = ls.evaluate("y(i) = A(i,j) * x(j)", out_format=ls.Format(["compressed"]), A=A, x=x)
    coords, values = y.to_coo()
    assert coords.tolist() == [[0, 5, n - 1]], coords
    assert values.tolist() == [1.0, 6.0, 6.0], values
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
""")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["dcsr", "coo"])
def test_a_few_entries_at_a_huge_dimension_allocate_no_dimension(fmt: str) -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT, fmt], check=False,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    peak_mb = int(done.stdout.split()[-1])
    assert peak_mb < 1024, f"peak {peak_mb} MB for 3 stored entries at n = 2**31 - 2"
