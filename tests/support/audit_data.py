"""What the audit's tests share: the fast audit settings and the label-dependent schedule built before the fix."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np

from forecast_env.eval.audit.run import AuditSettings
from forecast_env.eval.audit.schedule import BuiltSchedule, ScheduleInputs

#: settings small enough for the `micro` world: a few probes, days, queries and replayed events
FAST = AuditSettings(probes=60, probe_days=3, queries_per_day=6, replay_events=2, draws=500)

#: the settings of the `siblings` worlds' tests (checks 1 and 6)
SIBLINGS_FAST = AuditSettings(draws=400)


def build_old_schedule(inp: ScheduleInputs) -> BuiltSchedule:
    """The schedule as built before the fix: grid from the ACTUAL close, dates before the realized
    option's leg started dropped, only the started legs offered (label-dependent)."""
    last = inp.close_day - timedelta(days=2)
    grid = [inp.start_day + timedelta(days=i) for i in range(max(0, (last - inp.start_day).days + 1))]
    label_start = inp.option_start.get(inp.label, inp.start_day)
    eligible = [d for d in grid if d >= label_start]
    if not eligible:
        return BuiltSchedule(0, (), ())
    t_q = min(5, max(1, math.ceil(len(eligible) / 7)))
    dates, offered = [], []
    for idx in np.array_split(np.arange(len(eligible)), t_q):
        d = eligible[int(idx[0])]
        dates.append(d)
        offered.append(tuple(o for o in inp.options if inp.option_start.get(o, inp.start_day) <= d))
    return BuiltSchedule(t_q, tuple(dates), tuple(offered))
