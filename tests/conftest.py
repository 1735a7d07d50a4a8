"""Each test session gets its own kernel disk cache, so no earlier run can mask a bug;
the xdist workers of one session share it, so a kernel two workers need is compiled
once. Tests that need a system tool (cc, c++, nm, ptxas) ask the ``tool`` fixture for it."""

import os
import shutil
import sys
import tempfile
import types
from collections.abc import Callable

import numpy as np
import pytest

# The controller makes the folder; its workers, started after it, inherit the variable.
_SESSION_CACHE = "LLVSPARSE_TEST_SESSION_CACHE"
_IS_WORKER = _SESSION_CACHE in os.environ and "PYTEST_XDIST_WORKER" in os.environ
_CACHE_DIR = os.environ[_SESSION_CACHE] if _IS_WORKER else \
    tempfile.mkdtemp(prefix="llvsparse-test-cache-")
os.environ[_SESSION_CACHE] = os.environ["LLVSPARSE_CACHE_DIR"] = _CACHE_DIR


def pytest_unconfigure(config: pytest.Config) -> None:
    """The session's cache goes with it, when the process that made it ends: runs left
    hundreds of folders of compiled kernels in the temporary directory."""
    if not _IS_WORKER:
        shutil.rmtree(_CACHE_DIR, ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    """``-m "not slow"`` leaves out the slowest tests for a quick check while developing
    (README.md); CI runs everything."""
    config.addinivalue_line("markers", "slow: a test taking several seconds or more on a "
                                       "busy two-core machine; -m 'not slow' skips it")
    config.addinivalue_line("markers", "gpu: runs on a real GPU through cuda-python (-m gpu "
                                       "selects them); skipped, with the reason, without one")


@pytest.fixture
def always_gather(monkeypatch) -> list[int]:
    """Bindings that may gather always do (no timing probe); the list records each
    gathered call, so a test can tell it ran."""
    import llvsparse.calls.binding
    import llvsparse.calls.probe

    calls: list[int] = []
    real = llvsparse.calls.binding.gather_parallel

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setitem(llvsparse.calls.probe.FORCED, "assembly", "gathered")
    monkeypatch.setattr(llvsparse.calls.binding, "gather_parallel", counted)
    return calls


def find_tool(name: str) -> str:
    """The path of a system tool a test runs; without it the test is skipped with the
    reason, except under CI (the CI variable set), where a missing tool fails the test so
    that CI cannot pass without running it."""
    path = shutil.which(name)
    if path is not None:
        return path
    message = (f"{name} is not on PATH (this test runs it; README.md says which tools the "
               "tests need)")
    if os.environ.get("CI"):
        pytest.fail(f"{message}; under CI a missing tool is a failure", pytrace=False)
    pytest.skip(message)


@pytest.fixture
def tool() -> Callable[[str], str]:
    """``tool("cc")``: the path of cc, or the test skips (fails under CI) without it."""
    return find_tool


def _pydata_stand_in() -> types.ModuleType:
    """What llvsparse reads of pydata/sparse (the SparseArray base; COO's coords, data,
    shape; DOK's to_coo), for machines where the package, which is no test dependency, is
    not installed."""
    module = types.ModuleType("sparse")

    class SparseArray:
        pass

    class COO(SparseArray):
        def __init__(self, array: np.ndarray) -> None:
            self.array = np.asarray(array)
            self.coords = np.array(np.nonzero(self.array))
            self.data = self.array[tuple(self.coords)]
            self.shape, self.ndim, self.dtype = self.array.shape, self.array.ndim, self.array.dtype

        @classmethod
        def from_numpy(cls, array: np.ndarray) -> "COO":
            return cls(array)

        @property
        def T(self) -> "COO":
            return COO(self.array.T)

    class DOK(SparseArray):  # no coords: converted with to_coo, as pydata's DOK
        def __init__(self, array: np.ndarray) -> None:
            self.array, self.shape, self.ndim = array, array.shape, array.ndim

        def to_coo(self) -> COO:
            return COO(self.array)

    module.SparseArray, module.COO, module.DOK = SparseArray, COO, DOK
    return module


@pytest.fixture
def pydata_sparse(monkeypatch) -> types.ModuleType:
    """pydata/sparse where it is installed, else a stand-in with the same interface."""
    try:
        import sparse
    except ImportError:
        sparse = _pydata_stand_in()
        monkeypatch.setitem(sys.modules, "sparse", sparse)
    return sparse
