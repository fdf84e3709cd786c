"""The audit trail: one compact JSON object per recorded event, sent to a file by ``AuditFile``
or through the root logger otherwise."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from hotjoin.server import audit
from hotjoin.server.audit import AUDIT, AuditFile, record


@pytest.fixture
def audit_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "audit.jsonl"
    f = AuditFile(path)
    try:
        yield path
    finally:
        f.close()


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line]


def test_a_record_is_one_json_line_with_the_required_keys_first(audit_file: Path) -> None:
    record("topic.create", "root", "ok", topic="trades", peer="ipv4:127.0.0.1:5000")
    [line] = _lines(audit_file)
    assert "\n" not in line and ", " not in line and '": ' not in line  # compact separators
    rec = json.loads(line)
    assert list(rec) == ["ts", "action", "principal", "outcome", "topic", "peer"]
    assert (rec["action"], rec["principal"], rec["outcome"]) == ("topic.create", "root", "ok")
    assert (rec["topic"], rec["peer"]) == ("trades", "ipv4:127.0.0.1:5000")


def test_the_timestamp_is_utc_iso8601_with_milliseconds(audit_file: Path) -> None:
    before = dt.datetime.now(dt.UTC)
    record("listen", "alice", "ok")
    after = dt.datetime.now(dt.UTC)
    ts = json.loads(_lines(audit_file)[0])["ts"]
    parsed = dt.datetime.fromisoformat(ts)
    assert parsed.utcoffset() == dt.timedelta(0)
    assert ts.endswith("+00:00") and len(ts.split("T")[1].split("+")[0]) == len("12:34:56.789")
    assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= parsed <= after


def test_fields_that_are_none_are_left_out_but_a_null_principal_stays(audit_file: Path) -> None:
    record("auth", None, "unauthenticated", topic=None, code="UNAUTHENTICATED", reason="")
    rec = json.loads(_lines(audit_file)[0])
    assert rec["principal"] is None
    assert "topic" not in rec
    assert rec["code"] == "UNAUTHENTICATED" and rec["reason"] == ""


def test_values_json_cannot_encode_are_written_as_text(audit_file: Path, tmp_path: Path) -> None:
    record("subscription.create", "bob", "ok", ids=[1, 2, 3], where=tmp_path)
    rec = json.loads(_lines(audit_file)[0])
    assert rec["ids"] == [1, 2, 3]
    assert rec["where"] == str(tmp_path)


def test_records_are_appended_in_order(audit_file: Path) -> None:
    for i in range(5):
        record("publish", "p", "ok", n=i)
    assert [json.loads(x)["n"] for x in _lines(audit_file)] == [0, 1, 2, 3, 4]


def test_an_audit_file_keeps_lines_out_of_the_server_log_until_closed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    path = tmp_path / "a.jsonl"
    propagate = AUDIT.propagate
    f = AuditFile(path)
    assert AUDIT.propagate is False
    record("topic.delete", "root", "ok", topic="in-file")
    f.close()
    assert AUDIT.propagate is propagate
    assert f.handler not in AUDIT.handlers
    record("topic.delete", "root", "ok", topic="in-log")
    assert [json.loads(x)["topic"] for x in _lines(path)] == ["in-file"]
    logged = [json.loads(r.getMessage()) for r in caplog.records if r.name == "hotjoin.audit"]
    assert [r["topic"] for r in logged] == ["in-log"]


def test_an_existing_audit_file_is_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"old":1}\n', encoding="utf-8")
    f = AuditFile(path)
    try:
        record("auth.reload", "root", "ok")
    finally:
        f.close()
    lines = _lines(path)
    assert lines[0] == '{"old":1}' and json.loads(lines[1])["action"] == "auth.reload"


def test_nothing_is_recorded_when_the_audit_logger_is_silenced(audit_file: Path) -> None:
    level = AUDIT.level
    AUDIT.setLevel(logging.WARNING)
    try:
        record("publish", "p", "ok")
    finally:
        AUDIT.setLevel(level)
    assert _lines(audit_file) == []
    assert audit.AUDIT.name == "hotjoin.audit"
