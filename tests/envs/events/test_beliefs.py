"""Daily market beliefs and trades: hand-computed cases."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import polars as pl
import pytest

from forecast_env.envs.events.beliefs import daily_beliefs, daily_trades
from forecast_env.envs.events.build import build_events, load_events
from tests.support.hand_cache import MARKET_ONLY, HandCache, ts, wiggle


def _opts(rows):
    return pl.DataFrame(rows, schema={"event_id": pl.Utf8, "option_index": pl.Int32, "option": pl.Utf8,
                                      "binary": pl.Boolean}, orient="row")


def _obs(rows):
    return pl.DataFrame(rows, schema={"event_id": pl.Utf8, "option_index": pl.Int32, "t": pl.Int64,
                                      "p": pl.Float64}, orient="row")


D1, D2 = date(2025, 7, 1), date(2025, 7, 2)


def test_multi_belief_normalizes_over_priced_options_and_never_imputes():
    opts = _opts([("e", 0, "A", False), ("e", 1, "B", False), ("e", 2, "C", False)])
    obs = _obs([
        ("e", 0, ts(D1, 1), 0.2), ("e", 0, ts(D1, 23), 0.4),  # mean 0.3
        ("e", 1, ts(D1, 5), 0.6),
        ("e", 2, ts(D1, 5), 0.1),
        ("e", 0, ts(D2, 5), 0.5), ("e", 1, ts(D2, 5), 0.3),  # C unpriced on D2
        ("e", 1, ts(D2, 6), 1.5), ("e", 2, ts(D2, 7), -0.1),  # out of [0, 1]: dropped
    ])
    res = daily_beliefs(obs, opts)
    assert res.dropped_prices == 2
    b = {(r["day"], r["option"]): r for r in res.beliefs.iter_rows(named=True)}
    assert b[(D1, "A")]["price"] == pytest.approx(0.3)
    assert b[(D1, "A")]["belief"] == pytest.approx(0.3 / 1.0)
    assert b[(D1, "B")]["belief"] == pytest.approx(0.6 / 1.0)
    assert b[(D1, "A")]["n_obs"] == 2 and b[(D1, "A")]["complete"]
    assert b[(D2, "A")]["belief"] == pytest.approx(0.5 / 0.8)
    assert b[(D2, "B")]["belief"] == pytest.approx(0.3 / 0.8)
    assert b[(D2, "C")]["belief"] is None and b[(D2, "C")]["price"] is None
    assert not b[(D2, "A")]["complete"] and b[(D2, "C")]["n_obs"] == 0


def test_binary_belief_is_p_and_one_minus_p():
    opts = _opts([("b", 0, "Team X", True), ("b", 1, "Team Y", True)])
    obs = _obs([("b", 0, ts(D1, 0), 0.61), ("b", 0, ts(D1, 23, 59), 0.65)])
    out = daily_beliefs(obs, opts).beliefs
    rows = {r["option"]: r for r in out.iter_rows(named=True)}
    assert rows["Team X"]["price"] == pytest.approx(0.63) and rows["Team Y"]["price"] == pytest.approx(0.37)
    assert rows["Team X"]["belief"] == pytest.approx(0.63) and rows["Team Y"]["complete"]


def test_price_close_is_the_days_last_yes_price():
    """The day's last observation (not the max, not the file order); binary: 1 - p for the second option."""
    opts = _opts([("b", 0, "Yes", True), ("b", 1, "No", True), ("m", 0, "A", False), ("m", 1, "B", False)])
    obs = _obs([("b", 0, ts(D1, 23), 0.9), ("b", 0, ts(D1, 1), 0.2), ("b", 0, ts(D1, 12), 0.4),
                ("m", 0, ts(D1, 3), 0.7), ("m", 0, ts(D1, 20), 0.1), ("m", 1, ts(D1, 4), 0.5)])
    rows = {(r["event_id"], r["option"]): r for r in daily_beliefs(obs, opts).beliefs.iter_rows(named=True)}
    assert rows[("b", "Yes")]["price_close"] == pytest.approx(0.9) and rows[("b", "Yes")]["price"] == pytest.approx(0.5)
    assert rows[("b", "No")]["price_close"] == pytest.approx(0.1)
    assert rows[("m", "A")]["price_close"] == pytest.approx(0.1) and rows[("m", "B")]["price_close"] == pytest.approx(0.5)


def test_utc_day_boundaries():
    opts = _opts([("b", 0, "Yes", True), ("b", 1, "No", True)])
    midnight = int(datetime(2025, 7, 2, tzinfo=UTC).timestamp())
    obs = _obs([("b", 0, midnight - 1, 0.2), ("b", 0, midnight, 0.8)])
    out = daily_beliefs(obs, opts).beliefs.filter(pl.col("option") == "Yes")
    assert dict(zip(out["day"].to_list(), out["price"].to_list())) == {D1: 0.2, D2: 0.8}


def test_daily_trades_counts_and_shares():
    opts = _opts([("b", 0, "Yes", True), ("b", 1, "No", True)])
    tr = pl.DataFrame([("b", 0, ts(D1, 1), 10.0), ("b", 0, ts(D1, 2), 5.5), ("b", 1, ts(D1, 3), 7.0),
                       ("b", 0, ts(D2, 3), 1.0)],
                      schema={"event_id": pl.Utf8, "option_index": pl.Int32, "t": pl.Int64, "size": pl.Float64},
                      orient="row")
    out = {(r["option"], r["day"]): (r["n_trades"], r["shares"]) for r in daily_trades(tr, opts).iter_rows(named=True)}
    assert out == {("Yes", D1): (2, 15.5), ("No", D1): (1, 7.0), ("Yes", D2): (1, 1.0)}


def test_build_beliefs_from_a_hand_cache(tmp_path):
    """End to end through the cache: the second token's history stands in (1 - p) when the first is absent."""
    h = HandCache()
    s = datetime(2025, 7, 1, 8, tzinfo=UTC)
    m = h.market(s, s + timedelta(days=19), wiggle(20), ("0", "1"), outcomes=("Red", "Blue"))
    tok0, tok1 = json.loads(m["clobTokenIds"])
    h.prices[tok1] = [{"t": p["t"], "p": round(1 - p["p"], 6)} for p in h.prices.pop(tok0)]
    # trades of the realized option (Blue) must be counted on Blue's leg
    for row in h.trades[m["conditionId"]]:
        row["asset"], row["outcomeIndex"], row["outcome"] = tok1, 1, "Blue"
    h.event("9", [m])
    h.write(tmp_path / "pm")
    summary = build_events(tmp_path / "pm", tmp_path / "ws", config=MARKET_ONLY, progress=False)
    assert summary["kept"] == 1 and summary["counts"]["binary_series_from_second_token"] == 1
    t = load_events(tmp_path / "ws")
    ev = t.events.row(0, named=True)
    assert ev["options"] == ["Red", "Blue"] and ev["label"] == "Blue"
    day1 = t.beliefs.filter(pl.col("day") == D1).sort("option")
    assert day1["price"].to_list() == pytest.approx([0.7, 0.3])  # Blue, Red: first day p(Red)=0.3
    # the stored beliefs carry the day's last price too (hand cache: 0.29 at 06:00, 0.31 at 18:00 for Red)
    assert day1["price_close"].to_list() == pytest.approx([0.69, 0.31])
    assert set(t.trades_daily["option"].to_list()) == {"Blue"}
