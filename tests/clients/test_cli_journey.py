"""A newcomer's journey through the command line: the README's walk-through, run as written (free
ports, a temporary directory), then the user errors a newcomer runs into.

Every command runs as a real ``hotjoin`` process, so what is checked is what a user sees: the
exit code, one line on stderr for an error, and never a Python traceback. The module's fixture
runs the walk-through and restarts its server on the same data, so every test finds the
walk-through's state and runs alone too (``pytest -k NAME``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOTJOIN = str(Path(sys.executable).parent / "hotjoin")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def walkthrough() -> list[str]:
    """The command lines of the README's walk-through block, comments stripped."""
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- walkthrough:start -->", 1)[1].split("<!-- walkthrough:end -->", 1)[0]
    body = block.split("```bash", 1)[1].split("```", 1)[0]
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in body.splitlines()]
    return [line for line in lines if line]


def run(argv: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def assert_one_error_line(p: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    err = p.stderr.strip()
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == code, (p.returncode, p.stderr)
    assert len(err.splitlines()) == 1, err
    assert err.startswith("hotjoin"), err
    for n in needles:
        assert n in err, (n, err)
    return err


class Journey:
    """The walk-through's server and environment, shared by the error cases."""

    def __init__(self, tmp: Path) -> None:
        self.cwd = tmp
        self.port = self.metrics_port = free_port()
        while self.metrics_port == self.port:  # two probes of port 0 may hand out one port
            self.metrics_port = free_port()
        self.env = {**os.environ, "HOTJOIN_TARGET": f"127.0.0.1:{self.port}",
                    "PYTHONUNBUFFERED": "1"}
        self.env.pop("HOTJOIN_TOKEN", None)
        self.server: subprocess.Popen[str] | None = None
        self.outputs: dict[str, subprocess.CompletedProcess[str]] = {}
        self.serve_line = ""
        self.stopped: int | None = None

    def argv(self, line: str) -> list[str]:
        argv = shlex.split(line)
        assert argv[0] == ".venv/bin/hotjoin", line
        return [HOTJOIN, *argv[1:]]

    def start_server(self, line: str) -> None:
        argv = self.argv(line.rstrip("&").strip())
        argv += ["--port", str(self.port), "--metrics-port", str(self.metrics_port)]
        self.server = subprocess.Popen(argv, cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
        from hotjoin.clients import Client

        with Client(self.env["HOTJOIN_TARGET"]) as hj:
            hj.wait_ready(120)

    def stop_server(self) -> int:
        assert self.server is not None
        self.server.send_signal(signal.SIGTERM)
        return self.server.wait(60)

    def walk_through(self) -> None:
        """Run the README's walk-through (its outputs in ``outputs``, the exit code of its
        ``kill %1`` in ``stopped``), then restart the server on its data for the other tests."""
        lines = walkthrough()
        assert lines[0].startswith(".venv/bin/hotjoin serve") and lines[0].endswith("&")
        assert lines[-1] == "kill %1"
        self.serve_line = lines[0]
        self.start_server(lines[0])
        for line in lines[1:-1]:
            p = run(self.argv(line), self.cwd, self.env)
            assert p.returncode == 0 and "Traceback" not in p.stderr, (line, p.returncode, p.stderr)
            self.outputs[line] = p
        self.stopped = self.stop_server()  # `kill %1`: SIGTERM drains, the server exits
        self.start_server(lines[0])  # restarted on the same data for the other tests


@pytest.fixture(scope="module")
def journey(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Journey]:
    """The walk-through's server, after the walk-through ran (``Journey.walk_through``)."""
    tmp = tmp_path_factory.mktemp("journey")
    shutil.copytree(ROOT / "examples", tmp / "examples")
    j = Journey(tmp)
    try:
        j.walk_through()
        yield j
    finally:
        if j.server is not None and j.server.poll() is None:
            j.server.kill()
            j.server.wait(30)


def test_readme_walkthrough_runs_as_written(journey: Journey) -> None:
    out = {" ".join(shlex.split(k)[1:3]): v.stdout for k, v in journey.outputs.items()}
    # what each step printed: the band join is id 0, the file's four subscriptions 1-4
    assert json.loads(out["subscribe trades"].splitlines()[0]) in ({"subscription_id": 0},
                                                                   {"subscription_ids": [1, 2, 3, 4]})
    subscribed = [json.loads(v.stdout) for k, v in journey.outputs.items() if " subscribe " in k]
    assert subscribed == [{"subscription_id": 0}, {"subscription_ids": [1, 2, 3, 4]}]
    published = [json.loads(v.stdout) for k, v in journey.outputs.items() if " publish " in k]
    assert [(p["sent"], p["accepted"], p["rejected"]) for p in published] == [(7, 7, 0), (2, 2, 0)]
    # listen: snake_case, subscription 0 keeps its id, integers are numbers
    matches = [json.loads(x)["match"] for x in out["listen trades"].splitlines()]
    assert len(matches) == 3
    assert all(m["subscription_id"] in (0, 1, 2) and isinstance(m["seq"], int) for m in matches)
    assert matches[0]["subscription_id"] == 0 and matches[0]["pairs"] == [{"r_id": "r1", "s_id": "s1"}]
    assert not any(re.search(r"[a-z][A-Z]", k) for m in matches for k in m)
    table = out["subscriptions trades"].splitlines()
    assert table[0].split()[:3] == ["ID", "SUBSCRIBER", "DELIVERY"] and len(table) == 6
    stats = json.loads(out["stats trades"])
    assert stats["tuples"] == {"R": 4, "S": 5} or stats["tuples"] == {"S": 5, "R": 4}
    assert json.loads(out["delete trades"])["deleted"] == 1
    assert json.loads(out["unsubscribe trades"])["unsubscribed"][0]["subscription_id"] == 0
    exported = json.loads(out["export trades"])
    assert exported["subscriptions"] == 5 and (journey.cwd / "export").is_dir()
    # `kill %1`: SIGTERM drains and the server exits cleanly
    assert journey.stopped == 0


def _write(journey: Journey, name: str, text: str) -> str:
    (journey.cwd / name).write_text(text)
    return name


GOOD = '{"side": "R", "id": "g1", "key": 1, "value": 1, "time": 1500}\n'

# (argv after `hotjoin`, files to write, exit code, substrings of the one error line)
USER_ERRORS: list[tuple[list[str], dict[str, str], int, tuple[str, ...]]] = [
    (["publish", "trades", "bad.jsonl"], {"bad.jsonl": GOOD + "\n" + '{"side": "R", key: 1}\n'},
     2, ("bad.jsonl:3:", "not valid JSON")),
    (["publish", "trades", "array.json"],
     {"array.json": '[{"side": "R", "id": "x", "key": 1, "value": 1, "time": 1}]\n'},
     2, ("array.json:1:", "array")),
    (["publish", "trades", "side.jsonl"],
     {"side.jsonl": '{"side": "Q", "id": "x", "key": 1, "value": 1, "time": 1500}\n'},
     2, ("side.jsonl:1:", "side must be R or S, got 'Q'")),
    (["publish", "trades", "nokey.csv"], {"nokey.csv": "side,id,value,time\nR,x,1,1500\n"},
     2, ("nokey.csv:2:", "missing field 'key'")),
    (["publish", "trades", "missing.jsonl"], {}, 2, ("no such file: missing.jsonl",)),
    (["publish", "trades", "conflict.jsonl"],
     {"conflict.jsonl": '{"side": "S", "id": "s1", "key": 100.0, "value": 3.0, "time": 1000}\n'},
     1, ("events rejected", "event S/s1 already exists", "--allow-rejections")),
    (["subscribe", "trades", "--kind", "band", "--subscriber", "x", "--b=x:y"], {}, 2,
     ("argument --b", "'x' is not a number")),
    (["subscribe", "trades", "--kind", "band", "--subscriber", "x", "--b", "3:1"], {}, 2,
     ("lower bound 3 > upper bound 1",)),
    (["subscribe", "trades"], {}, 2, ("--kind is required",)),
    (["subscribe", "trades", "--kind", "band", "--b=-1:1"], {}, 2, ("--subscriber is required",)),
    (["subscribe", "trades", "--kind", "band", "--subscriber", "x"], {}, 2, ("needs --b",)),
    (["subscribe", "trades", "--kind", "select", "--subscriber", "x", "--b", "1:2"], {}, 2,
     ("--kind select takes no --b",)),
    (["subscribe", "trades", "--kind", "window", "--subscriber", "x", "--a", "0:1"], {}, 2,
     ("needs --w",)),
    (["subscribe", "trades", "--file", "subs.jsonl"],
     {"subs.jsonl": '{"kind": "band", "subscriber": "a", "b": [0, 1]}\n{"kind": "select", "b": [0, 1]}\n'},
     2, ("subs.jsonl:2:", "takes no b")),
    (["subscribe", "trades", "--file", "subs.json"], {"subs.json": '[{"kind": "band"}]\n'}, 2,
     ("subs.json:1:", "array")),
    (["listen", "trades", "--subscriber", "nobody"], {}, 1, ("'nobody' has no subscriptions",)),
    (["listen", "nosuchtopic", "--subscriber", "alice"], {}, 1, ("NOT_FOUND",)),
    (["stats", "nosuchtopic"], {}, 1, ("NOT_FOUND",)),
    (["unsubscribe", "trades", "999"], {}, 1, ("NOT_FOUND",)),
    (["delete", "trades", "R:nothere"], {}, 1, ("not deleted", "--allow-rejections")),
    (["delete", "trades", "Q:x"], {}, 2, ("SIDE:ID",)),
    (["topic", "create", "trades"], {}, 1, ("ALREADY_EXISTS",)),
    (["topic", "create", "t9", "--strategy", "band"], {}, 2, ("KIND=NAME",)),
    (["export", "--out", "x"], {}, 2, ("name the topic",)),
    (["export", "trades", "--data-dir", "nodata", "--out", "x"], {}, 2, ("no data directory nodata",)),
    (["replay", "--events", "nope/events.parquet", "--subscriptions", "nope/s.parquet", "--out", "o"],
     {}, 2, ("--events nope/events.parquet: no such file",)),
    (["replay", "--events", "export/events.parquet", "--subscriptions",
      "export/subscriptions.parquet", "--out", "examples"], {}, 2, ("--out examples is not empty",)),
    (["stats", "trades", "--target", "127.0.0.1:1"], {}, 1, ("cannot connect to 127.0.0.1:1",)),
    (["stats", "trades", "--tls"], {}, 1, ("UNAVAILABLE", "the server does not speak TLS (plaintext)")),
    (["topic", "get", "nosuchtopic"], {}, 1, ("NOT_FOUND",)),
    (["listen", "trades", "--subscriber", "alice", "--after", "-1"], {}, 2, ("--after must be >= 0",)),
    (["nosuchcommand"], {}, 2, ("invalid choice",)),
    (["publish", "trades"], {}, 2, ("required: file",)),
]


@pytest.mark.parametrize(("argv", "files", "code", "needles"), USER_ERRORS,
                         ids=[" ".join(a[0]) for a in USER_ERRORS])
def test_user_error_is_one_line(journey: Journey, argv: list[str], files: dict[str, str], code: int,
                                needles: tuple[str, ...]) -> None:
    for name, text in files.items():
        _write(journey, name, text)
    p = run([HOTJOIN, *argv], journey.cwd, journey.env)
    assert_one_error_line(p, code, *needles)


def test_a_bad_line_publishes_nothing(journey: Journey) -> None:
    """The file is checked before anything is sent: a bad line publishes neither the good line
    before it nor the one after it."""
    name = _write(journey, "partly.jsonl",
                  '{"side": "S", "id": "p1", "key": 7, "value": 0, "time": 1500}\n'
                  '{"side": "S", "id": "p2", "key": "seven", "value": 0, "time": 1500}\n'
                  '{"side": "S", "id": "p3", "key": 7, "value": 0, "time": 1500}\n')
    p = run([HOTJOIN, "publish", "trades", name], journey.cwd, journey.env)
    assert_one_error_line(p, 2, "partly.jsonl:2:", "key must be a number")
    p = run([HOTJOIN, "delete", "trades", "S:p1", "S:p3", "--allow-rejections"], journey.cwd, journey.env)
    assert p.returncode == 0 and json.loads(p.stdout)["deleted"] == 0, p.stdout


def test_allow_rejections_exits_zero(journey: Journey) -> None:
    p = run([HOTJOIN, "publish", "trades", "examples/events.jsonl", "--allow-rejections", "--quiet"],
            journey.cwd, journey.env)
    out = json.loads(p.stdout)
    # the walk-through's events again: duplicates, except r1 (deleted since) and the one with an
    # empty id (a new id is assigned)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert out["sent"] == 7 and out["rejected"] >= 5 and out["accepted"] + out["rejected"] == 7


def test_listen_into_head_ends_quietly(journey: Journey) -> None:
    """``hotjoin listen | head -1``: no BrokenPipe traceback, SIGPIPE's exit code."""
    cmd = f"{shlex.quote(HOTJOIN)} listen trades --subscriber alice | head -1; echo rc=${{PIPESTATUS[0]}}"
    p = subprocess.run(["bash", "-c", cmd], cwd=journey.cwd, env=journey.env, capture_output=True,
                       text=True, timeout=120)
    lines = p.stdout.strip().splitlines()
    # after the restart, the first message is the gap of what the restart did not retain
    assert len(lines) == 2 and set(json.loads(lines[0])) <= {"match", "gap"}, p.stdout
    assert lines[1] == "rc=141" and p.stderr == "", (p.stdout, p.stderr)


def test_listen_stdin_publish_and_stdin_subscribe(journey: Journey) -> None:
    """``-`` reads stdin; a JSON line from stdin that is bad names 'stdin' and the line."""
    p = run([HOTJOIN, "publish", "trades", "-", "--quiet"], journey.cwd, journey.env,
            stdin='{"side": "S", "id": "in1", "key": 3, "value": 0, "time": 1600}\n')
    assert p.returncode == 0 and json.loads(p.stdout)["accepted"] == 1
    p = run([HOTJOIN, "publish", "trades", "-"], journey.cwd, journey.env, stdin="{oops\n")
    assert_one_error_line(p, 2, "stdin:1:")


def test_bulk_subscribe_shows_progress(journey: Journey) -> None:
    """More subscriptions than one streamed chunk: progress on stderr, ids in order, atomic."""
    from hotjoin.cli.commands.subscribe import CHUNK

    n = CHUNK + 5
    line = '{"kind": "select", "a": [0, null], "c": [0, null]}\n'
    name = _write(journey, "bulk.jsonl", line * n)
    p = run([HOTJOIN, "subscribe", "trades", "--file", name, "--subscriber", "bulk"], journey.cwd,
            journey.env)
    assert p.returncode == 0, p.stderr
    ids = json.loads(p.stdout)["subscription_ids"]
    assert len(ids) == n and ids == list(range(ids[0], ids[0] + n))
    assert f"sent {CHUNK:,}/{n:,}" in p.stderr and f"registered {n:,} subscriptions" in p.stderr
    # a bad last line registers none of them
    name = _write(journey, "bulk-bad.jsonl", line * n + '{"kind": "select", "w": 3}\n')
    p = run([HOTJOIN, "subscribe", "trades", "--file", name, "--subscriber", "bulk2"], journey.cwd,
            journey.env)
    assert_one_error_line(p, 2, f"bulk-bad.jsonl:{n + 1}:", "takes no w")
    p = run([HOTJOIN, "subscriptions", "trades", "--subscriber", "bulk2"], journey.cwd, journey.env)
    assert p.returncode == 0 and p.stdout == ""


def test_serve_on_a_taken_port_or_bad_data_dir_is_one_line(journey: Journey) -> None:
    p = run([HOTJOIN, "serve", "--data-dir", "d2", "--port", str(journey.port), "--metrics-port", "-1"],
            journey.cwd, journey.env, timeout=60)
    assert_one_error_line(p, 1, f"cannot listen on 127.0.0.1:{journey.port} for gRPC",
                          "address already in use")
    p = run([HOTJOIN, "serve", "--data-dir", "d2", "--port", "0", "--metrics-port",
             str(journey.metrics_port)], journey.cwd, journey.env, timeout=60)
    assert_one_error_line(p, 1, f"{journey.metrics_port} for /metrics", "--metrics-port")
    _write(journey, "afile", "x")
    p = run([HOTJOIN, "serve", "--data-dir", "afile", "--port", "0", "--metrics-port", "-1"],
            journey.cwd, journey.env, timeout=60)
    assert_one_error_line(p, 1, "afile", "Not a directory")


def test_version_and_defaults_in_help(journey: Journey) -> None:
    p = run([HOTJOIN, "--version"], journey.cwd, journey.env)
    assert p.returncode == 0 and re.fullmatch(r"hotjoin \d+\.\d+\.\d+\S*\n", p.stdout)
    p = run([HOTJOIN, "publish", "--help"], journey.cwd, journey.env)
    assert p.returncode == 0 and "(default: 1000)" in p.stdout
    p = run([HOTJOIN, "serve", "--help"], journey.cwd, journey.env)
    assert "default" in p.stdout and "50051" in p.stdout


def test_export_topic_option_is_a_deprecated_alias(journey: Journey) -> None:
    p = run([HOTJOIN, "export", "--topic", "trades", "--data-dir", "data", "--out", "export2"],
            journey.cwd, journey.env)
    live = run([HOTJOIN, "subscriptions", "trades"], journey.cwd, journey.env).stdout.splitlines()
    assert p.returncode == 0 and "deprecated" in p.stderr, p.stderr
    assert json.loads(p.stdout)["subscriptions"] == len(live) >= 4


def test_bench_plots_without_matplotlib_is_one_line(journey: Journey) -> None:
    """The [plots] extra is optional: --plots without matplotlib says so in one line."""
    site = journey.cwd / "nompl"
    site.mkdir(exist_ok=True)
    (site / "matplotlib.py").write_text("raise ImportError('hidden by the test')\n")
    env = {**journey.env, "PYTHONPATH": str(site)}
    p = run([HOTJOIN, "bench", "band", "--quick", "--plots", "plots"], journey.cwd, env)
    assert_one_error_line(p, 2, "--plots needs matplotlib", "hotjoin[plots]")


def test_restart_drains_and_keeps_the_data(journey: Journey) -> None:
    """The walk-through's server drains on SIGTERM and serves its topic again after a restart."""
    assert journey.stop_server() == 0
    journey.start_server(journey.serve_line)
    p = run([HOTJOIN, "topic", "show", "trades"], journey.cwd, journey.env)
    assert p.returncode == 0 and json.loads(p.stdout)["name"] == "trades", p.stderr
