"""``hotjoin replay``: replay an exported log on Spark with the same engine (docs/how-to/replay.md)."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("replay", help="replay an exported log on Spark; deliveries as Parquet",
                       description="Replay a `hotjoin export` (events.parquet, "
                       "subscriptions.parquet, topic.json) as sharded workers on Spark running the "
                       "server's engine; writes every delivery (subscription_id, sign, r_id, s_id, "
                       "seq) as Parquet part files into --out. See docs/how-to/replay.md.")
    p.add_argument("--events", type=Path, required=True, help="events.parquet of the export")
    p.add_argument("--subscriptions", type=Path, required=True,
                   help="subscriptions.parquet of the export")
    p.add_argument("--topic", type=Path, default=None,
                   help="topic.json (lateness, retention; default: beside --events)")
    p.add_argument("--out", required=True, help="output directory (or URI) for the deliveries")
    p.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    p.add_argument("--shards", type=int, default=None,
                   help="key-range shards (default: Spark's default parallelism)")
    p.add_argument("--skew", type=float, default=1.0,
                   help="a key with more than SKEW x (events / shards) events is split "
                        "over several shards (default 1.0)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark configuration (repeatable)")
    p.add_argument("--in-process", action="store_true",
                   help="run the shards one after another in this process, without Spark")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --out")
    p.add_argument("--json", action="store_true", help="print the full summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--verbose", action="store_true",
                   help="show Spark's own log (WARN and above); without it only errors")
    p.set_defaults(func=run)


# Spark's log4j2 configuration without --verbose: errors only, on stderr.
QUIET_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def check_inputs(args: argparse.Namespace) -> None:
    """Everything that can be checked without Spark, before the JVM starts: the export's three
    files and an empty (or --overwrite) local --out."""
    from hotjoin.cli.main import CliError

    for opt, path in (("--events", args.events), ("--subscriptions", args.subscriptions)):
        if not Path(path).exists():
            raise CliError(f"{opt} {path}: no such file (hotjoin export TOPIC --out DIR writes it)")
    topic = args.topic if args.topic is not None else Path(args.events).parent / "topic.json"
    if not Path(topic).is_file():
        raise CliError(f"no topic file {topic} (the export writes it beside events.parquet; "
                       "--topic names another)")
    out = str(args.out)
    if "://" in out and not out.startswith("file://"):
        return  # a remote URI: checked by the job
    local = Path(out.removeprefix("file://"))
    if local.exists() and not local.is_dir():
        raise CliError(f"--out {out} is a file, not a directory")
    if local.is_dir() and any(local.iterdir()) and not args.overwrite:
        raise CliError(f"--out {out} is not empty (use --overwrite to replace it)")


def require_pyspark() -> None:
    """Spark is an optional extra: without pyspark, one line says what to install."""
    from hotjoin.cli.main import CliError

    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise CliError("hotjoin replay needs pyspark, which is not installed: pip install "
                       "'hotjoin[replay]' (or --in-process to replay without Spark)") from None


def _spark_message(e: BaseException) -> str:
    """The useful line of an exception that crossed Py4J from a Spark task."""
    text = str(e)
    m = re.findall(r"(?:ReplayError|LogError|ValueError|OSError|FileNotFoundError): ([^\n]+)", text)
    if m:
        return m[-1].strip()
    first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    return first[:500]


def run(args: argparse.Namespace) -> int:
    from hotjoin.cli.main import CliError

    t_start = time.monotonic()
    check_inputs(args)
    if not args.in_process:
        require_pyspark()
    from hotjoin.ops.replay.job import (
        JavaMissingError,
        no_progress,
        replay_in_process,
        stderr_progress,
    )
    from hotjoin.ops.replay.log import LogError, read_export
    from hotjoin.ops.replay.worker import ReplayError

    if args.shards is not None and args.shards < 1:
        raise CliError(f"--shards must be >= 1, got {args.shards}")
    if args.skew <= 0:
        raise CliError(f"--skew must be > 0, got {args.skew}")
    conf: dict[str, str] = {}
    for item in args.conf:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise CliError(f"--conf must be KEY=VALUE, got {item!r}")
        conf[k.strip()] = v.strip()
    if not args.verbose and not args.in_process:
        _quiet_spark(conf)
    progress = no_progress if args.quiet else stderr_progress
    try:
        log = read_export(args.events, args.subscriptions, args.topic)
        progress(f"read {log.n_events:,} events and {log.subscriptions.num_rows:,} "
                 f"subscriptions ({len(log.ops):,} operations)")
        if args.in_process:
            summary, _ = replay_in_process(log, args.out, shards=args.shards or 1, skew=args.skew,
                                           overwrite=args.overwrite, progress=progress,
                                           worker_progress=not args.quiet)
        else:
            summary = _run_spark(args, log, conf, progress)
    except (LogError, FileExistsError, JavaMissingError, ReplayError) as e:
        raise CliError(str(e)) from None
    except OSError as e:
        raise CliError(f"{type(e).__name__}: {e}") from None
    summary.setdefault("seconds", {})["wall"] = round(time.monotonic() - t_start, 3)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(_line(summary))
    return 0


def _run_spark(args: argparse.Namespace, log: Any, conf: dict[str, str], progress: Any,
               ) -> dict[str, Any]:
    """Replay on a session for ``--master`` (an active session is reused and left running)."""
    from pyspark.sql import SparkSession

    from hotjoin.cli.main import CliError
    from hotjoin.ops.replay.job import JavaMissingError, replay_spark, spark_session
    from hotjoin.ops.replay.worker import ReplayError

    existing = SparkSession.getActiveSession()
    spark = spark_session(args.master, conf)
    try:
        return replay_spark(spark, log, args.out, shards=args.shards, skew=args.skew,
                            overwrite=args.overwrite, progress=progress,
                            worker_progress=not args.quiet)
    except (FileExistsError, JavaMissingError, ReplayError):
        raise
    except Exception as e:  # a failed Spark task: Py4J wraps the worker's exception
        raise CliError(f"the Spark job failed: {_spark_message(e)}", code=1) from None
    finally:
        if existing is None:
            spark.stop()


def _line(s: dict[str, Any]) -> str:
    plan = s["plan"]
    hot = f", {len(plan['hot_keys'])} hot key(s) split" if plan["hot_keys"] else ""
    return (f"replayed {s['events']:,} events ({s['operations']:,} operations"
            + (f", {s['restored']:,} restored" if s["restored"] else "")
            + f") on {s['mode']}: {plan['cells']} shard(s){hot}, {s['deliveries']:,} deliveries "
            f"-> {s['out']} in {s['seconds']['wall']:.1f} s wall time, Spark start-up included "
            f"(replay {s['seconds']['total']:.1f} s, {s['events_per_s'] or 0:,.0f} events/s)")


def _quiet_spark(conf: dict[str, str]) -> None:
    """Point the driver JVM's log4j2 at an errors-only configuration (written to a temporary
    file), unless the user configured the driver's Java options; also set before the JVM starts
    so Spark's start-up WARN lines are quiet too."""
    key = "spark.driver.extraJavaOptions"
    if key in conf:
        return
    fd, path = tempfile.mkstemp(prefix="hotjoin-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(QUIET_LOG4J2)
    atexit.register(_remove, path)
    conf[key] = f"-Dlog4j2.configurationFile=file:{path}"
    conf.setdefault("spark.executor.extraJavaOptions", conf[key])


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
