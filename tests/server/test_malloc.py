"""``server.malloc.tune``: on Linux with glibc, buffers of megabytes allocated and freed over and
over are reused from the heap (few page faults) instead of mapped afresh each time; an
operator's own ``MALLOC_*_`` settings are left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hotjoin.server import malloc

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")

_CODE = """
import json, resource, sys
import numpy as np
from hotjoin.server import malloc
tuned = malloc.tune() if sys.argv[1] == "tune" else False
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
f0 = faults()
for i in range(50):  # what a server does per batch: a buffer of a few MiB filled, then freed
    a = np.ones((4 << 17) + i * 4096)  # 4 MiB and growing (glibc raises its threshold to
    del a                              # the largest block freed so far, so each is mapped anew)
print(json.dumps({"tuned": tuned, "faults": faults() - f0}))
"""


def _huge_pages_always() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[always]" in f.read()
    except OSError:
        return False


def _run(mode: str, **env: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CODE, mode], check=True, capture_output=True,
                         text=True, env={**os.environ, **env})
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_tuned_buffers_are_reused_instead_of_mapped_afresh() -> None:
    tuned = _run("tune")
    default = _run("default")
    assert tuned["tuned"] is True
    # 50 buffers of over 1,024 pages each: mapped afresh, every page faults; reused, the few
    # pages each one grew by
    if _huge_pages_always():  # then a fresh mapping faults once per 2 MiB, not per 4 KiB
        assert tuned["faults"] <= default["faults"], (tuned, default)
    else:
        assert tuned["faults"] < 5_000 and default["faults"] > 20_000, (tuned, default)


def test_the_operators_own_settings_are_left_alone() -> None:
    assert _run("tune", MALLOC_TOP_PAD_="0")["tuned"] is False
    assert set(malloc.ENV) == {"MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_",
                               "MALLOC_TRIM_THRESHOLD_"}
