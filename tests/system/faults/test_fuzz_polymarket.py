"""Hostile Polymarket input, many times: the recorded Gamma events, CLOB price histories and Data API
trades of tests/fixtures/polymarket, mutated by a seeded fuzzer (missing and wrong-typed fields, odd
numbers, broken JSON strings, bad dates, outcome / price / token arrays of other lengths, broken
series), through the events build's parser (`construct_event`) and through a whole `build_events`.

Every input must give no traceback: an event is either built or excluded with a known stage and
reason (counted in the events report and the `excluded` table), and the good events of the same build
(the micro world's, 7 of them kept, and the fixtures') keep the outcome they have without the bad ones.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from forecast_env import schema
from forecast_env.envs.events.build import build_events, resolve_config
from forecast_env.envs.events.candidate import Candidate, Excluded
from forecast_env.envs.events.gamma import construct_event, open_cache
from tests.support.paths import FIXTURES
from tests.system.faults._fuzz import Tally, fuzz_settings

FIXTURES = FIXTURES / "polymarket"
EVENTS = json.loads((FIXTURES / "gamma_events.json").read_text())
PRICES = json.loads((FIXTURES / "prices_history.json").read_text())
TRADES = json.loads((FIXTURES / "trades.json").read_text())

ODD = [None, "", " ", 0, -1, 1.5, 10**30, -(10**30), 1e308, float("inf"), float("-inf"), float("nan"), True, False,
       [], {}, [None], {"a": 1}, "abc", "x" * 5000, "0.5", "-0.5", "1e999", "NaN", "null", "[]", "[1,", '{"a":',
       "2025-13-45T99:99:99Z", "2021-02-30", "yesterday", "1639958079", 1639958079, 1639958079000, -1639958079,
       "2021-12-04T19:35:03.796+25:00", "\x00", "\u2028", "Yes", '["Yes"]', '["Yes","No","Maybe"]']
EVENT_KEYS = ["id", "title", "startDate", "endDate", "closedTime", "closed", "enableNegRisk", "negRiskAugmented",
              "volume", "tags", "markets", "description", "createdAt"]
MARKET_KEYS = ["id", "question", "conditionId", "startDate", "endDate", "closedTime", "closed", "negRisk",
               "outcomes", "outcomePrices", "clobTokenIds", "volume", "umaResolutionStatuses", "groupItemTitle",
               "createdAt"]
LIST_KEYS = ["outcomes", "outcomePrices", "clobTokenIds"]


def write_cache(root: Path, events: list[Any], prices: dict[str, Any] | None = None,
                trades: dict[str, Any] | None = None) -> Path:
    """A Polymarket cache folder (envs/events/polymarket/cache.py's layout) holding these responses."""
    (root / "gamma").mkdir(parents=True, exist_ok=True)
    (root / "clob" / "prices-history").mkdir(parents=True, exist_ok=True)
    (root / "data" / "trades").mkdir(parents=True, exist_ok=True)
    (root / "gamma" / "events-0.json").write_text(json.dumps(events))
    for token, hist in (PRICES if prices is None else prices).items():
        body = hist if isinstance(hist, str) else json.dumps({"history": hist})
        (root / "clob" / "prices-history" / f"{token}.json").write_text(body)
    for cid, rows in (TRADES if trades is None else trades).items():
        (root / "data" / "trades" / f"{cid}.json").write_text(rows if isinstance(rows, str) else json.dumps(rows))
    return root


def _list_field(value: Any, draw: st.DrawFn) -> Any:
    """An outcome / price / token list (a JSON string as Gamma sends it) with another length or bad items."""
    try:
        items = json.loads(value) if isinstance(value, str) else list(value or [])
    except (ValueError, TypeError):  # already broken by an earlier mutation
        items = [value]
    items = items if isinstance(items, list) else [items]
    how = draw(st.sampled_from(["drop", "add", "dup", "odd_item", "truncate_json", "decoded", "empty", "nested"]))
    if how == "drop" and items:
        items = items[:-1]
    elif how == "add":
        items = [*items, draw(st.sampled_from(["Maybe", "0.5", "123", None, -1]))]
    elif how == "dup" and items:
        items = [items[0]] * len(items)
    elif how == "odd_item" and items:
        items[draw(st.integers(0, len(items) - 1))] = draw(st.sampled_from(ODD[:30]))
    elif how == "truncate_json":
        text = json.dumps(items)
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    elif how == "decoded":
        return items
    elif how == "empty":
        return "[]"
    elif how == "nested":
        return json.dumps([items])
    return json.dumps(items)


@st.composite
def mutated_event(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    """A fixture event with 1-4 mutations; returns it and what was done."""
    ev = copy.deepcopy(draw(st.sampled_from(EVENTS)))
    done = []
    for _ in range(draw(st.integers(1, 4))):
        markets = ev.get("markets") if isinstance(ev.get("markets"), list) else []
        where = draw(st.sampled_from(["event", "market", "market", "list", "markets"]))
        if where == "list" and markets and isinstance(markets[0], dict):
            m = markets[draw(st.integers(0, len(markets) - 1))]
            key = draw(st.sampled_from(LIST_KEYS))
            if isinstance(m, dict) and key in m:
                m[key] = _list_field(m[key], draw)
                done.append(f"list:{key}")
            continue
        if where == "markets":
            how = draw(st.sampled_from(["empty", "not_list", "string", "broken_string", "odd_item", "dup_market"]))
            ev["markets"] = {"empty": [], "not_list": {"0": markets}, "string": json.dumps(markets),
                             "broken_string": json.dumps(markets)[:20], "odd_item": [*markets, draw(st.sampled_from(ODD))],
                             "dup_market": markets + markets[:1]}[how]
            done.append(f"markets:{how}")
            continue
        target = ev if where == "event" or not markets or not isinstance(markets[0], dict) else \
            markets[draw(st.integers(0, len(markets) - 1))]
        if not isinstance(target, dict):
            continue
        key = draw(st.sampled_from(EVENT_KEYS if target is ev else MARKET_KEYS))
        if draw(st.booleans()):
            target.pop(key, None)
            done.append(f"{where}:del:{key}")
        else:
            target[key] = draw(st.sampled_from(ODD))
            done.append(f"{where}:set:{key}")
    return ev, done


@st.composite
def mutated_series(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The price histories and trades with one series broken (bad points, broken JSON, odd rows)."""
    prices, trades = copy.deepcopy(PRICES), copy.deepcopy(TRADES)
    if draw(st.booleans()):
        token = draw(st.sampled_from(sorted(prices)))
        how = draw(st.sampled_from(["broken_json", "not_list", "odd_point", "empty", "unsorted", "dup_t"]))
        hist = prices[token]
        if how == "broken_json":
            prices[token] = json.dumps({"history": hist})[: draw(st.integers(0, 30))]
        elif how == "not_list":
            prices[token] = draw(st.sampled_from(ODD))
        elif how == "odd_point" and hist:
            i = draw(st.integers(0, len(hist) - 1))
            field = draw(st.sampled_from(["t", "p"]))
            hist[i] = {**hist[i], field: draw(st.sampled_from(ODD))} if draw(st.booleans()) else draw(st.sampled_from(ODD))
        elif how == "empty":
            prices[token] = []
        elif how == "unsorted":
            prices[token] = hist[::-1]
        elif how == "dup_t" and hist:
            prices[token] = hist + hist[:3]
        return prices, trades, f"prices:{how}"
    cid = draw(st.sampled_from(sorted(trades)))
    how = draw(st.sampled_from(["broken_json", "not_list", "odd_row", "odd_field", "empty"]))
    rows = trades[cid]
    if how == "broken_json":
        trades[cid] = json.dumps(rows)[: draw(st.integers(0, 40))]
    elif how == "not_list":
        trades[cid] = draw(st.sampled_from(ODD))
    elif how == "odd_row" and rows:
        rows[draw(st.integers(0, len(rows) - 1))] = draw(st.sampled_from(ODD))
    elif how == "odd_field" and rows:
        i = draw(st.integers(0, len(rows) - 1))
        key = draw(st.sampled_from(["size", "price", "timestamp", "outcome", "outcomeIndex", "asset", "side"]))
        rows[i] = {**rows[i], key: draw(st.sampled_from(ODD))}
    elif how == "empty":
        trades[cid] = []
    return prices, trades, f"trades:{how}"


def parse(ev: Any, cache_dir: Path, tally: Tally) -> None:
    """`construct_event` builds the event or excludes it with a known reason; nothing else escapes."""
    cache = open_cache(cache_dir)
    try:
        cand = construct_event(ev, cache, resolve_config(None)["labels"], Counter(), Counter())
    except Excluded as exc:
        assert exc.reason in schema.EVENT_REASONS[exc.stage]
        tally.add(f"excluded:{exc.stage}:{exc.reason}")
        return
    assert isinstance(cand, Candidate)
    tally.add("built")


def fuzz_parser(tmp_path: Path, name: str, examples: int) -> Tally:
    """`examples` mutated Gamma events through the parser against the fixtures' cache; what it saw."""
    tally = Tally(name)
    cache_dir = write_cache(tmp_path / "pm", EVENTS)

    @fuzz_settings(examples)
    @given(mutated_event())
    def fuzz(case: tuple[dict[str, Any], list[str]]) -> None:
        ev, done = case
        tally.add("inputs")
        for d in done:
            tally.add(f"mutation:{d.split(':')[0]}:{d.split(':')[1]}")
        parse(json.loads(json.dumps(ev)), cache_dir, tally)  # as read back from a cache file (NaN too)

    fuzz()
    tally.dump()
    return tally


def test_mutated_gamma_events_through_the_parser(tmp_path: Path) -> None:
    tally = fuzz_parser(tmp_path, "polymarket_parse", 300)
    assert tally.counts["inputs"] >= 300 and tally.counts["built"] > 0


def test_mutated_price_and_trade_series_through_the_parser(tmp_path: Path) -> None:
    tally = Tally("polymarket_series")
    n = [0]

    @fuzz_settings(40)
    @given(mutated_series())
    def fuzz(case: tuple[dict[str, Any], dict[str, Any], str]) -> None:
        prices, trades, how = case
        n[0] += 1
        cache_dir = write_cache(tmp_path / f"pm{n[0]}", EVENTS, prices, trades)
        tally.add("inputs")
        tally.add(f"mutation:{how}")
        for ev in EVENTS:
            parse(ev, cache_dir, tally)

    fuzz()
    tally.dump()
    assert tally.counts["inputs"] >= 40


def _build(ws_src: Path, world: Path, tmp: Path, events: list[Any], name: str) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """`build_events` over these Gamma events, with the micro world's series and the fixtures' (on a copy of a
    workspace with an index): (events, excluded, report)."""
    import shutil

    ws = tmp / f"ws-{name}"
    for part in ("corpus", "index"):
        shutil.copytree(ws_src / part, ws / part)
    pm = tmp / f"pm-{name}"
    shutil.copytree(world / "polymarket", pm)
    report = build_events(write_cache(pm, events), ws, progress=False)
    return pl.read_parquet(ws / "events" / "events.parquet"), pl.read_parquet(ws / "events" / "excluded.parquet"), \
        report if isinstance(report, dict) else json.loads((ws / "events" / "report.json").read_text())


def _outcome(eid: str, events: pl.DataFrame, excluded: pl.DataFrame) -> str:
    if eid in set(events["event_id"]):
        return "kept"
    rows = excluded.filter(pl.col("event_id") == eid)
    assert rows.height >= 1, f"{eid} neither kept nor excluded"
    return f"{rows['stage'][0]}/{rows['reason'][0]}"


def _run_build(examples: int, micro_index: Path, world: Path, tmp: Path, name: str) -> Tally:
    tally = Tally(name)
    micro = json.loads((world / "polymarket" / "gamma" / "events-0.json").read_text())
    base_events, base_excl, _ = _build(micro_index, world, tmp, micro + EVENTS, "base")
    good = {f"pm-{e['id']}": _outcome(f"pm-{e['id']}", base_events, base_excl) for e in micro + EVENTS}
    assert "kept" in good.values()
    bad: list[Any] = []

    @fuzz_settings(examples)
    @given(mutated_event())
    def collect(case: tuple[dict[str, Any], list[str]]) -> None:
        ev, _ = case
        if ev.get("id") not in (None, ""):
            ev["id"] = f"fz{len(bad)}"  # its own id: the good events keep theirs (odd ids: the parser test)
        bad.append(ev)

    collect()
    # the good events with the bad ones between them (every few good events, a run of bad ones)
    goods = micro + EVENTS
    step = max(1, len(bad) // len(goods))
    mixed = [e for i, g in enumerate(goods) for e in (g, *bad[i * step:(i + 1) * step])] + bad[len(goods) * step:]
    events, excl, _ = _build(micro_index, world, tmp, mixed, "mixed")
    for eid, outcome in good.items():
        assert _outcome(eid, events, excl) == outcome, eid  # good events around the bad ones: as without them
    for row in excl.select(["stage", "reason"]).to_dicts():
        assert row["reason"] in schema.EVENT_REASONS[row["stage"]], row
        tally.add(f"excluded:{row['stage']}:{row['reason']}")
    ids = [f"pm-{e['id']}" for e in bad if isinstance(e, dict) and e.get("id") not in (None, "")]
    for eid in set(ids):
        tally.add(_outcome(eid, events, excl).split("/")[0] if eid in set(events["event_id"]) or
                  eid in set(excl["event_id"]) else "unaccounted")
    tally.add("inputs", len(bad))
    tally.add("kept_total", events.height)
    tally.add("good_kept", sum(v == "kept" for v in good.values()))
    tally.add("good_same_outcome", len(good))
    assert tally.counts["unaccounted"] == 0
    tally.dump()
    return tally


def test_mutated_events_in_a_whole_build_are_counted_and_spare_the_good_ones(micro_index: Path, micro_world: Path,
                                                                              tmp_path: Path) -> None:
    tally = _run_build(60, micro_index, micro_world, tmp_path, "polymarket_build")
    assert tally.counts["inputs"] >= 60


@pytest.mark.benchmark
def test_thousands_of_mutated_gamma_events_through_the_parser(tmp_path: Path) -> None:
    tally = fuzz_parser(tmp_path, "polymarket_parse_bench", 5000)
    assert tally.counts["inputs"] >= 5000


@pytest.mark.benchmark
def test_thousands_of_mutated_events_in_a_whole_build(micro_index: Path, micro_world: Path, tmp_path: Path) -> None:
    tally = _run_build(2000, micro_index, micro_world, tmp_path, "polymarket_build_bench")
    assert tally.counts["inputs"] >= 2000



@pytest.mark.parametrize("raw", ["2021-12-04T19:35:03.796+25:00", "0001-01-01T00:00:00+01:00",
                                 "9999-12-31T23:59:59-01:00", "Dec 4 2021 10:00 +2500"])
def test_an_offset_past_a_day_or_a_year_past_9999_is_unreadable_not_a_traceback(tmp_path: Path, raw: str) -> None:
    """Found by the fuzzer: `parse_time` ("never raises") raised ValueError on a UTC offset of 24 h or more and
    OverflowError on an instant outside years 1-9999, and the events build stopped with a traceback. Now the
    value is unreadable: a market without another start is excluded as parse/bad_timestamp or missing_field."""
    from forecast_env.timeparse import parse_time

    assert parse_time(raw) is None
    ev = copy.deepcopy(EVENTS[0])
    ev["markets"][0]["startDate"] = raw
    ev["startDate"] = raw
    tally = Tally("timestamp")
    parse(ev, write_cache(tmp_path / "pm", EVENTS), tally)
    assert sum(tally.counts.values()) == 1
