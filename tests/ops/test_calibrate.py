"""Smoke runs of ``hotjoin calibrate`` (seconds, tiny sizes); the calibration's fit and measuring
core are tested in ``tests/matcher/router/test_calibrate.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from hotjoin.cli.main import main
from hotjoin.matcher.router.cost_model import FEATURES, CostProfile


def test_calibrate_quick_writes_a_loadable_profile(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "profile.json"
    assert main(["calibrate", "--quick", "--kinds", "band,select", "--tuples", "30",
                 "--out", str(out)]) == 0
    text = capsys.readouterr()
    assert "BJ-MJ" in text.out and "95% interval" in text.out
    assert "[calibrate] 1/" in text.err  # progress
    prof = CostProfile.load(out)
    assert set(prof.coef) == {n for n in FEATURES if n[:2] in ("BJ", "SJ")}
    for name, c in prof.coef.items():
        assert len(c) == len(FEATURES[name]) and all(x >= 0 for x in c)
        assert all(lo <= x <= hi for x, (lo, hi) in zip(c, prof.ci[name], strict=True))


def test_calibrate_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--kinds", "cubes"]) == 2
    assert "--kinds" in capsys.readouterr().err
    assert main(["calibrate", "--tuples", "3"]) == 2
