"""``hotjoin subscribe TOPIC``: register one subscription from flags or many from a JSON-lines file.

Flags: ``--kind`` and ``--subscriber`` are required (no silent default join, no anonymous
subscriber); each kind takes only its own parameters (select: ``--a --c``; band: ``--b`` required,
``--a --c`` optional; window: ``--a --c --w``), anything else is refused rather than ignored.

File lines (README "File formats", ``examples/subscriptions.jsonl``) look like ``{"kind":
"band", "b": [-1, 1], "a": [0, null], "delivery": "affected", "snapshot": false, "subscriber":
"me"}``: ranges ``[lo, hi]`` with ``null`` for unbounded, ``w`` for window joins. The same rules
hold per line; ``--subscriber`` supplies the subscriber of lines that name none. The file is
registered atomically (all or nothing), with progress on stderr for large files.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator
from typing import Any

from hotjoin.cli.commands.common import add_target, client, range_arg, rpc_errors

KINDS = ("select", "band", "window")
# The parameters each kind takes (ranges are [lo, hi]; w an integer).
PARAMS = {"select": ("a", "c"), "band": ("b", "a", "c"), "window": ("a", "c", "w")}
REQUIRED = {"select": (), "band": ("b",), "window": ("w",)}
FIELDS = {"kind", "a", "b", "c", "w", "delivery", "snapshot", "subscriber"}
CHUNK = 20_000  # subscriptions per streamed message of a bulk subscribe


def register(sub: Any) -> None:
    p = sub.add_parser(
        "subscribe", help="register subscriptions (flags or a JSON-lines file)",
        description="Register one subscription from flags, e.g.\n"
        "  hotjoin subscribe trades --kind band --subscriber alice --b -2.5:2.5\n"
        "or many, atomically, from a JSON-lines file (--file), one per line, e.g.\n"
        '  {"kind": "band", "subscriber": "alice", "b": [-2.5, 2.5], "a": [0, null]}\n'
        "Kinds: select (r.key == s.key; --a, --c), band (s.key - r.key in B; --b required, "
        "--a, --c), window (select plus |r.time - s.time| <= w; --a, --c, --w required). Ranges "
        "are LO:HI, either side empty for unbounded. See examples/subscriptions.jsonl.")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("--file", help="JSON lines, one subscription per line (- for stdin)")
    p.add_argument("--kind", choices=KINDS, default=None, help="join kind (required without --file)")
    p.add_argument("--subscriber", default=None,
                   help="subscriber name (required; with --file, for lines that name none)")
    p.add_argument("--a", type=range_arg, default=None, metavar="LO:HI", help="range A on r.value")
    p.add_argument("--b", type=range_arg, default=None, metavar="LO:HI",
                   help="range B on s.key - r.key (band joins; required for them)")
    p.add_argument("--c", type=range_arg, default=None, metavar="LO:HI", help="range C on s.value")
    p.add_argument("--w", type=int, default=None, help="window w >= 0 (window joins; required for them)")
    p.add_argument("--delivery", choices=("pairs", "affected"), default="pairs",
                   help="one message per pair, or per subscription and event with the pair count")
    p.add_argument("--snapshot", action="store_true", help="deliver the current result first")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=rpc_errors(run))


def _range(v: Any, name: str) -> tuple[float | None, float | None]:
    if not (isinstance(v, list | tuple) and len(v) == 2):
        raise ValueError(f"{name} must be [lo, hi] (null for unbounded), got {json.dumps(v)}")
    out = []
    for x in v:
        if x is not None and (isinstance(x, bool) or not isinstance(x, int | float) or math.isnan(x)):
            raise ValueError(f"{name} bounds must be numbers or null, got {json.dumps(v)}")
        out.append(None if x is None else float(x))
    if out[0] is not None and out[1] is not None and out[0] > out[1]:
        raise ValueError(f"{name}: lower bound {out[0]:g} > upper bound {out[1]:g}")
    return out[0], out[1]


def spec_from_dict(d: dict[str, Any], subscriber: str | None = None) -> Any:
    """A ``SubscriptionSpec`` from one JSON object; ``ValueError`` says what is wrong."""
    from hotjoin.clients.client import band, select, window

    if not isinstance(d, dict):
        raise ValueError(f"expected a JSON object, got {type(d).__name__}")
    unknown = sorted(set(d) - FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)} (fields: {', '.join(sorted(FIELDS))})")
    kind = d.get("kind")
    if kind not in KINDS:
        raise ValueError("missing field 'kind' (select, band or window)" if kind is None
                         else f"kind must be select, band or window, got {kind!r}")
    given = {k for k in ("a", "b", "c", "w") if d.get(k) is not None}
    extra = sorted(given - set(PARAMS[kind]))
    if extra:
        raise ValueError(f"a {kind} join takes no {', '.join(extra)} "
                         f"(it takes {', '.join(PARAMS[kind])})")
    missing = [k for k in REQUIRED[kind] if k not in given]
    if missing:
        hint = ' (b: [null, null] explicitly for every pair)' if kind == "band" else ""
        raise ValueError(f"a {kind} join needs {', '.join(missing)}{hint}")
    who = d.get("subscriber") or subscriber
    if not who or not isinstance(who, str):
        raise ValueError("no subscriber: give 'subscriber' (or --subscriber)")
    delivery = d.get("delivery", "pairs")
    if delivery not in ("pairs", "affected"):
        raise ValueError(f"delivery must be pairs or affected, got {delivery!r}")
    snapshot = d.get("snapshot", False)
    if not isinstance(snapshot, bool):
        raise ValueError(f"snapshot must be true or false, got {json.dumps(snapshot)}")
    common = dict(delivery=delivery, snapshot=snapshot, subscriber=who)

    def r(name: str) -> Any:
        return None if d.get(name) is None else _range(d[name], name)

    if kind == "select":
        return select(r("a"), r("c"), **common)
    if kind == "window":
        w = d["w"]
        if isinstance(w, bool) or not isinstance(w, int) or w < 0:
            raise ValueError(f"w must be an integer >= 0, got {json.dumps(w)}")
        return window(r("a"), r("c"), w, **common)
    return band(r("b"), r("a"), r("c"), **common)


def _read_specs(path: str, subscriber: str | None) -> list[Any]:
    from hotjoin.cli.main import CliError

    name = "stdin" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else open(path).read()  # noqa: SIM115
    except OSError as e:
        raise CliError(f"cannot read --file {path}: {e.strerror}") from None
    specs = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise CliError(f"{name}:{lineno}: not valid JSON ({e.msg} at column {e.colno}); "
                           "expected one JSON object per line") from None
        if isinstance(d, list):
            raise CliError(f"{name}:{lineno}: expected a JSON object, got a list (a JSON array "
                           "file? write one subscription object per line instead)")
        try:
            specs.append(spec_from_dict(d, subscriber))
        except ValueError as e:
            raise CliError(f"{name}:{lineno}: {e}") from None
    if not specs:
        raise CliError(f"{name}: no subscriptions in the file")
    return specs


def _subscribe_with_progress(hj: Any, topic: str, specs: list[Any], quiet: bool) -> list[int]:
    """Register ``specs`` atomically over the streaming RPC, printing how many were sent."""
    from hotjoin.proto import hotjoin_pb2 as pb

    t0 = time.monotonic()
    n = len(specs)

    def chunks() -> Iterator[Any]:
        for i in range(0, n, CHUNK):
            if not quiet:
                print(f"\rsubscribe: sent {i:,}/{n:,} subscriptions", end="", file=sys.stderr, flush=True)
            yield pb.SubscribeManyRequest(topic=topic if i == 0 else "", specs=specs[i: i + CHUNK])
        if not quiet:
            print(f"\rsubscribe: sent {n:,}/{n:,}; waiting for the server to register them",
                  end="", file=sys.stderr, flush=True)

    try:
        resp = hj.subscriptions.SubscribeStream(chunks(), timeout=max(60.0, n / 10_000))
    finally:
        if not quiet:
            print(file=sys.stderr)
    if not quiet:
        print(f"subscribe: registered {n:,} subscriptions in {time.monotonic() - t0:.1f} s",
              file=sys.stderr)
    return list(resp.subscription_ids)


def run(args: argparse.Namespace) -> int:
    from hotjoin.cli.main import CliError

    if args.file:
        flags = [f"--{k}" for k in ("kind", "a", "b", "c", "w") if getattr(args, k) is not None]
        flags += [f for f, on in (("--snapshot", args.snapshot), ("--delivery", args.delivery != "pairs"))
                  if on]
        if flags:
            raise CliError(f"{', '.join(flags)} cannot be combined with --file (put them in the "
                           "file's lines)")
        specs = _read_specs(args.file, args.subscriber)
    else:
        if args.kind is None:
            raise CliError("--kind is required (select, band or window), or --file")
        if not args.subscriber:
            raise CliError("--subscriber is required (the name listeners use to receive the matches)")
        kind = args.kind
        given = [k for k in ("a", "b", "c", "w") if getattr(args, k) is not None]
        extra = [f"--{k}" for k in given if k not in PARAMS[kind]]
        if extra:
            raise CliError(f"--kind {kind} takes no {', '.join(extra)} "
                           f"(it takes {', '.join('--' + k for k in PARAMS[kind])})")
        missing = [f"--{k}" for k in REQUIRED[kind] if k not in given]
        if missing:
            hint = " (--b=: explicitly for every pair)" if kind == "band" else ""
            raise CliError(f"--kind {kind} needs {', '.join(missing)}{hint}")
        if args.w is not None and args.w < 0:
            raise CliError(f"--w must be >= 0, got {args.w}")
        d = {"kind": kind, "a": args.a, "b": args.b, "c": args.c, "w": args.w,
             "delivery": args.delivery, "snapshot": args.snapshot, "subscriber": args.subscriber}
        try:
            specs = [spec_from_dict(d)]
        except ValueError as e:
            raise CliError(str(e)) from None
    with client(args) as hj:
        if len(specs) == 1:
            ids = [hj.subscribe(args.topic, specs[0])]
        elif len(specs) <= CHUNK:
            ids = hj.subscribe_many(args.topic, specs)
        else:
            ids = _subscribe_with_progress(hj, args.topic, specs, args.quiet)
    print(json.dumps({"subscription_ids": ids} if args.file else {"subscription_id": ids[0]}))
    return 0
