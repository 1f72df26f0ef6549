"""The source options of `corpus build` and the `corpus fetch` command (docs/data.md).

This module adds options and one command to the `corpus` group (created by `forecast_env.cli.corpus`,
which calls `add_source_arguments` and `add_fetch_command`); it deliberately defines no `register`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from forecast_env.cli.common import positive_int


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from exc
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in (0, 1], got {value}")
    return value


def add_source_arguments(p: argparse.ArgumentParser, warc: bool = True) -> None:
    """--warc (paths, globs, list files, URLs), --cc-news RANGE, --files-per-month / --sample, --refresh-listing."""
    if warc:
        p.add_argument("--warc", action="append", default=[], metavar="SOURCE",
                       help="a WARC file or glob (quote it), a list file (.txt/.paths/@FILE: one path or URL a "
                       "line), an http(s):// or s3:// URL, or a crawl-data/CC-NEWS/... path; repeatable")
    p.add_argument("--cc-news", default=None, metavar="RANGE",
                   help="CC-NEWS months from the listings under corpus.source.base_url: 2025-03, "
                   "2025-03..2026-05 (inclusive) or several joined by commas")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--files-per-month", type=positive_int, default=None, metavar="N",
                   help="read N files per month, spread evenly over its listing (nested: N+1 adds one)")
    g.add_argument("--sample", type=_fraction, default=None, metavar="FRACTION",
                   help="read this fraction of each month's files (rounded up), spread evenly")
    p.add_argument("--refresh-listing", action="store_true",
                   help="read the months' listings again instead of the copies frozen at the first build")


def spec_from_args(args: argparse.Namespace) -> Any:
    from forecast_env.corpus_build.source import SourceSpec

    return SourceSpec(warc=list(getattr(args, "warc", []) or []), cc_news=args.cc_news,
                      files_per_month=args.files_per_month, sample=args.sample,
                      refresh_listing=bool(args.refresh_listing))


def add_fetch_command(corpus_subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `fetch` to the `corpus` command group."""
    from forecast_env.cli.common import add_common

    p = corpus_subparsers.add_parser(
        "fetch", help="download CC-NEWS WARC files into a local mirror (resumable, checksummed)",
        description="Download WARC files into DIR in the Common Crawl layout (DIR can then serve as "
        "corpus.source.base_url). Partial files continue with Range requests and are renamed into place "
        "only when whole; sizes and sha256 go to DIR/manifest.json. Exit 4 when some files failed "
        "(rerun to retry them) unless --allow-failed.")
    add_source_arguments(p)
    p.add_argument("--out", required=True, metavar="DIR", help="the mirror folder (created if missing)")
    p.add_argument("--workers", type=positive_int, default=2, help="parallel downloads (the politeness limits "
                   "in corpus.source hold across all of them; default 2)")
    p.add_argument("--allow-failed", action="store_true", help="exit 0 even when some files could not be had")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_common(p, ["corpus"])
    p.set_defaults(func=run_fetch)
    return p


def run_fetch(args: argparse.Namespace) -> int:
    from forecast_env.cli.common import section_config
    from forecast_env.corpus_build.fetch import fetch_files, write_listings
    from forecast_env.corpus_build.source import check_base_url, resolve_sources
    from forecast_env.corpus_build.stream import FILES_FAILED_EXIT, HttpSettings

    cfg = section_config(args, "corpus")
    spec = spec_from_args(args)
    sources = resolve_sources(spec, cfg, None)
    settings = HttpSettings.from_config(cfg)
    write_listings(Path(args.out).expanduser(), spec, settings, check_base_url(settings.base_url))
    res = fetch_files(sources, args.out, cfg, workers=args.workers, progress=not args.no_progress)
    mb = res["bytes"] / 1e6
    print(f"fetched {res['fetched']} files ({mb:,.1f} MB in {res['seconds']:.1f}s, "
          f"{mb / max(res['seconds'], 1e-9):,.1f} MB/s), {res['skipped']} already there, "
          f"{len(res['failed'])} failed; manifest: {res['manifest']}")
    for ident, error in sorted(res["failed"].items()):
        print(f"  failed: {ident}: {error}")
    if res["failed"] and not args.allow_failed:
        return FILES_FAILED_EXIT
    return 0


def report_transfer(summary: dict[str, Any]) -> list[str]:
    """Console lines about the streamed files, the politeness limiter and every failed file."""
    t = summary.get("transfer") or {}
    lines = []
    st = t.get("streamed") or {}
    if st.get("files"):
        lines.append(f"  streamed: {st['files']} files, {st['bytes'] / 1e6:,.1f} MB ({st['bytes_fetched'] / 1e6:,.1f} "
                     f"MB fetched), {st['requests']} requests, {st['resumes']} resumed, {st['retries']} retries")
    lim = t.get("limiter")
    if lim:
        lines.append(f"  politeness: at most {lim['peak_connections']} of {lim['max_connections']} connections, "
                     f"{lim['max_rate']:g} requests/s (lowest {lim['lowest_rate']:g} after {lim['throttled']} "
                     "503/429 answers)")
    for f in t.get("failed") or []:
        lines.append(f"  FAILED {f['warc_file']} ({f['kind']}): {f['error']}")
    return lines
