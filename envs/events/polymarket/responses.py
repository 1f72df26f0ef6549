"""Pure functions over Polymarket API responses: which windows and markets to fetch, and merging pages.

The downloader (`client.py`) calls them; they touch no network and no disk, so they are tested alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from forecast_env.envs.events.polymarket.cache import is_safe_id, parse_json_string_field
from forecast_env.timeparse import parse_api_time

#: The fields that identify one trade row across overlapping pages.
_TRADE_KEY = ("transactionHash", "asset", "timestamp", "size", "price", "side")


def price_windows(start_ts: int, end_ts: int, window_days: float) -> list[tuple[int, int]]:
    """Contiguous [startTs, endTs] windows of at most `window_days` covering [start_ts, end_ts]."""
    step = max(1, round(window_days * 86400))
    if end_ts <= start_ts:
        return [(start_ts, start_ts)]
    return [(a, min(a + step, end_ts)) for a in range(start_ts, end_ts, step)]


def merge_history(points: Iterable[Any]) -> list[dict[str, float]]:
    """Price points sorted by t with one point per t (the last seen wins); malformed points dropped."""
    by_t: dict[int, float] = {}
    for point in points:
        if not isinstance(point, Mapping):
            continue
        t, p = point.get("t"), point.get("p")
        if isinstance(t, bool) or isinstance(p, bool):
            continue
        try:
            t_f, p_f = float(t), float(p)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if not (math.isfinite(t_f) and math.isfinite(p_f)):
            continue
        by_t[int(t_f)] = p_f
    return [{"t": t, "p": by_t[t]} for t in sorted(by_t)]


def merge_trades(rows: Iterable[Any]) -> list[dict]:
    """Trade rows de-duplicated by (transactionHash, asset, timestamp, size, price, side), sorted by time."""
    seen: dict[tuple[str, ...], dict] = {}
    for row in rows:
        if not isinstance(row, Mapping):
            continue
        key = tuple(str(row.get(k)) for k in _TRADE_KEY)
        seen.setdefault(key, dict(row))

    def order(row: dict) -> tuple[float, str]:
        try:
            ts = float(row.get("timestamp"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            ts = math.inf
        return (ts if math.isfinite(ts) else math.inf, str(row.get("transactionHash")))

    return sorted(seen.values(), key=order)


def market_plan(event: Mapping[str, Any], market: Any) -> tuple[dict[str, Any] | None, str | None]:
    """What to fetch for one market (`tokens`, `condition_id`, `start`, `end`), or (None, skip reason)."""
    if not isinstance(market, Mapping):
        return None, "market_not_an_object"
    cid = market.get("conditionId")
    if not is_safe_id(cid):
        return None, "bad_conditionId"
    tokens = parse_json_string_field(market.get("clobTokenIds"))
    if not tokens:
        return None, "bad_clobTokenIds"
    token_ids = [str(t) if isinstance(t, int) and not isinstance(t, bool) else t for t in tokens]
    if not all(is_safe_id(t) for t in token_ids):
        return None, "bad_clobTokenIds"
    # A field the market lacks falls back (docs/design.md §4 "Leg starts"): market startDate, the
    # event's startDate, the market's createdAt, then its first trade (start None: the downloader
    # reads the trades first); one it has but that does not parse skips it.
    start, bad = _first_time_of(((market, "startDate"), (event, "startDate"), (market, "createdAt")))
    if start is None and bad is not None:
        return None, f"bad_{bad}"
    end, bad = _first_time([market, event], ("closedTime", "endDate"))
    if end is None:
        return None, f"bad_{bad or 'endDate'}"
    if start is not None and end < start:
        if not is_same_day_end(start, end):
            return None, "end_before_start"
        end = start.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    return {"tokens": list(dict.fromkeys(token_ids)), "condition_id": cid, "start": start, "end": end}, None


def is_same_day_end(start: datetime, end: datetime) -> bool:
    """True when `end` is midnight (00:00 UTC) of the day `start` falls on: a same-day market.

    Real sports and daily markets carry such an `endDate` (the day's date, its time left at 00:00),
    hours before their `startDate`; it is not a malformed timestamp (docs/design.md §4).
    """
    return end < start and end.date() == start.date() and (end.hour, end.minute, end.second, end.microsecond) == (
        0, 0, 0, 0)


def first_trade_time(rows: Iterable[Any]) -> datetime | None:
    """The time of the earliest trade row with a readable `timestamp` (unix seconds), or None."""
    best: float | None = None
    for row in rows:
        if not isinstance(row, Mapping):
            continue
        raw = row.get("timestamp")
        if isinstance(raw, bool):
            continue
        try:
            ts = float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if math.isfinite(ts) and ts > 0 and (best is None or ts < best):
            best = ts
    return None if best is None else datetime.fromtimestamp(int(best), tz=UTC)


def _first_time_of(
    fields: Iterable[tuple[Mapping[str, Any], str]],
) -> tuple[datetime | None, str | None]:
    """The first present timestamp among (record, key) pairs in order; (None, key) if a present one is bad."""
    for record, key in fields:
        raw = record.get(key)
        if raw is None or raw == "":
            continue
        parsed = parse_api_time(raw)
        return (parsed, None) if parsed is not None else (None, key)
    return None, None


def _first_time(
    records: list[Mapping[str, Any]], keys: tuple[str, ...]
) -> tuple[datetime | None, str | None]:
    """The first present timestamp among `keys` of `records` in order; (None, key) if a present one is bad."""
    return _first_time_of((record, key) for record in records for key in keys)


def event_close(event: Mapping[str, Any]) -> datetime | None:
    """When an event closed (closedTime, else endDate); None if neither parses."""
    return parse_api_time(event.get("closedTime")) or parse_api_time(event.get("endDate"))
