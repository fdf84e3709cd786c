"""``hotjoin calibrate``: fit the router's cost constants on this machine (paper 004 §5.4)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    from hotjoin.matcher.router.calibrate import add_arguments
    from hotjoin.matcher.router.cost_model import USER_PROFILE

    p = sub.add_parser(
        "calibrate",
        help="profile every strategy over a grid of workload sizes and fit the cost constants",
        description="Times every join strategy per incoming tuple over a grid of workload sizes, "
        "fits each cost model's constants by least squares and prints them with 95% intervals "
        "(paper 004 Table II). The engine then loads the written profile (HOTJOIN_PROFILE "
        f"or {USER_PROFILE}) over the shipped default.")
    add_arguments(p)
    p.add_argument("--out", type=Path, default=USER_PROFILE,
                   help=f"where to write the profile (default {USER_PROFILE})")
    p.add_argument("--json", dest="json_path", default=None,
                   help="also write the fit report (samples, R², medians) as JSON here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hotjoin.cli.main import CliError
    from hotjoin.matcher.router.calibrate import calibrate, table
    from hotjoin.ops.bench.common import write_json

    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    bad = [k for k in kinds if k not in ("select", "band", "window")]
    if bad or not kinds:
        raise CliError(f"--kinds must list select, band and/or window, got {args.kinds!r}")
    if args.tuples < 20:
        raise CliError(f"--tuples must be at least 20 (one fit needs samples), got {args.tuples}")
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CliError(f"cannot create {args.out.parent}: {e.strerror}") from None

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    profile, report = calibrate(kinds, args.quick, args.tuples, log)
    print(table(profile, report))
    try:
        profile.save(args.out)
    except OSError as e:
        raise CliError(f"cannot write {args.out}: {e.strerror}") from None
    print(f"profile written to {args.out}")
    if args.json_path:
        write_json(args.json_path, {"profile": profile.to_json(), "report": report})
    return 0
