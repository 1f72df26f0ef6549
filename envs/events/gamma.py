"""Gamma events -> event candidates (docs/design.md §4 "Polymarket ingestion", "Layouts", "Labels").

`construct_event` parses one Gamma event and its markets (JSON-encoded strings, timestamps in
several formats, null or absent `negRisk`), decides its layout, reads its label, and loads its
price and trade series from the cache. Unambiguous defects are repaired and counted (numeric
strings, lists given as lists, a market without startDate takes the event's startDate, else its
createdAt, else its first trade); a same-day market (endDate at midnight of its start day) is
flagged for the span rule; anything else
raises `Excluded` with the stage, reason and where.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forecast_env.envs.events.candidate import Candidate, Excluded, Leg
from forecast_env.envs.events.polymarket.cache import PolymarketCache, parse_json_string_field
from forecast_env.envs.events.polymarket.responses import first_trade_time, is_same_day_end
from forecast_env.errors import EventsError
from forecast_env.timeparse import parse_api_time

#: Unix seconds outside this range are not price or trade times (year 2000 .. 2100).
_T_RANGE = (946_684_800, 4_102_444_800)

def open_cache(polymarket_dir: str | Path) -> PolymarketCache:
    """The shared cache reader over a Polymarket cache folder (gamma/, clob/prices-history/, data/trades/)."""
    root = Path(polymarket_dir)
    if not (root / "gamma").is_dir():
        raise EventsError(
            f"{root}: no gamma/ folder of Gamma event pages; fetch one with `forecast-env events fetch` "
            "or point --polymarket at a cache folder (gamma/, clob/prices-history/, data/trades/)"
        )
    return PolymarketCache(root)


def _history(raw: object) -> list[object]:
    """Normalize a prices() answer ({"history": [...]}, a list, or None) to a list of points."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        raw = raw.get("history") or []
    return list(raw) if isinstance(raw, list) else []



def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, str):
        try:
            f = float(value.strip())
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _as_bool(value: Any, repairs: Counter) -> bool | None:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        repairs["bool_from_string"] += 1
        return value.strip().lower() == "true"
    if isinstance(value, (int, float)) and value in (0, 1):
        repairs["bool_from_number"] += 1
        return bool(value)
    return None


def _json_list(m: Mapping[str, Any], key: str, where: str, repairs: Counter, required: bool = True) -> list | None:
    raw = m.get(key)
    if raw is None or raw == "":
        if required:
            raise Excluded("parse", "missing_field", f"{where}.{key}")
        return None
    if isinstance(raw, list):
        repairs[f"{key}_as_list"] += 1
        return raw
    out = parse_json_string_field(raw)
    if out is None:
        raise Excluded("parse", "bad_json", f"{where}.{key}={str(raw)[:80]!r}")
    return out


def _timestamp(m: Mapping[str, Any], key: str, where: str) -> datetime | None:
    raw = m.get(key)
    if raw is None or raw == "":
        return None
    ts = parse_api_time(raw)
    if ts is None:
        raise Excluded("parse", "bad_timestamp", f"{where}.{key}={str(raw)[:60]!r}")
    return ts


def _points(raw: object, counts: Counter) -> list[tuple[int, float]]:
    """(t, p) pairs of a CLOB history; unreadable points are dropped and counted."""
    out = []
    for pt in _history(raw):
        try:
            t = int(float(pt["t"]))  # type: ignore[index]
            p = float(pt["p"])  # type: ignore[index]
        except (KeyError, TypeError, ValueError, OverflowError):
            counts["bad_price_points"] += 1
            continue
        if not _T_RANGE[0] <= t <= _T_RANGE[1]:
            counts["bad_price_points"] += 1
            continue
        out.append((t, p))
    out.sort()
    return out


@dataclass
class _Market:
    index: int
    raw: Mapping[str, Any]
    market_id: str
    condition_id: str
    question: str
    title: str | None
    outcomes: list[str]
    tokens: list[str]
    prices: list[float] | None
    start: datetime
    close: datetime
    end: datetime
    neg_risk: bool | None
    other: bool
    same_day: str | None = None  # where the same-day endDate was seen (excluded under the span rule)


def _parse_market(m: Any, i: int, ev: Mapping[str, Any], cache: PolymarketCache, repairs: Counter) -> _Market:
    where = f"markets[{i}]"
    if not isinstance(m, Mapping):
        raise Excluded("parse", "bad_json", f"{where} is not an object")
    outcomes = _json_list(m, "outcomes", where, repairs)
    tokens = _json_list(m, "clobTokenIds", where, repairs)
    assert outcomes is not None and tokens is not None
    if len(outcomes) < 2 or not all(isinstance(o, str) and o.strip() for o in outcomes):
        raise Excluded("parse", "bad_json", f"{where}.outcomes={outcomes!r}")
    if len(tokens) != len(outcomes):
        raise Excluded("parse", "bad_json", f"{where}.clobTokenIds has {len(tokens)} ids for {len(outcomes)} outcomes")
    if any(isinstance(t, (int, float)) and not isinstance(t, bool) for t in tokens):
        repairs["token_id_from_number"] += 1
    tokens = [str(t) for t in tokens]
    if any(not t.strip() for t in tokens):
        raise Excluded("parse", "missing_field", f"{where}.clobTokenIds")
    raw_prices = _json_list(m, "outcomePrices", where, repairs, required=False)
    prices: list[float] | None = None
    if raw_prices is not None:
        parsed = [_as_float(p) for p in raw_prices]
        if any(p is None for p in parsed) or len(parsed) != len(outcomes):
            raise Excluded("parse", "bad_price", f"{where}.outcomePrices={raw_prices!r}")
        prices = [p for p in parsed if p is not None]
    start = _leg_start(m, ev, where, cache, repairs)
    end_date = _timestamp(m, "endDate", where)
    same_day = None
    if end_date is not None and is_same_day_end(start, end_date):
        # A same-day market (docs/design.md §4 "Spans"): excluded under the span rule, not as a bad
        # timestamp; its scheduled end is taken as its close so that the later stages can run.
        same_day = f"{where}: endDate {end_date.isoformat()} is midnight of its start day {start.date()}"
        end_date = None
    close = _timestamp(m, "closedTime", where) or end_date
    if close is None and same_day is not None:
        close = start
    if close is None:
        raise Excluded("parse", "missing_field", f"{where}.closedTime/endDate")
    end = end_date
    if end is None and same_day is not None:
        end = close
    if end is None:
        end = _timestamp(ev, "endDate", "event") or close
        repairs["endDate_from_event_or_close"] += 1
    if close < start:
        raise Excluded("parse", "bad_timestamp", f"{where}: close {close.isoformat()} before start {start.isoformat()}")
    cid = m.get("conditionId")
    if not isinstance(cid, str) or not cid.strip():
        raise Excluded("parse", "missing_field", f"{where}.conditionId")
    mid = m.get("id")
    if mid is None or mid == "":
        raise Excluded("parse", "missing_field", f"{where}.id")
    q, group_title = m.get("question"), m.get("groupItemTitle")
    question = q if isinstance(q, str) else ""
    title = group_title if isinstance(group_title, str) and group_title.strip() else None
    if end < start:
        raise Excluded("parse", "bad_timestamp", f"{where}: endDate {end.isoformat()} before start {start.isoformat()}")
    return _Market(i, m, str(mid), cid, question, title, [o.strip() for o in outcomes], tokens, prices,
                   start, close, end, _as_bool(m.get("negRisk"), repairs), bool(_as_bool(m.get("negRiskOther"), repairs)),
                   same_day)


def _leg_start(m: Mapping[str, Any], ev: Mapping[str, Any], where: str, cache: PolymarketCache,
               repairs: Counter) -> datetime:
    """A market's start: its startDate, else the event's startDate, else its createdAt, else its first trade.

    The order is documented in docs/design.md §4 ("Leg starts"); each fallback is counted as a repair.
    A present but unreadable field is a bad timestamp (it is not skipped over).
    """
    start = _timestamp(m, "startDate", where)
    if start is not None:
        return start
    start = _timestamp(ev, "startDate", "event")
    if start is not None:
        repairs["startDate_from_event"] += 1
        return start
    start = _timestamp(m, "createdAt", where)
    if start is not None:
        repairs["startDate_from_createdAt"] += 1
        return start
    cid = m.get("conditionId")
    rows = cache.trades(cid) if isinstance(cid, str) and cid.strip() else None
    start = first_trade_time(rows or [])
    if start is not None:
        repairs["startDate_from_first_trade"] += 1
        return start
    raise Excluded("parse", "missing_field", f"{where}.startDate (and event startDate, createdAt, no trades)")


def _yes_index(outcomes: list[str]) -> int:
    low = [o.lower() for o in outcomes]
    return low.index("yes") if "yes" in low else 0


def _tag_list(ev: Mapping[str, Any]) -> list[Any]:
    tags = ev.get("tags")
    return tags if isinstance(tags, list) else []  # tags are decoration: anything else reads as none


def _tags(ev: Mapping[str, Any]) -> list[str]:
    out = []
    for t in _tag_list(ev):
        if isinstance(t, Mapping):
            label = t.get("label") or t.get("slug")
            if label:
                out.append(str(label))
        elif isinstance(t, str):
            out.append(t)
    return out


def _category(ev: Mapping[str, Any]) -> str | None:
    """The first tag's slug (lower-case and stable), else its label."""
    for t in _tag_list(ev):
        if isinstance(t, Mapping) and (t.get("slug") or t.get("label")):
            return str(t.get("slug") or t.get("label"))
        if isinstance(t, str) and t:
            return t
    return None


def construct_event(ev: object, cache: PolymarketCache, labels: Mapping[str, float], repairs: Counter,
                    counts: Counter) -> Candidate:
    """Parse one Gamma event, decide its layout and label, and load its price and trade series.

    `labels` is the `labels` config section (yes/no thresholds). Raises `Excluded` at the first
    failing stage (parse, layout, label). In a `negRiskAugmented` bundle every leg starts at its
    first trade (placeholders are renamed, so a leg's startDate precedes its name).
    """
    if not isinstance(ev, Mapping):
        raise Excluded("parse", "bad_json", "event is not an object")
    if ev.get("id") in (None, ""):
        raise Excluded("parse", "missing_field", "id")
    eid = f"pm-{ev['id']}"
    markets_raw = ev.get("markets")
    if markets_raw is None:
        raise Excluded("parse", "missing_field", "markets")
    if isinstance(markets_raw, str):
        markets_raw = parse_json_string_field(markets_raw)
        if markets_raw is None:
            raise Excluded("parse", "bad_json", "markets")
        repairs["markets_from_string"] += 1
    if not isinstance(markets_raw, list):
        raise Excluded("parse", "bad_json", "markets is not a list")
    markets = [_parse_market(m, i, ev, cache, repairs) for i, m in enumerate(markets_raw)]

    # layout
    if not markets:
        raise Excluded("layout", "no_markets", "0 markets")
    augmented = bool(_as_bool(ev.get("negRiskAugmented"), repairs))
    event_neg = bool(_as_bool(ev.get("enableNegRisk"), repairs)) or augmented
    neg = [mk.neg_risk if mk.neg_risk is not None else event_neg for mk in markets]
    if len(markets) == 1:
        if neg[0]:
            raise Excluded("layout", "negrisk_single_market", "1 negRisk market")
        kind = "binary"
    elif all(neg):
        kind = "multi"
    else:
        raise Excluded("layout", "multi_market_not_negrisk", f"{len(markets)} markets, {sum(neg)} negRisk")

    # legs, series
    legs: list[Leg] = []
    prices: list[tuple[int, int, float]] = []
    trades: list[tuple[int, int, float]] = []
    if kind == "binary":
        mk = markets[0]
        if len(mk.outcomes) != 2:
            raise Excluded("parse", "bad_json", f"markets[0].outcomes has {len(mk.outcomes)} outcomes (binary needs 2)")
        if mk.outcomes[0] == mk.outcomes[1]:
            raise Excluded("parse", "bad_json", f"markets[0].outcomes repeats {mk.outcomes[0]!r}")
        options = list(mk.outcomes)
        for k in range(2):
            legs.append(Leg(options[k], k, mk.market_id, mk.condition_id, mk.tokens[k], mk.start, mk.close, mk.end,
                            mk.prices[k] if mk.prices else None, market_index=k))
        h0 = _points(cache.prices(mk.tokens[0]), counts)
        h1 = _points(cache.prices(mk.tokens[1]), counts)
        if h0:
            prices = [(0, t, p) for t, p in h0]
        elif h1:
            prices = [(0, t, 1.0 - p) for t, p in h1]
            counts["binary_series_from_second_token"] += 1
        if not prices:
            raise Excluded("parse", "no_price_history", "no CLOB history for either token of markets[0]")
        if mk.prices is None:
            last0 = h0[-1][1] if h0 else 1.0 - h1[-1][1]
            last1 = h1[-1][1] if h1 else 1.0 - last0
            legs[0].terminal, legs[1].terminal = last0, last1
            counts["label_from_clob"] += 1
        token_to_option = {mk.tokens[0]: 0, mk.tokens[1]: 1}
        for row in cache.trades(mk.condition_id) or []:
            opt = _trade_option(row, token_to_option, options, counts)
            if opt is not None:
                _append_trade(trades, opt, row, counts)
        question = mk.question or str(ev.get("title") or "")
    else:
        options = []
        seen: set[str] = set()
        any_history = False
        for k, mk in enumerate(markets):
            label = mk.title or mk.question
            if not label:
                raise Excluded("parse", "missing_field", f"markets[{k}].groupItemTitle/question")
            if label in seen:
                label = f"{label} ({mk.market_id})"
                repairs["duplicate_option_label"] += 1
            seen.add(label)
            options.append(label)
            yi = _yes_index(mk.outcomes)
            hist = _points(cache.prices(mk.tokens[yi]), counts)
            any_history = any_history or bool(hist)
            terminal = mk.prices[yi] if mk.prices else (hist[-1][1] if hist else None)
            if mk.prices is None and hist:
                counts["label_from_clob"] += 1
            n_before = len(trades)
            for row in cache.trades(mk.condition_id) or []:
                _append_trade(trades, k, row, counts)
            first = min((t for _, t, _ in trades[n_before:]), default=None)
            legs.append(Leg(label, k, mk.market_id, mk.condition_id, mk.tokens[yi], mk.start, mk.close, mk.end, terminal,
                            first_trade=_when(first), market_index=k, neg_risk_other=mk.other, renamed=augmented))
            prices.extend((k, t, p) for t, p in hist)
        if not any_history:
            raise Excluded("parse", "no_price_history", f"no CLOB history for any of {len(markets)} legs")
        missing = [k for k, leg in enumerate(legs) if leg.terminal is None]
        if missing:
            raise Excluded("parse", "no_price_history", f"markets[{missing[0]}]: no outcomePrices and no CLOB history")
        question = str(ev.get("title") or markets[0].question)

    label = _label(kind, legs, labels)
    description = ev.get("description")
    if not isinstance(description, str) or not description.strip():
        description = str(markets[0].raw.get("description") or "")
    tags = _tags(ev)
    category = ev.get("category") if isinstance(ev.get("category"), str) and ev.get("category") else _category(ev)
    volume = _as_float(ev.get("volume"))
    if isinstance(ev.get("volume"), str) and volume is not None:
        repairs["volume_from_string"] += 1
    if kind == "binary":
        first = min((t for _, t, _ in trades), default=None)
        for leg in legs:
            leg.first_trade = _when(first)
    slug = ev.get("slug")
    return Candidate(
        event_id=eid, source="polymarket", slug=slug if isinstance(slug, str) else None, question=question,
        description=description, options=options, type=kind, category=category, tags=tags,
        t_start=min(leg.leg_start for leg in legs), t_close=max(leg.leg_close for leg in legs),
        t_end=max(leg.leg_end or leg.leg_close for leg in legs),
        label=label, volume=volume, legs=legs, prices=prices, trades=trades,
        same_day=next((mk.same_day for mk in markets if mk.same_day), None),
    )


def _when(t: int | None) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t, tz=UTC)


def _trade_option(row: Any, token_to_option: Mapping[str, int], options: list[str], counts: Counter) -> int | None:
    if not isinstance(row, Mapping):
        counts["bad_trade_rows"] += 1
        return None
    asset = row.get("asset")
    if asset is not None and str(asset) in token_to_option:
        return token_to_option[str(asset)]
    idx = row.get("outcomeIndex")
    if isinstance(idx, (int, float)) and not isinstance(idx, bool) and int(idx) in (0, 1):
        return int(idx)
    if row.get("outcome") in options:
        return options.index(row["outcome"])
    counts["bad_trade_rows"] += 1
    return None


def _append_trade(out: list[tuple[int, int, float]], option: int, row: object, counts: Counter) -> None:
    try:
        t = int(float(row["timestamp"]))  # type: ignore[index]
        size = float(row["size"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError, OverflowError):
        counts["bad_trade_rows"] += 1
        return
    if not math.isfinite(size) or size < 0 or not _T_RANGE[0] <= t <= _T_RANGE[1]:
        counts["bad_trade_rows"] += 1
        return
    out.append((option, t, size))


def _label(kind: str, legs: list[Leg], th: Mapping[str, float]) -> str:
    yes, no = float(th["yes_threshold"]), float(th["no_threshold"])
    term = [leg.terminal for leg in legs]
    if kind == "binary":
        a, b = term
        if a is not None and b is not None:
            if a >= yes and b <= no:
                return legs[0].option
            if b >= yes and a <= no:
                return legs[1].option
        raise Excluded("label", "unresolved", f"terminal prices {a}, {b}")
    winners = [k for k, p in enumerate(term) if p is not None and p >= yes]
    if len(winners) >= 2:
        raise Excluded("label", "multiple_yes", f"{len(winners)} legs >= {yes}: " + ", ".join(legs[k].option for k in winners))
    if not winners:
        if all(p is not None and p <= no for p in term):
            raise Excluded("label", "no_yes", f"no leg >= {yes}")
        raise Excluded("label", "unresolved", f"no leg >= {yes}; max terminal {max(p or 0 for p in term):.3f}")
    others = [p for k, p in enumerate(term) if k != winners[0]]
    if not all(p is not None and p <= no for p in others):
        raise Excluded("label", "unresolved", f"a losing leg has terminal price {max(p or 0 for p in others):.3f} > {no}")
    return legs[winners[0]].option

