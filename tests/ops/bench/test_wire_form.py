"""The decode cost of the two candidate columnar publish forms: both forms are measured, sized
and printed, packed repeated fields decode into the engine's columns."""

from __future__ import annotations

import pytest

from hotjoin.ops.bench import wire_form


def test_both_forms_are_measured_and_printed(capsys: pytest.CaptureFixture[str]) -> None:
    out = wire_form.main(n=500, reps=2)
    assert set(out) == {"packed", "arrow_ipc"}
    for r in out.values():
        assert r["ms_per_batch"] >= 0 and r["ns_per_event"] >= 0
        assert r["wire_bytes"] > 500 * 8, "at least the keys' bytes"
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("packed: ") and "per 500-event batch" in lines[0]
    assert lines[1].startswith("arrow_ipc: ")
