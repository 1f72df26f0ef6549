"""Market-quote articles counted per event in the events report (docs/design.md §5 "Market-quote articles"):
an article quoting market odds counts for an event when it is not leak-flagged, visible from the event's
start day to its last forecast date, and about the event (a named option, or the question's key terms)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import polars as pl
import pyarrow as pa

from forecast_env.envs.events.funnel import (
    QuoteWindow,
    market_quote_articles,
    market_quote_summary,
    match_market_quotes,
    render_market_quotes,
)
from forecast_env.store import Workspace, atomic_write_table

ELECTION = QuoteWindow("pm-1", "Lunland Presidential Election Winner", ["Victor Brandt", "Julian Falk", "Other"],
                       date(2025, 12, 1), date(2025, 12, 15))
RATES = QuoteWindow("pm-2", "Will the Fed cut interest rates in March?", ["Yes", "No"],
                    date(2025, 12, 1), date(2025, 12, 15))
QUOTE = "Traders on Polymarket put the odds at 62% on Tuesday."


def quotes(*rows: tuple[str, date, str, str]) -> pl.DataFrame:
    """A market-quote table as `market_quote_articles` returns it (sorted by day, doc id)."""
    return pl.DataFrame([{"doc_id": d, "day": day, "title": t, "summary": "", "body": b} for d, day, t, b in rows],
                        schema={"doc_id": pl.String, "day": pl.Date, "title": pl.String, "summary": pl.String,
                                "body": pl.String}).sort("day", "doc_id")


def test_window_bounds_are_the_start_day_and_the_last_forecast_date():
    q = quotes(("before", date(2025, 11, 30), "Julian Falk rallies", QUOTE),
               ("first", date(2025, 12, 1), "Julian Falk rallies", QUOTE),
               ("last", date(2025, 12, 15), "Julian Falk rallies", QUOTE),
               ("after", date(2025, 12, 16), "Julian Falk rallies", QUOTE))
    assert match_market_quotes(q, [ELECTION], 2) == {"pm-1": ["first", "last"]}


def test_an_article_counts_for_the_event_it_is_about_only():
    q = quotes(("falk", date(2025, 12, 5), "Campaign trail", f"Julian Falk spoke in the capital. {QUOTE}"),
               ("fed", date(2025, 12, 5), "Markets", f"The Fed is expected to cut interest rates. {QUOTE}"),
               ("one-term", date(2025, 12, 6), "Markets", f"The Fed chair spoke. {QUOTE}"),  # one key term only
               ("yes-only", date(2025, 12, 7), "Poll", f"Yes, traders agree. {QUOTE}"),  # a generic option
               ("substring", date(2025, 12, 8), "Falkland news", f"Victor Brandtson won a prize. {QUOTE}"))
    got = match_market_quotes(q, [ELECTION, RATES], 2)
    assert got == {"pm-1": ["falk"], "pm-2": ["fed"]}
    assert match_market_quotes(q, [RATES], 1) == {"pm-2": ["fed", "one-term"]}  # screen.offline.min_term_hits
    assert match_market_quotes(quotes(), [ELECTION], 2) == {"pm-1": []}


def test_the_store_read_keeps_market_quotes_that_are_not_leak_flagged(tmp_path: Path):
    ws = Workspace.at(tmp_path / "ws")
    assert market_quote_articles(ws) is None  # no article store: not counted
    rows = [{"doc_id": f"d{i}", "day": date(2025, 12, 10 - i), "title": "t", "summary": None, "body": "b",
             "leak_flag": leak, "market_quote": quote}
            for i, (leak, quote) in enumerate([(False, True), (True, True), (False, False), (False, True),
                                               (None, True), (False, None)])]
    atomic_write_table(ws.articles_dir / "2025-12.parquet", pa.Table.from_pylist(rows))
    got = market_quote_articles(ws)
    assert got is not None and got["doc_id"].to_list() == ["d4", "d3", "d0"]  # by day: d4 (Dec 6) first
    old = [{k: v for k, v in r.items() if k != "market_quote"} for r in rows]
    atomic_write_table(ws.articles_dir / "2025-12.parquet", pa.Table.from_pylist(old))
    assert market_quote_articles(ws) is None  # a store built before the flag existed


def test_summary_counts_kept_events_only_and_renders_the_table():
    events = pl.DataFrame({"event_id": ["pm-1", "pm-2", "pm-3"], "question": ["A | b", "B", "C"]})
    docs = {"pm-1": ["x", "y"], "pm-2": ["y"], "pm-3": [], "pm-screened-out": ["z", "w"]}
    s = market_quote_summary(docs, events)
    assert (s["events"], s["events_with_quotes"], s["articles"], s["distinct_articles"]) == (3, 2, 3, 2)
    assert [r["event_id"] for r in s["per_event"]] == ["pm-1", "pm-2"]
    md = "\n".join(render_market_quotes(s))
    assert "3 articles quoting prediction-market odds (2 distinct)" in md and "for 2 of 3 kept events" in md
    assert "| pm-1 | A / b | 2 |" in md and "pm-3" not in md
    assert market_quote_summary(None, events) == {"counted": False}
    assert "Not counted" in "\n".join(render_market_quotes({"counted": False}))


def test_micro_world_counts_match_the_planted_quotes(micro_events: Path, micro_truth: dict):
    """truth.json names the event each planted quote is about; the count is the planted quotes kept in the
    store, not leak-flagged, and visible from the event's start day to its last forecast date."""
    ws = Path(micro_events)
    report = json.loads((ws / "events" / "report.json").read_text())
    f = report["polymarket"]["market_quotes"]
    events = pl.read_parquet(ws / "events" / "events.parquet")
    last = dict(pl.read_parquet(ws / "events" / "schedule.parquet").group_by("event_id")
                .agg(pl.col("forecast_date").max()).iter_rows())
    planted = [a for a in micro_truth["articles"].values() if a["market_quote"]]
    assert planted, "the micro world plants articles quoting market odds"
    want: dict[str, int] = {}
    for eid, start in zip(events["event_id"], events["t_start"]):
        n = sum(1 for a in planted if a["event_id"] == eid and a["expect"] == "keep" and not a["leak"]
                and start.date() <= date.fromisoformat(a["day"]) <= last[eid])
        if n:
            want[eid] = n
    assert want, "at least one planted quote is retrievable for its event"
    assert sum(want.values()) < len(planted)  # and at least one is not (visible after the last forecast date)
    assert f["counted"] and {r["event_id"]: r["articles"] for r in f["per_event"]} == want
    assert f["events"] == events.height and f["articles"] == sum(want.values())
    for eid, n in want.items():
        assert report["cuts"][eid]["market_quotes"] == n
    assert "### Market-quote articles" in (ws / "events" / "report.md").read_text()
