"""Settings every test process needs before any test module imports numba, and the fixtures
shared by test folders (a local Ray for the scale-out tests)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

# As ``hotjoin/__init__.py``: a test module may import numba before hotjoin (e.g. to inspect
# the kernels' dispatchers), and numba's error-message highlighting swaps sys.stdout/stderr
# from background threads, which breaks the tests' output capture.
os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """A local Ray of two CPUs for one test module (skips when Ray is missing or does not
    start here)."""
    ray = pytest.importorskip("ray")
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, ignore_reinit_error=True)
    except Exception as x:  # noqa: BLE001 - no Ray here: the tests that need it skip
        pytest.skip(f"Ray does not start here: {x}")
    yield ray
    ray.shutdown()
