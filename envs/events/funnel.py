"""The events funnel (docs/design.md §4 "Funnel"): what each stage and schedule rule removed, and how
many articles quoting market odds each event would expose (docs/design.md §5 "Market-quote articles").

`WS/events/report.json` holds one funnel per source plus totals, and `cuts`: the schedule record
of every event that reached the schedule stage (with its market-quote count); `report.md` renders it
(like the paper's Table 8).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import polars as pl
import pyarrow as pa

from forecast_env import schema
from forecast_env.envs.events.screen import key_terms, named_options, relevance
from forecast_env.store import Workspace, atomic_write_json, atomic_write_text, read_table, write_manifest

if TYPE_CHECKING:
    from forecast_env.envs.events.candidate import Candidate
    from forecast_env.envs.events.schedule import Schedule

#: JSON-able report content (values of mixed types: counts, nested sections, lists).
Report = dict[str, Any]

#: The schedule record of one event (see `BuildRun.cuts`): days, step counts, the rule that cut it.
Cut = dict[str, Any]


@dataclass
class BuildRun:
    """State of one build (one source): exclusions, repairs and counts, schedule records."""

    source: str
    cfg: dict[str, Any]  # the validated events config section
    exclusions: list[tuple[str, str, str, str | None]] = field(default_factory=list)
    repairs: Counter = field(default_factory=Counter)
    counts: Counter = field(default_factory=Counter)
    #: event id -> its schedule record (t_all, d_known, cut, steps_total, steps_offered, ...).
    cuts: dict[str, Cut] = field(default_factory=dict)
    n_in: int = 0
    #: event id -> the market-quote articles it would expose (None: not counted, no article store).
    quote_docs: dict[str, list[str]] | None = None
    #: the cross-question exposure rule's record (`exposure.cut_exposed`; None: not run).
    cross_question: dict[str, Any] | None = None

    def exclude(self, eid: str, stage: str, reason: str, detail: str | None) -> None:
        self.exclusions.append((eid, stage, reason, detail))


def schedule_rules(cuts: Mapping[str, Cut], exclusions: list[tuple[str, str, str, str | None]]) -> Report:
    """How many dates and events each schedule rule removed, over the events that reached the schedule."""
    excluded = Counter(reason for _, stage, reason, _ in exclusions if stage == "schedule")
    recs = list(cuts.values())

    def n(pred: Callable[[Cut], bool]) -> int:
        return sum(1 for r in recs if pred(r))

    return {
        "events_scheduled": len(recs),
        "late_legs": {"events_with_late_legs": n(lambda r: r["late_leg_days"] > 0),
                      "dates_removed": sum(int(r["late_leg_days"]) for r in recs),
                      "events_excluded": excluded.get("late_legs", 0)},
        "close": {"events_closed_before_end": n(lambda r: r["close_day"] < r["end_day"]),
                  "events_closed_after_end": n(lambda r: r["close_day"] > r["end_day"]),
                  "steps_cut": sum(int(r["steps_cut_by_close"]) for r in recs)},
        "d_known": {"events_with_d_known": n(lambda r: r["d_known"] is not None),
                    "events_cut_by_d_known": n(lambda r: r["cut_by"] == "d_known" and r["steps_cut_by_known"] > 0),
                    "steps_cut": sum(int(r["steps_cut_by_known"]) for r in recs)},
        "outcome_known_early": {"events_excluded": excluded.get("outcome_known_early", 0)},
        "no_forecast_dates": {"events_excluded": excluded.get("no_forecast_dates", 0)},
        "steps_total": sum(int(r["steps_total"]) for r in recs),
        "steps_offered": sum(int(r["steps_offered"]) for r in recs),
    }


@dataclass(frozen=True)
class QuoteWindow:
    """What the market-quote count needs of one event: its text and the days its articles may come from."""

    event_id: str
    question: str
    options: Sequence[str]
    first_day: date  # the event's start day: nothing quotes a market before it exists
    last_day: date  # its last offered forecast date: later articles are never retrievable for it


def market_quote_articles(ws: Workspace) -> pl.DataFrame | None:
    """The stored articles that `env.hide_market_quotes=false` would reveal (`market_quote` and not
    `leak_flag`), sorted by (day, doc_id); None without an article store or with one built before the
    flag existed."""
    shards = ws.article_shards()
    if not shards:
        return None
    frame = pl.scan_parquet(shards)
    if not {"market_quote", "leak_flag"} <= set(frame.collect_schema().names()):
        return None
    return (frame.filter(pl.col("market_quote").fill_null(False) & ~pl.col("leak_flag").fill_null(False))
            .select("doc_id", "day", "title", "summary", "body").sort("day", "doc_id").collect())


def match_market_quotes(quotes: pl.DataFrame, windows: Sequence[QuoteWindow], min_term_hits: int) -> dict[str, list[str]]:
    """Event id -> the doc ids of the market-quote articles retrievable for it (docs/design.md §5): visible
    on a day from the event's start day to its last forecast date, and about the event by the screen's
    relevance rule (a named option, or `min_term_hits` of the question's key terms)."""
    days = quotes["day"].to_numpy() if quotes.height else np.zeros(0, dtype="datetime64[D]")
    ids = quotes["doc_id"].to_list()
    texts = ["\n".join(str(x or "") for x in row) for row in quotes.select("title", "summary", "body").iter_rows()]
    out: dict[str, list[str]] = {}
    for w in windows:
        lo, hi = np.searchsorted(days, np.datetime64(w.first_day, "D"), "left"), \
            np.searchsorted(days, np.datetime64(w.last_day, "D"), "right")
        terms = [t.lower() for t in key_terms(w.question)]
        opts = named_options(w.options)
        out[w.event_id] = [ids[i] for i in range(lo, hi) if relevance(texts[i], terms, opts, min_term_hits)[1]]
    return out


def record_market_quotes(run: BuildRun, ws: Workspace, scheduled: Sequence[tuple[Candidate, Schedule]]) -> None:
    """Count the market-quote articles of every scheduled event into its schedule record (`market_quotes`)."""
    quotes = market_quote_articles(ws)
    if quotes is None:
        run.quote_docs = None
        return
    windows = [QuoteWindow(c.event_id, c.question, c.options, c.start_day, s.steps[-1].forecast_date)
               for c, s in scheduled if s.steps]
    run.quote_docs = match_market_quotes(quotes, windows, int(run.cfg["screen"]["offline"]["min_term_hits"]))
    for eid, docs in run.quote_docs.items():
        if eid in run.cuts:
            run.cuts[eid]["market_quotes"] = len(docs)


def market_quote_summary(quote_docs: Mapping[str, list[str]] | None, events: pl.DataFrame) -> Report:
    """The kept events' market-quote counts: totals and the events with at least one, most first."""
    if quote_docs is None:
        return {"counted": False}
    questions = dict(zip(events["event_id"].to_list(), events["question"].to_list())) if events.height else {}
    per = {eid: quote_docs.get(eid, []) for eid in questions}
    listed = sorted(((eid, docs) for eid, docs in per.items() if docs), key=lambda x: (-len(x[1]), x[0]))
    return {
        "counted": True,
        "events": len(per),
        "events_with_quotes": len(listed),
        "articles": sum(len(d) for d in per.values()),
        "distinct_articles": len({x for d in per.values() for x in d}),
        "per_event": [{"event_id": eid, "question": questions[eid], "articles": len(docs)} for eid, docs in listed],
    }


def funnel(run: BuildRun, tables: Mapping[str, pa.Table], seconds: float) -> Report:
    """The funnel of one build: events in, excluded per stage and reason, kept by split and type."""
    by_stage: dict[str, dict[str, int]] = {}
    for _, stage, reason, _ in run.exclusions:
        by_stage.setdefault(stage, {}).setdefault(reason, 0)
        by_stage[stage][reason] += 1
    rows = []
    remaining = run.n_in
    for stage in schema.EVENT_STAGES:
        k = sum(by_stage.get(stage, {}).values())
        remaining -= k
        rows.append({"stage": stage, "excluded": k, "remaining": remaining, "reasons": by_stage.get(stage, {})})
    ev = cast(pl.DataFrame, pl.from_arrow(tables["events"]))  # a Table gives a DataFrame
    by_split = dict(Counter(ev["split"].to_list())) if ev.height else {}
    by_type = dict(Counter(ev["type"].to_list())) if ev.height else {}
    by_split_type = ({f"{s}/{t}": k for (s, t), k in Counter(zip(ev["split"].to_list(), ev["type"].to_list())).items()}
                     if ev.height else {})
    scr = cast(pl.DataFrame, pl.from_arrow(tables["screen"]))
    verdicts = dict(Counter(scr["verdict"].to_list())) if scr.height else {}
    return {
        "events_in": run.n_in,
        "kept": ev.height,
        "excluded": by_stage,
        "stages": rows,
        "by_split": by_split,
        "by_type": by_type,
        "by_split_type": by_split_type,
        "screened": scr.height,
        "screen_verdicts": verdicts,
        "screen_leaks": int(scr["leak"].sum()) if scr.height else 0,
        "schedule_rules": {**schedule_rules(run.cuts, run.exclusions),
                           "cross_question": run.cross_question or {"enabled": False}},
        "market_quotes": market_quote_summary(run.quote_docs, ev),
        "schedule_rows": tables["schedule"].num_rows,
        "repairs": dict(run.repairs),
        "counts": dict(run.counts),
        "seconds": round(seconds, 3),
    }


def _totals(ws: Workspace) -> Report:
    path = ws.events_table("events")
    if not path.exists():
        return {}
    ev = cast(pl.DataFrame, pl.from_arrow(read_table(path, schema.EVENTS)))
    return {"events": ev.height, "by_source": dict(Counter(ev["source"].to_list())),
            "by_split": dict(Counter(ev["split"].to_list()))}


def _jsonable_cut(rec: Cut) -> Cut:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in rec.items()}


def write_report(ws: Workspace, run: BuildRun, tables: Mapping[str, pa.Table], seconds: float) -> Report:
    """Write report.json / report.md / the manifest of `WS/events/` (the other source's funnel is kept)."""
    from forecast_env.envs.events.tables import SOURCE_PREFIX

    report_path = ws.events_dir / "report.json"
    report: Report = {}
    if report_path.exists():
        try:
            report = json.loads(report_path.read_text())
        except json.JSONDecodeError:
            report = {}
    report[run.source] = funnel(run, tables, seconds)
    report["totals"] = _totals(ws)
    old = report.get("cuts")
    old_cuts: dict[str, Cut] = old if isinstance(old, dict) else {}
    prefix = SOURCE_PREFIX[run.source]
    cuts = {k: v for k, v in old_cuts.items() if not k.startswith(prefix)}
    cuts.update({k: _jsonable_cut(v) for k, v in run.cuts.items()})
    report["cuts"] = dict(sorted(cuts.items()))
    atomic_write_json(report_path, report)
    atomic_write_text(ws.events_dir / "report.md", render_report(report))
    write_manifest(ws.events_dir, "events", config=run.cfg,
                   extra={"sources": sorted(k for k in report if k in SOURCE_PREFIX),
                          "cross_question": CROSS_QUESTION_NOTE})
    return report


def render_report(report: Mapping[str, object]) -> str:
    """The funnel as Markdown (one table per source, like the paper's Table 8, then the schedule rules)."""
    lines = ["# Event construction funnel", ""]
    for source in ("polymarket", "questions", "generated", "forecastbench"):
        f = report.get(source)
        if not isinstance(f, Mapping) or not f:
            continue
        lines += [f"## {source}", "", f"Events in: **{f['events_in']}**; kept: **{f['kept']}**", "",
                  "| stage | reason | excluded | remaining |", "|---|---|---:|---:|"]
        for row in f["stages"]:
            if not row["excluded"]:
                continue
            for reason, k in sorted(row["reasons"].items()):
                lines.append(f"| {row['stage']} | {reason} | {k} | |")
            lines.append(f"| **{row['stage']}** | (all) | **{row['excluded']}** | {row['remaining']} |")
        lines += ["", f"Kept by split: {f['by_split']}; by type: {f['by_type']}; by split/type: {f['by_split_type']}",
                  f"Screen: {f['screened']} screened, verdicts {f['screen_verdicts']}, leaks {f['screen_leaks']}", ""]
        r = f.get("schedule_rules") or {}
        if r:
            lines += [
                "### Schedule rules", "",
                f"{r['events_scheduled']} events reached the schedule; {r['steps_offered']} of {r['steps_total']} "
                f"scheduled dates offered ({f['schedule_rows']} schedule rows written for kept events).", "",
                "| rule | events affected | dates removed | events excluded |", "|---|---:|---:|---:|",
                f"| late legs (dates before the last leg started) | {r['late_legs']['events_with_late_legs']} | "
                f"{r['late_legs']['dates_removed']} eligible days | {r['late_legs']['events_excluded']} |",
                f"| closedTime before the scheduled end | {r['close']['events_closed_before_end']} | "
                f"{r['close']['steps_cut']} dates | - |",
                f"| closedTime after the scheduled end (t_end kept) | {r['close']['events_closed_after_end']} | 0 | - |",
                f"| d_known cut (outcome public before close) | {r['d_known']['events_cut_by_d_known']} | "
                f"{r['d_known']['steps_cut']} dates | - |",
                f"| outcome_known_early (no date before the cut) | - | - | "
                f"{r['outcome_known_early']['events_excluded']} |",
                *render_cross_question_row(r.get("cross_question") or {}),
                "",
            ]
            lines += render_cross_question(r.get("cross_question") or {})
        lines += render_market_quotes(f.get("market_quotes") or {})
        lines += [f"Repairs: {f['repairs'] or 'none'}; counts: {f['counts'] or 'none'}", ""]
    if report.get("totals"):
        lines += ["## All sources", "", f"{report['totals']}", ""]
    return "\n".join(lines)


#: Events listed by name in report.md's market-quote table (report.json lists all of them).
QUOTE_ROWS = 25


def render_market_quotes(q: Mapping[str, Any]) -> list[str]:
    """The market-quote section of report.md (docs/design.md §5)."""
    lines = ["### Market-quote articles", ""]
    if not q.get("counted"):
        return lines + ["Not counted: the workspace has no article store with the `market_quote` flag.", ""]
    lines += [f"{q['articles']} articles quoting prediction-market odds ({q['distinct_articles']} distinct) would be "
              f"retrievable for {q['events_with_quotes']} of {q['events']} kept events: visible from the event's start "
              "day to its last forecast date, about the event (a named option, or the question's key terms), not "
              "leak-flagged. They are hidden by default (`env.hide_market_quotes`); a run that shows them is a "
              "recorded ablation.", ""]
    rows = q["per_event"]
    if rows:
        lines += ["| event | question | articles |", "|---|---|---:|"]
        lines += [f"| {r['event_id']} | {str(r['question'])[:90].replace('|', '/')} | {r['articles']} |"
                  for r in rows[:QUOTE_ROWS]]
        if len(rows) > QUOTE_ROWS:
            lines.append(f"| ... | {len(rows) - QUOTE_ROWS} more events with quotes (report.json) | |")
        lines.append("")
    return lines


#: The manifest's note on the cross-question rule (docs/design.md §4 "Cross-question exposure").
CROSS_QUESTION_NOTE = ("cuts include the cross-question exposure rule over every kept event of the workspace "
                       "(all splits and sources): adding events to a build (another source, a wider cache) can "
                       "cut the schedules of events already built; narrowing a world never changes a cut")


def render_cross_question_row(q: Mapping[str, Any]) -> list[str]:
    """The `cross_question` row of report.md's schedule-rules table."""
    if not q.get("enabled"):
        return ["| cross_question (another question gives the answer away) | off | - | - |"]
    return [f"| cross_question (another question gives the answer away) | {q['events_cut']} | {q['steps_cut']} dates | "
            f"{q['events_excluded']} |"]


def render_cross_question(q: Mapping[str, Any]) -> list[str]:
    """The exposures behind the `cross_question` row: which question exposed which, from when, by which words."""
    if not q.get("enabled"):
        return []
    lines = [f"Cross-question exposure: {q['visible_questions']} visible questions, {q['candidate_pairs']} candidate "
             f"pairs, {q['events_exposed']} events exposed (the rule cut {q['events_cut']}); skipped by the "
             f"detector: {q['skipped'] or 'none'}.", ""]
    rows = q.get("exposures") or []
    if rows:
        lines += ["| event | exposed from | by | rule | triggering words |", "|---|---|---|---|---|"]
        lines += [f"| {r['event_id']} | {r['day']} | {r['by']} | {r['rule']}/{r['where']} | "
                  f"{str(r['words'])[:80].replace('|', '/')} |" for r in rows[:QUOTE_ROWS]]
        lines.append("")
    return lines
