"""`forecast-env events fetch --cache DIR`: download resolved Polymarket events into a cache folder.

This module adds one command to the `events` group (created by `forecast_env.cli.events`, which
calls `add_fetch_command`); it deliberately defines no `register`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from datetime import date
from typing import Any

from forecast_env.cli.common import add_common, positive_int, section_config


def _iso_date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date; use YYYY-MM-DD, e.g. 2025-06-01") from exc


def add_fetch_command(events_subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `fetch` to the `events` command group."""
    p = events_subparsers.add_parser(
        "fetch",
        help="download closed Polymarket events, price histories and trades into a cache (resumable)",
        description="Download closed Polymarket events (Gamma), each market's token price histories "
        "(CLOB, in explicit windows) and trades (Data API) into DIR. A rerun fetches only what is "
        "missing; failed items are listed and retried by the next run.",
    )
    p.add_argument(
        "--cache", required=True, metavar="DIR", help="Polymarket cache folder (created if needed)"
    )
    p.add_argument(
        "--closed-since",
        type=_iso_date,
        default=None,
        metavar="YYYY-MM-DD",
        help="only events that closed on or after this date",
    )
    p.add_argument(
        "--closed-before",
        type=_iso_date,
        default=None,
        metavar="YYYY-MM-DD",
        help="only events that closed before this date (and whose endDate is on or before it)",
    )
    p.add_argument(
        "--max-pages",
        type=positive_int,
        default=None,
        metavar="N",
        help="consider at most N pages of the Gamma events listing (a trial run)",
    )
    p.add_argument(
        "--refresh",
        action="store_true",
        help="refetch the last page of a complete listing to pick up newly closed events",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_common(p, ["events"])
    p.set_defaults(func=run_fetch)
    return p


def run_fetch(args: argparse.Namespace) -> int:
    """Handler of `events fetch`: run the download and print its summary."""
    from forecast_env.envs.events.polymarket.client import PolymarketClient

    cfg = section_config(args, "events")
    with PolymarketClient(args.cache, config=cfg) as client:
        summary = client.fetch_all(
            closed_since=args.closed_since,
            progress=not args.no_progress,
            max_pages=args.max_pages,
            refresh=args.refresh,
            closed_before=args.closed_before,
        )
    print(format_summary(summary))
    return 0


def format_summary(summary: Mapping[str, Any]) -> str:
    """A short human-readable report of a `fetch_all` summary."""
    lines = [
        (
            f"events:  {summary['events']} cached, {summary['events_selected']} selected, "
            f"{summary['events_filtered']} closed outside --closed-since/--closed-before, "
            f"{summary['events_skipped']} malformed"
        ),
        f"markets: {summary['markets']} seen, {summary['markets_skipped']} skipped"
        + (
            " (" + ", ".join(f"{k}: {v}" for k, v in sorted(summary["skip_reasons"].items())) + ")"
            if summary["skip_reasons"]
            else ""
        ),
        (
            f"prices:  {summary['price_series']} series: {summary['prices_fetched']} fetched, "
            f"{summary['prices_cached']} already cached, {summary['prices_failed']} failed"
        ),
        (
            f"trades:  {summary['trade_histories']} markets: {summary['trades_fetched']} fetched, "
            f"{summary['trades_cached']} already cached, {summary['trades_failed']} failed, "
            f"{summary['trades_truncated']} truncated at the API's offset cap"
        ),
        f"{summary['requests']} request(s) in {summary['seconds']:.1f}s; cache: {summary['cache_dir']}",
    ]
    for failure in summary["failures"]:
        lines.append(f"  failed {failure['kind']} {failure['id']}: {failure['error']}")
    failed = summary["prices_failed"] + summary["trades_failed"]
    if failed:
        lines.append(
            f"{failed} item(s) failed (listed in fetch_state.json); rerun the same command to retry them"
        )
    return "\n".join(lines)
