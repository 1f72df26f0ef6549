"""`forecast-env events build|import|fetch|fetch-forecastbench`: events from Polymarket, ForecastBench or a questions
file."""

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

    i = events_sub.add_parser("import", help="add events from your own questions or from ForecastBench rounds")
    src = i.add_mutually_exclusive_group(required=True)
    src.add_argument("--questions", metavar="FILE", help="JSONL: one question object per line")
    src.add_argument("--forecastbench", metavar="REPO", help="a local copy of the forecastbench-datasets repository "
                     "(its datasets/question_sets and datasets/resolution_sets; docs/forecastbench.md)")
    i.add_argument("--rounds", metavar="A..B", default=None, help="with --forecastbench: due dates A..B, A.., ..B or A "
                   "(default: every round)")
    i.add_argument("--workspace", required=True, metavar="WS", help="workspace folder")
    i.add_argument("--judge", choices=("offline", "llm"), default=None, help="screen judge (default: screen.judge)")
    i.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_common(i, ["events"])
    i.set_defaults(func=run_import)

    add_fetch_command(events_sub)

    f = events_sub.add_parser(
        "fetch-forecastbench",
        help="download ForecastBench question and resolution sets into a folder (resumable)",
        description="Download the round files (datasets/question_sets/*-llm.json, datasets/resolution_sets/) of "
        "github.com/forecastingresearch/forecastbench-datasets into DIR, laid out as the repository, for "
        "`events import --forecastbench DIR`. Files already there with the listing's size and git sha are kept; a "
        "rerun fetches only what is missing or changed. GitHub's API allows 60 unauthenticated requests an hour "
        "(a run makes 2): set GITHUB_TOKEN to raise it. Exit status 1 when a file failed (rerun to retry it).",
    )
    f.add_argument("--out", required=True, metavar="DIR", help="folder to download into (created if needed)")
    f.add_argument("--rounds", metavar="A..B", default=None, help="due dates A..B, A.., ..B or A (default: every "
                   "round)")
    f.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_common(f, ["events"])
    f.set_defaults(func=run_fetch_forecastbench)

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
    from forecast_env.envs.events.build import import_forecastbench, import_questions

    if args.rounds is not None and not args.forecastbench:
        print("error: --rounds goes with --forecastbench")
        return 2
    if args.forecastbench:
        summary = import_forecastbench(args.forecastbench, args.workspace, rounds=args.rounds, config=_config(args),
                                       progress=not args.no_progress)
        print_summary(summary)
        print_forecastbench(summary)
        return 0
    summary = import_questions(args.questions, args.workspace, config=_config(args), progress=not args.no_progress)
    print_summary(summary)
    return 0


def run_fetch_forecastbench(args: argparse.Namespace) -> int:
    """Handler of `events fetch-forecastbench`: download, print the summary; 1 when a file failed."""
    from forecast_env.envs.events.forecastbench_fetch import fetch_forecastbench, format_summary

    summary = fetch_forecastbench(args.out, args.rounds, config=section_config(args, "events"),
                                  progress=not args.no_progress)
    print(format_summary(summary))
    return 1 if summary["failed"] else 0


def print_forecastbench(summary: Mapping[str, Any]) -> None:
    """The rounds read, the items by status and the file problems of a ForecastBench import."""
    from forecast_env.envs.events.forecastbench_import import read_items

    rounds = summary.get("rounds") or []
    print(f"rounds: {len(rounds)} ({rounds[0]} .. {rounds[-1]})" if rounds else "rounds: none")
    items = read_items(summary["workspace"])
    counts = items.group_by("kind", "status").len().sort("kind", "status", nulls_last=True)
    parts = [f"{k or 'other'} {s} {n}" for k, s, n in counts.iter_rows()]
    print(f"items ({items.height}): " + ", ".join(parts))
    problems = summary.get("file_problems") or []
    if problems:
        print(f"file problems ({len(problems)}):")
        for line in problems[:20]:
            print(f"  - {line}")
        if len(problems) > 20:
            print(f"  ... {len(problems) - 20} more")
    print(f"items table: {summary['output']}/forecastbench.parquet")
