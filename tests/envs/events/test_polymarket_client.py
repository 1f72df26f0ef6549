"""The Polymarket downloader against a real local HTTP server serving recorded-format responses."""

from __future__ import annotations

import argparse
import json
import math
import socket
import threading
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forecast_env.envs.events.polymarket import (
    PolymarketCache,
    PolymarketClient,
    parse_json_string_field,
)
from forecast_env.envs.events.polymarket.client import HTTPStatusFailure, TokenBucket
from forecast_env.envs.events.polymarket.responses import merge_history, merge_trades, price_windows
from forecast_env.errors import EventsError, FetchError
from forecast_env.timeparse import parse_api_time
from tests.support.paths import FIXTURES

FIXTURES = FIXTURES / "polymarket"
DAY = 86400
PAD = 24 * 3600  # price_padding_hours in the test config


# --------------------------------------------------------------------------------------------
# The local server
# --------------------------------------------------------------------------------------------
class FakePolymarket:
    """Serves Gamma /events, CLOB /prices-history and Data API /trades from the fixtures.

    `script[key]` is a list of actions used by the next requests for `key` (then normal service);
    `always[key]` is an action for every request. Keys: ("events", offset), ("prices", token_id),
    ("trades", condition_id). Actions: "ok", "429" (Retry-After: 0), "429:<s>", "500", "404", "slow", "truncated", "short".
    """

    def __init__(self) -> None:
        self.events: list[dict] = json.loads((FIXTURES / "gamma_events.json").read_text())
        self.prices: dict[str, list] = json.loads((FIXTURES / "prices_history.json").read_text())
        self.trades: dict[str, list] = json.loads((FIXTURES / "trades.json").read_text())
        self.lock = threading.Lock()
        self.log: list[tuple[str, dict[str, str]]] = []
        self.script: dict[tuple, list[str]] = {}
        self.always: dict[tuple, str] = {}
        self.release = threading.Event()
        self.honour_end_date_min = True
        self.trades_max_offset: int | None = None
        self.url = ""

    def requests(self, path: str | None = None) -> list[dict[str, str]]:
        with self.lock:
            return [q for p, q in self.log if path is None or p == path]

    def action(self, key: tuple) -> str:
        with self.lock:
            if key in self.always:
                return self.always[key]
            queue = self.script.get(key)
            return queue.pop(0) if queue else "ok"

    def respond(self, path: str, q: dict[str, str]) -> tuple[tuple, int, Any]:
        if path == "/events":
            offset, limit = int(q.get("offset", 0)), int(q.get("limit", 20))
            rows = sorted(self.events, key=lambda e: int(e["id"]))
            if "end_date_min" in q and self.honour_end_date_min:
                rows = [e for e in rows if e["endDate"][:10] >= q["end_date_min"]]
            return ("events", offset), 200, rows[offset : offset + limit]
        if path == "/prices-history":
            token = q["market"]
            lo, hi = int(q["startTs"]), int(q["endTs"])
            hist = [pt for pt in self.prices.get(token, []) if lo <= pt["t"] <= hi]
            return ("prices", token), 200, {"history": hist}
        if path == "/trades":
            cid = q["market"]
            offset, limit = int(q.get("offset", 0)), int(q.get("limit", 100))
            if self.trades_max_offset is not None and offset > self.trades_max_offset:
                return (
                    ("trades", cid),
                    400,
                    {"error": f"max historical activity offset of {self.trades_max_offset} exceeded"},
                )
            return ("trades", cid), 200, self.trades.get(cid, [])[offset : offset + limit]
        return ("other",), 404, {"error": "not found"}


class Handler(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(
        self, status: int, body: bytes, headers: dict[str, str] | None = None, length: int | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body) if length is None else length))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        fake: FakePolymarket = self.server.fake
        parsed = urlparse(self.path)
        q = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        with fake.lock:
            fake.log.append((parsed.path, q))
        key, status, payload = fake.respond(parsed.path, q)
        body = json.dumps(payload).encode()
        act = fake.action(key)
        try:
            if act.startswith("429"):  # "429" or "429:<seconds>"
                wait = act.partition(":")[2] or "0"
                self._send(429, b'{"error": "Too Many Requests"}', {"Retry-After": wait})
            elif act == "500":
                self._send(500, b'{"error": "internal"}')
            elif act == "404":
                self._send(404, b'{"error": "market not found"}')
            elif act == "slow":
                fake.release.wait(timeout=10)
                self._send(status, body)
            elif act == "truncated":
                self._send(200, body[: len(body) // 2])
            elif act == "short":
                self._send(200, body[: len(body) // 2], length=len(body))
            else:
                self._send(status, body)
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture
def fake():
    fake = FakePolymarket()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.fake = fake
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield fake
    fake.release.set()
    server.shutdown()
    server.server_close()


def config(fake: FakePolymarket, **over: Any) -> dict[str, Any]:
    return {
        "gamma_url": fake.url,
        "clob_url": fake.url,
        "data_url": fake.url,
        "page_size": 2,
        "price_window_days": 7,
        "price_fidelity_minutes": 60,
        "requests_per_second": 0.0,
        "max_retries": 4,
        "backoff_seconds": 0.0,
        "timeout_seconds": 5.0,
        "trades_page_size": 2,
        "price_padding_hours": 24,
        **over,
    }


def good_markets(fake: FakePolymarket) -> list[dict]:
    out = []
    for ev in fake.events:
        for m in ev["markets"]:
            if m["id"] in ("260001", "260002"):
                continue
            out.append(m)
    return out


def lifetime(market: dict) -> tuple[int, int]:
    start = parse_api_time(market["startDate"])
    end = parse_api_time(market["closedTime"]) or parse_api_time(market["endDate"])
    assert start is not None and end is not None
    return math.floor(start.timestamp()), math.ceil(end.timestamp()) + PAD


# --------------------------------------------------------------------------------------------
# Pure helpers
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, expected",
    [
        ('["Yes", "No"]', ["Yes", "No"]),
        ('["0.0000004113250948", "0.9999995886749052"]', ["0.0000004113250948", "0.9999995886749052"]),
        (
            '["217426331434639062905690501558262415330672727368976149504881568479499388364"]',
            ["217426331434639062905690501558262415330672727368976149504881568479499388364"],
        ),
        (["Yes", "No"], ["Yes", "No"]),
        ("[]", []),
        (b'["a"]', ["a"]),
        (None, None),
        ("", None),
        ("   ", None),
        ('["1234, "5678"', None),
        ("not json", None),
        ('{"a": 1}', None),
        ("42", None),
        (42, None),
        ({"a": 1}, None),
        ('"Yes"', None),
    ],
)
def test_parse_json_string_field(value: Any, expected: Any) -> None:
    assert parse_json_string_field(value) == expected


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("2021-12-04T19:35:03.796Z", datetime(2021, 12, 4, 19, 35, 3, 796000, tzinfo=UTC)),
        ("2021-12-04T00:00:00Z", datetime(2021, 12, 4, tzinfo=UTC)),
        ("2025-01-05T18:49:12.543209Z", datetime(2025, 1, 5, 18, 49, 12, 543209, tzinfo=UTC)),
        ("2021-12-05 20:37:01+00", datetime(2021, 12, 5, 20, 37, 1, tzinfo=UTC)),
        ("2021-12-05T22:37:01+02:00", datetime(2021, 12, 5, 20, 37, 1, tzinfo=UTC)),
        ("2025-03-02T09:00:00.5Z", datetime(2025, 3, 2, 9, 0, 0, 500000, tzinfo=UTC)),
        ("2025-01-05T18:49:12.543209123Z", datetime(2025, 1, 5, 18, 49, 12, 543209, tzinfo=UTC)),
        ("2021-12-04", datetime(2021, 12, 4, tzinfo=UTC)),
        ("2021-12-04T10:00:00", datetime(2021, 12, 4, 10, tzinfo=UTC)),
        (1638576000, datetime(2021, 12, 4, tzinfo=UTC)),
        (1638576000.5, datetime(2021, 12, 4, 0, 0, 0, 500000, tzinfo=UTC)),
        ("1638576000", datetime(2021, 12, 4, tzinfo=UTC)),
        (1638576000000, datetime(2021, 12, 4, tzinfo=UTC)),
        ("1638576000123", datetime(2021, 12, 4, 0, 0, 0, 123000, tzinfo=UTC)),
        (date(2021, 12, 4), datetime(2021, 12, 4, tzinfo=UTC)),
        (datetime(2021, 12, 4, 1), datetime(2021, 12, 4, 1, tzinfo=UTC)),
        (None, None),
        ("", None),
        ("not a date", None),
        ("2021-13-45", None),
        (True, None),
        (float("nan"), None),
        (float("inf"), None),
        ([2021], None),
        ({}, None),
        ("2021-12-04T25:00:00Z", None),
    ],
)
def test_parse_api_time(raw: Any, expected: datetime | None) -> None:
    got = parse_api_time(raw)
    assert got == expected
    if got is not None:
        assert got.utcoffset() == timedelta(0)


@given(st.integers(0, 2_000_000_000), st.integers(0, 400 * DAY), st.integers(1, 30))
def test_price_windows_cover_without_gaps(start: int, length: int, days: int) -> None:
    windows = price_windows(start, start + length, days)
    assert windows[0][0] == start and windows[-1][1] == start + length
    for (a, b), (c, _) in pairwise(windows):
        assert b == c
    assert all(0 <= b - a <= days * DAY for a, b in windows)


def test_merge_history_and_trades() -> None:
    merged = merge_history(
        [
            {"t": 5, "p": 0.2},
            {"t": 1, "p": "0.1"},
            {"t": 5, "p": 0.3},
            {"t": None, "p": 1},
            "junk",
            {"t": 2, "p": float("nan")},
            {"t": True, "p": 0.5},
        ]
    )
    assert merged == [{"t": 1, "p": 0.1}, {"t": 5, "p": 0.3}]
    row = {"transactionHash": "0xa", "asset": "1", "timestamp": 10, "size": 2.0, "price": 0.5, "side": "BUY"}
    other = {**row, "side": "SELL"}
    earlier = {**row, "transactionHash": "0xb", "timestamp": 3}
    assert merge_trades([row, dict(row), other, earlier, 7]) == [earlier, row, other]


def test_token_bucket_spaces_requests() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    bucket = TokenBucket(4.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        bucket.acquire()
    assert slept == pytest.approx([0.25] * 4)
    now[0] += 10.0  # idle: the bucket refills only up to its burst
    bucket.acquire()
    bucket.acquire()
    assert slept[-1] == pytest.approx(0.25) and len(slept) == 5
    unlimited = TokenBucket(0.0, sleep=sleep)
    unlimited.acquire()
    assert len(slept) == 5


# --------------------------------------------------------------------------------------------
# The cache reader
# --------------------------------------------------------------------------------------------
def test_cache_reads_pages_deduplicated_and_sorted(tmp_path: Path) -> None:
    cache = PolymarketCache(tmp_path)
    assert list(cache.events()) == [] and cache.prices("1") is None and cache.trades("0xab") is None
    cache.gamma_dir.mkdir(parents=True)
    (cache.gamma_dir / "events-0.json").write_text(json.dumps([{"id": "100", "v": 1}, {"id": "9"}, "junk"]))
    (cache.gamma_dir / "events-10.json").write_text(json.dumps([{"id": "100", "v": 2}, {"title": "no id"}]))
    (cache.gamma_dir / "events-2.json").write_text(json.dumps([{"id": 20}]))
    (cache.gamma_dir / "notes.txt").write_text("ignored")
    assert cache.page_offsets() == [0, 2, 10]
    events = list(cache.events())
    # entries without an id, and non-objects, come last so that the builder excludes them with a reason
    assert [e.get("id") if isinstance(e, dict) else e for e in events] == ["9", 20, "100", "junk", None]
    assert events[2]["v"] == 2  # the later page wins
    (cache.gamma_dir / "events-4.json").write_text('[{"id": "1",')
    with pytest.raises(EventsError, match="events-4.json.*not valid JSON"):
        list(cache.events())
    cache.prices_dir.mkdir(parents=True)
    (cache.prices_dir / "123.json").write_text('{"history": [{"t": 1, "p": 0.5}]}')
    assert cache.prices("123") == [{"t": 1, "p": 0.5}]
    assert cache.prices("../etc") is None
    (cache.prices_dir / "456.json").write_text('{"nope": 1}')
    assert cache.prices("456") is None and cache.unreadable == [cache.prices_dir / "456.json"]
    with pytest.raises(EventsError, match="456.json"):
        PolymarketCache(tmp_path, strict=True).prices("456")
    cache.trades_dir.mkdir(parents=True)
    (cache.trades_dir / "0xab.json").write_text("[{")
    assert cache.trades("0xab") is None and len(cache.unreadable) == 2
    (cache.trades_dir / "0xab.json").write_text('[{"side": "BUY"}]')
    assert cache.trades("0xab") == [{"side": "BUY"}]


# --------------------------------------------------------------------------------------------
# The downloader
# --------------------------------------------------------------------------------------------
def test_full_fetch_writes_the_cache_layout(fake: FakePolymarket, tmp_path: Path) -> None:
    with PolymarketClient(tmp_path, config(fake)) as client:
        summary = client.fetch_all(progress=False)
    markets = good_markets(fake)
    tokens = {t: m for m in markets for t in json.loads(m["clobTokenIds"])}
    assert summary["events"] == 5 and summary["events_selected"] == 5
    assert summary["markets"] == 8 and summary["markets_skipped"] == 2
    assert summary["skip_reasons"] == {"bad_clobTokenIds": 1, "bad_startDate": 1}
    assert summary["price_series"] == summary["prices_fetched"] == len(tokens) == 12
    assert summary["trade_histories"] == summary["trades_fetched"] == 6
    assert summary["prices_failed"] == summary["trades_failed"] == 0 and summary["failures"] == []
    assert summary["requests"] == len(fake.requests())

    # Gamma pages: offsets 0 and 2 full, 4 short (page_size 2, 5 events)
    assert sorted(p.name for p in (tmp_path / "gamma").iterdir()) == [
        "events-0.json",
        "events-2.json",
        "events-4.json",
    ]
    first = fake.requests("/events")[0]
    assert first["closed"] == "true" and first["limit"] == "2" and first["offset"] == "0"
    cache = PolymarketCache(tmp_path)
    assert [e["id"] for e in cache.events()] == ["15002", "16085", "16090", "16101", "17000"]
    assert json.loads((tmp_path / "gamma" / "events-4.json").read_text())[0]["id"] == "17000"

    # prices: windows of <= 7 days covering each lifetime with no gap; whole history merged
    windows: dict[str, list[tuple[int, int]]] = {}
    for q in fake.requests("/prices-history"):
        assert q["fidelity"] == "60" and "interval" not in q
        windows.setdefault(q["market"], []).append((int(q["startTs"]), int(q["endTs"])))
    assert set(windows) == set(tokens)
    for token, market in tokens.items():
        start, end = lifetime(market)
        ws = windows[token]
        assert ws[0][0] == start and ws[-1][1] == end
        assert all(b == c for (_, b), (c, _) in pairwise(ws))
        assert all(0 < b - a <= 7 * DAY for a, b in ws)
        expected = [pt for pt in fake.prices[token] if start <= pt["t"] <= end]
        assert cache.prices(token) == expected and len(expected) > 10
        raw = json.loads(cache.prices_path(token).read_text())
        assert list(raw) == ["history"]
    assert len(windows[json.loads(markets[0]["clobTokenIds"])[0]]) >= 2

    # trades: all pages merged, sorted by time, deduplicated
    for m in markets:
        rows = cache.trades(m["conditionId"])
        assert rows is not None
        assert sorted(rows, key=lambda r: r["timestamp"]) == rows
        assert Counter(json.dumps(r, sort_keys=True) for r in rows) == Counter(
            json.dumps(r, sort_keys=True) for r in fake.trades[m["conditionId"]]
        )
    state = json.loads((tmp_path / "fetch_state.json").read_text())
    assert state["events"]["done"] is True
    assert {v["status"] for v in state["prices"].values()} == {"complete"}
    assert {v["status"] for v in state["trades"].values()} == {"complete"}


def test_rerun_makes_zero_requests_when_complete(fake: FakePolymarket, tmp_path: Path) -> None:
    with PolymarketClient(tmp_path, config(fake)) as client:
        client.fetch_all(progress=False)
    before = len(fake.requests())
    with PolymarketClient(tmp_path, config(fake)) as client:
        summary = client.fetch_all(progress=False)
    assert len(fake.requests()) == before
    assert summary["requests"] == 0
    assert summary["prices_cached"] == 12 and summary["trades_cached"] == 6
    assert summary["prices_fetched"] == summary["trades_fetched"] == 0
    # --refresh refetches only the last (short) page of the listing
    with PolymarketClient(tmp_path, config(fake)) as client:
        client.fetch_events(refresh=True)
    assert [q["offset"] for q in fake.requests("/events")[-1:]] == ["4"]
    assert len(fake.requests()) == before + 1


def test_transient_errors_are_retried(fake: FakePolymarket, tmp_path: Path) -> None:
    token = json.loads(good_markets(fake)[0]["clobTokenIds"])[0]
    cid = good_markets(fake)[1]["conditionId"]
    fake.script[("events", 0)] = ["429", "500", "truncated", "short"]
    fake.script[("events", 2)] = ["slow"]
    fake.script[("prices", token)] = ["500", "429", "truncated"]
    fake.script[("trades", cid)] = ["short", "500"]
    slept: list[float] = []
    with PolymarketClient(tmp_path, config(fake, timeout_seconds=0.3), sleep=slept.append) as client:
        summary = client.fetch_all(progress=False)
    assert summary["prices_failed"] == summary["trades_failed"] == 0
    assert summary["prices_fetched"] == 12 and summary["trades_fetched"] == 6
    offsets = [q["offset"] for q in fake.requests("/events")]
    assert offsets == ["0"] * 5 + ["2"] * 2 + ["4"]
    assert all(s == 0.0 for s in slept) and len(slept) == 4 + 1 + 3 + 2
    history = PolymarketCache(tmp_path).prices(token)
    assert history and history[0] == fake.prices[token][0]


def test_retry_after_is_honoured_and_backoff_grows(fake: FakePolymarket, tmp_path: Path) -> None:
    fake.script[("events", 0)] = ["429"]  # Retry-After: 0
    fake.script[("events", 2)] = ["500", "500", "500"]
    slept: list[float] = []
    with PolymarketClient(
        tmp_path, config(fake, backoff_seconds=1.0, backoff_jitter=0.0), sleep=slept.append
    ) as client:
        assert client.fetch_events() == 5
    assert slept == [1.0, 1.0, 2.0, 4.0]  # Retry-After 0 never shortens the backoff
    fake.script[("prices", "123")] = ["429:3", "429:7"]
    slept.clear()
    with PolymarketClient(tmp_path, config(fake), sleep=slept.append) as client:
        start = datetime(2021, 12, 4, tzinfo=UTC)
        assert client.fetch_prices("123", start, start + timedelta(days=1)) == []
    assert slept == [3.0, 7.0]


def test_events_listing_failure_raises(fake: FakePolymarket, tmp_path: Path) -> None:
    fake.always[("events", 2)] = "500"
    pattern = r"GET http://127\.0\.0\.1:\d+/events\?.*offset=2.*3 attempt.*HTTP 500"
    with (
        PolymarketClient(tmp_path, config(fake, max_retries=2)) as client,
        pytest.raises(FetchError, match=pattern),
    ):
        client.fetch_all(progress=False)
    assert len(fake.requests("/events")) == 1 + 3
    # the complete first page was kept: the next run starts at offset 2
    fake.always.clear()
    with PolymarketClient(tmp_path, config(fake)) as client:
        assert client.fetch_events() == 5
    assert [q["offset"] for q in fake.requests("/events")[4:]] == ["2", "4"]
    fake.always[("events", 0)] = "404"
    with (
        PolymarketClient(tmp_path / "other", config(fake)) as client,
        pytest.raises(HTTPStatusFailure, match="HTTP 404"),
    ):
        client.fetch_events()


def test_permanent_404_is_recorded_and_the_rest_continues(fake: FakePolymarket, tmp_path: Path) -> None:
    bad = json.loads(good_markets(fake)[2]["clobTokenIds"])[1]
    fake.always[("prices", bad)] = "404"
    with PolymarketClient(tmp_path, config(fake)) as client:
        summary = client.fetch_all(progress=False)
    assert summary["prices_failed"] == 1 and summary["prices_fetched"] == 11
    assert summary["trades_fetched"] == 6
    assert [f["id"] for f in summary["failures"]] == [bad]
    assert "HTTP 404" in summary["failures"][0]["error"]
    assert len([q for q in fake.requests("/prices-history") if q["market"] == bad]) == 1  # no retry
    state = json.loads((tmp_path / "fetch_state.json").read_text())
    assert state["prices"][bad]["status"] == "failed" and "404" in state["prices"][bad]["error"]
    assert PolymarketCache(tmp_path).prices(bad) is None
    # the resumed run fetches only the missing series
    fake.always.clear()
    before = len(fake.requests())
    with PolymarketClient(tmp_path, config(fake)) as client:
        summary = client.fetch_all(progress=False)
    new = fake.requests()[before:]
    assert new and {q["market"] for q in new} == {bad}
    assert summary["prices_fetched"] == 1 and summary["prices_cached"] == 11 and summary["trades_cached"] == 6
    assert PolymarketCache(tmp_path).prices(bad)


def test_partial_price_series_is_continued(fake: FakePolymarket, tmp_path: Path) -> None:
    market = good_markets(fake)[0]  # 16 days + padding: three 7-day windows
    token = json.loads(market["clobTokenIds"])[0]
    start, end = lifetime(market)
    fake.script[("prices", token)] = ["ok"] + ["500"] * 3
    with PolymarketClient(tmp_path, config(fake, max_retries=2)) as client:
        s_dt = datetime.fromtimestamp(start, UTC)
        e_dt = datetime.fromtimestamp(end, UTC)
        with pytest.raises(FetchError, match="prices-history"):
            client.fetch_prices(token, s_dt, e_dt)
        assert client.state["prices"][token]["covered"] == [start, start + 7 * DAY]
        partial = PolymarketCache(tmp_path).prices(token)
        assert partial and all(pt["t"] <= start + 7 * DAY for pt in partial)
        before = len(fake.requests())
        history = client.fetch_prices(token, s_dt, e_dt)
    starts = [int(q["startTs"]) for q in fake.requests()[before:]]
    assert starts == [start + 7 * DAY, start + 14 * DAY]
    assert history == [pt for pt in fake.prices[token] if start <= pt["t"] <= end]
    assert PolymarketCache(tmp_path).prices(token) == history


def test_malformed_events_are_skipped_and_counted(fake: FakePolymarket, tmp_path: Path) -> None:
    broken = dict(fake.events[0], id="18000", markets="not a list")
    odd = dict(
        fake.events[0],
        id="18001",
        markets=[
            "not an object",
            dict(fake.events[0]["markets"][0], conditionId=None),
            dict(fake.events[0]["markets"][0], clobTokenIds='["../../etc/passwd", "1"]'),
            dict(fake.events[0]["markets"][0], clobTokenIds=None),
            dict(
                fake.events[0]["markets"][0], startDate=None, closedTime="2021-11-01T00:00:00Z", endDate=None
            ),  # falls back to the event's startDate, then ends before it
        ],
    )
    fake.events += [broken, odd]
    with PolymarketClient(tmp_path, config(fake)) as client:
        summary = client.fetch_all(progress=False)
    assert summary["events"] == 7 and summary["events_skipped"] == 1
    assert summary["skip_reasons"] == {
        "bad_clobTokenIds": 3,
        "bad_startDate": 1,
        "event_bad_markets": 1,
        "market_not_an_object": 1,
        "bad_conditionId": 1,
        "end_before_start": 1,
    }
    assert summary["prices_fetched"] == 12 and summary["prices_failed"] == 0
    assert not (tmp_path / "etc").exists()


def test_closed_since_filters_server_and_client_side(fake: FakePolymarket, tmp_path: Path) -> None:
    old = next(m for e in fake.events if e["id"] == "15002" for m in e["markets"])
    with PolymarketClient(tmp_path / "a", config(fake)) as client:
        summary = client.fetch_all(closed_since=date(2021, 6, 1), progress=False)
    assert all(q["end_date_min"] == "2021-06-01" for q in fake.requests("/events"))
    assert summary["events"] == 4 and summary["prices_fetched"] == 10
    fake.honour_end_date_min = False  # a server that ignores the filter: the client filters itself
    with PolymarketClient(tmp_path / "b", config(fake)) as client:
        summary = client.fetch_all(closed_since=date(2021, 6, 1), progress=False)
    assert summary["events"] == 5 and summary["events_filtered"] == 1 and summary["prices_fetched"] == 10
    assert PolymarketCache(tmp_path / "b").trades(old["conditionId"]) is None


def test_max_pages_then_resume(fake: FakePolymarket, tmp_path: Path) -> None:
    with PolymarketClient(tmp_path, config(fake)) as client:
        assert client.fetch_events(max_pages=1) == 2
        assert [q["offset"] for q in fake.requests("/events")] == ["0"]
        assert client.fetch_events() == 5
    assert [q["offset"] for q in fake.requests("/events")] == ["0", "2", "4"]
    # another query (closed-since) invalidates the old pages; stale pages beyond its end are removed
    fake.events = [e for e in fake.events if e["id"] in ("16085", "16090")]
    with PolymarketClient(tmp_path, config(fake)) as client:
        assert client.fetch_events(closed_since=date(2020, 1, 1)) == 2
    assert PolymarketCache(tmp_path).page_offsets() == [0, 2]
    assert [e["id"] for e in PolymarketCache(tmp_path).events()] == ["16085", "16090"]


def test_trades_offset_cap_is_recorded(fake: FakePolymarket, tmp_path: Path) -> None:
    cid = max(fake.trades, key=lambda c: len(fake.trades[c]))
    n = len(fake.trades[cid])
    assert n >= 5
    with PolymarketClient(tmp_path / "a", config(fake, trades_max_offset=2)) as client:
        rows = client.fetch_trades(cid)
        assert client.state["trades"][cid]["status"] == "truncated"
        assert "may be missing" in client.state["trades"][cid]["note"]
    assert len(rows) == 4
    fake.trades_max_offset = 2  # the server's own cap: a 400 past it
    with PolymarketClient(tmp_path / "b", config(fake)) as client:
        rows = client.fetch_trades(cid)
        assert client.state["trades"][cid]["status"] == "truncated"
        assert client.trades_complete(cid)
    assert len(rows) == 4


def test_cli_fetch_command(fake: FakePolymarket, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from forecast_env.cli.events_fetch import add_fetch_command

    parser = argparse.ArgumentParser(prog="forecast-env")
    events = parser.add_subparsers(dest="command").add_parser("events").add_subparsers(dest="events_command")
    add_fetch_command(events)
    cache = tmp_path / "cache"
    sets = [f"polymarket.{k}={v}" for k, v in config(fake).items()]
    argv = ["events", "fetch", "--cache", str(cache), "--closed-since", "2021-06-01", "--no-progress"]
    for s in sets:
        argv += ["--set", s]
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert (
        "prices:  10 series: 10 fetched" in out and "skipped (bad_clobTokenIds: 1, bad_startDate: 1)" in out
    )
    assert PolymarketCache(cache).page_offsets() == [0, 2, 4]  # the last page is empty
    with pytest.raises(SystemExit):
        parser.parse_args(["events", "fetch", "--cache", str(cache), "--closed-since", "June"])


def test_cli_main_runs_events_fetch(
    fake: FakePolymarket, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from forecast_env.cli.main import main

    sets = [x for k, v in config(fake).items() for x in ("--set", f"polymarket.{k}={v}")]
    assert main(["events", "fetch", "--cache", str(tmp_path), "--no-progress", *sets]) == 0
    assert "prices:  12 series: 12 fetched" in capsys.readouterr().out
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dead = ["--set", f"polymarket.gamma_url=http://127.0.0.1:{port}", "--set", "polymarket.max_retries=0"]
    assert main(["events", "fetch", "--cache", str(tmp_path / "x"), "--no-progress", *dead]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: GET http://127.0.0.1:{port}/events?") and "Traceback" not in err
