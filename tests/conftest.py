"""Settings every test process needs before any test module imports numba."""

from __future__ import annotations

import os

# As ``hotjoin/__init__.py``: a test module may import numba before hotjoin (e.g. to inspect
# the kernels' dispatchers), and numba's error-message highlighting swaps sys.stdout/stderr
# from background threads, which breaks the tests' output capture.
os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")
