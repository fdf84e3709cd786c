"""One owner per data directory (``server/datadir.py``): the lock is exclusive, names its
holder, is given back by ``release`` (twice is harmless), and refuses a path that is a file."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from hotjoin.server.datadir import LOCK_FILE, DataDirInUse, DataDirLock, holder_of


def test_a_second_lock_fails_naming_the_holder(tmp_path: Path) -> None:
    d = tmp_path / "new" / "data"  # created with its parents
    first = DataDirLock(d)
    try:
        with pytest.raises(DataDirInUse) as e:
            DataDirLock(d)
        assert e.value.pid == os.getpid() and e.value.directory == d
        msg = str(e.value)
        assert f"process {os.getpid()}" in msg and "--data-dir" in msg and "\n" not in msg
        assert " on " not in msg  # the same host is not named
        info = json.loads((d / LOCK_FILE).read_text())
        assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
        assert info["since_unix"] > 0
    finally:
        first.release()
    first.release()  # twice: nothing happens
    again = DataDirLock(d)  # given back: the next owner takes it
    again.release()


def test_a_file_is_not_a_data_directory(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(NotADirectoryError):
        DataDirLock(f)


def test_a_stale_lock_file_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE).write_text(json.dumps({"pid": 999999, "host": "elsewhere"}))
    lock = DataDirLock(tmp_path)  # no flock held on it: the kernel released it with its owner
    assert holder_of(tmp_path / LOCK_FILE)[0] == os.getpid()
    lock.release()


@pytest.mark.parametrize(("text", "want"), [
    ('{"pid": 12, "host": "h"}', (12, "h")),
    ('{"pid": "12"}', (12, "")),
    ("", (None, "")), ("not json", (None, "")), ('{"host": "h"}', (None, "")),
    ('{"pid": null}', (None, "")), ("[1]", (None, "")),
])
def test_holder_of_reads_what_it_can(tmp_path: Path, text: str, want: tuple) -> None:
    p = tmp_path / LOCK_FILE
    p.write_text(text)
    assert holder_of(p) == want
    assert holder_of(tmp_path / "missing") == (None, "")


def test_the_message_names_another_host_and_an_unknown_holder(tmp_path: Path) -> None:
    assert "process 7 on elsewhere" in str(DataDirInUse(tmp_path, 7, "elsewhere"))
    assert "(another process)" in str(DataDirInUse(tmp_path, None))
