"""Each test session gets its own kernel disk cache, so no earlier run can mask a bug."""

import os
import tempfile

import pytest

os.environ["LLVSPARSE_CACHE_DIR"] = tempfile.mkdtemp(prefix="llvsparse-test-cache-")


@pytest.fixture
def always_gather(monkeypatch) -> list[int]:
    """Bindings that may gather always do (no timing probe); the list records each
    gathered call, so a test can tell it ran."""
    import llvsparse.api
    import llvsparse.probe

    calls: list[int] = []
    real = llvsparse.api.gather_parallel

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setitem(llvsparse.probe.FORCED, "assembly", "gathered")
    monkeypatch.setattr(llvsparse.api, "gather_parallel", counted)
    return calls
