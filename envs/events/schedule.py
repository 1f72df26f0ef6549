"""Forecast schedules (docs/design.md §4 "Forecast schedule"): pure, label-free functions.

The rule, in the order the build applies it:

1. `t_all` (`options_start_day`): the UTC day on which the event's LAST leg started; a leg's start
   is its `startDate`, except in a `negRiskAugmented` bundle, where placeholders are renamed and a
   leg starts on the day of its first trade. Every option is on offer from the first date.
2. The grid `G_Q` (`forecast_grid`): UTC days from `max(start day, t_all)` to `t_end day - 2`,
   where `t_end` is the SCHEDULED end (max `endDate`), never the actual close.
3. `T_Q = min(T_max, max(1, ceil(|G_Q| / 7)))` (`steps_total`); `G_Q` is split into `T_Q`
   contiguous bins with `numpy.array_split` semantics (earlier bins take the remainder).
4. Inside each bin, market movement (total-variation distance between the belief vectors of day e
   and e - 1) and corpus activity (articles visible on e) are max-normalized over the bin's own
   days; `score = 0.5 * move + 0.5 * activity`; the highest score is the bin's date (ties: the
   earliest). A bin's date therefore depends only on data inside that bin.
5. The cut (`schedule_cut`): `cut = min(d_known, t_close day - 1)`; a bin is offered only when all
   its days lie before `cut`. The offered dates are a prefix of the uncut schedule and
   `steps_total` stays `T_Q` whatever happens at the end.
6. `d_known` (`known_day`): for each option, its own leg's YES-price observations up to the leg's
   close (binary: `p` and `1 - p`, never the normalized belief); `t_k` = the earliest observation
   from which every later one is >= 0.97; `d_known` = the UTC day of `min_k t_k`.

Nothing here takes the label: the schedule of an event is identical whatever its answer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import numpy as np


@dataclass(frozen=True)
class ScheduleStep:
    """One forecast date of an event: its bin, its score, and every option (the set never changes)."""

    step: int  # 1-based
    steps_total: int
    forecast_date: date
    options: list[str]
    score: float
    bin_first: date
    bin_last: date


@dataclass(frozen=True)
class Schedule:
    """The schedule of one event: the uncut steps fixed from `t_end`, and the offered prefix."""

    grid: list[date]
    uncut: list[ScheduleStep]
    cut: date | None  # offered bins lie wholly before this day; None: nothing cut

    @property
    def steps_total(self) -> int:
        """`T_Q` (0 when the grid is empty)."""
        return len(self.uncut)

    @property
    def steps(self) -> list[ScheduleStep]:
        """The offered steps: the bins whose every day is before the cut (a prefix of `uncut`)."""
        if self.cut is None:
            return list(self.uncut)
        out = []
        for s in self.uncut:
            if s.bin_last >= self.cut:
                break
            out.append(s)
        return out

    @property
    def tau_star(self) -> date | None:
        """The last eligible day: the last day of the last offered bin (None when none is offered)."""
        steps = self.steps
        return steps[-1].bin_last if steps else None


def _day_of(t: int | float) -> date:
    return datetime.fromtimestamp(t, tz=UTC).date()


def options_start_day(leg_starts: Iterable[date]) -> date | None:
    """`t_all`: the day on which the last leg started (None for no legs)."""
    days = list(leg_starts)
    return max(days) if days else None


def forecast_grid(start_day: date, t_all: date | None, end_day: date, buffer_days: int = 2) -> list[date]:
    """`G_Q`: the UTC days from `max(start_day, t_all)` to `end_day - buffer_days` (both included)."""
    first = max(start_day, t_all) if t_all is not None else start_day
    last = end_day - timedelta(days=buffer_days)
    return [first + timedelta(days=i) for i in range(max(0, (last - first).days + 1))]


def steps_total(n_days: int, max_steps: int = 5, days_per_step: int = 7) -> int:
    """`T_Q = min(T_max, max(1, ceil(n / 7)))` for a non-empty grid of `n_days` days, else 0."""
    if n_days <= 0:
        return 0
    return min(max_steps, max(1, math.ceil(n_days / days_per_step)))


def known_time(observations: Sequence[tuple[int, float]], threshold: float = 0.97) -> int | None:
    """The earliest time from which every later observation is >= `threshold` (None when the last is below).

    `observations` are (unix seconds, YES price) of one leg up to its close, in time order.
    """
    t_k: int | None = None
    for t, p in reversed(observations):
        if not p >= threshold:  # NaN counts as below
            break
        t_k = t
    return t_k


def known_day(legs: Iterable[Sequence[tuple[int, float]]], threshold: float = 0.97) -> date | None:
    """`d_known`: the UTC day of the earliest `known_time` over the legs (None when no leg is known)."""
    times = [t for obs in legs if (t := known_time(obs, threshold)) is not None]
    return _day_of(min(times)) if times else None


def schedule_cut(d_known: date | None, close_day: date, buffer_days: int = 2) -> date:
    """`cut = min(d_known, close_day - 1)` (with the default buffer of 2 days: `close_day - (buffer - 1)`)."""
    by_close = close_day - timedelta(days=buffer_days - 1)
    return by_close if d_known is None else min(d_known, by_close)


def total_variation(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """0.5 * sum |a_k - b_k| over the options defined in both (0 when either is empty)."""
    common = [k for k in a if k in b]
    if not common:
        return 0.0
    return 0.5 * float(sum(abs(a[k] - b[k]) for k in common))


def _max_normalize(x: np.ndarray) -> np.ndarray:
    m = float(x.max()) if x.size else 0.0
    return x / m if m > 0 else np.zeros_like(x)


def build_schedule(
    start_day: date,
    t_all: date | None,
    end_day: date,
    options: Sequence[str],
    beliefs: Mapping[date, Mapping[str, float]],
    day_counts: Mapping[date, int],
    cut: date | None = None,
    *,
    buffer_days: int = 2,
    max_steps: int = 5,
    days_per_step: int = 7,
    movement_weight: float = 0.5,
    activity_weight: float = 0.5,
) -> Schedule:
    """The schedule of one event (see the module docstring); `end_day` is the day of `t_end`."""
    grid = forecast_grid(start_day, t_all, end_day, buffer_days)
    t_q = steps_total(len(grid), max_steps, days_per_step)
    uncut: list[ScheduleStep] = []
    if t_q:
        for i, idx in enumerate(np.array_split(np.arange(len(grid)), t_q)):
            days = [grid[j] for j in idx]
            move = np.array([total_variation(beliefs.get(d, {}), beliefs.get(d - timedelta(days=1), {}))
                             for d in days], dtype=np.float64)
            act = np.array([float(day_counts.get(d, 0)) for d in days], dtype=np.float64)
            score = movement_weight * _max_normalize(move) + activity_weight * _max_normalize(act)
            best = int(np.argmax(score))  # argmax returns the first maximum: the earliest day
            uncut.append(ScheduleStep(i + 1, t_q, days[best], list(options), float(score[best]), days[0], days[-1]))
    return Schedule(grid, uncut, cut)


def fixed_schedule(dates: Sequence[date], options: Sequence[str], cut: date | None = None) -> Schedule:
    """A schedule on given forecast dates (ForecastBench rounds' freeze days), each date its own one-day bin.

    No grid search and no scores (1.0): the dates are the source's, fixed before any outcome. The cut works
    as for every schedule: a date on or after it is not offered, and neither is any later one.
    """
    days = sorted(set(dates))
    uncut = [ScheduleStep(i + 1, len(days), d, list(options), 1.0, d, d) for i, d in enumerate(days)]
    return Schedule(list(days), uncut, cut)
