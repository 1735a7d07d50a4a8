"""Each test session gets its own kernel disk cache, so no earlier run can mask a bug."""

import os
import tempfile

os.environ["LLVSPARSE_CACHE_DIR"] = tempfile.mkdtemp(prefix="llvsparse-test-cache-")
