"""Event construction (docs/design.md §4): Polymarket cache or questions file -> the `WS/events/` tables.

Stages, in the order of `schema.EVENT_STAGES` (an excluded event gets exactly one row in the
`excluded` table, for its first failing stage):

1. parse / layout / label - `gamma.construct_event` (Polymarket) or `questions.read_questions`;
   then the options are put in a deterministic order seeded by the event id (`candidate.shuffle_options`).
2. span / activity / signal - the market-side filters (`filters.py`, over the trading life).
3. split   - train / eval by start and SCHEDULED end `t_end` (`splits.py`).
4. schedule - label-free (`schedule.py`): grid from the day the last leg started to `t_end - 2`,
   `T_Q` bins, then the cut `min(d_known, close day - 1)` keeps a prefix of whole bins (the exposure day
   joins it in the last pass, step 6). No eligible
   day: `late_legs` (when legs started late) or `no_forecast_dates`; no bin before the cut:
   `outcome_known_early`.
5. screen  - the corpus-side screen at `tau*` = the last day of the last offered bin (`screen.py`).
6. cross-question exposure - a last global pass over every kept event of the workspace (`exposure.py`):
   the first day another visible question presupposes an event's outcome joins its cut (`exposed_early`
   when no bin is left). The screen verdict stays the one taken at the earlier tau*.

The modules: `candidate` (the record), `gamma` (Gamma parsing), `descriptions` (descriptions as of
a date), `event_tables` (tables, merge, reading back), `funnel` (report); this one orchestrates.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl

from forecast_env.config import flatten_keys, load_config
from forecast_env.crashpoints import crash_point
from forecast_env.envs.events.beliefs import daily_beliefs, daily_trades
from forecast_env.envs.events.candidate import Candidate, Excluded, shuffle_options
from forecast_env.envs.events.descriptions import description_as_of
from forecast_env.envs.events.exposure import cut_exposed, recut_stored
from forecast_env.envs.events.filters import EventSeries, MarketFilters
from forecast_env.envs.events.funnel import BuildRun, Report, record_market_quotes, write_report
from forecast_env.envs.events.gamma import construct_event, open_cache
from forecast_env.envs.events.schedule import (
    Schedule,
    build_schedule,
    fixed_schedule,
    forecast_grid,
    known_day,
    schedule_cut,
)
from forecast_env.envs.events.screen import Decomposer, Judge
from forecast_env.envs.events.splits import Splits
from forecast_env.envs.events.tables import (
    EventTables,
    Row,
    assemble_tables,
    by_event,
    clip_to_span,
    day_of,
    load_events,
    options_frame,
    series_frames,
    write_tables,
)
from forecast_env.errors import EventsError, IndexMissingError, WorkspaceError
from forecast_env.store import Workspace, remove_temporaries

if TYPE_CHECKING:
    from forecast_env.retrieval import Searcher

__all__ = ["EventTables", "build_events", "description_as_of", "import_forecastbench", "import_questions", "load_events",
           "resolve_config", "schedule_event"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


def resolve_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The events config: packaged defaults updated by `config` (a full or partial section), validated."""
    if config is None:
        return load_config("events")
    return load_config("events", overrides=flatten_keys(config))


def _open_searcher(workspace: Path, required: bool) -> Searcher | None:
    from forecast_env.retrieval import Searcher

    try:
        return Searcher.open(workspace)
    except WorkspaceError as exc:
        if required:
            raise IndexMissingError(
                f"{workspace}: no search index to screen and schedule events ({exc}); build it with "
                "`forecast-env index build`, or run the market side only with "
                "--set screen.enabled=false --set schedule.require_index=false"
            ) from exc
        log.warning("%s: no search index (%s); corpus activity is 0 on every day and the screen is off", workspace, exc)
        return None


def _progress(items: Iterable[_T], total: int, desc: str, enabled: bool) -> Iterable[_T]:
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, total=total, desc=desc, unit="event")


def build_events(
    polymarket_dir: str | Path,
    workspace: str | Path,
    config: Mapping[str, Any] | None = None,
    searcher: Searcher | None = None,
    judge: Judge | str | None = None,
    progress: bool = True,
) -> Report:
    """Build the events tables of `workspace` from a Polymarket cache folder; return the funnel.

    `judge`: a `Judge` (optionally with a `decompose(view)` method), or "offline" / "llm", or None
    for the config's `screen.judge`. `searcher`: an open index (default: the workspace's).
    """
    from forecast_env.workspace.remote import is_remote, staged

    if not is_remote(workspace):
        return _build_events(polymarket_dir, workspace, config, searcher, judge, progress)
    # an object-store workspace: build in node-local scratch, publish from there
    with staged(workspace, pull=("corpus/", "index/", "events/"), skip=("corpus/parts/",),
                publish=("events/",), publish_on_failure=()) as local:
        return _build_events(polymarket_dir, local, config, searcher, judge, progress)


def _build_events(polymarket_dir: str | Path, workspace: str | Path, config: Mapping[str, Any] | None,
                  searcher: Searcher | None, judge: Judge | str | None, progress: bool) -> Report:
    """`build_events` in a local workspace folder."""
    t0 = time.perf_counter()
    cfg = resolve_config(config)
    ws = Workspace.at(workspace, create=True)
    remove_temporaries(ws.events_dir)  # a killed build's writes in flight
    cache = open_cache(polymarket_dir)
    run = BuildRun("polymarket", cfg)
    raw_events = list(cache.events())
    run.n_in = len(raw_events)
    cands: list[Candidate] = []
    seen: set[str] = set()
    for i, ev in enumerate(_progress(raw_events, len(raw_events), "events", progress)):
        eid = f"pm-{ev.get('id')}" if isinstance(ev, Mapping) and ev.get("id") not in (None, "") else f"pm-?{i}"
        if eid in seen:
            run.counts["duplicate_events_skipped"] += 1
            run.n_in -= 1
            continue
        seen.add(eid)
        n_bad = len(cache.unreadable)
        crash_point("events.event")
        try:
            cand = construct_event(ev, cache, cfg["labels"], run.repairs, run.counts)
            if len(cache.unreadable) > n_bad:
                raise Excluded("parse", "bad_json", f"unreadable cache file {cache.unreadable[n_bad]}")
            cands.append(cand)
        except Excluded as exc:
            run.exclude(eid, exc.stage, exc.reason, exc.detail)
    return _finish(run, cands, ws, searcher, judge, progress, t0)


def import_questions(
    questions_jsonl: str | Path,
    workspace: str | Path,
    config: Mapping[str, Any] | None = None,
    searcher: Searcher | None = None,
    judge: Judge | str | None = None,
    progress: bool = True,
    source: str = "questions",
) -> Report:
    """Add events from a JSONL file of questions (source "questions", or "generated" for questions/'s accepted
    questions, which replace the earlier generated ones); the same splits, schedule and screen."""
    from forecast_env.envs.events.questions import read_questions

    t0 = time.perf_counter()
    cfg = resolve_config(config)
    ws = Workspace.at(workspace, create=True)
    if source not in ("questions", "generated"):
        raise EventsError(f"import_questions: source {source!r} is not 'questions' or 'generated'")
    run = BuildRun(source, cfg)
    parsed = read_questions(questions_jsonl, source=source)
    run.n_in = len(parsed.candidates) + len(parsed.errors)
    for eid, detail in parsed.errors:
        run.exclude(eid, "parse", "bad_json", detail)
    run.counts["invalid_lines"] = len(parsed.errors)
    return _finish(run, parsed.candidates, ws, searcher, judge, progress, t0)


def import_forecastbench(
    root: str | Path,
    workspace: str | Path,
    rounds: str | None = None,
    config: Mapping[str, Any] | None = None,
    searcher: Searcher | None = None,
    judge: Judge | str | None = None,
    progress: bool = True,
) -> Report:
    """Add the ForecastBench rounds `rounds` ("A..B" due dates; None: all) read from `root`, a local copy of
    the `forecastbench-datasets` repository, as events (source "forecastbench"; docs/forecastbench.md).

    Writes `WS/events/forecastbench.parquet` (one row per resolution-set row, `schema.FORECASTBENCH_ITEMS`)
    beside the events tables; a re-import replaces every earlier ForecastBench event.
    """
    from forecast_env.envs.events import forecastbench_import as fbi
    from forecast_env.envs.events.forecastbench import read_rounds

    t0 = time.perf_counter()
    cfg = resolve_config(config)
    ws = Workspace.at(workspace, create=True)
    root = Path(root)
    if not (root / "datasets").is_dir():
        raise EventsError(f"{root}: no datasets/ folder; pass a local copy of the forecastbench-datasets "
                          "repository (git clone https://github.com/forecastingresearch/forecastbench-datasets)")
    first, last = fbi.parse_rounds(rounds)
    every = read_rounds(root)  # a question's home split and label come from every round, not the selected ones
    read = [r for r in every if (first is None or r.due_date >= first) and (last is None or r.due_date <= last)]
    if not read:
        raise EventsError(f"{root}: no ForecastBench round with a due date in {rounds or 'any range'} "
                          "(files datasets/question_sets/YYYY-MM-DD-llm.json, "
                          "datasets/resolution_sets/YYYY-MM-DD_resolution_set.json)")
    fb_splits = Splits.from_config({"splits": cfg["forecastbench"]["splits"]})
    imp = fbi.import_rounds(read, fb_splits, fbi.polymarket_conditions(ws), int(cfg["schedule"]["buffer_days"]),
                            fbi.History.of(every))
    run = BuildRun("forecastbench", cfg)
    run.n_in = imp.n_in
    for eid, stage, reason, detail in imp.exclusions:
        run.exclude(eid, stage, reason, detail)
    run.counts.update(imp.counts)
    run.counts["rounds"] = len(read)
    run.counts["file_problems"] = len(imp.errors)
    for line in imp.errors:
        log.warning("forecastbench: %s", line)
    report = _finish(run, imp.candidates, ws, searcher, judge, progress, t0)
    fbi.write_items(ws, imp.items, run)
    report["rounds"] = [r.due_date for r in read]
    report["file_problems"] = imp.errors
    return report


# ---------------------------------------------------------------------------------------------
# The stages after parsing
# ---------------------------------------------------------------------------------------------


def _market_filters(run: BuildRun, cands: list[Candidate], beliefs: pl.DataFrame,
                    trades_daily: pl.DataFrame) -> list[Candidate]:
    """Span, activity, signal over the trading life (Polymarket only: imported questions have no trades)."""
    if run.source != "polymarket":
        return list(cands)
    filt = MarketFilters.from_config(run.cfg)
    labels = pl.DataFrame({"event_id": [c.event_id for c in cands], "option": [c.label for c in cands]},
                          schema={"event_id": pl.Utf8, "option": pl.Utf8})
    tr = by_event(trades_daily.join(labels, on=["event_id", "option"], how="semi"), ("day",), ("n_trades", "shares"))
    bl = by_event(beliefs.join(labels, on=["event_id", "option"], how="semi").filter(pl.col("belief").is_not_null()),
                  ("day",), ("belief",))
    survivors = []
    for c in cands:
        out = filt.check(EventSeries(c.type, c.start_day, c.close_day, tr.get(c.event_id, {}), bl.get(c.event_id, {}),
                                     same_day=c.same_day))
        c.metrics.update(out.metrics)
        if out.keep:
            survivors.append(c)
        else:
            run.exclude(c.event_id, out.stage or "", out.reason or "", out.detail)
    return survivors


def _assign_splits(run: BuildRun, cands: list[Candidate]) -> list[Candidate]:
    """Train / eval by start and scheduled end; events in neither split are excluded."""
    splits = Splits.from_config(run.cfg)
    out = []
    for c in cands:
        if c.source == "forecastbench":  # split by due date at import (forecastbench_import.py)
            out.append(c)
            continue
        name, reason = splits.assign(c.t_start, c.t_end)
        if reason is None:
            c.metrics["split"] = name
            out.append(c)
        else:
            run.exclude(c.event_id, "split", reason, f"t_start {c.t_start.isoformat()} t_end {c.t_end.isoformat()}")
    return out


def schedule_event(c: Candidate, beliefs: Mapping[date, Mapping[str, float]], day_counts: Mapping[date, int],
                   cfg: Mapping[str, Any]) -> Schedule:
    """The schedule of one candidate under the events config `cfg` (label-free: see `schedule.py`).

    Imported questions without daily probabilities have no `d_known` (their prices list is empty).
    """
    sc = cfg["schedule"]
    buffer = int(sc["buffer_days"])
    if c.dates is not None:  # ForecastBench: the rounds' freeze days; its sparse freeze values set no d_known
        return _fixed(c, buffer)
    d_known = known_day(c.leg_series(), float(sc["known_threshold"]))
    if c.known is not None:  # a generated question: the first visible report of its outcome (questions/resolve.py)
        d_known = c.known if d_known is None else min(d_known, c.known)
    cut = schedule_cut(d_known, c.close_day, buffer)
    s = build_schedule(c.start_day, c.t_all, c.end_day, c.options, beliefs, day_counts, cut,
                       buffer_days=buffer, max_steps=int(sc["max_steps"]), days_per_step=int(sc["days_per_step"]),
                       movement_weight=float(sc["movement_weight"]), activity_weight=float(sc["activity_weight"]))
    by_close = sum(1 for st in s.uncut if st.bin_last >= schedule_cut(None, c.close_day, buffer))
    c.metrics.update(
        t_all=c.t_all, d_known=d_known, cut=cut,
        cut_by="d_known" if d_known is not None and cut == d_known and cut < schedule_cut(None, c.close_day, buffer)
        else "close",
        steps_total=s.steps_total, steps_offered=len(s.steps),
        late_leg_days=len(forecast_grid(c.start_day, None, c.end_day, buffer)) - len(s.grid),
        steps_cut_by_close=by_close, steps_cut_by_known=s.steps_total - len(s.steps) - by_close,
    )
    return s


def _fixed(c: Candidate, buffer: int) -> Schedule:
    assert c.dates is not None
    cut = schedule_cut(c.known, c.close_day, buffer)
    s = fixed_schedule(c.dates, c.options, cut)
    by_close = sum(1 for st in s.uncut if st.bin_last >= cut)
    c.metrics.update(t_all=c.t_all, d_known=c.known, cut=cut, cut_by="d_known" if c.known is not None else "close",
                     steps_total=s.steps_total, steps_offered=len(s.steps), late_leg_days=0,
                     steps_cut_by_close=by_close, steps_cut_by_known=0)
    return s


def _schedule_all(run: BuildRun, cands: list[Candidate], beliefs: pl.DataFrame,
                  day_counts: Mapping[date, int]) -> list[tuple[Candidate, Schedule]]:
    """Schedules of the split events; the label-free exclusions (late_legs, outcome_known_early)."""
    ids = pl.DataFrame({"event_id": [c.event_id for c in cands]}, schema={"event_id": pl.Utf8})
    bvec = by_event(beliefs.filter(pl.col("belief").is_not_null()).join(ids, on="event_id", how="semi"),
                    ("day", "option"), ("belief",))
    out = []
    for c in cands:
        per_day: dict[date, dict[str, float]] = {}
        for (d, o), b in bvec.get(c.event_id, {}).items():
            per_day.setdefault(d, {})[o] = b
        s = schedule_event(c, per_day, day_counts, run.cfg)
        m = c.metrics
        run.cuts[c.event_id] = {k: m[k] for k in ("t_all", "d_known", "cut", "cut_by", "steps_total", "steps_offered",
                                                   "late_leg_days", "steps_cut_by_close", "steps_cut_by_known")}
        run.cuts[c.event_id].update(start_day=c.start_day, end_day=c.end_day, close_day=c.close_day)
        if not s.grid:
            last = c.end_day - timedelta(days=int(run.cfg["schedule"]["buffer_days"]))
            if m["late_leg_days"]:
                run.exclude(c.event_id, "schedule", "late_legs",
                            f"the last leg started on {c.t_all}, after the last eligible day {last}")
            else:
                run.exclude(c.event_id, "schedule", "no_forecast_dates", f"no day from {c.start_day} to {last}")
            continue
        if not s.steps:
            run.exclude(c.event_id, "schedule", "outcome_known_early",
                        f"cut {m['cut']} ({m['cut_by']}; d_known {m['d_known']}, close day {c.close_day}) is on or "
                        f"before the last day {s.uncut[0].bin_last} of the first of {s.steps_total} bins")
            continue
        out.append((c, s))
    return out


def _screen_all(run: BuildRun, scheduled: list[tuple[Candidate, Schedule]], searcher: Searcher | None,
                judge: Judge | str | None, progress: bool) -> tuple[list[tuple[Candidate, Schedule]], list[Row]]:
    """The corpus-side screen of the scheduled events at tau* = the last offered bin's last day."""
    sc = run.cfg["screen"]
    if not sc["enabled"] or not scheduled:
        return scheduled, []
    from forecast_env.envs.events.screen import decompose_offline, make_event_view, make_judge, screen_event

    if searcher is None:
        raise IndexMissingError("the screen needs a search index; build it with `forecast-env index build` "
                                "or turn the screen off with --set screen.enabled=false")
    decompose: Decomposer
    if judge is None or isinstance(judge, str):
        the_judge, decompose = make_judge(run.cfg, judge)
    else:
        the_judge = judge
        decompose = getattr(judge, "decompose", None) or (
            lambda v: decompose_offline(v, int(sc["min_queries"]), int(sc["max_queries"])))
    corpus_start = day_of(searcher.first_day) if searcher.first_day is not None else date.max
    # ForecastBench: verdicts that are recorded but do not exclude (data questions are rarely news)
    records_only = set(run.cfg["forecastbench"]["screen_records_only"]) if run.source == "forecastbench" else set()
    kept, rows = [], []
    for c, s in _progress(scheduled, len(scheduled), "screen", progress):
        tau = s.tau_star
        assert tau is not None  # scheduled events have an offered bin
        view = make_event_view(c.question, description_as_of(c.description, tau), c.options, tau)
        res = screen_event(c.event_id, view, searcher, the_judge, decompose, corpus_start,
                           int(sc["evidence_per_query"]), int(sc["evidence_size"]))
        rows.append(res.row())
        c.metrics.update(screen_verdict=res.verdict, screen_leak=res.leak)
        if res.exclusion is None or res.exclusion[0] in records_only:
            kept.append((c, s))
        else:
            run.exclude(c.event_id, "screen", res.exclusion[0], res.exclusion[1])
    return kept, rows


def _finish(run: BuildRun, cands: list[Candidate], ws: Workspace, searcher: Searcher | None,
            judge: Judge | str | None, progress: bool, t0: float) -> Report:
    cfg = run.cfg
    cands = [shuffle_options(c) for c in cands]
    options = options_frame(cands)
    prices, trades = series_frames(cands)
    br = daily_beliefs(prices, options)
    run.counts["dropped_price_points"] += br.dropped_prices
    beliefs = clip_to_span(br.beliefs, cands)
    trades_daily = clip_to_span(daily_trades(trades, options), cands)

    survivors = _market_filters(run, cands, beliefs, trades_daily)
    in_split = _assign_splits(run, survivors)

    need_index = bool(cfg["screen"]["enabled"]) or bool(cfg["schedule"]["require_index"])
    if searcher is None and (need_index or ws.index_dir.exists()):
        searcher = _open_searcher(ws.root, need_index)
    day_counts = {day_of(d): int(n) for d, n in searcher.day_counts().items()} if searcher is not None else {}
    if not day_counts and in_split:
        log.warning("no corpus day counts: the schedule's activity term is 0 on every day")
    scheduled = _schedule_all(run, in_split, beliefs, day_counts)
    record_market_quotes(run, ws, scheduled)  # docs/design.md §5: what showing market quotes would expose
    kept, screen_rows = _screen_all(run, scheduled, searcher, judge, progress)
    # the last global pass (docs/design.md §4 "Cross-question exposure"): other kept questions may give the answer away
    kept, foreign = cut_exposed(run, ws, kept)

    sched_rows: list[Row] = [
        {"event_id": c.event_id, "step": st.step, "steps_total": st.steps_total, "forecast_date": st.forecast_date,
         "options": st.options, "score": st.score, "bin_first": st.bin_first, "bin_last": st.bin_last}
        for c, s in kept for st in s.steps
    ]
    final = [c for c, _ in kept]
    tables = assemble_tables(final, beliefs, trades_daily, sched_rows, screen_rows, run.exclusions)
    write_tables(ws, tables, run.source)
    recut_stored(ws, foreign)
    if run.source == "polymarket":  # ForecastBench questions on a market this build holds (forecastbench_import.py)
        from forecast_env.envs.events.forecastbench_import import drop_duplicates

        drop_duplicates(ws)
    report = write_report(ws, run, tables, time.perf_counter() - t0)
    out = dict(report[run.source])
    out["workspace"] = str(ws.root)
    out["output"] = str(ws.events_dir)
    return out
