"""The world of world mode (docs/design.md §5 "World mode"): the questions of a split on one shared
calendar, with the days each is listed and the dates on which it is scored.

Everything here is label-free except `WorldQuestion.episode.label`, which only scoring reads:

* the calendar is the split's window from the events config (`start`/`end` narrow it);
* a question's listing runs from its first eligible day (`max(start day, t_all)`) to
  `t_end day - buffer_days` (the last day of its forecast grid) or the world's end, whichever is
  first; an event is in the world when that grid lies inside the calendar;
* it stays listed, unscored, after its `d_known`/`closedTime` cut: its disappearance would tell;
* its scheduled (offered) forecast dates are scored exactly as in episode mode; the
  time-weighted Brier averages over its listed days before the cut;
* the listing order is the first listed day, then the question id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from forecast_env.config import load_config
from forecast_env.envs.episodes import EventEpisode, load_episodes
from forecast_env.envs.events.splits import Splits
from forecast_env.envs.events.tables import load_events
from forecast_env.errors import EventsError


@dataclass(frozen=True)
class WorldQuestion:
    """One event of the world: its episode record and its days on the world's calendar."""

    episode: EventEpisode
    first_day: date  # first listed day
    last_day: date  # last listed day
    cut: date | None  # scored days lie before it (None: never cut)

    @property
    def question_id(self) -> str:
        return self.episode.event_id

    @property
    def scheduled(self) -> dict[date, int]:
        """Scored date -> its step in the event's schedule."""
        return {d.day: d.step for d in self.episode.dates}

    def listed_on(self, day: date) -> bool:
        return self.first_day <= day <= self.last_day

    def eligible_days(self) -> list[date]:
        """The listed days before the cut: the days the time-weighted Brier averages over."""
        last = self.last_day if self.cut is None else min(self.last_day, self.cut - timedelta(days=1))
        return [self.first_day + timedelta(days=i) for i in range((last - self.first_day).days + 1)]

    def compact(self) -> dict[str, object]:
        """The question as the day's list shows it."""
        return {"question_id": self.question_id, "question": self.episode.question,
                "options": list(self.episode.options)}


@dataclass(frozen=True)
class World:
    """The calendar and its questions, in listing order."""

    split: str
    start: date
    end: date
    questions: tuple[WorldQuestion, ...]

    @property
    def days(self) -> list[date]:
        return [self.start + timedelta(days=i) for i in range((self.end - self.start).days + 1)]

    @property
    def world_id(self) -> str:
        """The id a world run's rows carry where an event id would stand (tool calls, notebook, run parts)."""
        return f"world-{self.split}-{self.start.isoformat()}-{self.end.isoformat()}"

    def listed(self, day: date) -> list[WorldQuestion]:
        """The questions listed on `day`, in listing order."""
        return [q for q in self.questions if q.listed_on(day)]


def split_window(split: str, events_config: dict | None = None) -> tuple[date, date]:
    """The split's calendar [first day, last day] from `events.splits` (`all`: every split's)."""
    windows = Splits.from_config(events_config or load_config("events")).windows
    chosen = [(s, e) for name, s, e in windows if split in (name, "all")]
    if not chosen:
        raise EventsError(f"split {split!r} has no window in events.splits (known: "
                          f"{', '.join(n for n, _, _ in windows)}, all)")
    return min(s for s, _ in chosen).date(), (max(e for _, e in chosen) - timedelta(days=1)).date()


def _as_day(value: str | date | None, what: str) -> date | None:
    if value is None or isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError as exc:
        raise EventsError(f"world {what} {value!r} is not an ISO date (YYYY-MM-DD)") from exc


def load_world(workspace: str | Path, split: str = "eval", start: str | date | None = None,
               end: str | date | None = None, event_ids: Sequence[str] | None = None) -> World:
    """The world of one split (narrowed to [`start`, `end`] and to `event_ids` when given)."""
    cfg = load_config("events")
    first, last = split_window(split, cfg)
    start_d, end_d = _as_day(start, "start"), _as_day(end, "end")
    first = max(first, start_d) if start_d else first
    last = min(last, end_d) if end_d else last
    if last < first:
        raise EventsError(f"world calendar is empty: start {first} is after end {last}")
    buffer = int(cfg["schedule"]["buffer_days"])
    events = load_events(workspace).events
    missing = [c for c in ("start_day", "t_all", "end_day", "cut") if c not in events.columns]
    if missing or (events.height and events["end_day"].null_count() == events.height):
        raise EventsError(f"{workspace}: the events table has no scheduled end (end_day) or first eligible day; "
                          "rebuild it with `forecast-env events build` (world mode needs them)")
    days = {r["event_id"]: r for r in events.select("event_id", "start_day", "t_all", "end_day", "cut").iter_rows(
        named=True)}
    questions = []
    for ep in load_episodes(workspace, split, event_ids):
        row = days[ep.event_id]
        if row["end_day"] is None or row["start_day"] is None:
            continue
        q_first = max(row["start_day"], row["t_all"]) if row["t_all"] is not None else row["start_day"]
        q_last = row["end_day"] - timedelta(days=buffer)
        if q_first < first or q_last > last or q_last < q_first:
            continue  # its grid is not inside the calendar
        questions.append(WorldQuestion(ep, q_first, min(q_last, last), row["cut"]))
    questions.sort(key=lambda q: (q.first_day, q.question_id))
    if not questions:
        raise EventsError(f"{workspace}: no event of split {split!r} has its forecast grid inside the world's "
                          f"calendar {first}..{last}; widen start/end or build events for this window")
    return World(split, first, last, tuple(questions))

