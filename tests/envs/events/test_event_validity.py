"""Benchmark validity of event construction (docs/design.md §4): each test plants a structure real
Polymarket produces and checks that nothing an agent observes depends on the answer or on the
actual close: late legs, an early or late closedTime, an outcome public before the close (d_known),
augmented bundles with renamed placeholders and an "Other" leg, and the option order."""

from __future__ import annotations

import copy
import json
from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forecast_env import schema
from forecast_env.envs.events.build import build_events, load_events
from forecast_env.envs.events.candidate import Excluded, option_seed, shuffle_options
from forecast_env.envs.events.gamma import construct_event
from forecast_env.envs.events.polymarket import PolymarketCache
from forecast_env.envs.events.tables import event_row
from tests.support.hand_cache import MARKET_ONLY, HandCache, iso, wiggle

S = datetime(2025, 7, 1, 8, tzinfo=UTC)


def _build(tmp_path, h: HandCache, name: str):
    h.write(tmp_path / f"{name}_pm")
    summary = build_events(tmp_path / f"{name}_pm", tmp_path / f"{name}_ws", config=MARKET_ONLY, progress=False)
    return load_events(tmp_path / f"{name}_ws"), summary


def _schedule(t, eid: str) -> list[tuple]:
    s = t.schedule.filter(pl.col("event_id") == eid).sort("step")
    return [(r["step"], r["steps_total"], r["forecast_date"], tuple(r["options"])) for r in s.iter_rows(named=True)]


def _bundle(winner: str, *, augmented: bool = False) -> HandCache:
    """A negRisk bundle with a leg added six days later (Gamma shapes: JSON strings, null negRisk)."""
    h = HandCache()
    paths = {"Avery": wiggle(20, 0.2, 0.5), "Blake": wiggle(20, 0.45, 0.25), "Casey": [None] * 6 + wiggle(14, 0.1, 0.35)}
    legs = []
    for name, daily in paths.items():
        terminal = ("1", "0") if name == winner else ("0", "1")
        start = S + timedelta(days=6) if name == "Casey" and not augmented else S
        if name == "Casey" and not augmented:
            daily = daily[6:]
        m = h.market(start, S + timedelta(days=19), daily, terminal, title=name, neg_risk=None if name == "Blake" else True,
                     trades_per_day=(5, 60))
        legs.append(m)
    h.event("500", legs, neg_risk=True, negRiskAugmented=augmented)
    return h


def test_late_leg_schedule_does_not_depend_on_the_label(tmp_path):
    """Old rule: dates before the answer's leg started were dropped and options offered as legs
    started, so a late loser showed up mid-episode and steps_total moved with the label."""
    runs = {w: _build(tmp_path, _bundle(w), w)[0] for w in ("Avery", "Casey")}
    for w, t in runs.items():
        assert t.events.filter(pl.col("event_id") == "pm-500")["label"].to_list() == [w]
    a, c = (_schedule(runs[w], "pm-500") for w in ("Avery", "Casey"))
    assert a == c and a  # identical dates, steps_total and options whatever the answer
    late_start = (S + timedelta(days=6)).date()
    assert all(d >= late_start and sorted(opts) == ["Avery", "Blake", "Casey"] for _, _, d, opts in a)


def test_binary_schedule_does_not_depend_on_the_label(tmp_path):
    sched = []
    for k, terminal in enumerate((("1", "0"), ("0", "1"))):
        h = HandCache()
        h.event("7", [h.market(S, S + timedelta(days=29), wiggle(30), terminal, trade_outcome=k)])
        t, _ = _build(tmp_path, h, f"b{k}")
        sched.append(_schedule(t, "pm-7"))
    assert sched[0] == sched[1] and len(sched[0]) == 4


def test_augmented_bundle_starts_at_the_renamed_legs_first_trade_and_offers_other(tmp_path):
    """In a negRiskAugmented bundle a placeholder's startDate precedes its name: its first trade counts."""
    h = _bundle("Avery", augmented=True)
    other = h.market(S, S + timedelta(days=19), wiggle(20, 0.05, 0.1), ("0", "1"), title="Other", neg_risk=True)
    other["negRiskOther"] = True
    h.events[0]["markets"].append(other)
    t, _ = _build(tmp_path, h, "aug")
    ev = t.events.row(0, named=True)
    legs = {r["option"]: r for r in t.legs.iter_rows(named=True)}
    assert legs["Casey"]["leg_start"] == S and legs["Casey"]["start_day"] == (S + timedelta(days=6)).date()
    assert legs["Casey"]["first_trade"].date() == (S + timedelta(days=6)).date()
    assert legs["Other"]["neg_risk_other"] and not legs["Avery"]["neg_risk_other"]
    assert ev["t_all"] == (S + timedelta(days=6)).date() and ev["late_leg_days"] == 6
    sched = _schedule(t, "pm-500")
    assert sched and all(d >= ev["t_all"] and "Other" in opts and len(opts) == 4 for _, _, d, opts in sched)


def _deadline(h: HandCache, gid: str, end_days: int, close_days: int, daily: list[float], terminal=("1", "0")) -> dict:
    """A binary market scheduled to end after `end_days` that closed after `close_days`."""
    m = h.market(S, S + timedelta(days=close_days), daily, terminal)
    m["endDate"] = iso(S + timedelta(days=end_days))
    return h.event(gid, [m], endDate=m["endDate"])


def test_moved_close_keeps_steps_total_and_a_prefix_of_the_dates(tmp_path):
    """Old rule: spans, T_Q and bins came from closedTime, so an early close (a deadline question
    resolving Yes) changed steps_total and every date."""
    prices = wiggle(40)
    h = HandCache()
    _deadline(h, "9", 40, 40, prices)
    full, _ = _build(tmp_path, h, "full")
    h = HandCache()
    _deadline(h, "9", 40, 20, prices[:21])
    early, summary = _build(tmp_path, h, "early")
    a, b = _schedule(full, "pm-9"), _schedule(early, "pm-9")
    assert len(a) == 5 and 0 < len(b) < len(a)
    assert b == a[: len(b)] and {s[1] for s in b} == {5}
    ev = early.events.row(0, named=True)
    assert ev["cut"] == (S + timedelta(days=19)).date() and ev["cut_by"] == "close"
    assert (ev["steps_total"], ev["steps_offered"]) == (5, len(b)) and ev["t_end"] == S + timedelta(days=40)
    rules = summary["schedule_rules"]
    assert rules["close"]["events_closed_before_end"] == 1 and rules["close"]["steps_cut"] == 5 - len(b)


def test_late_resolution_keeps_the_scheduled_end(tmp_path):
    h = HandCache()
    _deadline(h, "10", 20, 30, wiggle(31))
    t, summary = _build(tmp_path, h, "late")
    ev = t.events.row(0, named=True)
    assert ev["end_day"] == (S + timedelta(days=20)).date() and ev["steps_total"] == 3 == ev["steps_offered"]
    assert max(d for _, _, d, _ in _schedule(t, "pm-10")) <= (S + timedelta(days=18)).date()
    assert summary["schedule_rules"]["close"]["events_closed_after_end"] == 1


def test_d_known_cuts_the_bins_once_the_outcome_is_public(tmp_path):
    """Old rule: dates ran to close - 2 and the picker favoured the resolution jump itself."""
    for k, (tail, terminal) in enumerate(((0.98, ("1", "0")), (0.02, ("0", "1")))):
        h = HandCache()
        h.event("11", [h.market(S, S + timedelta(days=29), wiggle(20) + [tail] * 10, terminal, trade_outcome=k)])
        t, summary = _build(tmp_path, h, f"known{k}")
        ev = t.events.row(0, named=True)
        day20 = (S + timedelta(days=20)).date()
        assert ev["d_known"] == day20 and ev["cut"] == day20 and ev["cut_by"] == "d_known"
        assert (ev["steps_total"], ev["steps_offered"]) == (4, 2)  # bins of 7 days: the third ends on day 20
        assert all(d < day20 for _, _, d, _ in _schedule(t, "pm-11"))
        assert summary["schedule_rules"]["d_known"]["steps_cut"] == 2
        assert summary["schedule_rules"]["close"]["steps_cut"] == 0


def test_no_bin_before_the_cut_is_excluded_outcome_known_early(tmp_path):
    h = HandCache()
    _deadline(h, "12", 60, 19, wiggle(10) + [0.99] * 10)
    t, summary = _build(tmp_path, h, "ke")
    row = t.excluded.row(0, named=True)
    assert (row["event_id"], row["stage"], row["reason"]) == ("pm-12", "schedule", "outcome_known_early")
    assert "d_known" in row["detail"] and t.events.height == 0
    assert summary["schedule_rules"]["outcome_known_early"]["events_excluded"] == 1
    report = json.loads((tmp_path / "ke_ws" / "events" / "report.json").read_text())
    assert report["cuts"]["pm-12"]["d_known"] == (S + timedelta(days=10)).date().isoformat()
    assert report["cuts"]["pm-12"]["steps_offered"] == 0


def test_leg_started_after_the_last_eligible_day_is_excluded_late_legs(tmp_path):
    h = HandCache()
    legs = [h.market(S, S + timedelta(days=19), wiggle(20, 0.3, 0.6), ("1", "0"), title="A", neg_risk=True),
            h.market(S, S + timedelta(days=19), wiggle(20, 0.5, 0.3), ("0", "1"), title="C", neg_risk=True),
            h.market(S + timedelta(days=18), S + timedelta(days=19), wiggle(2), ("0", "1"), title="B", neg_risk=True)]
    h.event("13", legs, neg_risk=True)
    t, _ = _build(tmp_path, h, "ll")
    assert t.excluded.select("stage", "reason").row(0) == ("schedule", "late_legs")


def test_option_order_is_a_deterministic_shuffle_seeded_by_the_event_id(tmp_path):
    h = HandCache()
    for gid in ("20", "21", "22", "23"):
        legs = [h.market(S, S + timedelta(days=19), wiggle(20, 0.2 + 0.02 * k, 0.3), ("1", "0") if k == 1 else ("0", "1"),
                         title=f"O{k}", neg_risk=True, trades_per_day=(5, 60)) for k in range(4)]
        h.event(gid, legs, neg_risk=True)
    t1, _ = _build(tmp_path, h, "o1")
    t2, _ = _build(tmp_path, h, "o2")
    orders = {}
    for r in t1.events.iter_rows(named=True):
        perm = np.random.default_rng(option_seed(r["event_id"])).permutation(4).tolist()
        assert r["options"] == [f"O{k}" for k in perm] and r["option_seed"] == option_seed(r["event_id"])
        orders[r["event_id"]] = r["options"]
        # beliefs follow the options, not Gamma's positions: market k's price on day 0 is 0.2 + 0.02 k
        b = t1.beliefs.filter((pl.col("event_id") == r["event_id"]) & (pl.col("day") == S.date()))
        for opt, price in b.select("option", "price").iter_rows():
            assert abs(price - (0.2 + 0.02 * int(opt[1]))) < 1e-9
    assert t1.events["options"].to_list() == t2.events["options"].to_list()
    assert any(o != ["O0", "O1", "O2", "O3"] for o in orders.values())
    assert len({tuple(o) for o in orders.values()}) > 1


# ---------------------------------------------------------------------------------------------
# Hostile Gamma fields: an exclusion with a reason, never a crash (and no catch-all hiding bugs)
# ---------------------------------------------------------------------------------------------

_JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=True)
                     | st.text(max_size=12), lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c,
                                                                                               max_size=3), max_leaves=6)
_EVENT_KEYS = ("id", "title", "description", "slug", "tags", "volume", "enableNegRisk", "negRiskAugmented", "markets",
               "startDate", "endDate", "category")
_MARKET_KEYS = ("id", "conditionId", "question", "groupItemTitle", "negRisk", "negRiskOther", "startDate", "endDate",
                "closedTime", "outcomes", "outcomePrices", "clobTokenIds", "description")


@pytest.fixture(scope="module")
def hostile_base(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    h = _bundle("Avery")
    h.write(root / "pm")
    return h.events[0], PolymarketCache(root / "pm")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_fields_are_excluded_with_a_reason(hostile_base, data):
    base, cache = hostile_base
    ev = copy.deepcopy(base)
    for _ in range(data.draw(st.integers(1, 3))):
        if data.draw(st.booleans()):
            ev[data.draw(st.sampled_from(_EVENT_KEYS))] = data.draw(_JSON)
        elif isinstance(ev.get("markets"), list) and ev["markets"]:
            m = ev["markets"][data.draw(st.integers(0, len(ev["markets"]) - 1))]
            if isinstance(m, dict):
                m[data.draw(st.sampled_from(_MARKET_KEYS))] = data.draw(_JSON)
    try:
        cand = construct_event(ev, cache, {"yes_threshold": 0.99, "no_threshold": 0.01}, Counter(), Counter())
    except Excluded as exc:
        assert exc.reason in schema.EVENT_REASONS[exc.stage]
        return
    # what passes must make a valid table row
    assert cand.t_start <= cand.t_close and cand.legs and cand.label in cand.options
    pa.Table.from_pylist([event_row(shuffle_options(cand))], schema=schema.EVENTS)
