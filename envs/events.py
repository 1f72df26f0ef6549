"""Event construction (SPEC section 4): Polymarket cache -> events, legs, beliefs, schedules.

Stages, in the order of `schema.EVENT_STAGES` (an excluded event gets exactly one row in the
`excluded` table, for its first failing stage):

1. parse   - fields of the Gamma event and its markets (JSON-encoded strings, timestamps, prices);
             unambiguous defects are repaired and counted (numeric strings, lists given as lists,
             a market without startDate takes the event's startDate).
2. layout  - one non-negRisk market = binary; a negRisk bundle of >= 2 markets = multi.
3. label   - terminal outcomePrices (else the last CLOB point): exactly one option resolved.
4. span / activity / signal - the market-side filters (`filters.py`).
5. split   - train / eval by complete lifetime (`splits.py`); events in neither split are
             excluded so that the environment only sees split events. The split is decided
             before the screen (unlike the order of `schema.EVENT_STAGES`) so that no judge call is
             spent on an event that no split can use; `BUILD_ORDER` is the order of the funnel.
6. screen  - the corpus-side screen (`screen.py`): keep iff Sufficient and no leakage.
7. schedule - forecast dates (`schedule.py`); eligible dates on which the realized option's leg
             had not started are dropped and recorded as extra `excluded` rows
             (stage "schedule", reason "date_leg_not_started", detail = the date), which do not
             exclude the event; an event left with no date is excluded (no_forecast_dates).

The written tables hold the kept events only (events, legs, beliefs, trades_daily, schedule); the
`screen` table holds every verdict and `excluded` every exclusion. `WS/events/report.{json,md}` is
the funnel (like the paper's Table 8).
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
from forecast_env.envs.beliefs import daily_beliefs, daily_trades
from forecast_env.envs.filters import EventSeries, MarketFilters
from forecast_env.envs.polymarket.cache import PolymarketCache, parse_json_string_field, parse_timestamp
from forecast_env.envs.schedule import build_schedule
from forecast_env.envs.splits import Splits

from forecast_env import schema
from forecast_env.config import load_config
from forecast_env.errors import EventsError, IndexMissingError, WorkspaceError
from forecast_env.store import (
    EVENT_TABLES,
    Workspace,
    atomic_write_json,
    atomic_write_table,
    atomic_write_text,
    read_table,
    write_manifest,
)

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Reading the Polymarket cache
# ---------------------------------------------------------------------------------------------

def open_cache(polymarket_dir: str | Path) -> PolymarketCache:
    """The shared cache reader over a Polymarket cache folder (gamma/, clob/prices-history/, data/trades/)."""
    root = Path(polymarket_dir)
    if not (root / "gamma").is_dir():
        raise EventsError(
            f"{root}: no gamma/ folder of Gamma event pages; fetch one with `forecast-env events fetch` "
            "or point --polymarket at a cache folder (gamma/, clob/prices-history/, data/trades/)"
        )
    return PolymarketCache(root)


def _history(raw: Any) -> list[dict]:
    """Normalize a prices() answer ({"history": [...]}, a list, or None) to a list of points."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        raw = raw.get("history") or []
    return list(raw) if isinstance(raw, list) else []


# ---------------------------------------------------------------------------------------------
# description_as_of
# ---------------------------------------------------------------------------------------------

_MONTHS = {m: i + 1 for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])}
_MONTH_RE = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
             r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?")
_DATE_PATTERNS = [
    (re.compile(r"(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})"), "ymd"),
    (re.compile(r"(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4}|\d{2})\b"), "mdy"),
    (re.compile(rf"(?P<mon>{_MONTH_RE})\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}})", re.IGNORECASE), "mon_d_y"),
    (re.compile(rf"(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{_MONTH_RE}),?\s+(?P<y>\d{{4}})", re.IGNORECASE), "d_mon_y"),
]
_MARKER_RE = re.compile(
    r"^[\s*_#>\-\[(]*(?:update[sd]?|clarification|note|edit(?:ed)?|additional context)\b(?P<rest>.*)$", re.IGNORECASE
)


def _match_date(m: re.Match[str]) -> date | None:
    g = m.groupdict()
    try:
        y = int(g["y"])
        if y < 100:
            y += 2000
        month = _MONTHS[g["mon"].lower().rstrip(".")[:3]] if g.get("mon") else int(g["m"])
        return date(y, month, int(g["d"]))
    except (ValueError, KeyError):
        return None


def find_date(text: str) -> tuple[date, int] | None:
    """The first date written in `text` (ISO, m/d/Y, 'April 12, 2026', '12 Apr 2026') and its offset."""
    best: tuple[date, int] | None = None
    for pattern, _ in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            d = _match_date(m)
            if d is not None and (best is None or m.start() < best[1]):
                best = (d, m.start())
            if d is not None:
                break
    return best


def _marker_date(line: str) -> date | None:
    """The date of a dated Update/Clarification/Note/Edit/Additional context marker line, else None."""
    m = _MARKER_RE.match(line)
    if not m:
        return None
    rest = m.group("rest")
    found = find_date(rest[:60])
    if found is None:
        return None
    d, offset = found
    # The date must belong to the marker ("Update (2026-04-12):", "Note on April 12, 2026 -"),
    # not sit deep inside an undated note's sentence.
    lead = rest[:offset]
    if not re.fullmatch(r"[\s(\[:\-–—,@]*(?:(?:on|as of|posted|added|at)\s*)?[\s(\[:\-–—,@]*", lead, re.IGNORECASE):
        return None
    return d


def description_as_of(description: str | None, day: date) -> str:
    """The description as it could have read on `day`: dated appendices dated after `day` are cut.

    A cut starts at a line that opens with a dated "Update", "Clarification", "Note", "Edit" or
    "Additional context" marker dated after `day`, and runs to the next blank line or the next
    marker line. Undated appendices and appendices dated on or before `day` are kept.
    """
    if not description:
        return description or ""
    if isinstance(day, datetime):
        day = day.date()
    kept: list[str] = []
    cutting = False
    for line in description.split("\n"):
        if not line.strip():
            cutting = False
            kept.append(line)
            continue
        d = _marker_date(line)
        if d is not None:
            cutting = d > day
        elif _MARKER_RE.match(line):
            cutting = False
        if not cutting:
            kept.append(line)
    text = "\n".join(kept)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


# ---------------------------------------------------------------------------------------------
# Construction of one event
# ---------------------------------------------------------------------------------------------


class Excluded(Exception):
    """An event fails a stage (raised inside construction, caught per event)."""

    def __init__(self, stage: str, reason: str, detail: str | None = None) -> None:
        assert reason in schema.EVENT_REASONS[stage], (stage, reason)
        super().__init__(f"{stage}/{reason}: {detail}")
        self.stage, self.reason, self.detail = stage, reason, detail


@dataclass
class Leg:
    """The market leg behind one option."""

    option: str
    option_index: int
    market_id: str
    condition_id: str
    token_id: str  # YES token of the leg (binary: the token of this outcome)
    leg_start: datetime
    leg_close: datetime
    terminal: float | None = None  # terminal YES price of this option (from outcomePrices)


@dataclass
class Candidate:
    """An event that passed parse/layout/label, with its raw observation series."""

    event_id: str
    source: str
    slug: str | None
    question: str
    description: str
    options: list[str]
    type: str
    category: str | None
    tags: list[str]
    t_start: datetime
    t_close: datetime
    label: str
    volume: float | None
    legs: list[Leg]
    prices: list[tuple[int, int, float]] = field(default_factory=list)  # (option_index, t, p)
    trades: list[tuple[int, int, float]] = field(default_factory=list)  # (option_index, t, size)
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def start_day(self) -> date:
        return self.t_start.date()

    @property
    def close_day(self) -> date:
        return self.t_close.date()


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
    ts = parse_timestamp(raw)
    if ts is None:
        raise Excluded("parse", "bad_timestamp", f"{where}.{key}={str(raw)[:60]!r}")
    return ts


def _points(raw: Any, counts: Counter) -> list[tuple[int, float]]:
    """(t, p) pairs of a CLOB history; unreadable points are dropped and counted."""
    out = []
    for pt in _history(raw):
        try:
            t = int(float(pt["t"]))
            p = float(pt["p"])
        except (KeyError, TypeError, ValueError):
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
    neg_risk: bool | None


def _parse_market(m: Any, i: int, ev: Mapping[str, Any], repairs: Counter) -> _Market:
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
    prices = None
    if raw_prices is not None:
        prices = [_as_float(p) for p in raw_prices]
        if any(p is None for p in prices) or len(prices) != len(outcomes):
            raise Excluded("parse", "bad_price", f"{where}.outcomePrices={raw_prices!r}")
    start = _timestamp(m, "startDate", where)
    if start is None:
        start = _timestamp(ev, "startDate", "event")
        if start is None:
            raise Excluded("parse", "missing_field", f"{where}.startDate")
        repairs["startDate_from_event"] += 1
    close = _timestamp(m, "closedTime", where) or _timestamp(m, "endDate", where)
    if close is None:
        raise Excluded("parse", "missing_field", f"{where}.closedTime/endDate")
    if close < start:
        raise Excluded("parse", "bad_timestamp", f"{where}: close {close.isoformat()} before start {start.isoformat()}")
    cid = m.get("conditionId")
    if not isinstance(cid, str) or not cid.strip():
        raise Excluded("parse", "missing_field", f"{where}.conditionId")
    mid = m.get("id")
    if mid is None or mid == "":
        raise Excluded("parse", "missing_field", f"{where}.id")
    question = m.get("question") if isinstance(m.get("question"), str) else ""
    title = m.get("groupItemTitle") if isinstance(m.get("groupItemTitle"), str) and m.get("groupItemTitle").strip() else None
    return _Market(i, m, str(mid), cid, question, title, [o.strip() for o in outcomes], tokens, prices,
                   start, close, _as_bool(m.get("negRisk"), repairs))


def _yes_index(outcomes: list[str]) -> int:
    low = [o.lower() for o in outcomes]
    return low.index("yes") if "yes" in low else 0


def _tags(ev: Mapping[str, Any]) -> list[str]:
    out = []
    for t in ev.get("tags") or []:
        if isinstance(t, Mapping):
            label = t.get("label") or t.get("slug")
            if label:
                out.append(str(label))
        elif isinstance(t, str):
            out.append(t)
    return out


def _category(ev: Mapping[str, Any]) -> str | None:
    """The first tag's slug (lower-case and stable), else its label."""
    for t in ev.get("tags") or []:
        if isinstance(t, Mapping) and (t.get("slug") or t.get("label")):
            return str(t.get("slug") or t.get("label"))
        if isinstance(t, str) and t:
            return t
    return None


def construct_event(ev: Any, cache: Any, cfg: Mapping[str, Any], repairs: Counter, counts: Counter) -> Candidate:
    """Parse one Gamma event, decide its layout and label, and load its price and trade series.

    Raises `Excluded` at the first failing stage (parse, layout, label).
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
    markets = [_parse_market(m, i, ev, repairs) for i, m in enumerate(markets_raw)]

    # layout
    if not markets:
        raise Excluded("layout", "no_markets", "0 markets")
    event_neg = bool(_as_bool(ev.get("enableNegRisk"), repairs)) or bool(_as_bool(ev.get("negRiskAugmented"), repairs))
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
            legs.append(Leg(options[k], k, mk.market_id, mk.condition_id, mk.tokens[k], mk.start, mk.close,
                            mk.prices[k] if mk.prices else None))
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
            legs.append(Leg(label, k, mk.market_id, mk.condition_id, mk.tokens[yi], mk.start, mk.close, terminal))
            prices.extend((k, t, p) for t, p in hist)
            for row in cache.trades(mk.condition_id) or []:
                _append_trade(trades, k, row, counts)
        if not any_history:
            raise Excluded("parse", "no_price_history", f"no CLOB history for any of {len(markets)} legs")
        missing = [k for k, leg in enumerate(legs) if leg.terminal is None]
        if missing:
            raise Excluded("parse", "no_price_history", f"markets[{missing[0]}]: no outcomePrices and no CLOB history")
        question = str(ev.get("title") or markets[0].question)

    label = _label(kind, legs, cfg["labels"])
    description = ev.get("description")
    if not isinstance(description, str) or not description.strip():
        description = str(markets[0].raw.get("description") or "")
    tags = _tags(ev)
    category = ev.get("category") if isinstance(ev.get("category"), str) and ev.get("category") else _category(ev)
    volume = _as_float(ev.get("volume"))
    if isinstance(ev.get("volume"), str) and volume is not None:
        repairs["volume_from_string"] += 1
    return Candidate(
        event_id=eid, source="polymarket", slug=ev.get("slug"), question=question, description=description,
        options=options, type=kind, category=category, tags=tags,
        t_start=min(leg.leg_start for leg in legs), t_close=max(leg.leg_close for leg in legs),
        label=label, volume=volume, legs=legs, prices=prices, trades=trades,
    )


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


def _append_trade(out: list[tuple[int, int, float]], option: int, row: Any, counts: Counter) -> None:
    try:
        t = int(float(row["timestamp"]))
        size = float(row["size"])
    except (KeyError, TypeError, ValueError):
        counts["bad_trade_rows"] += 1
        return
    if not math.isfinite(size) or size < 0:
        counts["bad_trade_rows"] += 1
        return
    out.append((option, t, size))


def _label(kind: str, legs: list[Leg], th: Mapping[str, Any]) -> str:
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


# ---------------------------------------------------------------------------------------------
# The build: filters, screen, split, schedule, tables, funnel
# ---------------------------------------------------------------------------------------------

SOURCE_PREFIX = {"polymarket": "pm-", "questions": "q-"}
#: The order in which the build applies the stages (the funnel's rows).
BUILD_ORDER = ("parse", "layout", "label", "span", "activity", "signal", "split", "screen", "schedule")


@dataclass
class EventTables:
    """Every table of `WS/events/` as polars DataFrames."""

    events: pl.DataFrame
    legs: pl.DataFrame
    beliefs: pl.DataFrame
    trades_daily: pl.DataFrame
    schedule: pl.DataFrame
    screen: pl.DataFrame
    excluded: pl.DataFrame


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def resolve_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The events config: packaged defaults updated by `config` (a full or partial section), validated."""
    if config is None:
        return load_config("events")
    return load_config("events", overrides=_flatten(config))


def _open_searcher(workspace: Path, required: bool) -> Any:
    try:
        from forecast_env.retrieval import Searcher  # type: ignore[attr-defined]

        return Searcher.open(workspace)
    except (ImportError, AttributeError, WorkspaceError) as exc:
        if required:
            raise IndexMissingError(
                f"{workspace}: no search index to screen and schedule events ({exc}); build it with "
                "`forecast-env index build`, or run the market side only with "
                "--set screen.enabled=false --set schedule.require_index=false"
            ) from exc
        log.warning("%s: no search index (%s); corpus activity is 0 on every day and the screen is off", workspace, exc)
        return None


def _day_counts(searcher: Any) -> dict[date, int]:
    if searcher is None:
        return {}
    return {(d if isinstance(d, date) else date.fromisoformat(str(d))): int(n) for d, n in searcher.day_counts().items()}


def _options_frame(cands: list[Candidate]) -> pl.DataFrame:
    rows = [(c.event_id, k, o, c.source == "polymarket" and c.type == "binary")
            for c in cands for k, o in enumerate(c.options)]
    return pl.DataFrame(rows, schema={"event_id": pl.Utf8, "option_index": pl.Int32, "option": pl.Utf8,
                                      "binary": pl.Boolean}, orient="row")


def _series_frames(cands: list[Candidate]) -> tuple[pl.DataFrame, pl.DataFrame]:
    eids, idx, ts, ps = [], [], [], []
    for c in cands:
        for k, t, p in c.prices:
            eids.append(c.event_id)
            idx.append(k)
            ts.append(t)
            ps.append(p)
    prices = pl.DataFrame({"event_id": eids, "option_index": idx, "t": ts, "p": ps},
                          schema={"event_id": pl.Utf8, "option_index": pl.Int32, "t": pl.Int64, "p": pl.Float64})
    eids, idx, ts, ss = [], [], [], []
    for c in cands:
        for k, t, s in c.trades:
            eids.append(c.event_id)
            idx.append(k)
            ts.append(t)
            ss.append(s)
    trades = pl.DataFrame({"event_id": eids, "option_index": idx, "t": ts, "size": ss},
                          schema={"event_id": pl.Utf8, "option_index": pl.Int32, "t": pl.Int64, "size": pl.Float64})
    return prices, trades


def _clip_to_span(df: pl.DataFrame, cands: list[Candidate]) -> pl.DataFrame:
    spans = pl.DataFrame({"event_id": [c.event_id for c in cands], "_s": [c.start_day for c in cands],
                          "_e": [c.close_day for c in cands]},
                         schema={"event_id": pl.Utf8, "_s": pl.Date, "_e": pl.Date})
    return (df.join(spans, on="event_id", how="inner")
            .filter((pl.col("day") >= pl.col("_s")) & (pl.col("day") <= pl.col("_e"))).drop("_s", "_e"))


def _by_event(df: pl.DataFrame, key_cols: tuple[str, ...], value_cols: tuple[str, ...]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for row in df.select("event_id", *key_cols, *value_cols).iter_rows():
        eid, rest = row[0], row[1:]
        key = rest[: len(key_cols)]
        val = rest[len(key_cols):]
        out.setdefault(eid, {})[key[0] if len(key) == 1 else key] = val[0] if len(val) == 1 else val
    return out


@dataclass
class _Run:
    """State of one build (one source)."""

    source: str
    cfg: dict[str, Any]
    exclusions: list[tuple[str, str, str, str | None]] = field(default_factory=list)  # event-level
    dropped_dates: list[tuple[str, str, str, str | None]] = field(default_factory=list)
    repairs: Counter = field(default_factory=Counter)
    counts: Counter = field(default_factory=Counter)
    n_in: int = 0

    def exclude(self, eid: str, stage: str, reason: str, detail: str | None) -> None:
        self.exclusions.append((eid, stage, reason, detail))


def _progress(items: Iterable[Any], total: int, desc: str, enabled: bool) -> Iterable[Any]:
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, total=total, desc=desc, unit="event")


def build_events(
    polymarket_dir: str | Path,
    workspace: str | Path,
    config: Mapping[str, Any] | None = None,
    searcher: Any = None,
    judge: Any = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Build the events tables of `workspace` from a Polymarket cache folder; return the funnel."""
    t0 = time.perf_counter()
    cfg = resolve_config(config)
    ws = Workspace.at(workspace, create=True)
    cache = open_cache(polymarket_dir)
    run = _Run("polymarket", cfg)
    raw_events = list(cache.events())
    run.n_in = len(raw_events)
    cands: list[Candidate] = []
    seen: set[str] = set()
    for i, ev in enumerate(_progress(raw_events, len(raw_events), "events", progress)):
        eid = f"pm-{ev.get('id')}" if isinstance(ev, Mapping) and ev.get("id") not in (None, "") else f"pm-?{i}"
        if eid in seen:
            run.counts["duplicate_events_skipped"] += 1
            run.n_in -= 1
            continue
        seen.add(eid)
        n_bad = len(cache.unreadable)
        try:
            cand = construct_event(ev, cache, cfg, run.repairs, run.counts)
            if len(cache.unreadable) > n_bad:
                raise Excluded("parse", "bad_json", f"unreadable cache file {cache.unreadable[n_bad]}")
            cands.append(cand)
        except Excluded as exc:
            run.exclude(eid, exc.stage, exc.reason, exc.detail)
        except Exception as exc:
            run.exclude(eid, "parse", "bad_json", f"{type(exc).__name__}: {exc}"[:300])
    return _finish(run, cands, ws, searcher, judge, progress, t0)


def _finish(run: _Run, cands: list[Candidate], ws: Workspace, searcher: Any, judge: Any,
            progress: bool, t0: float) -> dict[str, Any]:
    cfg = run.cfg
    options = _options_frame(cands)
    prices, trades = _series_frames(cands)
    br = daily_beliefs(prices, options)
    run.counts["dropped_price_points"] += br.dropped_prices
    beliefs = _clip_to_span(br.beliefs, cands)
    trades_daily = _clip_to_span(daily_trades(trades, options), cands)

    # market-side filters (Polymarket only: imported questions have no trades)
    survivors: list[Candidate] = []
    if run.source == "polymarket":
        filt = MarketFilters.from_config(cfg)
        labels = pl.DataFrame({"event_id": [c.event_id for c in cands], "option": [c.label for c in cands]},
                              schema={"event_id": pl.Utf8, "option": pl.Utf8})
        tr = _by_event(trades_daily.join(labels, on=["event_id", "option"], how="semi"), ("day",), ("n_trades", "shares"))
        bl = _by_event(beliefs.join(labels, on=["event_id", "option"], how="semi").filter(pl.col("belief").is_not_null()),
                       ("day",), ("belief",))
        for c in cands:
            out = filt.check(EventSeries(c.type, c.start_day, c.close_day, tr.get(c.event_id, {}), bl.get(c.event_id, {})))
            c.metrics.update(out.metrics)
            if out.keep:
                survivors.append(c)
            else:
                run.exclude(c.event_id, out.stage or "", out.reason or "", out.detail)
    else:
        survivors = list(cands)

    # splits (before the screen: no judge call is spent on an event no split can use)
    splits = Splits.from_config(cfg)
    in_split: list[Candidate] = []
    for c in survivors:
        name, reason = splits.assign(c.t_start, c.t_close)
        if reason is None:
            c.metrics["split"] = name
            in_split.append(c)
        else:
            run.exclude(c.event_id, "split", reason,
                        f"t_start {c.t_start.isoformat()} t_close {c.t_close.isoformat()}")

    # corpus-side screen
    sc = cfg["screen"]
    need_index = bool(sc["enabled"]) or bool(cfg["schedule"]["require_index"])
    if searcher is None and (need_index or (ws.index_dir.exists())):
        searcher = _open_searcher(ws.root, need_index)
    screen_rows: list[dict] = []
    kept: list[Candidate] = []
    if sc["enabled"] and in_split:
        from forecast_env.envs.screen import decompose_offline, make_event_view, make_judge, screen_event

        if judge is None or isinstance(judge, str):
            the_judge, decompose = make_judge(cfg, judge)
        else:
            the_judge = judge
            decompose = getattr(judge, "decompose", None) or (
                lambda v: decompose_offline(v, int(sc["min_queries"]), int(sc["max_queries"])))
        corpus_start = searcher.first_day
        corpus_start = corpus_start if isinstance(corpus_start, date) else date.fromisoformat(str(corpus_start))
        for c in _progress(in_split, len(in_split), "screen", progress):
            tau = c.close_day - timedelta(days=int(sc["buffer_days"]))
            view = make_event_view(c.question, description_as_of(c.description, tau), c.options, tau)
            res = screen_event(c.event_id, view, searcher, the_judge, decompose, corpus_start,
                               int(sc["evidence_per_query"]), int(sc["evidence_size"]))
            screen_rows.append(res.row())
            c.metrics.update(screen_verdict=res.verdict, screen_leak=res.leak)
            if res.exclusion is None:
                kept.append(c)
            else:
                run.exclude(c.event_id, "screen", res.exclusion[0], res.exclusion[1])
    else:
        kept = list(in_split)

    # schedules
    sch_cfg = cfg["schedule"]
    counts_by_day = _day_counts(searcher)
    if not counts_by_day and kept:
        log.warning("no corpus day counts: the schedule's activity term is 0 on every day")
    bvec = _by_event(beliefs.filter(pl.col("belief").is_not_null()).join(
        pl.DataFrame({"event_id": [c.event_id for c in kept]}, schema={"event_id": pl.Utf8}), on="event_id", how="semi"),
        ("day", "option"), ("belief",))
    sched_rows: list[dict] = []
    final: list[Candidate] = []
    for c in kept:
        per_day: dict[date, dict[str, float]] = {}
        for (d, o), b in bvec.get(c.event_id, {}).items():
            per_day.setdefault(d, {})[o] = b
        option_start = {leg.option: leg.leg_start.date() for leg in c.legs}
        s = build_schedule(c.start_day, c.close_day, c.options, option_start, c.label, per_day, counts_by_day,
                           buffer_days=int(sch_cfg["buffer_days"]), max_steps=int(sch_cfg["max_steps"]),
                           days_per_step=int(sch_cfg["days_per_step"]),
                           movement_weight=float(sch_cfg["movement_weight"]),
                           activity_weight=float(sch_cfg["activity_weight"]))
        if not s.steps:
            run.exclude(c.event_id, "schedule", "no_forecast_dates",
                        f"{len(s.dropped_dates)} eligible date(s), none with the realized leg started")
            continue
        for d in s.dropped_dates:
            run.dropped_dates.append((c.event_id, "schedule", "date_leg_not_started", d.isoformat()))
        for st in s.steps:
            sched_rows.append({"event_id": c.event_id, "step": st.step, "steps_total": st.steps_total,
                               "forecast_date": st.forecast_date, "options": st.options, "score": st.score})
        final.append(c)

    tables = _tables(final, beliefs, trades_daily, sched_rows, screen_rows, run)
    _write(ws, tables, run, cfg, time.perf_counter() - t0)
    return _summary(run, final, screen_rows, ws, time.perf_counter() - t0)


def _tables(final: list[Candidate], beliefs: pl.DataFrame, trades_daily: pl.DataFrame, sched_rows: list[dict],
            screen_rows: list[dict], run: _Run) -> dict[str, pa.Table]:
    ids = pl.DataFrame({"event_id": [c.event_id for c in final]}, schema={"event_id": pl.Utf8})
    ev_rows = []
    leg_rows = []
    for c in final:
        m = c.metrics
        ev_rows.append({
            "event_id": c.event_id, "source": c.source, "slug": c.slug, "question": c.question,
            "description": c.description, "options": c.options, "type": c.type, "category": c.category,
            "tags": c.tags, "t_start": c.t_start, "t_close": c.t_close, "start_day": c.start_day,
            "close_day": c.close_day, "label": c.label, "split": m.get("split"), "volume": c.volume,
            "rho": m.get("rho"), "max_unfaithful_run": m.get("max_unfaithful_run"), "mid_share": m.get("mid_share"),
            "total_variation": m.get("total_variation"), "screen_verdict": m.get("screen_verdict"),
            "screen_leak": m.get("screen_leak"),
        })
        for leg in c.legs:
            leg_rows.append({"event_id": c.event_id, "option": leg.option, "option_index": leg.option_index,
                             "market_id": leg.market_id, "condition_id": leg.condition_id, "token_id": leg.token_id,
                             "leg_start": leg.leg_start, "leg_close": leg.leg_close, "start_day": leg.leg_start.date()})
    excl = [dict(zip(("event_id", "stage", "reason", "detail"), r)) for r in run.exclusions + run.dropped_dates]

    def table(rows: list[dict], sch: pa.Schema) -> pa.Table:
        return pa.Table.from_pylist(rows, schema=sch) if rows else sch.empty_table()

    return {
        "events": table(ev_rows, schema.EVENTS),
        "legs": table(leg_rows, schema.LEGS),
        "beliefs": beliefs.join(ids, on="event_id", how="semi").to_arrow(),
        "trades_daily": trades_daily.join(ids, on="event_id", how="semi").to_arrow(),
        "schedule": table(sched_rows, schema.SCHEDULE),
        "screen": table(screen_rows, schema.SCREEN),
        "excluded": table(excl, schema.EXCLUDED),
    }


def _write(ws: Workspace, tables: dict[str, pa.Table], run: _Run, cfg: Mapping[str, Any], seconds: float) -> None:
    """Write the tables, keeping the rows of the other source (Polymarket vs imported questions)."""
    prefix = SOURCE_PREFIX[run.source]
    for name, sch in EVENT_TABLES.items():
        path = ws.events_table(name)
        new = pl.from_arrow(_conform(tables[name], sch))
        if path.exists():
            old = pl.from_arrow(read_table(path, sch))
            old = old.filter(~pl.col("event_id").str.starts_with(prefix))
            if run.source == "questions":  # re-imported ids replace their old rows
                old = old.join(new.select("event_id").unique(), on="event_id", how="anti")
            new = pl.concat([old, new], how="vertical_relaxed")
            new = new.sort("event_id", maintain_order=True)
        atomic_write_table(path, new.to_arrow(), sch)
    report_path = ws.events_dir / "report.json"
    report: dict[str, Any] = {}
    if report_path.exists():
        try:
            report = json.loads(report_path.read_text())
        except json.JSONDecodeError:
            report = {}
    report[run.source] = funnel(run, tables, seconds)
    report["totals"] = _totals(ws)
    atomic_write_json(report_path, report)
    atomic_write_text(ws.events_dir / "report.md", render_report(report))
    write_manifest(ws.events_dir, "events", config=cfg, extra={"sources": sorted(k for k in report if k in SOURCE_PREFIX)})


def _conform(table: pa.Table, sch: pa.Schema) -> pa.Table:
    from forecast_env.store import conform

    return conform(table, sch)


def funnel(run: _Run, tables: Mapping[str, pa.Table], seconds: float) -> dict[str, Any]:
    """The funnel of one build: events in, excluded per stage and reason, kept by split and type."""
    by_stage: dict[str, dict[str, int]] = {}
    for _, stage, reason, _ in run.exclusions:
        by_stage.setdefault(stage, {}).setdefault(reason, 0)
        by_stage[stage][reason] += 1
    rows = []
    remaining = run.n_in
    for stage in BUILD_ORDER:
        n = sum(by_stage.get(stage, {}).values())
        remaining -= n
        rows.append({"stage": stage, "excluded": n, "remaining": remaining, "reasons": by_stage.get(stage, {})})
    ev = pl.from_arrow(tables["events"])
    by_split = dict(Counter(ev["split"].to_list())) if ev.height else {}
    by_type = dict(Counter(ev["type"].to_list())) if ev.height else {}
    by_split_type = {f"{s}/{t}": n for (s, t), n in Counter(zip(ev["split"].to_list(), ev["type"].to_list())).items()} if ev.height else {}
    scr = pl.from_arrow(tables["screen"])
    verdicts = dict(Counter(scr["verdict"].to_list())) if scr.height else {}
    return {
        "events_in": run.n_in,
        "kept": ev.height,
        "excluded": by_stage,
        "stages": rows,
        "by_split": by_split,
        "by_type": by_type,
        "by_split_type": by_split_type,
        "screened": scr.height,
        "screen_verdicts": verdicts,
        "screen_leaks": int(scr["leak"].sum()) if scr.height else 0,
        "dropped_forecast_dates": len(run.dropped_dates),
        "schedule_rows": tables["schedule"].num_rows,
        "repairs": dict(run.repairs),
        "counts": dict(run.counts),
        "seconds": round(seconds, 3),
    }


def _totals(ws: Workspace) -> dict[str, Any]:
    path = ws.events_table("events")
    if not path.exists():
        return {}
    ev = pl.from_arrow(read_table(path, schema.EVENTS))
    return {"events": ev.height, "by_source": dict(Counter(ev["source"].to_list())),
            "by_split": dict(Counter(ev["split"].to_list()))}


def render_report(report: Mapping[str, Any]) -> str:
    """The funnel as Markdown (one table per source, like the paper's Table 8)."""
    lines = ["# Event construction funnel", ""]
    for source in ("polymarket", "questions"):
        f = report.get(source)
        if not f:
            continue
        lines += [f"## {source}", "", f"Events in: **{f['events_in']}**; kept: **{f['kept']}**", "",
                  "| stage | reason | excluded | remaining |", "|---|---|---:|---:|"]
        for row in f["stages"]:
            if not row["excluded"]:
                continue
            for reason, n in sorted(row["reasons"].items()):
                lines.append(f"| {row['stage']} | {reason} | {n} | |")
            lines.append(f"| **{row['stage']}** | (all) | **{row['excluded']}** | {row['remaining']} |")
        lines += ["", f"Kept by split: {f['by_split']}; by type: {f['by_type']}; by split/type: {f['by_split_type']}",
                  f"Screen: {f['screened']} screened, verdicts {f['screen_verdicts']}, leaks {f['screen_leaks']}",
                  (f"Forecast dates dropped (realized leg not started): {f['dropped_forecast_dates']}; "
                   f"schedule rows: {f['schedule_rows']}"),
                  f"Repairs: {f['repairs'] or 'none'}; counts: {f['counts'] or 'none'}", ""]
    if report.get("totals"):
        lines += ["## All sources", "", f"{report['totals']}", ""]
    return "\n".join(lines)


def _summary(run: _Run, final: list[Candidate], screen_rows: list[dict], ws: Workspace, seconds: float) -> dict[str, Any]:
    report = json.loads((ws.events_dir / "report.json").read_text())
    out = dict(report[run.source])
    out["workspace"] = str(ws.root)
    out["output"] = str(ws.events_dir)
    return out


def load_events(workspace: str | Path) -> EventTables:
    """Read every events table of a workspace (a clear error when the build has not run)."""
    ws = Workspace.at(workspace)
    frames = {}
    for name, sch in EVENT_TABLES.items():
        path = ws.require(ws.events_table(name), f"events table {name!r}",
                          "forecast-env events build --polymarket DIR --workspace WS")
        frames[name] = pl.from_arrow(read_table(path, sch))
    return EventTables(**frames)


def import_questions(
    questions_jsonl: str | Path,
    workspace: str | Path,
    config: Mapping[str, Any] | None = None,
    searcher: Any = None,
    judge: Any = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Add events from a JSONL file of questions (source "questions"); the same screen, splits, schedule."""
    from forecast_env.envs.questions import read_questions

    t0 = time.perf_counter()
    cfg = resolve_config(config)
    ws = Workspace.at(workspace, create=True)
    run = _Run("questions", cfg)
    parsed = read_questions(questions_jsonl)
    run.n_in = len(parsed.candidates) + len(parsed.errors)
    for eid, detail in parsed.errors:
        run.exclude(eid, "parse", "bad_json", detail)
    run.counts["invalid_lines"] = len(parsed.errors)
    return _finish(run, parsed.candidates, ws, searcher, judge, progress, t0)
