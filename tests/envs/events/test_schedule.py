"""Forecast schedules: T_Q, bins with array_split semantics, scores within bins, the cut, d_known."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from forecast_env.envs.events.schedule import (
    build_schedule,
    forecast_grid,
    known_day,
    known_time,
    schedule_cut,
    total_variation,
)

S = date(2025, 7, 1)


def days(n):
    return [S + timedelta(days=i) for i in range(n)]


def ts(d: date, hour: int = 12) -> int:
    return int(datetime(d.year, d.month, d.day, hour, tzinfo=UTC).timestamp())


def test_t_q_and_bins_follow_array_split():
    # 20-day span: eligible 18 days -> T_Q = 3, bins of 6, 6, 6; 24-day span: 22 -> 4 bins 6, 6, 5, 5
    for span, t_q, sizes in ((20, 3, [6, 6, 6]), (24, 4, [6, 6, 5, 5]), (60, 5, [12, 12, 12, 11, 11]), (3, 1, [1])):
        grid = days(span)
        elig = grid[: span - 2]
        assert t_q == min(5, max(1, math.ceil(len(elig) / 7)))
        counts = {d: 1 for d in grid}  # flat activity, no beliefs: every score 0.5 -> earliest of each bin
        s = build_schedule(S, None, grid[-1], ["Yes", "No"], {}, counts)
        assert len(s.steps) == t_q == s.steps_total
        starts = np.cumsum([0] + sizes[:-1])
        assert [x.forecast_date for x in s.steps] == [elig[i] for i in starts]
        assert [x.bin_last - x.bin_first for x in s.steps] == [timedelta(days=n - 1) for n in sizes]
        assert [x.step for x in s.steps] == list(range(1, t_q + 1))
        assert all(x.steps_total == t_q for x in s.steps)


def test_highest_score_in_each_bin_normalized_within_the_bin():
    grid = days(16)  # eligible 14 -> T_Q 2, bins 7 + 7
    counts = {d: 10 for d in grid}
    counts[grid[3]] = 100  # activity peak in bin 1
    counts[grid[12]] = 20  # bin 2's own peak: normalized within bin 2, it scores 1.0 there
    beliefs = {d: {"Yes": 0.5, "No": 0.5} for d in grid}
    beliefs[grid[10]] = {"Yes": 0.9, "No": 0.1}  # movement on day 10 and back on day 11
    s = build_schedule(S, None, grid[-1], ["Yes", "No"], beliefs, counts)
    assert [x.forecast_date for x in s.steps] == [grid[3], grid[10]]
    assert s.steps[0].score == 0.5 * 0 + 0.5 * 1.0
    assert s.steps[1].score == 0.5 * 1.0 + 0.5 * 0.5


def test_a_bins_date_ignores_data_in_later_bins():
    """A huge move in the last bin (the resolution jump) changes no earlier bin's date or score."""
    grid = days(30)
    rng = np.random.default_rng(3)
    beliefs = {d: {"Yes": float(p), "No": float(1 - p)} for d, p in zip(grid, rng.uniform(0.4, 0.6, 30))}
    counts = {d: int(c) for d, c in zip(grid, rng.integers(0, 30, 30))}
    a = build_schedule(S, None, grid[-1], ["Yes", "No"], beliefs, counts)
    jumped = dict(beliefs)
    jumped[grid[25]] = {"Yes": 0.999, "No": 0.001}
    more = dict(counts)
    more[grid[26]] = 10_000
    b = build_schedule(S, None, grid[-1], ["Yes", "No"], jumped, more)
    assert a.uncut[:-1] == b.uncut[:-1] and a.uncut[-1] != b.uncut[-1]


def test_total_variation_over_common_options():
    assert abs(total_variation({"A": 0.5, "B": 0.5}, {"A": 0.2, "B": 0.8}) - 0.3) < 1e-12
    assert total_variation({"A": 0.5}, {"B": 0.5}) == 0.0
    assert total_variation({}, {"A": 1.0}) == 0.0


def test_grid_starts_when_the_last_leg_started_and_every_date_offers_every_option():
    grid = days(20)
    s = build_schedule(S, S + timedelta(days=9), grid[-1], ["A", "B", "C"], {}, {d: 1 for d in grid})
    assert s.grid == forecast_grid(S, S + timedelta(days=9), grid[-1]) == grid[9:18]
    assert all(x.options == ["A", "B", "C"] for x in s.steps) and s.steps_total == 2
    assert build_schedule(S, S + timedelta(days=18), grid[-1], ["A"], {}, {}).steps_total == 0


def test_known_time_is_the_start_of_the_final_run_above_the_threshold():
    d = [S + timedelta(days=i) for i in range(6)]
    obs = [(ts(d[0]), 0.5), (ts(d[1]), 0.98), (ts(d[2]), 0.6), (ts(d[3], 20), 0.97), (ts(d[4]), 0.99), (ts(d[5]), 1.0)]
    assert known_time(obs) == ts(d[3], 20)
    assert known_time(obs[:-1] + [(ts(d[5]), 0.96)]) is None
    assert known_time([]) is None and known_time([(1, float("nan"))]) is None
    # evening announcement on day 3 -> d_known is day 3; the earliest over the legs wins
    assert known_day([obs, [(ts(d[4]), 0.99)]]) == d[3]
    assert known_day([[(ts(d[0]), 0.2)]]) is None
    assert known_day([obs], threshold=0.995) == d[5]


def test_cut_is_the_earlier_of_d_known_and_close_minus_one():
    assert schedule_cut(None, date(2025, 7, 20)) == date(2025, 7, 19)
    assert schedule_cut(date(2025, 7, 10), date(2025, 7, 20)) == date(2025, 7, 10)
    assert schedule_cut(date(2025, 7, 25), date(2025, 7, 20)) == date(2025, 7, 19)


def test_cut_keeps_whole_bins_before_it():
    grid = days(30)  # 28 eligible days -> 4 bins of 7
    full = build_schedule(S, None, grid[-1], ["Yes", "No"], {}, {d: 1 for d in grid})
    for cut_i, offered in ((28, 4), (21, 3), (20, 2), (7, 1), (6, 0), (0, 0)):
        s = build_schedule(S, None, grid[-1], ["Yes", "No"], {}, {d: 1 for d in grid}, cut=grid[cut_i])
        assert s.steps == full.steps[:offered] and s.steps_total == 4
        assert all(x.bin_last < grid[cut_i] for x in s.steps)
    assert full.tau_star == grid[27]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 80), seed=st.integers(0, 10_000), late=st.integers(0, 10), cut=st.integers(-5, 90))
def test_schedule_invariants(n, seed, late, cut):
    rng = np.random.default_rng(seed)
    grid = days(n)
    beliefs = {d: {"A": float(p), "B": float(1 - p)} for d, p in zip(grid, rng.random(n)) if rng.random() < 0.8}
    counts = {d: int(c) for d, c in zip(grid, rng.integers(0, 50, n))}
    t_all = S + timedelta(days=late)
    a = build_schedule(S, t_all, grid[-1], ["A", "B"], beliefs, counts)
    b = build_schedule(S, t_all, grid[-1], ["A", "B"], beliefs, counts, cut=S + timedelta(days=cut))
    elig = [d for d in grid[: max(0, n - 2)] if d >= t_all]
    assert a.grid == b.grid == elig and a.uncut == b.uncut
    if not elig:
        assert a.steps == [] and a.steps_total == 0
        return
    t_q = min(5, max(1, math.ceil(len(elig) / 7)))
    assert len(a.steps) == t_q == b.steps_total
    assert b.steps == a.steps[: len(b.steps)]  # the cut keeps a prefix
    assert all(x.bin_last < S + timedelta(days=cut) for x in b.steps)
    bins = np.array_split(np.arange(len(elig)), t_q)
    for st_, idx in zip(a.steps, bins):
        assert st_.forecast_date in [elig[i] for i in idx]  # one per bin, in order
        assert (st_.bin_first, st_.bin_last) == (elig[idx[0]], elig[idx[-1]])
        assert 0.0 <= st_.score <= 1.0
