"""Score tables: event weighting, market row, thirds, paired differences, base-rate reference."""

from __future__ import annotations

from datetime import date

import polars as pl
import pytest

from forecast_env.eval.report import metrics
from forecast_env.eval.report.render import load_run
from tests.support.eval_data import write_run

BOOT = metrics.Boot(draws=500)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return load_run(write_run(tmp_path_factory.mktemp("run")))


def test_agent_table_uniform_and_missing(run):
    rows = {r["agent"]: r for r in metrics.agent_table(run["forecasts"], run["market"], BOOT)}
    # uniform: binary 0.5, 3-option 2/3, events weighted equally: (0.5*3 + 2/3*2)/5
    assert rows["uniform"]["brier"]["value"] == pytest.approx((0.5 * 3 + 2 / 3 * 2) / 5)
    assert rows["sharp"]["missing"] == 1
    assert rows["sharp"]["brier"]["hi"] < rows["uniform"]["brier"]["lo"]
    assert rows["market"]["log_vs_market"] is None and rows["market"]["n_events"] == 5


def test_step_thirds_by_hand():
    f = pl.DataFrame({
        "agent": ["x"] * 7, "event_id": ["a", "a", "a", "b", "b", "c", "c"], "step": [1, 2, 3, 1, 2, 1, 4],
        "steps_total": [3, 3, 3, 2, 2, 4, 4], "brier": [0.9, 0.6, 0.3, 1.0, 0.0, 0.8, 0.2],
        "log_vs_market": [0.0] * 7, "market_prob": [0.5] * 7, "missing": [False] * 7,
    })
    rows = metrics.step_thirds(f, None, BOOT)
    # a: positions 0, .5, 1 -> all thirds; b: 0, 1 -> no middle; c: 0, 1 -> no middle
    assert [r["n_events"] for r in rows] == [1, 1, 1]
    assert [r["brier"]["value"] for r in rows] == pytest.approx([0.9, 0.6, 0.3])
    t = metrics.with_third(f)
    assert t.filter(pl.col("event_id") == "c")["third"].to_list() == [0, 2]


def test_paired_difference_and_significance(run):
    est = metrics.paired_difference(run["forecasts"], "sharp", "uniform", boot=BOOT)
    assert est.value < 0 and est.excludes(0.0)
    table = metrics.paired_table(run["forecasts"], BOOT)
    assert table[0]["a"] == "sharp" and table[0]["significant"]


def test_group_tables(run):
    by_type = metrics.group_table(run["forecasts"], run["market"], "type", BOOT)
    assert {(r["group"], r["agent"]) for r in by_type} >= {("binary", "uniform"), ("multi", "market")}
    uni = next(r for r in by_type if r["group"] == "multi" and r["agent"] == "uniform")
    assert uni["brier"]["value"] == pytest.approx(2 / 3)


def test_base_rate_reference(run):
    ref = metrics.base_rate_reference(run["forecasts"], BOOT)
    # binary labels: Yes, No, Yes -> P(Yes)=2/3 constant: Brier 2*(1/3)^2 on Yes events, 2*(2/3)^2 on the No event
    per = {r["agent"]: r for r in ref["agents"]}
    assert per["sharp"]["beats_base_rate"]
    assert per["uniform"]["value"] < 0.1


def test_quick_summary_counts(run):
    s = metrics.quick_summary(run["forecasts"]).to_dicts()
    assert [r["agent"] for r in s] == ["sharp", "uniform"]
    assert s[0]["missing"] == 1 and s[1]["missing"] == 0
    assert date(2026, 3, 4) in run["forecasts"]["forecast_date"].to_list()


def _uneven(with_close: bool = False) -> pl.DataFrame:
    """Agent x, two rollouts; rollout 1 misses (infrastructure) dates 2 and 3 of event a."""
    rows = []
    for eid, briers in (("a", {0: [0.9, 0.5, 0.1], 1: [0.9, None, None]}), ("b", {0: [0.2, 0.2, 0.2],
                                                                              1: [0.4, 0.4, 0.4]})):
        for r, bs in briers.items():
            for step, b in enumerate(bs, start=1):
                row = {"agent": "x", "event_id": eid, "rollout": r, "step": step, "steps_total": 3,
                       "brier": b, "accuracy": None if b is None else 1.0 - b, "missing": b is None,
                       "fallback": None, "market_prob": 0.5, "log_vs_market": None if b is None else -b}
                if with_close:
                    row.update(market_prob_close=0.6, log_vs_market_close=None if b is None else -2 * b)
                rows.append(row)
    return pl.DataFrame(rows)


def test_tables_average_dates_within_rollouts_then_rollouts():
    row = metrics.agent_table(_uneven(), None, BOOT)[0]
    assert row["missing"] == 2 and row["n_forecasts"] == 10
    # event a: mean(rollout 0 = 0.5, rollout 1 = 0.9) = 0.7; event b: 0.3; events equally: 0.5
    assert row["brier"]["value"] == pytest.approx(0.5)
    assert row["log_vs_market_close"] is None  # a run without the close price: no column, no figure
    # paired differences use the same order on the cells both agents scored
    y = _uneven().with_columns(agent=pl.lit("y"), brier=pl.lit(0.0), missing=pl.lit(False))
    est = metrics.paired_difference(pl.concat([_uneven(), y]), "x", "y", boot=BOOT)
    assert est.value == pytest.approx(0.5)


def test_log_score_vs_the_days_last_price():
    f = _uneven(with_close=True)
    assert metrics.market_comparisons(f) == ("log_vs_market", "log_vs_market_close")
    row = metrics.agent_table(f, None, BOOT)[0]
    assert row["log_vs_market"]["value"] == pytest.approx(-0.5)
    assert row["log_vs_market_close"]["value"] == pytest.approx(-1.0)
    thirds = metrics.step_thirds(f, None, BOOT)
    assert [r["log_vs_market_close"]["value"] for r in thirds] == pytest.approx([-2 * 0.6, -2 * 0.4, -2 * 0.2])
