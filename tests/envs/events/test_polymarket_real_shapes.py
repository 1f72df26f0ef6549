"""Real Polymarket shapes (docs/design.md §4): a market without startDate, and the same-day market.

The markets are REAL Gamma responses recorded by the Polymarket/agents repository (MIT; see
tests/fixtures/polymarket/README.md); each becomes the Gamma `/events` shape (its `events[0]` with
`markets: [market]`). Where a test needs a resolved or same-day market, the change to the real
object is made in the test, in one visible line.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from forecast_env.envs.events.build import build_events
from forecast_env.envs.events.candidate import Excluded
from forecast_env.envs.events.filters import EventSeries, MarketFilters
from forecast_env.envs.events.gamma import _parse_market
from forecast_env.envs.events.polymarket.cache import PolymarketCache
from forecast_env.envs.events.polymarket.client import PolymarketClient
from forecast_env.envs.events.polymarket.responses import is_same_day_end, market_plan
from forecast_env.synth import serve_polymarket as sp
from forecast_env.timeparse import parse_api_time
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "polymarket" / "gamma_markets_polymarket_agents.json"


def real_event(market_id: str) -> dict:
    """The recorded market `market_id` in the Gamma /events shape."""
    market = next(m for m in json.loads(FIXTURE.read_text()) if m["id"] == market_id)
    market = copy.deepcopy(market)
    event = market.pop("events")[0]
    event["markets"] = [market]
    return event


def ts(text: str) -> datetime:
    out = parse_api_time(text)
    assert out is not None
    return out


def test_start_falls_back_to_event_start_then_created_at_then_first_trade(tmp_path: Path) -> None:
    ev = real_event("503484")  # recorded without a startDate
    m = ev["markets"][0]
    assert "startDate" not in m
    cache = PolymarketCache(tmp_path)
    repairs: Counter = Counter()
    assert _parse_market(m, 0, ev, cache, repairs).start == ts("2024-07-15T16:24:50.921818Z")
    assert repairs["startDate_from_event"] == 1
    del ev["startDate"]
    assert _parse_market(m, 0, ev, cache, repairs).start == ts("2024-07-15T15:54:34.813438Z")  # createdAt
    assert repairs["startDate_from_createdAt"] == 1
    del m["createdAt"]
    with pytest.raises(Excluded) as exc:
        _parse_market(m, 0, ev, cache, repairs)
    assert (exc.value.stage, exc.value.reason) == ("parse", "missing_field")
    cache.trades_dir.mkdir(parents=True)
    rows = [{"timestamp": 1721070000, "size": 5, "asset": "x"}, {"timestamp": 1721060000, "size": 2},
            {"timestamp": "junk"}]
    cache.trades_path(m["conditionId"]).write_text(json.dumps(rows))
    assert _parse_market(m, 0, ev, cache, repairs).start == datetime.fromtimestamp(1721060000, UTC)
    assert repairs["startDate_from_first_trade"] == 1
    # a present but unreadable startDate is not skipped over
    m["startDate"] = "July 15th"
    with pytest.raises(Excluded) as exc:
        _parse_market(m, 0, ev, cache, repairs)
    assert exc.value.reason == "bad_timestamp"


def test_downloader_plans_the_same_fallbacks() -> None:
    ev = real_event("503484")
    plan, reason = market_plan(ev, ev["markets"][0])
    assert reason is None and plan is not None and plan["start"] == ts("2024-07-15T16:24:50.921818Z")
    del ev["startDate"]
    plan, _ = market_plan(ev, ev["markets"][0])
    assert plan is not None and plan["start"] == ts("2024-07-15T15:54:34.813438Z")
    del ev["markets"][0]["createdAt"]
    plan, reason = market_plan(ev, ev["markets"][0])
    assert reason is None and plan is not None and plan["start"] is None  # from its first trade: not skipped


def test_midnight_end_dates() -> None:
    ev = real_event("255398")  # endDate 2024-07-20T00:00:00Z, months after its start: an ordinary market
    m = ev["markets"][0]
    assert not is_same_day_end(ts(m["startDate"]), ts(m["endDate"]))
    assert is_same_day_end(ts("2024-07-20T16:05:00Z"), ts(m["endDate"]))
    assert not is_same_day_end(ts("2024-07-21T16:05:00Z"), ts(m["endDate"]))  # the day before: a bad timestamp
    assert not is_same_day_end(ts("2024-07-20T16:05:00Z"), ts("2024-07-20T00:00:01Z"))
    plan, reason = market_plan(ev, dict(m, startDate="2024-07-20T16:05:00Z"))
    assert reason is None and plan is not None and plan["end"] == ts("2024-07-21T00:00:00Z")
    _, reason = market_plan(ev, dict(m, startDate="2024-07-21T16:05:00Z"))
    assert reason == "end_before_start"


def test_same_day_filter_reason_comes_before_too_short() -> None:
    out = MarketFilters().check(EventSeries("binary", ts("2024-07-20T00:00:00Z").date(),
                                            ts("2024-07-20T00:00:00Z").date(), {}, {}, same_day="markets[0]"))
    assert (out.keep, out.stage, out.reason, out.detail) == (False, "span", "same_day", "markets[0]")


def _same_day_cache(root: Path, with_start: bool) -> tuple[dict, list[dict]]:
    """A cache holding the real binary market 503051, made a resolved same-day market."""
    ev = real_event("503051")
    m = ev["markets"][0]
    m["outcomePrices"] = '["0", "1"]'  # resolved (No) so that it reaches the span rule
    m["closed"] = ev["closed"] = True
    m["startDate"] = "2024-07-31T14:48:35.918Z"  # same day as its (real) endDate 2024-07-31T12:00:00Z ...
    m["endDate"] = ev["endDate"] = "2024-07-31T00:00:00Z"  # ... at midnight, as daily markets carry it
    if not with_start:
        for key in ("startDate",):
            m.pop(key)
            ev.pop(key)
        m.pop("createdAt")
    cache = PolymarketCache(root)
    for d in (cache.gamma_dir, cache.prices_dir, cache.trades_dir):
        d.mkdir(parents=True, exist_ok=True)
    cache.events_page_path(0).write_text(json.dumps([ev]))
    t0 = int(ts("2024-07-31T14:50:00Z").timestamp())
    tokens = json.loads(m["clobTokenIds"])
    cache.prices_path(tokens[0]).write_text(json.dumps({"history": [{"t": t0 + 600 * i, "p": 0.1} for i in range(5)]}))
    trades = [{"timestamp": t0 + 900 * i, "size": 20, "asset": tokens[1], "outcomeIndex": 1,
               "transactionHash": f"0x{i:064x}", "price": 0.9, "side": "BUY"} for i in range(6)]
    cache.trades_path(m["conditionId"]).write_text(json.dumps(trades))
    return ev, trades


def test_same_day_market_gets_its_own_reason_in_the_build(tmp_path: Path) -> None:
    _same_day_cache(tmp_path / "pm", with_start=True)
    report = build_events(tmp_path / "pm", tmp_path / "ws", config={"screen": {"enabled": False},
                                                                    "schedule": {"require_index": False}},
                          progress=False)
    assert report["excluded"] == {"span": {"same_day": 1}}


@pytest.fixture
def served_cache(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    world = tmp_path / "world"
    _same_day_cache(world / "polymarket", with_start=False)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            status, headers, body = sp.handle("GET", url.path, parse_qs(url.query), world) or (404, {}, b"")
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield world, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_downloader_fetches_a_market_without_any_start_from_its_first_trade(served_cache: tuple[Path, str],
                                                                          tmp_path: Path) -> None:
    world, base = served_cache
    cfg = {line.split("=", 1)[0].removeprefix("events.polymarket."): line.split("=", 1)[1]
           for line in sp.client_settings(base)}
    cfg.update(requests_per_second=0, price_fidelity_minutes=1)
    with PolymarketClient(tmp_path / "fetched", cfg, sleep=lambda s: None) as client:
        summary = client.fetch_all(progress=False)
    assert summary["markets_skipped"] == 0 and summary["starts_from_first_trade"] == 1
    assert summary["price_series"] == 2 and summary["prices_failed"] == 0
    fetched = PolymarketCache(tmp_path / "fetched")
    token = json.loads(real_event("503051")["markets"][0]["clobTokenIds"])[0]
    assert fetched.prices(token) == PolymarketCache(world / "polymarket").prices(token)
    report = build_events(tmp_path / "fetched", tmp_path / "ws", config={"screen": {"enabled": False},
                                                                         "schedule": {"require_index": False}},
                          progress=False)
    assert report["repairs"]["startDate_from_first_trade"] == 1
    assert report["excluded"] == {"span": {"same_day": 1}}
