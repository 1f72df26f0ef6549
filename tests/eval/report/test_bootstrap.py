"""Event-clustered bootstrap and the averaging order (docs/design.md §7): known answers."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from forecast_env.eval.report.bootstrap import bootstrap_means, clustered_mean, event_means


def test_constant_data_gives_zero_width_interval():
    est = bootstrap_means(np.full(30, 0.25))
    assert est.value == est.lo == est.hi == 0.25
    assert est.n_events == 30


def test_interval_contains_mean_and_shrinks_with_n():
    rng = np.random.default_rng(3)
    small = bootstrap_means(rng.normal(1.0, 1.0, 20))
    large = bootstrap_means(rng.normal(1.0, 1.0, 2000))
    for est in (small, large):
        assert est.lo <= est.value <= est.hi
    assert (large.hi - large.lo) < (small.hi - small.lo) / 5
    assert large.lo < 1.0 < large.hi


def test_deterministic_with_seed():
    v = np.random.default_rng(5).normal(size=12)
    assert bootstrap_means(v, seed=0) == bootstrap_means(v, seed=0)
    assert bootstrap_means(v, seed=0) != bootstrap_means(v, seed=1)


def _frame(rollouts: int) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for e in range(25):
        base = rng.normal()
        for step in (1, 2):
            for r in range(rollouts):
                rows.append({"event_id": f"e{e:02d}", "step": step, "rollout": r, "x": base + 0.1 * step})
    return pl.DataFrame(rows)


def test_duplicating_rollouts_does_not_narrow_the_interval():
    one, five = clustered_mean(_frame(1), "x"), clustered_mean(_frame(5), "x")
    assert _frame(5)["rollout"].n_unique() == 5
    assert one.n_events == five.n_events == 25
    for a, b in ((one.value, five.value), (one.lo, five.lo), (one.hi, five.hi)):
        assert abs(a - b) < 1e-12


def test_rollouts_weigh_equally_whatever_dates_they_miss():
    # event a, rollout 0 scored dates 1-3 (0.9, 0.5, 0.1); rollout 1 only date 1 (0.9), dates 2-3 missing.
    # Dates within each rollout first: mean(0.5, 0.9) = 0.7 (rollouts per date first would give 0.5).
    f = pl.DataFrame({"event_id": ["a"] * 4 + ["b"] * 2, "rollout": [0, 0, 0, 1, 0, 1],
                      "step": [1, 2, 3, 1, 1, 1], "x": [0.9, 0.5, 0.1, 0.9, 0.2, 0.4]})
    em = event_means(f, "x")
    assert em["x"].to_list() == pytest.approx([0.7, 0.3])
    assert clustered_mean(f, "x").value == pytest.approx(0.5)
    # nested levels: dates within (agent, rollout), rollouts within agent, agents within the event
    g = f.with_columns(agent=pl.Series(["p", "p", "p", "q", "p", "p"]))
    assert event_means(g, "x", levels=("agent", "rollout"))["x"].to_list() == pytest.approx([(0.5 + 0.9) / 2, 0.3])


def test_events_weighted_equally():
    # event a: 1 date of value 0; event b: 3 dates of value 1 -> mean of event means = 0.5, not 0.75
    f = pl.DataFrame({"event_id": ["a", "b", "b", "b"], "step": [1, 1, 2, 3], "x": [0.0, 1.0, 1.0, 1.0]})
    assert event_means(f, "x")["x"].to_list() == [0.0, 1.0]
    assert clustered_mean(f, "x").value == 0.5


def test_nan_and_null_are_dropped():
    f = pl.DataFrame({"event_id": ["a", "b", "c"], "step": [1, 1, 1], "x": [1.0, None, float("nan")]})
    assert clustered_mean(f, "x").n_events == 1
