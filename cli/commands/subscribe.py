"""``hotjoin subscribe TOPIC``: register one subscription from flags or many from a JSON-lines file.

Flags: ``--kind`` and ``--subscriber`` are required (no silent default join, no anonymous
subscriber); each kind takes only its own parameters (select: ``--a --c``; band: ``--b`` required,
``--a --c`` optional; window: ``--a --c --w``; interval: ``--b`` required, ``--a --c``, and either
``--relation`` (with ``--delta``/``--eps`` for an ISEQL join) or the raw endpoint ranges
``--ss --se --es --ee``), anything else is refused rather than ignored.

Interval relations (docs/design.md, "Interval joins"): Allen's thirteen by name (``overlaps``,
or ``allen:overlaps``), the ISEQL joins as ``iseql:NAME`` (``iseql:left_overlap --delta 5 --eps
3``; the prefix is required, as ``before`` and ``during`` exist in both families). Endpoint
ranges are ``LO:HI`` of integers.

File lines (README "File formats", ``examples/subscriptions.jsonl``) look like ``{"kind":
"band", "b": [-1, 1], "a": [0, null], "delivery": "affected", "snapshot": false, "subscriber":
"me"}``: ranges ``[lo, hi]`` with ``null`` for unbounded, ``w`` for window joins; interval joins
as ``{"kind": "interval", "b": [0, 0], "relation": "iseql:left_overlap", "delta": 5, "eps": 3}``
or with ``"ss": [1, null]`` etc. The same rules hold per line; ``--subscriber`` supplies the
subscriber of lines that name none. The file is registered atomically (all or nothing), with
progress on stderr for large files.
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

KINDS = ("select", "band", "window", "interval")
ENDPOINTS = ("ss", "se", "es", "ee")
INTERVAL_ONLY = ("relation", "delta", "eps", *ENDPOINTS)
# The parameters each kind takes (ranges are [lo, hi]; w, delta, eps integers; relation a name).
PARAMS = {"select": ("a", "c"), "band": ("b", "a", "c"), "window": ("a", "c", "w"),
          "interval": ("b", "a", "c", *INTERVAL_ONLY)}
REQUIRED = {"select": (), "band": ("b",), "window": ("w",), "interval": ("b",)}
ALL_PARAMS = ("a", "b", "c", "w", *INTERVAL_ONLY)
FIELDS = {"kind", *ALL_PARAMS, "delivery", "snapshot", "subscriber"}
CHUNK = 20_000  # subscriptions per streamed message of a bulk subscribe


def register(sub: Any) -> None:
    p = sub.add_parser(
        "subscribe", help="register subscriptions (flags or a JSON-lines file)",
        description="Register one subscription from flags, e.g.\n"
        "  hotjoin subscribe trades --kind band --subscriber alice --b -2.5:2.5\n"
        "or many, atomically, from a JSON-lines file (--file), one per line, e.g.\n"
        '  {"kind": "band", "subscriber": "alice", "b": [-2.5, 2.5], "a": [0, null]}\n'
        "Kinds: select (r.key == s.key; --a, --c), band (s.key - r.key in B; --b required, "
        "--a, --c), window (select plus |r.time - s.time| <= w; --a, --c, --w required), "
        "interval (interval events [time, end]; --b required, --a, --c, and --relation or the "
        "raw endpoint ranges --ss/--se/--es/--ee), e.g.\n"
        "  hotjoin subscribe trades --kind interval --subscriber bob --b 0:0 --relation overlaps\n"
        "  hotjoin subscribe trades --kind interval --subscriber bob --b 0:0 "
        "--relation iseql:left_overlap --delta 5 --eps 3\n"
        "Ranges are LO:HI, either side empty for unbounded. See examples/subscriptions.jsonl.")
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
    p.add_argument("--relation", default=None, metavar="NAME",
                   help="interval joins: an Allen relation (before, after, meets, met_by, overlaps, "
                   "overlapped_by, starts, started_by, during, contains, finishes, finished_by, "
                   "equals; r's relation to s) or an ISEQL join iseql:NAME (start_preceding, "
                   "end_following, before, left_overlap, during) with --delta/--eps")
    p.add_argument("--delta", type=int, default=None, help="ISEQL parameter delta >= 0")
    p.add_argument("--eps", type=int, default=None, help="ISEQL parameter eps >= 0")
    for name, what in (("ss", "s.time - r.time"), ("se", "s.time - r.end"),
                       ("es", "s.end - r.time"), ("ee", "s.end - r.end")):
        p.add_argument(f"--{name}", type=range_arg, default=None, metavar="LO:HI",
                       help=f"interval joins: raw range of {what} (integers)")
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


def _a(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _int_range(v: Any, name: str) -> tuple[int | None, int | None]:
    """An endpoint range ``[lo, hi]`` of integers (``null`` unbounded)."""
    lo, hi = _range(v, name)
    for x in (lo, hi):
        if x is not None and not float(x).is_integer():
            raise ValueError(f"{name} bounds must be integers or null, got {json.dumps(v)}")
    return (None if lo is None else int(lo)), (None if hi is None else int(hi))


def _param_int(d: dict[str, Any], name: str) -> int | None:
    v = d.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not float(v).is_integer():
        raise ValueError(f"{name} must be an integer >= 0, got {json.dumps(v)}")
    if v < 0:
        raise ValueError(f"{name} must be >= 0, got {json.dumps(v)}")
    return int(v)


def interval_from_dict(d: dict[str, Any]) -> Any:
    """The ``IntervalJoin`` of one interval subscription's fields: ``relation`` (Allen name,
    ``allen:NAME`` or ``iseql:NAME``) with ``delta``/``eps``, or raw ``ss``/``se``/``es``/``ee``
    ranges; ``ValueError`` naming what is wrong.

    >>> interval_from_dict({"b": [0, 0], "relation": "iseql:left_overlap", "delta": 5,
    ...                     "eps": 3}).preset
    'iseql:left_overlap(5,3)'
    >>> interval_from_dict({"b": [0, 0], "ss": [1, None]}).ss.lo
    1
    """
    from hotjoin.matcher.model import ALLEN_RELATIONS, ISEQL_JOINS, IntervalJoin, Range

    def r(name: str) -> Range:
        return Range() if d.get(name) is None else Range(*_range(d[name], name))

    b, a, c = r("b"), r("a"), r("c")
    relation = d.get("relation")
    delta, eps = _param_int(d, "delta"), _param_int(d, "eps")
    raw = [k for k in ENDPOINTS if d.get(k) is not None]
    if relation is None:
        if delta is not None or eps is not None:
            raise ValueError("delta and eps go with an ISEQL relation (relation iseql:NAME)")
        ends = {k: Range(*_int_range(d[k], k)) for k in raw}
        return IntervalJoin(b=b, a=a, c=c, **ends)
    if raw:
        raise ValueError(f"give a relation or the raw ranges ({', '.join(raw)}), not both")
    if not isinstance(relation, str):
        raise ValueError(f"relation must be a name, got {json.dumps(relation)}")
    family, sep, name = relation.partition(":")
    if not sep:
        family, name = "allen", relation
    if family == "allen":
        if delta is not None or eps is not None:
            raise ValueError(f"Allen relation {name!r} takes no delta or eps")
        if name not in ALLEN_RELATIONS:
            hint = " (ISEQL joins are spelled iseql:NAME)" if name in ISEQL_JOINS else ""
            raise ValueError(f"unknown Allen relation {name!r}{hint}; one of "
                             f"{', '.join(ALLEN_RELATIONS)}")
        return IntervalJoin.allen(name, b=b, a=a, c=c)
    if family != "iseql":
        raise ValueError(f"relation {relation!r}: expected an Allen name, allen:NAME or iseql:NAME")
    takes = {"start_preceding": ("delta",), "end_following": ("eps",), "before": ("delta",),
             "left_overlap": ("delta", "eps"), "during": ("delta", "eps")}.get(name)
    if takes is None:
        raise ValueError(f"unknown ISEQL join {name!r}; one of {', '.join(ISEQL_JOINS)}")
    given = {"delta": delta, "eps": eps}
    extra = [k for k, v in given.items() if v is not None and k not in takes]
    if extra:
        raise ValueError(f"iseql:{name} takes {' and '.join(takes)}, not {', '.join(extra)}")
    missing = [k for k in takes if given[k] is None]
    if missing:
        raise ValueError(f"iseql:{name} needs {' and '.join(missing)}")
    return IntervalJoin.iseql(name, delta=delta, eps=eps, b=b, a=a, c=c)


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
        raise ValueError("missing field 'kind' (select, band, window or interval)" if kind is None
                         else f"kind must be select, band, window or interval, got {kind!r}")
    given = {k for k in ALL_PARAMS if d.get(k) is not None}
    extra = sorted(given - set(PARAMS[kind]))
    if extra:
        raise ValueError(f"{_a(kind)} {kind} join takes no {', '.join(extra)} "
                         f"(it takes {', '.join(PARAMS[kind])})")
    missing = [k for k in REQUIRED[kind] if k not in given]
    if missing:
        hint = (' (b: [null, null] explicitly for every pair)' if kind == "band" else
                ' (b: [0, 0] for equal keys)' if kind == "interval" else "")
        raise ValueError(f"{_a(kind)} {kind} join needs {', '.join(missing)}{hint}")
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
    if kind == "interval":
        from hotjoin.clients.convert import spec_to_wire

        return spec_to_wire(interval_from_dict(d), **common)
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
        flags = [f"--{k}" for k in ("kind", *ALL_PARAMS) if getattr(args, k) is not None]
        flags += [f for f, on in (("--snapshot", args.snapshot), ("--delivery", args.delivery != "pairs"))
                  if on]
        if flags:
            raise CliError(f"{', '.join(flags)} cannot be combined with --file (put them in the "
                           "file's lines)")
        specs = _read_specs(args.file, args.subscriber)
    else:
        if args.kind is None:
            raise CliError("--kind is required (select, band, window or interval), or --file")
        if not args.subscriber:
            raise CliError("--subscriber is required (the name listeners use to receive the matches)")
        kind = args.kind
        given = [k for k in ALL_PARAMS if getattr(args, k) is not None]
        extra = [f"--{k}" for k in given if k not in PARAMS[kind]]
        if extra:
            raise CliError(f"--kind {kind} takes no {', '.join(extra)} "
                           f"(it takes {', '.join('--' + k for k in PARAMS[kind])})")
        missing = [f"--{k}" for k in REQUIRED[kind] if k not in given]
        if missing:
            hint = (" (--b=: explicitly for every pair)" if kind == "band" else
                    " (--b 0:0 for equal keys)" if kind == "interval" else "")
            raise CliError(f"--kind {kind} needs {', '.join(missing)}{hint}")
        if args.w is not None and args.w < 0:
            raise CliError(f"--w must be >= 0, got {args.w}")
        d = {"kind": kind, **{k: getattr(args, k) for k in ALL_PARAMS},
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
