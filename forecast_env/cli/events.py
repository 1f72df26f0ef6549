"""`forecast-env events build|import|fetch`: event construction from Polymarket or a questions file."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from forecast_env.cli.common import add_common, section_config
from forecast_env.cli.events_fetch import add_fetch_command


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("events", help="build forecasting events (Polymarket cache or your own questions)")
    events_sub = p.add_subparsers(dest="events_command", metavar="SUBCOMMAND")

    b = events_sub.add_parser("build", help="build events, beliefs, screen and schedules from a Polymarket cache")
    b.add_argument("--polymarket", required=True, metavar="DIR", help="Polymarket cache folder (gamma/, clob/, data/)")
    b.add_argument("--workspace", required=True, metavar="WS", help="workspace folder (needs the index for the screen)")
    b.add_argument("--judge", choices=("offline", "llm"), default=None, help="screen judge (default: screen.judge)")
    b.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_common(b, ["events"])
    b.set_defaults(func=run_build)

    i = events_sub.add_parser("import", help="add events from a JSONL file of your own questions")
    i.add_argument("--questions", required=True, metavar="FILE", help="JSONL: one question object per line")
    i.add_argument("--workspace", required=True, metavar="WS", help="workspace folder")
    i.add_argument("--judge", choices=("offline", "llm"), default=None, help="screen judge (default: screen.judge)")
    i.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_common(i, ["events"])
    i.set_defaults(func=run_import)

    add_fetch_command(events_sub)

    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _config(args: argparse.Namespace) -> dict[str, Any]:
    cfg = section_config(args, "events")
    if args.judge:
        cfg["screen"]["judge"] = args.judge
    return cfg


def print_summary(summary: Mapping[str, Any]) -> None:
    """The funnel in a few lines."""
    print(f"events in: {summary['events_in']}")
    for row in summary["stages"]:
        if row["excluded"]:
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(row["reasons"].items()))
            print(f"  - {row['stage']:9s} -{row['excluded']:<5d} ({reasons}) -> {row['remaining']}")
    print(f"kept: {summary['kept']}  by split: {summary['by_split']}  by type: {summary['by_type']}")
    if summary.get("screened"):
        print(f"screen: {summary['screened']} judged, verdicts {summary['screen_verdicts']}, leaks {summary['screen_leaks']}")
    r = summary["schedule_rules"]
    print(f"forecast dates: {r['steps_offered']} of {r['steps_total']} offered over {r['events_scheduled']} events "
          f"(cut by closedTime {r['close']['steps_cut']}, by d_known {r['d_known']['steps_cut']}); "
          f"{summary['schedule_rows']} rows for kept events; late legs removed {r['late_legs']['dates_removed']} "
          "eligible days")
    q = summary.get("market_quotes") or {}
    if q.get("counted"):
        print(f"market-quote articles: {q['articles']} ({q['distinct_articles']} distinct) retrievable for "
              f"{q['events_with_quotes']} of {q['events']} kept events; hidden by default (env.hide_market_quotes)")
    print(f"wrote {summary['output']} (report.md, report.json) in {summary['seconds']:.1f}s")


def run_build(args: argparse.Namespace) -> int:
    from forecast_env.envs.events.build import build_events

    summary = build_events(args.polymarket, args.workspace, config=_config(args), progress=not args.no_progress)
    print_summary(summary)
    return 0


def run_import(args: argparse.Namespace) -> int:
    from forecast_env.envs.events.build import import_questions

    summary = import_questions(args.questions, args.workspace, config=_config(args), progress=not args.no_progress)
    print_summary(summary)
    return 0
