"""Market-side filters: span, faithful days, unfaithful runs, learning signal."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np

from forecast_env.envs.events.filters import EventSeries, MarketFilters, longest_run

S = date(2025, 7, 1)


def _series(n, trades, belief, kind="binary"):
    days = [S + timedelta(days=i) for i in range(n)]
    return EventSeries(kind, S, days[-1], {d: t for d, t in zip(days, trades) if t is not None},
                       {d: b for d, b in zip(days, belief) if b is not None})


GOOD = (4, 101.0)  # strictly above the binary thresholds (3 trades, 100 shares)
EDGE = (3, 500.0)  # 3 trades is not > 3


def test_span_counts_both_ends():
    f = MarketFilters()
    assert f.check(_series(7, [GOOD] * 7, [0.3, 0.6] * 4)).reason == "too_short"
    assert f.check(_series(8, [GOOD] * 8, [0.3, 0.6] * 4)).keep


def test_faithful_thresholds_are_strict_and_type_specific():
    f = MarketFilters()
    out = f.check(_series(10, [EDGE] * 10, [0.3, 0.6] * 5))
    assert out.reason == "low_faithful_share" and out.metrics["rho"] == 0.0
    assert f.check(_series(10, [(3, 51.0)] * 10, [0.3, 0.6] * 5, kind="multi")).keep  # multi: > 2 and > 50
    assert f.check(_series(10, [(3, 50.0)] * 10, [0.3, 0.6] * 5, kind="multi")).reason == "low_faithful_share"


def test_long_unfaithful_run():
    f = MarketFilters()
    trades = [GOOD] * 10 + [None] * 8 + [GOOD] * 12
    out = f.check(_series(30, trades, [0.3, 0.6] * 15))
    assert out.stage == "activity" and out.reason == "long_unfaithful_run"
    assert out.metrics["max_unfaithful_run"] == 8 and abs(out.metrics["rho"] - 22 / 30) < 1e-12
    trades = [GOOD] * 10 + [None] * 7 + [GOOD] * 13
    assert f.check(_series(30, trades, [0.3, 0.6] * 15)).keep


def test_nearly_certain_and_flat():
    f = MarketFilters()
    out = f.check(_series(10, [GOOD] * 10, [0.97, 0.98] * 5))
    assert (out.stage, out.reason) == ("signal", "nearly_certain")
    out = f.check(_series(10, [GOOD] * 10, [0.40, 0.401] * 5))
    assert (out.stage, out.reason) == ("signal", "flat_prices")
    assert abs(out.metrics["total_variation"] - 9 * 0.001) < 1e-9


def test_total_variation_only_over_adjacent_faithful_observed_days():
    f = MarketFilters(min_total_variation=0.0)
    trades = [GOOD, GOOD, None, GOOD, GOOD, GOOD, GOOD, GOOD, GOOD, GOOD]
    belief = [0.2, 0.4, 0.9, 0.1, 0.5, None, 0.5, 0.5, 0.5, 0.5]
    out = f.check(_series(10, trades, belief))
    # pairs: (0,1) 0.2; (3,4) 0.4; day 2 unfaithful, day 5 unobserved break the chain
    assert abs(out.metrics["total_variation"] - 0.6) < 1e-12
    assert out.metrics["signal_days"] == 8


def test_longest_run():
    assert longest_run(np.array([True, True, False, True, True, True])) == 3
    assert longest_run(np.array([], dtype=bool)) == 0
