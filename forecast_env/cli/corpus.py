"""`forecast-env corpus build|report|fetch`: build the article store from WARC files (local or streamed,
docs/data.md); print the funnel; download files into a mirror."""

from __future__ import annotations

import argparse

from forecast_env.cli.common import add_common, section_config
from forecast_env.cli.corpus_sources import (
    add_fetch_command,
    add_source_arguments,
    report_transfer,
    spec_from_args,
)
from forecast_env.enums import ENGINES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("corpus", help="build the news corpus from CC-NEWS WARC files")
    csub = p.add_subparsers(dest="corpus_command", metavar="SUBCOMMAND")
    b = csub.add_parser("build", help="read, filter, date, dedup and store articles (incremental, resumable)")
    add_source_arguments(b)  # --warc, --cc-news, --files-per-month, --sample, --refresh-listing
    b.add_argument("--keep-warc", default=None, metavar="DIR", help="also keep a copy of each streamed WARC here")
    b.add_argument("--allow-failed", action="store_true",
                   help="exit 0 even when some files could not be had (default: exit 4; a rerun retries them)")
    b.add_argument("--workspace", required=True, help="workspace folder (created if missing)")
    b.add_argument("--workers", type=int, default=None, help="parallel processes (default: all cores)")
    b.add_argument("--engine", choices=ENGINES, default=None, help="executor (default: config)")
    b.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: start a local one)")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    b.add_argument("--keep-dropped-text", action="store_true",
                   help="store the first 500 characters of each dropped record's text (shown by `corpus why`; "
                   "redoes the parts, keeps the snapshot id)")
    add_common(b, ["corpus"])
    b.set_defaults(func=run_build)
    r = csub.add_parser("report", help="print the corpus funnel (Markdown)")
    r.add_argument("--workspace", required=True, help="workspace folder")
    add_common(r, ())
    r.set_defaults(func=run_report)
    w = csub.add_parser("why", help="what became of a URL in a build: kept (day, timestamp rule), dropped "
                        "(stage, reason), duplicate (of which article), or never seen (exit 3)")
    w.add_argument("url", help="the page's URL (matched after the build's URL normalisation)")
    w.add_argument("--workspace", required=True, help="workspace folder")
    w.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_common(w, ())
    w.set_defaults(func=run_why)
    add_fetch_command(csub)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def run_build(args: argparse.Namespace) -> int:
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.corpus_build.report import render_summary

    cfg = section_config(args, "corpus")
    if args.ray_address:
        cfg.setdefault("execution", {})["ray_address"] = args.ray_address
    engine = args.engine or (cfg.get("execution") or {}).get("engine", "local")
    from forecast_env.corpus_build.source import resolve_sources
    from forecast_env.corpus_build.stream import FILES_FAILED_EXIT
    from forecast_env.workspace.remote import is_remote, pulled_prefix

    # frozen CC-NEWS listings live in corpus/sources/: for a URL workspace, in its scratch copy (published with corpus/)
    listing_ws = pulled_prefix(args.workspace, "corpus/sources/") if is_remote(args.workspace) else args.workspace
    sources = resolve_sources(spec_from_args(args), cfg, listing_ws)
    summary = build_corpus(sources, args.workspace, config=cfg, workers=args.workers, engine=engine,
                           progress=not args.no_progress, keep_warc=args.keep_warc,
                           keep_dropped_text=args.keep_dropped_text)
    print(render_summary(summary))
    for line in report_transfer(summary):
        print(line)
    if summary["counts"].get("files_failed") and not args.allow_failed:
        print(f"{summary['counts']['files_failed']} files could not be had (listed above); rerun to retry them, "
              "or pass --allow-failed")
        return FILES_FAILED_EXIT
    return 0


def run_report(args: argparse.Namespace) -> int:
    from forecast_env.corpus_build.report import load_report, render_markdown

    print(render_markdown(load_report(args.workspace)), end="")
    return 0


def run_why(args: argparse.Namespace) -> int:
    """`corpus why`: 0 when the URL has a record in the build, 3 when it was never seen."""
    import json

    from forecast_env.corpus_build.why import NEVER_SEEN_EXIT, explain_url, render_why

    answer = explain_url(args.workspace, args.url)
    print(json.dumps(answer.to_dict(), indent=1) if args.json else render_why(answer), end="\n" if args.json else "")
    return 0 if answer.seen else NEVER_SEEN_EXIT
