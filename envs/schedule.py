"""Forecast schedules (SPEC section 4, "Forecast schedule").

`D_Q` = UTC days from the start day to the close day; eligible `E_Q` = the days of `D_Q` up to
close day - buffer (2). Question-side hygiene comes first: eligible days on which the realized
option's leg had not started are removed (and reported), then
`T_Q = min(T_max, max(1, ceil(|E_Q| / 7)))` is computed on what remains. Each eligible day e gets
`score = 0.5 * move_e + 0.5 * activity_e`, where move_e is the total-variation distance between the
belief vectors of e and e - 1 over the options defined on both days (0 when either day has no
belief) and activity_e the number of indexed articles published on e, both max-normalized over
`E_Q` (all zeros stay zeros). `E_Q` is split into `T_Q` contiguous bins with `numpy.array_split`
semantics (earlier bins take the remainder) and the highest score of each bin is chosen (ties: the
earliest day).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

import numpy as np


@dataclass
class ScheduleStep:
    """One forecast date of an event."""

    step: int  # 1-based
    steps_total: int
    forecast_date: date
    options: list[str]
    score: float


@dataclass
class Schedule:
    """The steps of one event and the eligible dates removed by hygiene."""

    steps: list[ScheduleStep]
    dropped_dates: list[date] = field(default_factory=list)
    eligible: list[date] = field(default_factory=list)


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
    close_day: date,
    options: Sequence[str],
    option_start: Mapping[str, date],
    label: str,
    beliefs: Mapping[date, Mapping[str, float]],
    day_counts: Mapping[date, int],
    buffer_days: int = 2,
    max_steps: int = 5,
    days_per_step: int = 7,
    movement_weight: float = 0.5,
    activity_weight: float = 0.5,
) -> Schedule:
    """The forecast dates of one event (see the module docstring for the exact rule)."""
    last = close_day - timedelta(days=buffer_days)
    n = (last - start_day).days + 1
    grid = [start_day + timedelta(days=i) for i in range(max(0, n))]
    label_start = option_start.get(label, start_day)
    eligible = [d for d in grid if d >= label_start]
    dropped = [d for d in grid if d < label_start]
    if not eligible:
        return Schedule([], dropped, eligible)
    t_q = min(max_steps, max(1, math.ceil(len(eligible) / days_per_step)))

    move = np.array(
        [total_variation(beliefs.get(d, {}), beliefs.get(d - timedelta(days=1), {})) for d in eligible],
        dtype=np.float64,
    )
    act = np.array([float(day_counts.get(d, 0)) for d in eligible], dtype=np.float64)
    score = movement_weight * _max_normalize(move) + activity_weight * _max_normalize(act)

    steps = []
    for i, idx in enumerate(np.array_split(np.arange(len(eligible)), t_q)):
        best = int(idx[int(np.argmax(score[idx]))])  # argmax returns the first maximum: earliest day
        d = eligible[best]
        offered = [o for o in options if option_start.get(o, start_day) <= d]
        steps.append(ScheduleStep(i + 1, t_q, d, offered, float(score[best])))
    return Schedule(steps, dropped, eligible)
