"""Audit check 1: schedule invariants (docs/design.md §8 check 1, rules of §4).

On the stored tables of the audited split:
* every date offers every option, in one order (`all_options`);
* no date before `t_all` (the later of the stored `t_all` and the last leg's start day:
  `before_t_all`), on or after `d_known` (stored, and recomputed from raw prices when the Polymarket
  cache is given: `on_or_after_d_known`), on or after the stored cross-question exposure day
  (`on_or_after_exposure`, docs/design.md §4 "Cross-question exposure"), or after the `t_close` day - 2
  (`after_close`);
* steps numbered 1..n with one `steps_total` >= n (`step_numbering`);
* the stored dates and `steps_total` equal the schedule rebuilt from the tables with the cut
  `min(d_known, close day - 1, exposure day)` (`stored_vs_rebuilt`).

Counterfactual rebuilds with the build's schedule function (or `builder`):
* with every other option as the label, the schedule is identical (`label_changes_schedule`);
* with `closedTime` moved earlier, `steps_total` is unchanged and the offered dates are a prefix of
  the uncut schedule (`close_moves_schedule`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, cast

import numpy as np
import polars as pl

from forecast_env.config import load_config
from forecast_env.eval.audit.inputs import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    AuditInputs,
    AuditSettings,
    CheckResult,
    as_day,
)

#: How far after the scheduled end the actual close is put for the uncut schedule (no bin is cut).
_UNCUT_DAYS = 400


@dataclass(frozen=True)
class ScheduleInputs:
    """Everything the events build could see about one event when it scheduled it (label included,
    so that a counterfactual rebuild can change it)."""

    event_id: str
    options: tuple[str, ...]
    label: str
    start_day: date
    t_all: date | None
    end_day: date  # day of t_end, the scheduled end
    close_day: date  # day of t_close, the actual close
    d_known: date | None
    option_start: Mapping[str, date]
    beliefs: Mapping[date, Mapping[str, float]]
    day_counts: Mapping[date, int]
    config: Mapping[str, Any]
    exposure_day: date | None = None  # stored: first day another visible question gives the answer away
    fixed_dates: tuple[date, ...] | None = None  # ForecastBench: the round's freeze day, from the items table


@dataclass(frozen=True)
class BuiltSchedule:
    """A schedule as the audit compares it: `steps_total` and the offered dates with their options."""

    steps_total: int
    dates: tuple[date, ...]
    options: tuple[tuple[str, ...], ...]


#: A schedule function under audit: the inputs of one event -> its offered schedule.
ScheduleBuilder = Callable[[ScheduleInputs], BuiltSchedule]


def build_with_project(inp: ScheduleInputs) -> BuiltSchedule:
    """The events build's own schedule functions (`forecast_env.envs.events.schedule`) on `inp`."""
    from forecast_env.envs.events.exposure import apply_cut
    from forecast_env.envs.events.schedule import build_schedule, fixed_schedule, schedule_cut

    cfg = inp.config
    buffer = int(cfg["buffer_days"])
    cut = apply_cut(schedule_cut(inp.d_known, inp.close_day, buffer), inp.exposure_day)
    if inp.fixed_dates is not None:  # ForecastBench rounds: the source's own dates (envs/events/forecastbench_import.py)
        f = fixed_schedule(inp.fixed_dates, list(inp.options), cut)
        return BuiltSchedule(f.steps_total, tuple(st.forecast_date for st in f.steps),
                             tuple(tuple(st.options) for st in f.steps))
    s = build_schedule(inp.start_day, inp.t_all, inp.end_day, list(inp.options), inp.beliefs, inp.day_counts, cut,
                       buffer_days=buffer, max_steps=int(cfg["max_steps"]),
                       days_per_step=int(cfg["days_per_step"]), movement_weight=float(cfg["movement_weight"]),
                       activity_weight=float(cfg["activity_weight"]))
    steps = s.steps
    return BuiltSchedule(int(s.steps_total), tuple(st.forecast_date for st in steps),
                         tuple(tuple(st.options) for st in steps))


# ---------------------------------------------------------------------------------------------
# inputs from the tables
# ---------------------------------------------------------------------------------------------


def _col(row: Mapping[str, Any], *names: str) -> Any:
    for n in names:
        if n in row and row[n] is not None:
            return row[n]
    return None


def _kept_day(row: Mapping[str, Any], *names: str) -> date:
    # start, end and close are set on every kept event (the build scheduled it from them): typed as a date
    return cast(date, as_day(_col(row, *names)))


def raw_known_days(inputs: AuditInputs, event_ids: list[str], threshold: float = 0.97) -> dict[str, date | None]:
    """`d_known` recomputed from the raw CLOB price histories of the Polymarket cache (independent code).

    Per option, its own leg's YES-price observations up to the leg's close (binary: the first
    option's token `p`, the second `1 - p`); `t_k` = the earliest observation from which every later
    one is >= `threshold`; the result is the UTC day of the earliest `t_k` (None: never known).
    """
    from forecast_env.envs.events.polymarket.cache import PolymarketCache

    if inputs.polymarket is None:
        return {}
    cache = PolymarketCache(inputs.polymarket)
    ev_type = dict(zip(inputs.events["event_id"].to_list(), inputs.events["type"].to_list()))
    legs = inputs.legs.filter(pl.col("event_id").is_in(event_ids)).sort(["event_id", "option_index"])
    out: dict[str, date | None] = {}
    for (eid,), df in legs.group_by(["event_id"], maintain_order=True):
        series: list[list[tuple[float, float]]] = []  # per leg: (time, price) points
        rows = df.to_dicts()
        for i, leg in enumerate(rows):
            close = leg.get("leg_close")
            close_ts = close.timestamp() if isinstance(close, datetime) else math.inf
            if ev_type.get(eid) == "binary" and i == 1 and series:
                series.append([(t, 1.0 - p) for t, p in series[0]])
                continue
            raw = cache.prices(str(leg.get("token_id")))
            hist = raw.get("history", []) if isinstance(raw, dict) else (raw or [])
            pts = []
            for h in hist:
                try:
                    t, p = float(h["t"]), float(h["p"])
                except (KeyError, TypeError, ValueError):
                    continue
                if t <= close_ts and math.isfinite(p):
                    pts.append((t, p))
            series.append(sorted(pts))
        times = []
        for pts in series:
            t_k = None
            for t, p in reversed(pts):
                if p < threshold:
                    break
                t_k = t
            if t_k is not None:
                times.append(t_k)
        out[eid] = datetime.fromtimestamp(min(times), tz=UTC).date() if times else None
    return out


def schedule_inputs(inputs: AuditInputs, events: pl.DataFrame, day_counts: Mapping[date, int],
                    config: Mapping[str, Any]) -> dict[str, ScheduleInputs]:
    """One `ScheduleInputs` per event of `events`, from the events, legs and beliefs tables."""
    ids = events["event_id"].to_list()
    leg_start: dict[str, dict[str, date]] = {}
    for r in inputs.legs.filter(pl.col("event_id").is_in(ids)).iter_rows(named=True):
        d = as_day(_col(r, "start_day", "leg_start"))
        if d is not None:
            leg_start.setdefault(r["event_id"], {})[r["option"]] = d
    beliefs: dict[str, dict[date, dict[str, float]]] = {}
    b = inputs.beliefs.filter(pl.col("event_id").is_in(ids) & pl.col("belief").is_not_null())
    for eid, day, opt, bel in b.select("event_id", "day", "option", "belief").iter_rows():
        beliefs.setdefault(eid, {}).setdefault(day, {})[opt] = float(bel)
    fixed = _forecastbench_dates(inputs, ids)
    out = {}
    for r in events.iter_rows(named=True):
        eid = r["event_id"]
        starts = leg_start.get(eid, {})
        t_all = as_day(_col(r, "t_all")) or (max(starts.values()) if starts else None)
        out[eid] = ScheduleInputs(
            event_id=eid, options=tuple(r["options"] or []), label=r["label"],
            start_day=_kept_day(r, "start_day", "t_start"), t_all=t_all,
            end_day=_kept_day(r, "end_day", "t_end", "close_day"),
            close_day=_kept_day(r, "close_day", "t_close"), d_known=as_day(_col(r, "d_known")),
            option_start=starts, beliefs=beliefs.get(eid, {}), day_counts=day_counts, config=config,
            exposure_day=as_day(_col(r, "exposure_day")), fixed_dates=fixed.get(eid))
    return out


def _forecastbench_dates(inputs: AuditInputs, ids: list[str]) -> dict[str, tuple[date, ...]]:
    """Event id -> its rounds' freeze days, from the ForecastBench items table (the import's source record, not
    the stored schedule); {} when the workspace has none. An fb- event missing from it is rebuilt on no date."""
    path = inputs.workspace.events_dir / "forecastbench.parquet"
    fb = [e for e in ids if e.startswith("fb-")]
    if not fb:
        return {}
    out: dict[str, tuple[date, ...]] = {e: () for e in fb}
    if path.exists():
        items = pl.read_parquet(path, columns=["event_id", "freeze_date"]).drop_nulls()
        for (eid,), g in items.filter(pl.col("event_id").is_in(fb)).group_by(["event_id"]):
            out[str(eid)] = tuple(sorted(set(g["freeze_date"].to_list())))
    return out


# ---------------------------------------------------------------------------------------------
# the check
# ---------------------------------------------------------------------------------------------


class _Tally:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.examples: list[dict[str, Any]] = []

    def add(self, name: str, **example: Any) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1
        if sum(1 for e in self.examples if e["violation"] == name) < 5:
            self.examples.append({"violation": name, **example})


def _is_prefix(short: tuple, long: tuple) -> bool:
    return len(short) <= len(long) and tuple(long[: len(short)]) == tuple(short)


def _close_days(inp: ScheduleInputs, n: int, rng: np.random.Generator) -> list[date]:
    """Earlier actual-close days to try: spread over the schedule's span, seeded."""
    first = max(inp.start_day, inp.t_all) if inp.t_all else inp.start_day
    last = min(inp.close_day, inp.end_day) - timedelta(days=1)
    span = (last - first).days
    if span < 1:
        return []
    picks = sorted({int(x) for x in rng.integers(1, span + 1, size=n)})
    return [first + timedelta(days=p) for p in picks]


def built_schedule_config(inputs: AuditInputs) -> dict[str, Any]:
    """The `schedule` config the events were built with (the events manifest), else the defaults."""
    cfg = dict(load_config("events")["schedule"])
    try:
        manifest = json.loads((inputs.workspace.events_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return cfg
    cfg.update(((manifest.get("config") or {}).get("schedule")) or {})
    return cfg


def check_schedule(inputs: AuditInputs, settings: AuditSettings, builder: ScheduleBuilder | None = None) -> CheckResult:
    """Check 1 (see the module docstring)."""
    cfg = built_schedule_config(inputs)
    build = builder or build_with_project
    events = inputs.split_events
    ids = events["event_id"].to_list()
    sched = inputs.schedule.filter(pl.col("event_id").is_in(ids)).sort(["event_id", "step"])
    by_event = {k[0]: df for k, df in sched.group_by(["event_id"], maintain_order=True)}
    tally = _Tally()
    try:
        day_counts = inputs.searcher().day_counts() if (inputs.workspace.index_dir / "manifest.json").exists() else {}
    except Exception:  # an unreadable index is check 3's finding; the rebuild then has no activity term
        day_counts = {}
    inps = schedule_inputs(inputs, events, day_counts, cfg)
    raw_known = raw_known_days(inputs, ids, float(cfg.get("known_threshold", 0.97)))
    rng = np.random.default_rng(settings.seed)
    n_rows = n_label_rebuilds = n_close_rebuilds = 0
    builder_error: str | None = None

    for r in events.sort("event_id").iter_rows(named=True):
        eid = r["event_id"]
        inp = inps[eid]
        df = by_event.get(eid)
        if df is None or df.height == 0:
            tally.add("no_dates", event_id=eid)
            continue
        rows = df.to_dicts()
        n_rows += len(rows)
        options = list(r["options"] or [])
        t_all = max([d for d in (inp.t_all, max(inp.option_start.values()) if inp.option_start else None) if d],
                    default=None)
        known = [d for d in (inp.d_known, raw_known.get(eid)) if d is not None]
        d_known = min(known) if known else None
        last_allowed = inp.close_day - timedelta(days=int(cfg["buffer_days"]))
        totals = {int(x["steps_total"]) for x in rows}
        if [int(x["step"]) for x in rows] != list(range(1, len(rows) + 1)) or len(totals) != 1 \
                or max(totals) < len(rows) or ("steps_total" in r and r["steps_total"] is not None
                                               and int(r["steps_total"]) not in totals):
            tally.add("step_numbering", event_id=eid, steps=[x["step"] for x in rows], steps_total=sorted(totals))
        for x in rows:
            d = x["forecast_date"]
            if list(x["options"] or []) != options:
                tally.add("all_options", event_id=eid, date=d, offered=x["options"], options=options)
            if t_all is not None and d < t_all:
                tally.add("before_t_all", event_id=eid, date=d, t_all=t_all)
            if d_known is not None and d >= d_known:
                tally.add("on_or_after_d_known", event_id=eid, date=d, d_known=d_known,
                          d_known_stored=inp.d_known, d_known_raw=raw_known.get(eid))
            if inp.exposure_day is not None and d >= inp.exposure_day:
                tally.add("on_or_after_exposure", event_id=eid, date=d, exposure_day=inp.exposure_day,
                          exposed_by=r.get("exposed_by"))
            if d > last_allowed:
                tally.add("after_close", event_id=eid, date=d, close_day=inp.close_day)

        # rebuilds with the schedule function under audit
        try:
            base = build(inp)
        except Exception as exc:  # the build's API is missing or changed: nothing to rebuild with
            builder_error = f"{type(exc).__name__}: {exc}"[:300]
            continue
        stored = BuiltSchedule(max(totals), tuple(x["forecast_date"] for x in rows),
                               tuple(tuple(x["options"] or []) for x in rows))
        if (stored.steps_total, stored.dates) != (base.steps_total, base.dates):
            tally.add("stored_vs_rebuilt", event_id=eid, stored=[str(d) for d in stored.dates],
                      rebuilt=[str(d) for d in base.dates], stored_total=stored.steps_total,
                      rebuilt_total=base.steps_total)
        for other in options:
            if other == inp.label:
                continue
            n_label_rebuilds += 1
            alt = build(replace(inp, label=other))
            if alt != base:
                tally.add("label_changes_schedule", event_id=eid, label=inp.label, other_label=other,
                          dates=[str(d) for d in base.dates], other_dates=[str(d) for d in alt.dates],
                          steps_total=base.steps_total, other_steps_total=alt.steps_total)
        uncut = build(replace(inp, close_day=max(inp.end_day, inp.close_day) + timedelta(days=_UNCUT_DAYS),
                              d_known=None, exposure_day=None))
        if not _is_prefix(base.dates, uncut.dates) or base.steps_total != uncut.steps_total:
            tally.add("close_moves_schedule", event_id=eid, close_day=inp.close_day,
                      dates=[str(d) for d in base.dates], uncut=[str(d) for d in uncut.dates],
                      steps_total=base.steps_total, uncut_steps_total=uncut.steps_total)
        for c in _close_days(inp, settings.close_moves, rng):
            n_close_rebuilds += 1
            moved = build(replace(inp, close_day=c))
            if moved.steps_total != uncut.steps_total or not _is_prefix(moved.dates, uncut.dates):
                tally.add("close_moves_schedule", event_id=eid, close_day=c,
                          dates=[str(d) for d in moved.dates], uncut=[str(d) for d in uncut.dates],
                          steps_total=moved.steps_total, uncut_steps_total=uncut.steps_total)

    figures: dict[str, Any] = {
        "events": events.height, "schedule_rows": n_rows, "label_rebuilds": n_label_rebuilds,
        "close_rebuilds": n_close_rebuilds, "d_known_from_raw_prices": bool(raw_known),
        "violations": dict(sorted(tally.counts.items())),
    }
    figures["events_with_exposure_day"] = sum(1 for i in inps.values() if i.exposure_day is not None)
    for name in ("all_options", "before_t_all", "on_or_after_d_known", "on_or_after_exposure", "after_close",
                 "step_numbering",
                 "stored_vs_rebuilt", "label_changes_schedule", "close_moves_schedule", "no_dates"):
        figures[name] = tally.counts.get(name, 0)
    failures = [f"{k}: {v}" for k, v in sorted(tally.counts.items())]
    if failures:
        verdict, reason = FAIL, f"{sum(tally.counts.values())} violation(s): {', '.join(failures)}"
    elif builder_error:
        verdict, reason = INCONCLUSIVE, (f"stored schedules pass the invariants, but the schedule could not be "
                                         f"rebuilt ({builder_error})")
    else:
        verdict, reason = PASS, (f"{n_rows} dates of {events.height} events: every option offered, within "
                                 f"[t_all, min(d_known, close - 2, exposure day - 1)]; identical over {n_label_rebuilds} label "
                                 f"changes; prefix-stable over {n_close_rebuilds} earlier closes")
    if builder_error:
        figures["rebuild_error"] = builder_error
    return CheckResult("schedule", verdict, reason, figures, failures, tally.examples)
