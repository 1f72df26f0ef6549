"""The Polymarket downloader: Gamma events, CLOB price histories and Data API trades into the cache.

`PolymarketClient(cache_dir, config)` fetches resolved (closed) events page by page, then for every
market the YES/NO token price histories over the market's lifetime (in explicit startTs/endTs
windows: `interval=max` returns an empty history for resolved markets below 12-hour fidelity,
py-clob-client issues #189 and #216) and the market's trades. Raw responses go to the cache layout
of `forecast_env.envs.events.polymarket.cache`; `fetch_state.json` records what is complete, so a rerun
fetches only what is missing.

Transient errors (429 and 5xx, honouring Retry-After, timeouts, connection errors, truncated or invalid JSON)
are retried with exponential backoff; other 4xx are not. A price series or trade history that still
fails is recorded as failed (summary and fetch_state) and the run goes on; a failure of the events
listing itself raises `FetchError`.
"""

from __future__ import annotations

import email.utils
import json
import math
import random
import time
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Self

import httpx

from forecast_env.config import load_config
from forecast_env.envs.events.polymarket.cache import PolymarketCache, is_safe_id
from forecast_env.envs.events.polymarket.responses import (
    event_close,
    first_trade_time,
    market_plan,
    merge_history,
    merge_trades,
    price_windows,
)
from forecast_env.errors import ConfigError, EventsError, FetchError
from forecast_env.store import atomic_write_bytes, atomic_write_json

STATE_VERSION = 1
#: Seconds between two writes of fetch_state.json during a long run (it is always written at the end).
STATE_FLUSH_SECONDS = 5.0
#: Failures listed in the summary (all of them are in fetch_state.json).
SUMMARY_FAILURES = 20


class HTTPStatusFailure(FetchError):
    """A non-retryable HTTP status (4xx other than 429) for one URL."""

    def __init__(self, url: str, status: int, body: str) -> None:
        self.url = url
        self.status = status
        super().__init__(f"GET {url}: HTTP {status} ({body[:200]!r}); not retried: check the id or URL")


class TokenBucket:
    """A polite rate limit: at most `rate` requests per second on average, bursts of `burst`."""

    def __init__(
        self,
        rate: float,
        burst: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = float(rate)
        self.burst = max(1.0, float(burst))
        self.tokens = self.burst
        self._clock = clock
        self._sleep = sleep
        self._last = clock()

    def acquire(self) -> None:
        """Take one token, waiting until one is available (no wait when rate <= 0: unlimited)."""
        if self.rate <= 0:
            return
        now = self._clock()
        self.tokens = min(self.burst, self.tokens + (now - self._last) * self.rate)
        self._last = now
        if self.tokens < 1.0:
            wait = (1.0 - self.tokens) / self.rate
            self._sleep(wait)
            self._last = self._clock()
            self.tokens = 1.0
        self.tokens -= 1.0


def polymarket_config(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The validated `polymarket` config section: defaults updated by `config`.

    `config` may be a whole `events` config (its `polymarket` key is used) or the section itself
    (possibly partial, e.g. `{"gamma_url": "http://127.0.0.1:8000"}`).
    """
    section: Mapping[str, Any] = {}
    if config is not None:
        section = (
            config.get("polymarket", config) if isinstance(config.get("polymarket"), Mapping) else config
        )
    return load_config("events", overrides={f"polymarket.{k}": v for k, v in section.items()})["polymarket"]


class PolymarketClient:
    """Downloads Polymarket events, price histories and trades into a cache folder (resumable)."""

    def __init__(
        self,
        cache_dir: str | Path,
        config: Mapping[str, Any] | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = polymarket_config(config)
        cfg = self.config
        for key in ("page_size", "trades_page_size", "price_fidelity_minutes"):
            if cfg[key] < 1:
                raise ConfigError(f"events.polymarket.{key} must be >= 1, got {cfg[key]!r}")
        if cfg["price_window_days"] <= 0:
            raise ConfigError(
                f"events.polymarket.price_window_days must be > 0, got {cfg['price_window_days']!r}"
            )
        if cfg["max_retries"] < 0:
            raise ConfigError(f"events.polymarket.max_retries must be >= 0, got {cfg['max_retries']!r}")
        self.cache = PolymarketCache(cache_dir, strict=True)
        self.cache.dir.mkdir(parents=True, exist_ok=True)
        self._sleep = sleep
        self._http = httpx.Client(
            timeout=httpx.Timeout(float(cfg["timeout_seconds"])),
            headers={"Accept": "application/json", "User-Agent": "forecast-env polymarket downloader"},
            follow_redirects=True,
            transport=transport,
        )
        self._bucket = TokenBucket(cfg["requests_per_second"], sleep=sleep)
        self._rng = random.Random(0)
        #: HTTP attempts made by this client (retries included).
        self.requests = 0
        self._state = self._load_state()
        self._last_flush = time.monotonic()

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- state ---------------------------------------------------------------------------------
    def _load_state(self) -> dict[str, Any]:
        try:
            state = self.cache.state()
        except EventsError:
            state = {}  # an unreadable state only costs refetching; the cache files are atomic
        if state.get("version") != STATE_VERSION:
            state = {"version": STATE_VERSION}
        for key in ("events", "prices", "trades"):
            if not isinstance(state.get(key), dict):
                state[key] = {}
        return state

    def save_state(self, force: bool = True) -> None:
        """Write fetch_state.json (when `force`, or when the last write is older than a few seconds)."""
        now = time.monotonic()
        if force or now - self._last_flush >= STATE_FLUSH_SECONDS:
            atomic_write_json(self.cache.state_path, self._state)
            self._last_flush = now

    @property
    def state(self) -> dict[str, Any]:
        return self._state

    # -- HTTP ----------------------------------------------------------------------------------
    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        cfg = self.config
        delay = cfg["backoff_seconds"] * (2**attempt) * (1.0 + cfg["backoff_jitter"] * self._rng.random())
        delay = min(delay, cfg["max_backoff_seconds"])
        if retry_after is not None:
            delay = max(delay, min(retry_after, 600.0))
        return max(0.0, delay)

    @staticmethod
    def _retry_after(response: httpx.Response) -> float | None:
        raw = response.headers.get("Retry-After")
        if raw is None:
            return None
        try:
            return max(0.0, float(raw))
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())

    def get_json(self, url: str, params: Mapping[str, Any]) -> Any:
        """GET `url` and decode its JSON, retrying transient failures; FetchError after max_retries."""
        full = str(httpx.URL(url, params=dict(params)))
        attempts = self.config["max_retries"] + 1
        cause = "no attempt"
        for attempt in range(attempts):
            self._bucket.acquire()
            self.requests += 1
            retry_after = None
            try:
                response = self._http.get(url, params=dict(params))
            except httpx.TimeoutException:
                cause = f"timed out after {self.config['timeout_seconds']}s"
            except httpx.TransportError as exc:
                cause = f"{type(exc).__name__}: {exc}"
            else:
                status = response.status_code
                if status == 429:
                    cause = "HTTP 429 (rate limited)"
                    retry_after = self._retry_after(response)
                elif status >= 500:
                    cause = f"HTTP {status}"
                    retry_after = self._retry_after(response)  # a 503 "Slow Down" may say when
                elif status >= 400 or status < 200 or status >= 300:
                    raise HTTPStatusFailure(full, status, response.text)
                else:
                    try:
                        return json.loads(response.content)
                    except (ValueError, UnicodeDecodeError):
                        cause = f"invalid or truncated JSON body ({len(response.content)} bytes)"
            if attempt + 1 < attempts:
                self._sleep(self._backoff(attempt, retry_after))
        raise FetchError(
            f"GET {full}: failed after {attempts} attempt(s), last: {cause}; "
            "check the URL and network, then rerun (the fetch resumes where it stopped)"
        )

    # -- events --------------------------------------------------------------------------------
    def _events_query(self, closed_since: date | None, closed_before: date | None = None) -> dict[str, Any]:
        query: dict[str, Any] = {
            "closed": "true",
            "order": "id",
            "ascending": "true",
            "limit": int(self.config["page_size"]),
        }
        if closed_since is not None:
            query["end_date_min"] = closed_since.isoformat()
        if closed_before is not None:
            query["end_date_max"] = closed_before.isoformat()
        return query

    def fetch_events(
        self,
        closed_since: date | None = None,
        max_pages: int | None = None,
        refresh: bool = False,
        closed_before: date | None = None,
    ) -> int:
        """Fetch the Gamma /events listing of closed events into the cache; returns the events cached.

        Complete (full) pages already cached for the same query are not fetched again; a listing
        that reached its last (short) page is complete, and `refresh=True` refetches that last page
        (and any that follow, for events closed since). `max_pages` bounds the pages considered.
        """
        page_size = int(self.config["page_size"])
        query = self._events_query(closed_since, closed_before)
        query_key = {**query, "url": self.config["gamma_url"]}
        st = self._state["events"]
        if st.get("query") != query_key:
            st.clear()
            st.update({"query": query_key, "complete_offsets": [], "done": False, "last_offset": None})
        complete = set(st["complete_offsets"])
        url = self.config["gamma_url"].rstrip("/") + "/events"
        if st["done"] and not refresh and self.cache.events_page_path(st["last_offset"]).exists():
            return self._count_events(st["last_offset"])
        offset = 0
        if st["done"] and refresh:
            offset = st["last_offset"]
        st["done"] = False
        while max_pages is None or offset < max_pages * page_size:
            path = self.cache.events_page_path(offset)
            if offset in complete and path.exists():
                offset += page_size
                continue
            page = self.get_json(url, {**query, "offset": offset})
            if not isinstance(page, list):
                raise FetchError(
                    f"GET {url}?offset={offset}: expected a JSON list of events, got "
                    f"{type(page).__name__}; is events.polymarket.gamma_url right?"
                )
            atomic_write_bytes(path, _compact(page))
            if len(page) >= page_size:
                complete.add(offset)
                st["complete_offsets"] = sorted(complete)
                self.save_state(force=False)
                offset += page_size
                continue
            st["done"] = True
            st["last_offset"] = offset
            for stale in self.cache.page_offsets():
                if stale > offset:  # left by an earlier, longer listing of another query
                    self.cache.events_page_path(stale).unlink(missing_ok=True)
            break
        self.save_state()
        return self._count_events(st["last_offset"] if st["done"] else None)

    def _count_events(self, last_offset: int | None) -> int:
        total = 0
        for offset in self.cache.page_offsets():
            if last_offset is None or offset <= last_offset:
                total += len(self.cache.read_page(offset))
        return total

    # -- prices --------------------------------------------------------------------------------
    @staticmethod
    def _span(start: datetime, end: datetime) -> tuple[int, int]:
        s = math.floor(start.timestamp())
        e = math.ceil(end.timestamp())
        return s, max(s, e)

    def prices_complete(self, token_id: str, start: datetime, end: datetime) -> bool:
        """True when the cached history of `token_id` already covers [start, end]."""
        s, e = self._span(start, end)
        item = self._state["prices"].get(token_id)
        if not item or item.get("status") != "complete" or not is_safe_id(token_id):
            return False
        covered = item.get("covered") or [None, None]
        return (
            covered[0] is not None
            and covered[0] <= s
            and covered[1] >= e
            and self.cache.prices_path(token_id).exists()
        )

    def fetch_prices(self, token_id: str, start: datetime, end: datetime) -> list[dict]:
        """The price history of one token over [start, end], fetched in windows and merged into the cache.

        Windows of `price_window_days` are requested in order; a series already complete makes no
        request; one interrupted by a failure is continued from its last complete window.
        Raises FetchError (recording the item as failed) when a window cannot be fetched.
        """
        if not is_safe_id(token_id):
            raise FetchError(f"token id {token_id!r} is not a valid CLOB token id (digits expected)")
        s, e = self._span(start, end)
        path = self.cache.prices_path(token_id)
        if self.prices_complete(token_id, start, end):
            return self.cache.prices(token_id) or []
        item = self._state["prices"].get(token_id) or {}
        covered = item.get("covered")
        points: list[Any] = []
        base, cursor = s, s
        if covered and path.exists() and covered[0] <= s <= covered[1]:
            try:
                points = list(self.cache.prices(token_id) or [])
                base, cursor = covered[0], covered[1]
            except EventsError:
                points = []
        url = self.config["clob_url"].rstrip("/") + "/prices-history"
        fidelity = int(self.config["price_fidelity_minutes"])
        windows = price_windows(cursor, e, self.config["price_window_days"]) if cursor < e else []
        if cursor == e == s and not points:
            windows = [(s, e)]
        try:
            for ws, we in windows:
                data = self.get_json(
                    url, {"market": token_id, "startTs": ws, "endTs": we, "fidelity": fidelity}
                )
                history = data.get("history") if isinstance(data, dict) else None
                if not isinstance(history, list):
                    raise FetchError(
                        f"GET {url}?market={token_id}&startTs={ws}&endTs={we}: expected "
                        f'{{"history": [...]}}, got {str(data)[:200]!r}'
                    )
                points.extend(history)
                cursor = we
        except FetchError as exc:
            merged = merge_history(points)
            if cursor > base:
                atomic_write_bytes(path, _compact({"history": merged}))
            self._state["prices"][token_id] = {
                "status": "failed",
                "covered": [base, cursor] if cursor > base else None,
                "requested": [s, e],
                "error": str(exc),
            }
            self.save_state(force=False)
            raise
        merged = merge_history(points)
        atomic_write_bytes(path, _compact({"history": merged}))
        self._state["prices"][token_id] = {
            "status": "complete",
            "covered": [base, max(e, cursor)],
            "points": len(merged),
        }
        self.save_state(force=False)
        return merged

    # -- trades --------------------------------------------------------------------------------
    def trades_complete(self, condition_id: str) -> bool:
        """True when all trades of `condition_id` (or all the API would give) are cached."""
        item = self._state["trades"].get(condition_id)
        return bool(
            item
            and item.get("status") in ("complete", "truncated")
            and is_safe_id(condition_id)
            and self.cache.trades_path(condition_id).exists()
        )

    def fetch_trades(self, condition_id: str) -> list[dict]:
        """All trade rows of one market (condition id), paged and merged into the cache.

        Stops at the API's maximum offset (`trades_max_offset`, or a 4xx answer past the first
        page) and records the history as `truncated`. Raises FetchError (item recorded as failed)
        when a page cannot be fetched.
        """
        if not is_safe_id(condition_id):
            raise FetchError(f"condition id {condition_id!r} is not valid (0x-hex expected)")
        if self.trades_complete(condition_id):
            return self.cache.trades(condition_id) or []
        url = self.config["data_url"].rstrip("/") + "/trades"
        limit = int(self.config["trades_page_size"])
        max_offset = int(self.config["trades_max_offset"])
        rows: list[Any] = []
        offset, truncated = 0, False
        try:
            while True:
                if offset > max_offset:
                    truncated = True
                    break
                try:
                    page = self.get_json(url, {"market": condition_id, "limit": limit, "offset": offset})
                except HTTPStatusFailure as exc:
                    if offset > 0 and exc.status in (400, 403, 422):
                        truncated = True  # the API's own offset cap
                        break
                    raise
                if not isinstance(page, list):
                    raise FetchError(
                        f"GET {url}?market={condition_id}&offset={offset}: expected a JSON "
                        f"list of trades, got {str(page)[:200]!r}"
                    )
                rows.extend(page)
                if len(page) < limit:
                    break
                offset += limit
        except FetchError as exc:
            self._state["trades"][condition_id] = {"status": "failed", "error": str(exc)}
            self.save_state(force=False)
            raise
        merged = merge_trades(rows)
        atomic_write_bytes(self.cache.trades_path(condition_id), _compact(merged))
        entry: dict[str, Any] = {"status": "truncated" if truncated else "complete", "rows": len(merged)}
        if truncated:
            entry["note"] = (
                f"the Data API stopped paging at offset {offset}; older trades of this market may be missing"
            )
        self._state["trades"][condition_id] = entry
        self.save_state(force=False)
        return merged

    def _first_trade_start(self, condition_id: str) -> tuple[datetime | None, str | None]:
        """The first trade's time of a market with no start field (its trades are fetched first).

        (None, reason) when it has no trade or its trades could not be fetched (the trades job
        then retries them and records the failure; a rerun fetches the prices).
        """
        try:
            rows = self.fetch_trades(condition_id)
        except FetchError:
            return None, "start_pending_trades_failed"
        start = first_trade_time(rows)
        return (start, None) if start is not None else (None, "no_start_and_no_trades")

    # -- everything ----------------------------------------------------------------------------
    def fetch_all(
        self,
        closed_since: date | None = None,
        progress: bool = True,
        max_pages: int | None = None,
        refresh: bool = False,
        closed_before: date | None = None,
    ) -> dict[str, Any]:
        """Events, then every market's token price histories and trades; returns a summary of counts.

        Markets with unusable fields are skipped and counted by reason; items that fail are recorded
        (summary and fetch_state.json) and the run goes on. A rerun fetches only what is missing.
        A market with no startDate, event startDate or createdAt starts at its first trade: its
        trades are fetched before its prices (`starts_from_first_trade`; then counted as cached).
        """
        from tqdm.auto import tqdm

        t0 = time.monotonic()
        requests0 = self.requests
        summary: dict[str, Any] = {
            "cache_dir": str(self.cache.dir),
            "events": 0,
            "events_selected": 0,
            "events_filtered": 0,
            "events_skipped": 0,
            "markets": 0,
            "markets_skipped": 0,
            "skip_reasons": {},
            "price_series": 0,
            "prices_fetched": 0,
            "prices_cached": 0,
            "prices_failed": 0,
            "trade_histories": 0,
            "trades_fetched": 0,
            "trades_cached": 0,
            "trades_failed": 0,
            "trades_truncated": 0,
            "starts_from_first_trade": 0,
            "failures": [],
            "requests": 0,
            "seconds": 0.0,
        }
        reasons: dict[str, int] = summary["skip_reasons"]
        try:
            summary["events"] = self.fetch_events(
                closed_since, max_pages=max_pages, refresh=refresh, closed_before=closed_before
            )
            before = (
                datetime(closed_before.year, closed_before.month, closed_before.day, tzinfo=UTC)
                if closed_before is not None
                else None
            )
            since = (
                datetime(closed_since.year, closed_since.month, closed_since.day, tzinfo=UTC)
                if closed_since is not None
                else None
            )
            now = datetime.now(UTC)
            pad = timedelta(hours=float(self.config["price_padding_hours"]))
            spans: dict[str, tuple[datetime, datetime]] = {}
            conditions: dict[str, None] = {}
            by_first_trade: list[dict[str, Any]] = []
            for event in self.cache.events():
                closed = event_close(event)
                if since is not None and closed is not None and closed < since:
                    summary["events_filtered"] += 1
                    continue
                if before is not None and closed is not None and closed >= before:
                    summary["events_filtered"] += 1  # closed on or after --closed-before
                    continue
                markets = event.get("markets")
                if not isinstance(markets, list):
                    summary["events_skipped"] += 1
                    reasons["event_bad_markets"] = reasons.get("event_bad_markets", 0) + 1
                    continue
                summary["events_selected"] += 1
                for market in markets:
                    summary["markets"] += 1
                    plan, reason = market_plan(event, market)
                    if plan is None:
                        summary["markets_skipped"] += 1
                        reasons[str(reason)] = reasons.get(str(reason), 0) + 1
                        continue
                    conditions[plan["condition_id"]] = None
                    if plan["start"] is None:  # no startDate, event startDate or createdAt
                        by_first_trade.append(plan)
                        continue
                    _add_spans(spans, plan, plan["start"], pad, now)
            for plan in by_first_trade:
                start, why = self._first_trade_start(plan["condition_id"])
                if start is None:
                    summary["markets_skipped"] += 1
                    reasons[str(why)] = reasons.get(str(why), 0) + 1
                    continue
                summary["starts_from_first_trade"] += 1
                _add_spans(spans, plan, start, pad, now)
            summary["price_series"] = len(spans)
            summary["trade_histories"] = len(conditions)
            jobs: list[tuple[str, str]] = [("prices", t) for t in spans] + [("trades", c) for c in conditions]
            bar = tqdm(jobs, desc="polymarket", unit="item", disable=not progress, leave=False)
            for kind, key in bar:
                if kind == "prices":
                    start, end = spans[key]
                    if self.prices_complete(key, start, end):
                        summary["prices_cached"] += 1
                        continue
                    try:
                        self.fetch_prices(key, start, end)
                        summary["prices_fetched"] += 1
                    except FetchError as exc:
                        summary["prices_failed"] += 1
                        _note_failure(summary, kind, key, exc)
                else:
                    if self.trades_complete(key):
                        summary["trades_cached"] += 1
                        if self._state["trades"][key].get("status") == "truncated":
                            summary["trades_truncated"] += 1
                        continue
                    try:
                        self.fetch_trades(key)
                        summary["trades_fetched"] += 1
                        if self._state["trades"][key].get("status") == "truncated":
                            summary["trades_truncated"] += 1
                    except FetchError as exc:
                        summary["trades_failed"] += 1
                        _note_failure(summary, kind, key, exc)
        finally:
            self.save_state()
        summary["requests"] = self.requests - requests0
        summary["seconds"] = round(time.monotonic() - t0, 3)
        self._state["last_run"] = {k: v for k, v in summary.items() if k != "failures"}
        self.save_state()
        return summary


def _add_spans(
    spans: dict[str, tuple[datetime, datetime]],
    plan: Mapping[str, Any],
    start: datetime,
    pad: timedelta,
    now: datetime,
) -> None:
    """Widen each token's price span to cover this market's [start, end + pad] (never past now)."""
    end = min(plan["end"] + pad, max(now, start))
    end = max(end, start)
    for token in plan["tokens"]:
        old = spans.get(token)
        spans[token] = (start, end) if old is None else (min(old[0], start), max(old[1], end))


def _note_failure(summary: dict[str, Any], kind: str, key: str, exc: Exception) -> None:
    if len(summary["failures"]) < SUMMARY_FAILURES:
        summary["failures"].append({"kind": kind, "id": key, "error": str(exc)})


def _compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
