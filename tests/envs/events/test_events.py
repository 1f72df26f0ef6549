"""Event construction on hand-made caches (every exclusion reason), description_as_of, and the
end-to-end build on the micro sample world checked against its truth.json."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from forecast_env.cli.main import main as cli_main
from forecast_env.envs.events.build import build_events, description_as_of, load_events
from forecast_env.envs.events.candidate import option_seed
from forecast_env.errors import IndexMissingError, WorkspaceError
from tests.support.hand_cache import MARKET_ONLY, HandCache, wiggle

S = datetime(2025, 7, 1, 8, tzinfo=UTC)
C = S + timedelta(days=19)


def _excl(ws):
    t = load_events(ws)
    return {(r["event_id"]): (r["stage"], r["reason"], r["detail"]) for r in t.excluded.iter_rows(named=True)}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """One event per exclusion reason, plus good binary and multi events."""
    h = HandCache()
    good = lambda **kw: h.market(S, C, wiggle(20), ("1", "0"), **kw)
    h.event("good", [good()])
    h.event("good_named", [h.market(S, C, wiggle(20), ("0.0000001", "0.9999999"), outcomes=("Lakers", "Celtics"),
                                    trade_outcome=1)])
    m = good()
    m["outcomePrices"] = m["outcomePrices"][:-1]
    h.event("bad_json", [m])
    m = good()
    del m["conditionId"]
    h.event("missing", [m])
    m = good()
    m["closedTime"] = "yesterday"
    h.event("bad_ts", [m])
    h.event("no_hist", [h.market(S, C, None, ("1", "0"))])
    h.event("no_markets", [])
    h.event("two_binary", [good(), good()])
    h.event("neg_single", [good(neg_risk=True)], neg_risk=True)
    h.event("unresolved", [h.market(S, C, wiggle(20), ("0.5", "0.5"))])
    legs = lambda yes: [h.market(S, C, [0.5] * 20 if y else wiggle(20, 0.1, 0.4), ("1", "0") if y else ("0", "1"), title=f"O{k}",
                                 neg_risk=True, trades_per_day=(5, 60)) for k, y in enumerate(yes)]
    h.event("multi_good", legs([0, 1, 0]), neg_risk=True)
    h.event("multi_two_yes", legs([1, 1, 0]), neg_risk=True)
    h.event("multi_no_yes", legs([0, 0, 0]), neg_risk=True)
    h.event("short", [h.market(S, S + timedelta(days=6), wiggle(7), ("1", "0"))])
    h.event("thin", [h.market(S, C, wiggle(20), ("1", "0"), trades_per_day=(3, 100.0))])
    run = [0.5] * 20
    m = h.market(S, C, [0.3, 0.6] * 10, ("1", "0"))
    cid = m["conditionId"]
    h.trades[cid] = [r for r in h.trades[cid] if datetime.fromtimestamp(r["timestamp"], UTC).day not in range(3, 11)]
    h.event("gap", [m])
    h.event("certain", [h.market(S, C, [0.97, 0.975] * 10, ("1", "0"))])
    h.event("flat", [h.market(S, C, [0.4, 0.4005] * 10, ("1", "0"))])
    del run
    h.event("crossing", [h.market(datetime(2026, 2, 20, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC),
                                  wiggle(10), ("1", "0"))])
    h.event("outside", [h.market(datetime(2025, 4, 1, tzinfo=UTC), datetime(2025, 4, 20, tzinfo=UTC),
                                 wiggle(20), ("1", "0"))])
    late = [h.market(S, C, wiggle(20, 0.2, 0.4), ("0", "1"), title="Early", neg_risk=None, trades_per_day=(1, 5)),
            h.market(S + timedelta(days=5), C, wiggle(15, 0.3, 0.5), ("1", "0"), title="Late", neg_risk="absent",
                     trades_per_day=(5, 60))]
    h.event("late_winner", late, neg_risk=True)
    # repairs: numbers instead of JSON strings, numeric string volume, missing market startDate
    m = good()
    m["clobTokenIds"] = json.loads(m["clobTokenIds"])
    del m["startDate"]
    h.event("repaired", [m], volume="1234.5", startDate="2025-07-01T08:00:00Z")
    h.events.append({"title": "no id", "markets": []})
    root = tmp_path_factory.mktemp("planted")
    h.write(root / "pm")
    summary = build_events(root / "pm", root / "ws", config=MARKET_ONLY, progress=False)
    return root / "ws", summary


EXPECT = {
    "bad_json": ("parse", "bad_json"), "missing": ("parse", "missing_field"), "bad_ts": ("parse", "bad_timestamp"),
    "no_hist": ("parse", "no_price_history"), "no_markets": ("layout", "no_markets"),
    "two_binary": ("layout", "multi_market_not_negrisk"), "neg_single": ("layout", "negrisk_single_market"),
    "unresolved": ("label", "unresolved"), "multi_two_yes": ("label", "multiple_yes"),
    "multi_no_yes": ("label", "no_yes"), "short": ("span", "too_short"), "thin": ("activity", "low_faithful_share"),
    "gap": ("activity", "long_unfaithful_run"), "certain": ("signal", "nearly_certain"),
    "flat": ("signal", "flat_prices"), "crossing": ("split", "crossing_split"), "outside": ("split", "outside_splits"),
}


def test_every_planted_event_excluded_for_its_reason(planted):
    ws, summary = planted
    ex = _excl(ws)
    for gid, want in EXPECT.items():
        assert ex[f"pm-{gid}"][:2] == want, (gid, ex.get(f"pm-{gid}"))
    assert ex["pm-bad_ts"][2] == "markets[0].closedTime='yesterday'"
    assert ex["pm-missing"][2] == "markets[0].conditionId"
    assert [v for k, v in ex.items() if k.startswith("pm-?")] == [("parse", "missing_field", "id")]
    # exactly one row per excluded event
    t = load_events(ws)
    assert t.excluded["event_id"].n_unique() == t.excluded.height
    assert summary["events_in"] == summary["kept"] + t.excluded.height


def test_good_events_kept_with_label_options_and_split(planted):
    ws, summary = planted
    t = load_events(ws)
    ev = {r["event_id"]: r for r in t.events.iter_rows(named=True)}
    assert set(ev) == {"pm-good", "pm-good_named", "pm-multi_good", "pm-late_winner", "pm-repaired"}
    assert ev["pm-good"]["options"] == ["Yes", "No"] and ev["pm-good"]["label"] == "Yes"
    assert ev["pm-good_named"]["options"] == ["Lakers", "Celtics"] and ev["pm-good_named"]["label"] == "Celtics"
    # a negRisk bundle is offered in the order seeded by its event id, recorded with the legs
    multi = ev["pm-multi_good"]
    assert multi["option_seed"] == option_seed("pm-multi_good") and multi["label"] == "O1"
    perm = np.random.default_rng(multi["option_seed"]).permutation(3).tolist()
    assert multi["options"] == [f"O{k}" for k in perm] and multi["options"] != ["O0", "O1", "O2"]
    assert ev["pm-good"]["option_seed"] is None
    assert ev["pm-multi_good"]["type"] == "multi" and ev["pm-good"]["split"] == "train"
    assert ev["pm-good"]["category"] == "politics"
    assert summary["repairs"]["clobTokenIds_as_list"] == 1 and summary["repairs"]["startDate_from_event"] == 1
    assert ev["pm-repaired"]["volume"] == 1234.5
    legs = t.legs.filter(pl.col("event_id") == "pm-multi_good").sort("option_index")
    assert legs["option"].to_list() == multi["options"] and legs["option_index"].to_list() == [0, 1, 2]
    assert legs["market_index"].to_list() == perm


def test_late_leg_dates_start_when_the_last_leg_started(planted):
    ws, summary = planted
    t = load_events(ws)
    sched = t.schedule.filter(pl.col("event_id") == "pm-late_winner")
    late_start = (S + timedelta(days=5)).date()
    ev = t.events.filter(pl.col("event_id") == "pm-late_winner").row(0, named=True)
    assert ev["t_all"] == late_start and ev["late_leg_days"] == 5
    assert sched.height == ev["steps_total"] >= 1 and sched["forecast_date"].min() >= late_start
    for r in sched.iter_rows(named=True):  # every date offers every option
        assert sorted(r["options"]) == ["Early", "Late"] and r["options"] == ev["options"]
    assert summary["schedule_rules"]["late_legs"]["dates_removed"] >= 5


def test_beliefs_and_report(planted):
    ws, summary = planted
    t = load_events(ws)
    b = t.beliefs.filter(pl.col("event_id") == "pm-late_winner")
    first = b.filter(pl.col("day") == S.date())
    assert first.filter(pl.col("option") == "Late")["belief"].to_list() == [None]
    assert first.filter(pl.col("option") == "Early")["belief"].to_list() == [1.0]
    assert not first["complete"].any()
    report = json.loads((ws / "events" / "report.json").read_text())
    assert report["polymarket"]["kept"] == 5 and report["polymarket"]["events_in"] == summary["events_in"]
    assert report["cuts"]["pm-late_winner"]["t_all"] == (S + timedelta(days=5)).date().isoformat()
    md = (ws / "events" / "report.md").read_text()
    assert "long_unfaithful_run" in md and "| **split** |" in md and "late legs" in md
    assert (ws / "events" / "manifest.json").exists()


def test_missing_index_is_a_clear_error(tmp_path):
    h = HandCache()
    h.event("1", [h.market(S, C, wiggle(20), ("1", "0"))])
    h.write(tmp_path / "pm")
    with pytest.raises(IndexMissingError, match="forecast-env index build"):
        build_events(tmp_path / "pm", tmp_path / "ws", progress=False)


def test_load_events_names_the_build_command(tmp_path):
    with pytest.raises(WorkspaceError, match="forecast-env events build"):
        load_events(tmp_path)


def test_cli_build(tmp_path, capsys):
    h = HandCache()
    h.event("1", [h.market(S, C, wiggle(20), ("1", "0"))])
    h.write(tmp_path / "pm")
    rc = cli_main(["events", "build", "--polymarket", str(tmp_path / "pm"), "--workspace", str(tmp_path / "ws"),
                   "--no-progress", "--set", "screen.enabled=false", "--set", "schedule.require_index=false"])
    out = capsys.readouterr().out
    assert rc == 0 and "kept: 1" in out
    assert cli_main(["events", "build", "--polymarket", str(tmp_path / "nope"), "--workspace", str(tmp_path)]) == 2


@pytest.mark.parametrize("text,day,kept", [
    ("Update (2026-04-12): moved.", date(2026, 4, 11), False),
    ("Update (2026-04-12): moved.", date(2026, 4, 12), True),
    ("Clarification 2026-04-12: moved.", date(2026, 4, 1), False),
    ("UPDATE 4/12/2026: moved.", date(2026, 4, 1), False),
    ("Update: April 12, 2026 - moved.", date(2026, 4, 1), False),
    ("Note (Apr 12, 2026): moved.", date(2026, 4, 1), False),
    ("**Edit 12 April 2026**: moved.", date(2026, 4, 1), False),
    ("Additional context (2026/04/12): moved.", date(2026, 4, 1), False),
    ("Additional context: moved.", date(2026, 4, 1), False),  # undated appendix: cut
    ("Update: moved.", date(2026, 4, 1), False),
    ("**Clarification** - moved.", date(2026, 4, 1), False),
    ("Note: moved.", date(2026, 4, 1), True),  # an undated note may be part of the rules
    ("Updates will be posted; moved.", date(2026, 4, 1), True),  # a sentence, not a heading
    ("Note: moved. The deadline is April 12, 2026.", date(2026, 4, 1), True),  # a date inside the sentence
    ("Update (2026-03-30): moved.", date(2026, 4, 1), True),
])
def test_description_as_of_formats(text, day, kept):
    base = "This market resolves Yes if X happens.\n\nSources: official."
    out = description_as_of(base + "\n\n" + text, day)
    assert out.startswith(base)
    assert ("moved." in out) == kept


def test_description_as_of_cuts_only_later_paragraphs():
    d = ("Main text.\n\nUpdate (2026-04-02): first.\ncontinues first.\n\nClarification 2026-04-20: second.\n"
         "Update 2026-04-25: third.\n\nUndated tail.\n\nClarification: undated appendix.\nits second line.")
    assert description_as_of(d, date(2026, 4, 10)) == "Main text.\n\nUpdate (2026-04-02): first.\ncontinues first.\n\nUndated tail."
    assert "third" not in description_as_of(d, date(2026, 4, 21)) and "second" in description_as_of(d, date(2026, 4, 21))
    assert description_as_of("", date(2026, 1, 1)) == ""


@pytest.mark.slow
def test_micro_world_against_truth(micro_events, micro_truth):
    """Every planted case lands where truth.json says: market-side exclusions, and for the events
    that pass them the schedule (t_all from renamed legs' first trades, the scheduled end, d_known,
    the cut, steps_total and the offered prefix), the Other option and undated clarifications."""
    t = load_events(micro_events)
    kept = {r["event_id"]: r for r in t.events.iter_rows(named=True)}
    excl = {r["event_id"]: r for r in t.excluded.iter_rows(named=True)}
    cuts = json.loads((micro_events / "events" / "report.json").read_text())["cuts"]
    screened_out = []
    planted = {"end": 0, "known": 0, "other": 0, "undated": 0, "renamed": 0}
    for eid, want in micro_truth["events"].items():
        if want["expect"] == "exclude":
            assert eid in excl, eid
            assert (excl[eid]["stage"], excl[eid]["reason"]) == (want["stage"], want["reason"]), eid
            continue
        sched_want = want["schedule"]
        rec = cuts[eid]  # every event that reached the schedule, kept or screened out later
        for key in ("t_all", "end_day", "close_day", "d_known", "cut", "steps_total", "steps_offered"):
            assert rec[key] == sched_want[key], (eid, key, rec[key], sched_want)
        planted["end"] += sched_want["end_day"] > sched_want["close_day"]
        planted["known"] += rec["cut_by"] == "d_known"
        planted["renamed"] += bool(want["late_legs"])
        if sched_want["expect"] != "offered":
            assert (excl[eid]["stage"], excl[eid]["reason"]) == ("schedule", sched_want["expect"]), eid
            continue
        if eid in excl:
            assert excl[eid]["stage"] == "screen", (eid, excl[eid])
            screened_out.append(eid)
            continue
        ev = kept[eid]
        options = list(want["options"])
        if want.get("other_option"):
            options[options.index(want["other_option"][1])] = "Other"
            planted["other"] += 1
        assert ev["label"] == want["label"] and sorted(ev["options"]) == sorted(options), eid
        assert ev["type"] == want["type"] and ev["split"] == want["split"], eid
        assert ev["cut"].isoformat() == sched_want["cut"] and ev["steps_offered"] == sched_want["steps_offered"], eid
        s = t.schedule.filter(pl.col("event_id") == eid).sort("step")
        assert s.height == ev["steps_offered"] and set(s["steps_total"]) == {ev["steps_total"]}
        assert s["step"].to_list() == list(range(1, s.height + 1))
        for row in s.iter_rows(named=True):  # every option on every date, never before t_all or on/after the cut
            assert row["options"] == ev["options"]
            assert ev["t_all"] <= row["forecast_date"] <= row["bin_last"] < ev["cut"]
        if want.get("undated_clarification"):
            planted["undated"] += 1
            assert want["undated_clarification"] in ev["description"]
            assert want["undated_clarification"] not in description_as_of(ev["description"], ev["close_day"])
    goods = [e for e, w in micro_truth["events"].items() if w["expect"] == "keep"]
    # the offline screen must keep most of the good events of the sample world
    assert len(screened_out) <= len(goods) // 3, screened_out
    assert all(planted.values()), planted


def test_entries_that_are_not_events_are_counted_and_excluded(tmp_path):
    """A Gamma page holding strings, numbers or nulls beside events: counted in, excluded as bad_json."""
    pm = tmp_path / "pm"
    (pm / "gamma").mkdir(parents=True)
    (pm / "gamma" / "events-0.json").write_text(json.dumps([{"id": "7", "markets": "oops"}, "junk", 42, None]))
    summary = build_events(pm, tmp_path / "ws", config=MARKET_ONLY, progress=False)
    assert summary["events_in"] == 4 and summary["kept"] == 0
    excluded = load_events(tmp_path / "ws").excluded
    assert excluded.height == 4
    assert set(excluded["stage"]) == {"parse"} and set(excluded["reason"]) == {"bad_json"}
