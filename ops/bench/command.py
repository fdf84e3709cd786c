"""``hotjoin bench KIND``: the benchmarks of paper 004 §5, all strategies side by side."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable
from typing import Any

from hotjoin.cli.main import CliError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run a benchmark (JSON results, ratios and plots)")
    kinds = p.add_subparsers(dest="bench_kind", metavar="KIND")
    kinds.required = True
    _register_kinds(kinds)
    for k in kinds.choices.values():  # every KIND checks --plots before it starts timing
        k.set_defaults(func=_plots_checked(k.get_default("func")))


def _plots_available(args: argparse.Namespace) -> None:
    """``hotjoin bench --plots`` needs the optional extra ``[plots]`` (matplotlib)."""
    if not getattr(args, "plot_dir", None):
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise CliError("--plots needs matplotlib, which is not installed: "
                       "pip install 'hotjoin[plots]' (or leave out --plots)") from None


def _plots_checked(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        _plots_available(args)
        return fn(args)

    return run


def _register_kinds(kinds: argparse._SubParsersAction) -> None:
    from hotjoin.ops.bench import band

    b = kinds.add_parser("band", help="band joins: Figs. 10(i), 10(ii), 11 of paper 004")
    band.add_arguments(b)
    b.add_argument("--json", dest="json_path", help="write all records as JSON to this path")
    b.add_argument("--plots", dest="plot_dir", default=None,
                   help="write one PNG per figure into this directory")
    b.add_argument("--markdown", default=None, help="write the tables as Markdown to this path")
    b.set_defaults(func=_run_band)
    st = kinds.add_parser("storage", help="µs per key insert: sorted array, SortedList, SortedRuns")
    st.add_argument("--sizes", default="100000,1000000")
    st.add_argument("--inserts", type=int, default=3000)
    st.add_argument("--json", dest="json_path", default=None)
    st.set_defaults(func=_run_storage)
    from hotjoin.ops.bench import select, window

    for name, mod, helptext, fn in (
        ("select", select, "select joins: Figs. 7(i), 7(ii), 8(i), 8(ii), 9 of paper 004",
         _run_select),
        ("window", window, "window joins: throughput over n, spread of w, tuples per key",
         _run_window),
    ):
        k = kinds.add_parser(name, help=helptext)
        mod.add_arguments(k)
        k.add_argument("--json", dest="json_path", help="write all records as JSON to this path")
        k.add_argument("--plots", dest="plot_dir", default=None,
                       help="write one PNG per figure into this directory")
        k.set_defaults(func=fn)
    from hotjoin.ops.bench import interval

    iv = kinds.add_parser("interval", help="interval joins: every strategy side by side with the "
                          "nested-loop, plane-sweep and NumPy brute-force baselines")
    interval.add_arguments(iv)
    iv.set_defaults(func=_run_interval)
    from hotjoin.ops.bench import router

    rt = kinds.add_parser("router", help="cost-based router: Figs. 12-20 of paper 004 (Dynamic "
                          "against every static strategy and Optimum)")
    router.add_arguments(rt)
    rt.add_argument("--json", dest="json_path", help="write all records as JSON to this path")
    rt.add_argument("--plots", dest="plot_dir", default=None,
                    help="write the throughput, decision and optimal-share PNGs here")
    rt.set_defaults(func=_run_router)
    from hotjoin.ops.bench import memory

    m = kinds.add_parser("memory", help="resident memory of mixed subscriptions plus stored "
                         "tuples (fresh subprocess)")
    memory.add_arguments(m)
    m.add_argument("--json", dest="json_path", help="write the result as JSON to this path")
    m.set_defaults(func=_run_memory)
    from hotjoin.ops.bench import batch

    bt = kinds.add_parser("batch", help="Engine.publish_batch against the one-at-a-time loop on "
                          "the load-test workloads (select, band, window)")
    batch.add_arguments(bt)
    bt.add_argument("--json", dest="json_path", help="write all records as JSON to this path")
    bt.set_defaults(func=_run_batch)
    from hotjoin.ops.bench import histogram

    h = kinds.add_parser("histogram", help="interval histograms: Fig. 25 of paper 004 "
                         "(HIST-EQW, HIST-SSI, HIST-OPT*)")
    histogram.add_arguments(h)
    h.add_argument("--json", dest="json_path", help="write all records as JSON to this path")
    h.add_argument("--plots", dest="plot_dir", default=None, help="write the Fig. 25 PNG here")
    h.add_argument("--markdown", default=None, help="write the table as Markdown to this path")
    h.set_defaults(func=_run_histogram)

    s = kinds.add_parser("serve", help="load test of the gRPC server (separate processes, loopback)")
    s.add_argument("--subscriptions", default="100000",
                   help="comma-separated subscription counts, one run each (e.g. 100000,500000)")
    s.add_argument("--stored", type=int, default=100_000, help="stored S tuples before publishing")
    s.add_argument("--affected", type=float, default=10.0,
                   help="target subscriptions affected per event (band calibration)")
    s.add_argument("--rate", type=float, default=5000.0, help="target events/s in total (0: max)")
    s.add_argument("--duration", type=float, default=20.0, help="seconds of publishing per run")
    s.add_argument("--kind", choices=("band", "select", "window"), default="select")
    s.add_argument("--lateness", type=int, default=1000,
                   help="window kind: the topic's lateness in ms; events are out of order by up to half")
    s.add_argument("--wire", default="columns",
                   help="publish form(s), comma-separated, one run each: columns, events")
    s.add_argument("--delivery", choices=("AFFECTED", "PAIRS", "affected", "pairs"), default="AFFECTED")
    s.add_argument("--publishers", type=int, default=2, help="publisher processes")
    s.add_argument("--batch-size", type=int, default=100, help="events per streamed batch")
    s.add_argument("--max-in-flight", type=int, default=4, help="unacknowledged batches per publisher")
    s.add_argument("--no-listener", action="store_true", help="no listener process")
    s.add_argument("--listeners", type=int, default=1,
                   help="listener processes; with N > 1 listener k holds the subscriptions i with "
                        "i mod N = k (fan-out)")
    s.add_argument("--listener-processes", type=int, default=2,
                   help="processes the listeners run in (one stream and thread each)")
    s.add_argument("--listen-form", choices=("columns", "batch"), default="columns",
                   help="columns: listen_columns (columnar messages); batch: listen(batch=True, "
                        "batch_pairs=True), the repeated-field form")
    s.add_argument("--marginal", action="store_true",
                   help="run each configuration without a listener first and report the delivery's "
                        "own CPU per message and pair (the difference)")
    s.add_argument("--no-engine-reference", action="store_true",
                   help="skip the same-run in-process Engine.publish_batch CPU reference")
    s.add_argument("--strategy", default="auto")
    s.add_argument("--restart-test", action="store_true",
                   help="after the run fill up to --restart-stored stored tuples, kill -9, time the restart")
    s.add_argument("--restart-stored", type=int, default=1_000_000)
    s.add_argument("--json", dest="json_path", help="write the results as JSON to this path")
    s.add_argument("--plots", dest="plot_dir", default=None, help="write latency CDF PNGs here")
    s.set_defaults(func=_run_serve)
    from hotjoin.ops.replay import bench as replay_bench

    rp = kinds.add_parser("replay", help="Spark bulk replay: events/s on 1 and 2 cores against "
                          "the single-process engine")
    replay_bench.add_arguments(rp)
    rp.set_defaults(func=replay_bench.run_cli)
    from hotjoin.ops.bench import scaleout

    so = kinds.add_parser("scaleout", help="a matching-bound topic on 1 and 2 Ray workers against one process")
    scaleout.add_arguments(so)
    so.set_defaults(func=scaleout.run_cli)


def _run_storage(args: argparse.Namespace) -> int:
    from hotjoin.ops.bench import storage
    from hotjoin.ops.bench.common import write_json

    try:
        sizes = tuple(int(x) for x in args.sizes.split(",") if x)
    except ValueError:
        raise CliError(f"--sizes must be comma-separated integers, got {args.sizes!r}") from None
    res = storage.run(sizes, args.inserts)
    for r in res["records"]:
        print(f"{r['keys']:>9,} keys: single sorted array {r['single_sorted_array_us']:8.2f} us, "
              f"SortedList {r['sortedlist_us']:6.2f} us, SortedRuns {r['sorted_runs_us']:6.2f} us "
              "per insert")
    if args.json_path:
        write_json(args.json_path, res)
    return 0


def _run_batch(args: argparse.Namespace) -> int:
    from hotjoin.ops.bench import batch

    try:
        cfg = batch.config_from_args(args)
    except ValueError as e:
        raise CliError(str(e)) from None
    res = batch.run(cfg, args.json_path)
    for r in res["records"]:
        print(batch.record_line(r))
    print("ratios (publish_batch / one-at-a-time):")
    print(json.dumps(res["ratios"], indent=1))
    sys.stdout.flush()
    return 0


def _run_histogram(args: argparse.Namespace) -> int:
    from hotjoin.ops.bench import histogram

    res = _run_figures("histogram", args, histogram.record_line)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(histogram.to_markdown(res))
    return 0


def _run_figures(module_name: str, args: argparse.Namespace,
                 line: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """Shared by the paper-figure benches: parse the config, run, print a line per record."""
    module = importlib.import_module(f"hotjoin.ops.bench.{module_name}")
    try:
        cfg = module.config_from_args(args)
    except ValueError as e:
        raise CliError(str(e)) from None
    res = module.run(cfg, args.json_path, args.plot_dir)
    for r in res["records"]:
        print(line(r))
    print("ratios:")
    print(json.dumps(res["ratios"], indent=1))
    sys.stdout.flush()
    return res


def _band_line(r: dict[str, Any]) -> str:
    if r["figure"] == "11":
        return f"fig 11  {r['strategy']:<11} {r['us_per_update']:9.2f} us/update"
    return (f"fig {r['figure']:<4} n={r['subscriptions']:<7} tau={r['tau_target']:<5} "
            f"{r['strategy']:<11} identify {r['identify_tuples_per_s']:11.1f}/s  "
            f"pairs {r['pairs_tuples_per_s']:11.1f}/s  "
            f"affected {r['affected_per_tuple']:8.1f}  pairs {r['pairs_per_tuple']:8.1f}")


def _run_band(args: argparse.Namespace) -> int:
    from hotjoin.ops.bench import band

    res = _run_figures("band", args, _band_line)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(band.to_markdown(res))
    return 0


def _run_serve(args: argparse.Namespace) -> int:
    from hotjoin.ops.loadtest import BenchFailed, ServeBenchConfig, run

    try:
        sizes = tuple(int(x) for x in str(args.subscriptions).split(",") if x.strip())
    except ValueError:
        raise CliError(f"--subscriptions must be comma-separated integers, got {args.subscriptions!r}") from None
    if not sizes or min(sizes) <= 0 or args.duration <= 0 or args.publishers < 1 or args.rate < 0:
        raise CliError("need positive --subscriptions, --duration, --publishers and --rate >= 0")
    if args.listeners < 1:
        raise CliError(f"--listeners must be at least 1 (--no-listener for none), got {args.listeners}")
    cfg = ServeBenchConfig(
        subscriptions=sizes, stored=args.stored, affected=args.affected, rate=args.rate,
        duration=args.duration, kind=args.kind, delivery=args.delivery.lower(),
        publishers=args.publishers, batch_size=args.batch_size, max_in_flight=args.max_in_flight,
        restart_test=args.restart_test, restart_stored=args.restart_stored, strategy=args.strategy,
        listener=not args.no_listener, lateness=args.lateness,
        wire=tuple(x.strip() for x in str(args.wire).split(",") if x.strip()),
        listeners=args.listeners, listen_form=args.listen_form,
        listener_processes=args.listener_processes,
        engine_reference=not args.no_engine_reference, marginal=args.marginal,
    )
    if not cfg.wire or set(cfg.wire) - {"columns", "events"}:
        raise CliError(f"--wire must list columns and/or events, got {args.wire!r}")
    try:
        res = run(cfg, args.json_path, args.plot_dir)
    except BenchFailed as e:
        raise CliError(str(e), code=1) from None
    for r in res["records"]:
        print(f"n={r['subscriptions']:<7} {r['kind']} {r['delivery']} {r['wire']}: "
              f"{r['throughput_events_per_s']:.0f} "
              f"events/s ({r['messages_per_event']} messages/event), ack {r['publish_to_ack_ms']}, "
              f"match {r['publish_to_match_ms']}, delivery {r['publish_to_delivery_ms']}, "
              f"RSS {r['server_rss_mib']} MiB"
              + (f", {r['pairs_delivered_per_s']:.0f} pairs/s delivered" if r.get("pairs_delivered") else "")
              + f"; server CPU {r['server_cpu_us_per_event']} µs/event"
              + (f", {r['server_cpu_us_per_message']} µs/message" if "server_cpu_us_per_message" in r else "")
              + (f", {r['server_cpu_us_per_pair']} µs/pair" if "server_cpu_us_per_pair" in r else "")
              + (f", {r['messages_received_per_s']:.0f} messages/s received by {r['listeners']} "
                 f"listener(s)" if "messages_received_per_s" in r else "")
              + (f"; delivery's own CPU {r['delivery_cpu_us_per_message']} µs/message"
                 if "delivery_cpu_us_per_message" in r else "")
              + (f", {r['delivery_cpu_us_per_pair']} µs/pair" if "delivery_cpu_us_per_pair" in r else "")
              + (f"; in-process publish_batch {r['engine_reference']['cpu_us_per_event']} µs/event "
                 f"(server ÷ engine {r['server_cpu_over_engine']}×)" if "engine_reference" in r else "")
              + (f", restart {r['restart_s']}s" if "restart_s" in r else ""))
    for r in res.get("references", ()):
        print(f"n={r['subscriptions']:<7} {r['kind']} NumPy brute force in process (matching only, "
              f"same run): {r['throughput_events_per_s']:.0f} events/s "
              f"({r['affected_per_event']} affected/event)")
    sys.stdout.flush()
    return 0


def _select_line(r: dict[str, Any]) -> str:
    if r["figure"] == "table1":
        return (f"table1 {r['x']:<18} {r['strategy']:<17} identify "
                f"{r['identify_tuples_per_s']:10.1f}/s  AFFECTED {r['count_tuples_per_s']:10.1f}/s"
                f"  affected {r['affected_per_tuple']:8.1f}  x brute force "
                f"{r['count_vs_brute']:6.2f}  agrees {r['agrees_with_brute_force']}")
    return (f"fig {r['figure']:<4} x={r['x']:<8g} n={r['subscriptions']:<7} {r['strategy']:<15} "
            f"identify {r['identify_tuples_per_s']:11.1f}/s  pairs {r['pairs_tuples_per_s']:11.1f}/s"
            f"  affected {r['affected_per_tuple']:8.1f}  pairs {r['pairs_per_tuple']:9.1f}")


def _run_select(args: argparse.Namespace) -> int:
    _run_figures("select", args, _select_line)
    return 0


def _run_window(args: argparse.Namespace) -> int:
    _run_figures("window", args, lambda r: (
        f"{r['series']:<8} x={r['x']:<8g} n={r['subscriptions']:<7} {r['strategy']:<15} "
        f"identify {r['identify_tuples_per_s']:11.1f}/s  pairs {r['pairs_tuples_per_s']:11.1f}/s"
        f"  m_b {r['m_b']:8.1f}  skyline {r['skyline_points_per_key']:8.1f}"))
    return 0


def _run_memory(args: argparse.Namespace) -> int:
    from hotjoin.ops.bench import memory

    try:
        cfg = memory.config_from_args(args)
    except ValueError as e:
        raise CliError(str(e)) from None
    res = memory.run(cfg, args.json_path)
    print(memory.format_result(res))
    sys.stdout.flush()
    return 0


def _run_interval(args: argparse.Namespace) -> int:
    from hotjoin.ops.bench import interval

    try:
        interval.check_output_path(args.json_path)
    except ValueError as e:
        raise CliError(str(e)) from None
    return interval.main(args)


def _run_router(args: argparse.Namespace) -> int:
    from hotjoin.ops.bench import router

    res = _run_figures("router", args, lambda r: (
        f"fig {r['figure']:<6} x={r['x']:<8g} Dynamic/best static "
        f"{r['dynamic_over_best_static']:5.2f} ({r['best_static']}), Optimum/Dynamic "
        f"{r['optimum_over_dynamic']:5.2f}, optimal {r['optimal_share']:4.0%}, "
        + ", ".join(f"{k} {v:,.0f}/s" for k, v in r["throughput"].items())))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(router.to_markdown(res))
    return 0
