"""``hotjoin bench KIND``: the benchmarks of paper 004 §5, all strategies side by side."""

from __future__ import annotations

import argparse
import json
import sys

from clients.cli import CliError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run a benchmark (JSON results, ratios and plots)")
    kinds = p.add_subparsers(dest="bench_kind", metavar="KIND")
    kinds.required = True
    from matcher.bench import band

    b = kinds.add_parser("band", help="band joins: Figs. 10(i), 10(ii), 11 of paper 004")
    band.add_arguments(b)
    b.add_argument("--json", dest="json_path", help="write all records as JSON to this path")
    b.add_argument("--plots", dest="plot_dir", default=None,
                   help="write one PNG per figure into this directory")
    b.set_defaults(func=_run_band)


def _run_band(args: argparse.Namespace) -> int:
    from matcher.bench import band

    try:
        cfg = band.config_from_args(args)
    except ValueError as e:
        raise CliError(str(e)) from None
    res = band.run(cfg, args.json_path, args.plot_dir)
    for r in res["records"]:
        if r["figure"] == "11":
            print(f"fig 11  {r['strategy']:<11} {r['us_per_update']:9.2f} us/update")
        else:
            print(f"fig {r['figure']:<4} n={r['subscriptions']:<7} tau={r['tau_target']:<5} "
                  f"{r['strategy']:<11} identify {r['identify_tuples_per_s']:11.1f}/s  "
                  f"pairs {r['pairs_tuples_per_s']:11.1f}/s  "
                  f"affected {r['affected_per_tuple']:8.1f}  pairs {r['pairs_per_tuple']:8.1f}")
    print("ratios:")
    print(json.dumps(res["ratios"], indent=1))
    sys.stdout.flush()
    return 0
