"""The sample world's Polymarket cache served as Gamma / CLOB / Data API (synth/serve_polymarket.py).

The handler is exercised directly and behind the world server (`synth/serve.py`, 127.0.0.1:0), with
the real downloader (`PolymarketClient`) pointed at it; its sleeps are recorded, never slept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from forecast_env.envs.events.polymarket.cache import PolymarketCache
from forecast_env.envs.events.polymarket.client import PolymarketClient
from forecast_env.synth import serve_polymarket as sp
from forecast_env.timeparse import parse_api_time


@pytest.fixture
def served(micro_world: Path) -> Iterator[tuple[Path, str]]:
    """The micro world behind synth/serve.py, which delegates the three services to this handler."""
    from forecast_env.synth.serve import WorldServer

    sp.clear_faults(micro_world)
    with WorldServer(micro_world) as server:
        yield micro_world, server.url.rstrip("/")
    sp.clear_faults(micro_world)


def _config(base: str, **extra: object) -> dict:
    cfg = {line.split("=", 1)[0].removeprefix("events.polymarket."): line.split("=", 1)[1]
           for line in sp.client_settings(base)}
    cfg.update({"requests_per_second": 0, "page_size": 7, "price_fidelity_minutes": 1, "max_retries": 2})
    cfg.update(extra)
    return cfg


def test_handler_answers_only_its_prefixes_and_pages_gamma(micro_world: Path) -> None:
    assert sp.handle("GET", "/crawl-data/CC-NEWS/2025/03/warc.paths.gz", {}, micro_world) is None
    everything = PolymarketCache(micro_world / "polymarket")
    ids = [e["id"] for e in everything.events()]
    got: list[str] = []
    for offset in range(0, len(ids) + 7, 7):
        status, headers, body = sp.handle("GET", "/gamma/events", {"closed": ["true"], "limit": ["7"],
                                                                    "offset": [str(offset)]}, micro_world)
        assert status == 200 and headers["Content-Type"] == "application/json"
        got += [e["id"] for e in json.loads(body)]
    assert got == ids  # ordered by id, every event once
    status, _, body = sp.handle("GET", "/gamma/events", {"closed": "false"}, micro_world)
    assert status == 200 and json.loads(body) == []  # the sample world's events are all closed
    some = json.loads(sp.handle("GET", "/gamma/events", {"end_date_max": "2025-01-01"}, micro_world)[2])
    assert len(some) < len(ids)
    assert sp.handle("POST", "/gamma/events", {}, micro_world)[0] == 405
    assert sp.handle("GET", "/gamma/events", {"limit": "x"}, micro_world)[0] == 400


def test_prices_history_windows_fidelity_and_the_empty_interval_max(micro_world: Path) -> None:
    cache = PolymarketCache(micro_world / "polymarket")
    ev = next(iter(cache.events()))
    token = json.loads(ev["markets"][0]["clobTokenIds"])[0]
    full = cache.prices(token)
    assert full and len(full) > 3
    lo, hi = full[1]["t"], full[-2]["t"]
    body = json.loads(sp.handle("GET", "/clob/prices-history",
                                {"market": token, "startTs": str(lo), "endTs": str(hi), "fidelity": "1"},
                                micro_world)[2])
    assert body["history"] == [p for p in full if lo <= p["t"] <= hi]  # both ends inclusive
    daily = json.loads(sp.handle("GET", "/clob/prices-history",
                                 {"market": token, "startTs": "0", "endTs": str(2**31), "fidelity": "1440"},
                                 micro_world)[2])["history"]
    assert len({p["t"] // 86400 for p in daily}) == len(daily) < len(full)  # one point per day bucket
    # interval=max below 12-hour fidelity: empty for a resolved market (why the client uses windows)
    empty = sp.handle("GET", "/clob/prices-history", {"market": token, "interval": "max", "fidelity": "60"},
                      micro_world)
    assert empty[0] == 200 and json.loads(empty[2]) == {"history": []}
    coarse = json.loads(sp.handle("GET", "/clob/prices-history", {"market": token, "interval": "max",
                                                                   "fidelity": "720"}, micro_world)[2])
    assert coarse["history"]
    assert sp.handle("GET", "/clob/prices-history", {"interval": "max"}, micro_world)[0] == 400
    unknown = sp.handle("GET", "/clob/prices-history", {"market": "123", "startTs": "0", "endTs": "9"},
                        micro_world)
    assert json.loads(unknown[2]) == {"history": []}


def test_trades_pages_newest_first_and_refuses_offsets_past_the_cap(micro_world: Path) -> None:
    cache = PolymarketCache(micro_world / "polymarket")
    cid = next(p.stem for p in sorted(cache.trades_dir.glob("*.json")) if len(cache.trades(p.stem) or []) > 10)
    rows = cache.trades(cid)
    pages = [json.loads(sp.handle("GET", "/data-api/trades", {"market": cid, "limit": "4", "offset": str(o)},
                                  micro_world)[2]) for o in range(0, len(rows) + 4, 4)]
    got = [r for page in pages for r in page]
    assert sorted(got, key=json.dumps) == sorted(rows, key=json.dumps)
    ts = [r["timestamp"] for r in got]
    assert ts == sorted(ts, reverse=True)
    status, _, body = sp.handle("GET", "/data-api/trades", {"market": cid, "offset": str(sp.DATA_API_MAX_OFFSET + 1)},
                                micro_world)
    assert status == 400 and b"offset" in body


def test_downloader_against_the_served_world_rebuilds_the_cache(served: tuple[Path, str], tmp_path: Path) -> None:
    world, base = served
    sleeps: list[float] = []
    with PolymarketClient(tmp_path, _config(base), sleep=sleeps.append) as client:
        summary = client.fetch_all(progress=False)
    original, fetched = PolymarketCache(world / "polymarket"), PolymarketCache(tmp_path)
    assert [e["id"] for e in fetched.events()] == [e["id"] for e in original.events()]
    assert summary["prices_failed"] == summary["trades_failed"] == 0
    assert sleeps == []
    # every cached series comes back (fidelity 1 keeps every point of the sample world)
    for path in sorted(original.trades_dir.glob("*.json"))[:20]:
        assert sorted(fetched.trades(path.stem) or [], key=json.dumps) == sorted(original.trades(path.stem),
                                                                                  key=json.dumps)
    for path in sorted(original.prices_dir.glob("*.json"))[:20]:
        if fetched.prices_path(path.stem).exists():
            assert fetched.prices(path.stem) == original.prices(path.stem)


def test_faults_503_retry_after_is_honoured_and_404_is_not_retried(served: tuple[Path, str], tmp_path: Path) -> None:
    world, base = served
    cache = PolymarketCache(world / "polymarket")
    cids = sorted(p.stem for p in cache.trades_dir.glob("*.json"))
    sp.inject(world, sp.Fault("/gamma/events", "503", count=2, retry_after=7))
    sp.inject(world, sp.Fault("/data-api/trades", "404", count=5, match={"market": cids[0]}))
    sleeps: list[float] = []
    with PolymarketClient(tmp_path, _config(base, max_retries=3), sleep=sleeps.append) as client:
        summary = client.fetch_all(progress=False)
    assert len(sleeps) == 2 and all(s >= 7 for s in sleeps)  # two 503s on the first page, Retry-After kept
    assert summary["trades_failed"] == 1 and summary["failures"][0]["id"] == cids[0]
    assert "HTTP 404" in summary["failures"][0]["error"]
    assert sp.request_counts[world.resolve()]["/data-api/trades"] >= 1
    with PolymarketClient(tmp_path, _config(base), sleep=sleeps.append) as client:
        again = client.fetch_all(progress=False)  # one 404 was taken: 4 are left, the rerun fails again
    assert again["trades_failed"] == 1 and again["trades_cached"] == summary["trades_fetched"]


def test_truncated_body_is_retried_and_offset_cap_truncates(served: tuple[Path, str], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    world, base = served
    sp.inject(world, sp.Fault("/gamma/events", "truncated", count=1))
    monkeypatch.setattr(sp, "DATA_API_MAX_OFFSET", 4)
    sleeps: list[float] = []
    cfg = _config(base, trades_page_size=2, trades_max_offset=10_000)
    with PolymarketClient(tmp_path, cfg, sleep=sleeps.append) as client:
        summary = client.fetch_all(progress=False)
    assert len(sleeps) == 1  # the cut JSON body was retried once
    assert summary["trades_truncated"] > 0  # the server's 400 past its offset cap
    state = json.loads((tmp_path / "fetch_state.json").read_text())
    assert any(v.get("status") == "truncated" for v in state["trades"].values())


def test_closed_before_bounds_the_listing_server_and_client_side(served: tuple[Path, str], tmp_path: Path) -> None:
    from datetime import UTC, date, datetime

    from forecast_env.envs.events.polymarket.responses import event_close

    world, base = served
    before = date(2026, 1, 1)
    with PolymarketClient(tmp_path, _config(base), sleep=lambda s: None) as client:
        summary = client.fetch_all(closed_before=before, progress=False)
    cut = datetime(2026, 1, 1, tzinfo=UTC)
    everything = list(PolymarketCache(world / "polymarket").events())
    fetched = list(PolymarketCache(tmp_path).events())
    assert 0 < len(fetched) < len(everything)
    assert all(parse_api_time(e["endDate"]) <= cut for e in fetched)  # end_date_max, server-side
    kept = summary["events_selected"]
    assert kept == sum(1 for e in fetched if event_close(e) < cut)  # closed before, client-side
    assert summary["events_filtered"] == len(fetched) - kept
