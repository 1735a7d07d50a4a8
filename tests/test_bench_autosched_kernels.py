"""tools/bench_autosched_kernels: every hand-written candidate it times lowers and gives
the bench's reference result on a small matrix and tensor (measure returns a reason
string instead of times where one does not), and the table's pick column reads the
binding."""

from __future__ import annotations

import time

import pytest
from llvsparse.tools import bench_autosched_kernels as bak
from llvsparse.tools.bench_inputs import MatrixInput, random_tensor, uniform


@pytest.mark.parametrize("kernel", sorted(bak.CANDIDATES))
def test_every_candidate_verified(kernel: str) -> None:
    item = random_tensor((20, 30, 25), 600, skew=True) if bak.KERNELS[kernel].kind == "tensor" \
        else MatrixInput("uniform-300", uniform(300, 6), "generated", {})
    measured = bak.measure(kernel, item, 1, time.process_time)
    assert not isinstance(measured, str), measured
    times, form = measured
    assert set(times) == {"auto", *bak.CANDIDATES[kernel]}
    assert all(t > 0 for t in times.values())
    assert form == "-" or form.endswith(("(model)", "(probe)"))
