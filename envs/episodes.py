"""Episode records (docs/design.md §5): the events, schedule and beliefs tables of a workspace
turned into one `EventEpisode` per event, with everything an episode looks up precomputed.

Options and their order come from the events table and are the same on every date (the option
set of an event never changes, docs/design.md §4); forecast dates come from the schedule; the
description shown on a date is the snapshot's, cut with `description_as_of`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

from forecast_env.envs.events.descriptions import description_as_of
from forecast_env.envs.events.tables import load_events
from forecast_env.errors import EventsError
from forecast_env.store import Workspace


class Quote(NamedTuple):
    """The market on one day for one option: day-mean YES price, normalized belief, last price."""

    price: float | None
    belief: float | None
    price_close: float | None = None


@dataclass(frozen=True)
class ForecastDate:
    """One scheduled forecast date of an event."""

    step: int
    steps_total: int
    day: date
    options: tuple[str, ...]  # the event's options, in the events table's order
    description: str  # as of `day`


@dataclass(frozen=True)
class EventEpisode:
    """What one episode needs: question, dates, label, and the market quotes of the days it looks up."""

    event_id: str
    question: str
    options: tuple[str, ...]
    type: str
    category: str | None
    label: str
    dates: tuple[ForecastDate, ...]
    beliefs: dict[date, dict[str, Quote]]  # day -> option -> quote
    description: str = ""  # the full snapshot text; cut per day with `description_on`

    def description_on(self, day: date) -> str:
        """The description as it could have read on `day`."""
        return description_as_of(self.description, day)

    def quote(self, day: date, option: str) -> Quote:
        """The market's quote for `option` on `day` (all None when unpriced)."""
        return self.beliefs.get(day, {}).get(option, Quote(None, None, None))


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def select_events(events: pl.DataFrame, split: str, event_ids: Sequence[str] | None, where: Path) -> pl.DataFrame:
    """The rows of `events` in `split` (`all` keeps every row), narrowed to `event_ids` when given."""
    if split != "all":
        events = events.filter(pl.col("split") == split)
    if event_ids is not None:
        wanted = list(dict.fromkeys(event_ids))
        known = set(events["event_id"].to_list())
        unknown = [e for e in wanted if e not in known]
        if unknown:
            raise EventsError(f"{where}: event id(s) {', '.join(unknown[:5])} are not in split {split!r}; "
                              "the split's ids are the event_id column of events/events.parquet, "
                              "or pass split='all'")
        events = events.filter(pl.col("event_id").is_in(wanted))
    return events


def quotes_by_event(beliefs: pl.DataFrame, days: pl.DataFrame) -> dict[str, dict[date, dict[str, Quote]]]:
    """event -> day -> option -> `Quote`, for the (event_id, day) pairs of `days`."""
    out: dict[str, dict[date, dict[str, Quote]]] = {}
    if not beliefs.height or not days.height:
        return out
    if "price_close" not in beliefs.columns:  # a workspace built before the close price was recorded
        beliefs = beliefs.with_columns(pl.lit(None, dtype=pl.Float64).alias("price_close"))
    sub = beliefs.join(days.unique(), on=["event_id", "day"], how="inner")
    for ev, day, opt, price, belief, close in sub.select(
            "event_id", "day", "option", "price", "belief", "price_close").iter_rows():
        out.setdefault(ev, {}).setdefault(day, {})[opt] = Quote(_num(price), _num(belief), _num(close))
    return out


def load_episodes(workspace: str | Path, split: str, event_ids: Sequence[str] | None = None) -> list[EventEpisode]:
    """The episodes of one split (`train`, `eval` or `all`), sorted by event id."""
    ws = Workspace.at(workspace)
    tables = load_events(ws.root)
    events = select_events(tables.events, split, event_ids, ws.root)
    ids = set(events["event_id"].to_list())
    schedule = tables.schedule.filter(pl.col("event_id").is_in(ids)).sort(["event_id", "step"])
    by_event_sched = {k[0]: df for k, df in schedule.group_by(["event_id"])} if schedule.height else {}
    # the forecast dates and the days before them (the show_market ablation's previous day)
    sched_days = schedule.select("event_id", day="forecast_date")
    days = pl.concat([sched_days, sched_days.with_columns(pl.col("day") - timedelta(days=1))])
    quotes = quotes_by_event(tables.beliefs, days)
    out = []
    for row in events.sort("event_id").iter_rows(named=True):
        ev = row["event_id"]
        sched = by_event_sched.get(ev)
        if sched is None or sched.height == 0:
            continue
        desc = row.get("description") or ""
        options = tuple(row["options"] or ())
        dates = tuple(
            ForecastDate(int(s["step"]), int(s["steps_total"]), s["forecast_date"], options,
                         description_as_of(desc, s["forecast_date"]))
            for s in sched.iter_rows(named=True)
        )
        out.append(EventEpisode(ev, row.get("question") or "", options, row.get("type") or "",
                                row.get("category"), row["label"], dates, quotes.get(ev, {}), desc))
    if not out:
        raise EventsError(f"{ws.root}: no events with a forecast schedule in split {split!r}; build events with "
                          "`forecast-env events build` or choose another split (train, eval, all)")
    return out
