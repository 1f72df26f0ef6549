"""Forecast schedules: T_Q, bins with array_split semantics, scores, hygiene, determinism."""

from __future__ import annotations

import math
from datetime import date, timedelta

import numpy as np
from forecast_env.envs.schedule import build_schedule, total_variation
from hypothesis import given, settings
from hypothesis import strategies as st

S = date(2025, 7, 1)


def days(n):
    return [S + timedelta(days=i) for i in range(n)]


def test_t_q_and_bins_follow_array_split():
    # 20-day span: eligible 18 days -> T_Q = 3, bins of 6, 6, 6; 24-day span: 22 -> 4 bins 6, 6, 5, 5
    for span, t_q, sizes in ((20, 3, [6, 6, 6]), (24, 4, [6, 6, 5, 5]), (60, 5, [12, 12, 12, 11, 11]), (3, 1, [1])):
        grid = days(span)
        elig = grid[: span - 2]
        assert t_q == min(5, max(1, math.ceil(len(elig) / 7)))
        counts = {d: 1 for d in grid}  # flat activity, no beliefs: every score 0.5 -> earliest of each bin
        s = build_schedule(S, grid[-1], ["Yes", "No"], {}, "Yes", {}, counts)
        assert len(s.steps) == t_q
        starts = np.cumsum([0] + sizes[:-1])
        assert [x.forecast_date for x in s.steps] == [elig[i] for i in starts]
        assert [x.step for x in s.steps] == list(range(1, t_q + 1))
        assert all(x.steps_total == t_q for x in s.steps)


def test_highest_score_in_each_bin():
    grid = days(16)  # eligible 14 -> T_Q 2, bins 7 + 7
    counts = {d: 10 for d in grid}
    counts[grid[3]] = 100  # activity peak in bin 1
    beliefs = {d: {"Yes": 0.5, "No": 0.5} for d in grid}
    beliefs[grid[10]] = {"Yes": 0.9, "No": 0.1}  # movement on day 10 and back on day 11
    s = build_schedule(S, grid[-1], ["Yes", "No"], {}, "Yes", beliefs, counts)
    assert [x.forecast_date for x in s.steps] == [grid[3], grid[10]]
    assert s.steps[0].score == 0.5 * 0 + 0.5 * 1.0
    assert s.steps[1].score == 0.5 * 1.0 + 0.5 * 0.1


def test_total_variation_over_common_options():
    assert abs(total_variation({"A": 0.5, "B": 0.5}, {"A": 0.2, "B": 0.8}) - 0.3) < 1e-12
    assert total_variation({"A": 0.5}, {"B": 0.5}) == 0.0
    assert total_variation({}, {"A": 1.0}) == 0.0


def test_late_legs_not_offered_and_unstarted_realized_leg_dates_dropped():
    grid = days(20)
    starts = {"A": S, "B": S + timedelta(days=4), "C": S + timedelta(days=9)}
    s = build_schedule(S, grid[-1], ["A", "B", "C"], starts, "B", {}, {d: 1 for d in grid})
    assert s.dropped_dates == grid[:4]
    assert all(x.forecast_date >= starts["B"] for x in s.steps)
    for step in s.steps:
        assert step.options == [o for o in ("A", "B", "C") if starts[o] <= step.forecast_date]
    assert len(s.eligible) == 14 and len(s.steps) == 2


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 80), seed=st.integers(0, 10_000), late=st.integers(0, 10))
def test_schedule_invariants(n, seed, late):
    rng = np.random.default_rng(seed)
    grid = days(n)
    beliefs = {d: {"A": float(p), "B": float(1 - p)} for d, p in zip(grid, rng.random(n)) if rng.random() < 0.8}
    counts = {d: int(c) for d, c in zip(grid, rng.integers(0, 50, n))}
    starts = {"A": S, "B": S + timedelta(days=late)}
    a = build_schedule(S, grid[-1], ["A", "B"], starts, "B", beliefs, counts)
    b = build_schedule(S, grid[-1], ["A", "B"], starts, "B", beliefs, counts)
    assert [(x.forecast_date, x.score) for x in a.steps] == [(x.forecast_date, x.score) for x in b.steps]
    elig = [d for d in grid[: max(0, n - 2)] if d >= starts["B"]]
    assert a.eligible == elig
    if not elig:
        assert a.steps == []
        return
    t_q = min(5, max(1, math.ceil(len(elig) / 7)))
    assert len(a.steps) == t_q
    bins = np.array_split(np.arange(len(elig)), t_q)
    for st_, idx in zip(a.steps, bins):
        assert st_.forecast_date in [elig[i] for i in idx]  # one per bin, in order
        assert 0.0 <= st_.score <= 1.0
