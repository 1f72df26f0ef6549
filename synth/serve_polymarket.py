"""The sample world's Polymarket cache served as the real Gamma, CLOB and Data API endpoints.

`handle(method, path, query, world_dir)` answers one request from `world_dir/polymarket/` (the
layout of `forecast_env.synth.polymarket`) under three prefixes, so that a client pointed at

    events.polymarket.gamma_url = http://HOST:PORT/gamma
    events.polymarket.clob_url  = http://HOST:PORT/clob
    events.polymarket.data_url  = http://HOST:PORT/data-api

runs the same code it runs against the real services. It returns `(status, headers, body)`, or
None for a path outside the three prefixes (the caller, `synth/serve.py`, answers those; it also
sets Content-Length). What the real services do, and is kept here:

- Gamma `/gamma/events`: a JSON list of events ordered by id, paged by `limit` / `offset` (limit at
  most `GAMMA_MAX_LIMIT`); `closed=true|false` filters on the event's `closed`; `end_date_min` /
  `end_date_max` (ISO dates or times) on its `endDate`.
- CLOB `/clob/prices-history`: `{"history": [{"t", "p"}]}` of one token (`market`), either in
  `startTs..endTs` (both inclusive, unix seconds) or by `interval`; `fidelity` (minutes, default
  1) keeps the last point of each fidelity bucket. `interval=max` below 12-hour fidelity answers an
  empty history for a resolved market (as the real CLOB does: why the client asks for explicit
  windows). A token it does not know has an empty history; a missing `market` is a 400.
- Data API `/data-api/trades`: the trades of one market (`market` = condition id), newest first,
  paged by `limit` / `offset`; an offset past `DATA_API_MAX_OFFSET` is a 400 (the documented cap).

Faults for tests (`inject`): a rule answers the next N matching requests with 503 + Retry-After,
429 + Retry-After, 404, or a truncated JSON body, then the endpoint recovers.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forecast_env.timeparse import parse_api_time

#: The prefixes of the three services (paths of the served world).
GAMMA_PREFIX = "/gamma"
CLOB_PREFIX = "/clob"
DATA_PREFIX = "/data-api"
#: The largest Gamma page; a larger `limit` is cut to it (the real API caps its pages too).
GAMMA_MAX_LIMIT = 500
#: Data API: the largest offset it pages to (its documentation: offset <= 10000); beyond it, 400.
DATA_API_MAX_OFFSET = 10_000
#: Data API: the largest and the default `limit`.
DATA_API_MAX_LIMIT = 10_000
DATA_API_DEFAULT_LIMIT = 100
#: Below this fidelity (minutes) `interval=max` is empty for a resolved market.
MAX_INTERVAL_MIN_FIDELITY = 720
#: Seconds of each relative `interval` other than max (ending now).
_INTERVALS = {"1m": 60, "1h": 3600, "6h": 6 * 3600, "1d": 86400, "1w": 7 * 86400}

Response = tuple[int, dict[str, str], bytes]
Query = Mapping[str, Any]

FAULT_KINDS = ("503", "429", "404", "truncated")


@dataclass
class Fault:
    """Answer the next `count` requests whose path starts with `path_prefix` with a fault."""

    path_prefix: str  # e.g. "/clob/prices-history" or "/gamma/events"
    kind: str  # one of FAULT_KINDS
    count: int = 1
    retry_after: float = 0.0  # seconds, sent with 503 and 429
    match: Mapping[str, str] | None = None  # query values the request must carry (e.g. {"market": id})


_faults: dict[Path, list[Fault]] = {}
_fault_lock = threading.Lock()
#: Requests answered per world (path -> count), for tests that check politeness and retries.
request_counts: dict[Path, dict[str, int]] = {}


def inject(world_dir: str | Path, fault: Fault) -> None:
    """Plant `fault` for requests to the world at `world_dir` (consumed in order, one per request)."""
    if fault.kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {fault.kind!r}; one of {', '.join(FAULT_KINDS)}")
    with _fault_lock:
        _faults.setdefault(Path(world_dir).resolve(), []).append(fault)


def clear_faults(world_dir: str | Path) -> None:
    """Remove every planted fault (and the request counts) of the world at `world_dir`."""
    key = Path(world_dir).resolve()
    with _fault_lock:
        _faults.pop(key, None)
        request_counts.pop(key, None)


def _take_fault(key: Path, path: str, query: Mapping[str, str]) -> Fault | None:
    with _fault_lock:
        counts = request_counts.setdefault(key, {})
        counts[path] = counts.get(path, 0) + 1
        for fault in _faults.get(key, []):
            if fault.count <= 0 or not path.startswith(fault.path_prefix):
                continue
            if fault.match and any(query.get(k) != v for k, v in fault.match.items()):
                continue
            fault.count -= 1
            return fault
    return None


def _fault_response(fault: Fault) -> Response:
    if fault.kind == "truncated":
        return 200, {"Content-Type": "application/json"}, b'[{"id": "1", "markets": ['
    headers = {"Content-Type": "application/json"}
    if fault.kind in ("503", "429"):
        headers["Retry-After"] = f"{fault.retry_after:g}"
    message = {"503": "Service Unavailable", "429": "Too Many Requests", "404": "Not Found"}[fault.kind]
    return int(fault.kind), headers, _json({"error": message})


# ---------------------------------------------------------------------------------------------
# The world's data, read once per world (and again when its Gamma pages change)
# ---------------------------------------------------------------------------------------------


@dataclass
class _World:
    stamp: tuple[float, ...]
    events: list[dict]
    resolved_tokens: set[str]


_worlds: dict[Path, _World] = {}
_world_lock = threading.Lock()


def _cache_dir(world_dir: Path) -> Path:
    """The Polymarket cache of a world: WORLD/polymarket, or WORLD itself when it is a cache folder."""
    return world_dir / "polymarket" if (world_dir / "polymarket" / "gamma").is_dir() else world_dir


# The cache layout is `forecast_env.synth.polymarket`'s (the same as the downloader's cache); synth
# imports only the core, so it is read here directly.
_PAGE_RE = re.compile(r"^events-(\d+)\.json$")
_SAFE_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,200}$")


def _pages(cache: Path) -> list[Path]:
    gamma = cache / "gamma"
    found = [(int(m.group(1)), p) for p in gamma.iterdir() if (m := _PAGE_RE.match(p.name))] if gamma.is_dir() else []
    return [p for _, p in sorted(found)]


def _json_list(value: Any) -> list:
    if isinstance(value, list):
        return value
    try:
        decoded = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return []
    return decoded if isinstance(decoded, list) else []


def _id_key(event: dict) -> tuple[int, int, str]:
    text = str(event.get("id"))
    return (0, int(text), text) if text.isdigit() else (1, 0, text)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return None


def _world(world_dir: Path) -> _World:
    cache = _cache_dir(world_dir)
    pages = _pages(cache)
    stamp = tuple(p.stat().st_mtime for p in pages)
    with _world_lock:
        known = _worlds.get(world_dir)
        if known is not None and known.stamp == stamp:
            return known
        by_id: dict[str, dict] = {}
        for page in pages:
            for ev in _read(page) or []:
                if isinstance(ev, dict) and ev.get("id") not in (None, ""):
                    by_id[str(ev["id"])] = ev
        events = sorted(by_id.values(), key=_id_key)
        resolved: set[str] = set()
        for ev in events:
            for m in ev.get("markets") or []:
                if isinstance(m, dict) and (m.get("closed") or ev.get("closed")):
                    resolved.update(str(t) for t in _json_list(m.get("clobTokenIds")))
        world = _World(stamp, events, resolved)
        _worlds[world_dir] = world
        return world


def _series(world: Path, folder: str, key: str) -> list:
    """One cached price history (`clob/prices-history`) or trade list (`data/trades`); [] if absent."""
    if not _SAFE_ID_RE.fullmatch(key):
        return []
    data = _read(_cache_dir(world) / folder / f"{key}.json")
    if isinstance(data, dict):
        data = data.get("history")
    return data if isinstance(data, list) else []


# ---------------------------------------------------------------------------------------------
# The endpoints
# ---------------------------------------------------------------------------------------------


def handle(method: str, path: str, query: Query, world_dir: str | Path) -> Response | None:
    """Answer one request to the served Polymarket services, or None for a path that is not theirs.

    `query` maps a parameter to its value (or to a list of values: the last one is used).
    HEAD is answered like GET (the caller drops the body); other methods get 405.
    """
    route = path.split("?", 1)[0].rstrip("/") or "/"
    if not route.startswith((GAMMA_PREFIX + "/", CLOB_PREFIX + "/", DATA_PREFIX + "/")):
        return None
    world = Path(world_dir).resolve()
    q = {k: (v[-1] if isinstance(v, (list, tuple)) and v else v) for k, v in query.items()}
    q = {k: str(v) for k, v in q.items() if v is not None and not isinstance(v, (list, tuple))}
    fault = _take_fault(world, route, q)
    if method not in ("GET", "HEAD"):
        return _error(405, f"{method} not allowed; this API is read-only", {"Allow": "GET, HEAD"})
    if fault is not None:
        return _fault_response(fault)
    try:
        if route == GAMMA_PREFIX + "/events":
            return _gamma_events(world, q)
        if route == CLOB_PREFIX + "/prices-history":
            return _prices_history(world, q)
        if route == DATA_PREFIX + "/trades":
            return _trades(world, q)
    except _BadRequest as exc:
        return _error(400, str(exc))
    return _error(404, f"no endpoint {route}")


class _BadRequest(ValueError):
    pass


def _int_param(q: Mapping[str, str], key: str, default: int | None, lo: int = 0) -> int | None:
    raw = q.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _BadRequest(f"{key}={raw!r} is not an integer") from None
    if value < lo:
        raise _BadRequest(f"{key}={value} must be >= {lo}")
    return value


def _gamma_events(world: Path, q: Mapping[str, str]) -> Response:
    events = _world(world).events
    closed = q.get("closed")
    if closed is not None:
        want = closed.lower() == "true"
        events = [e for e in events if bool(e.get("closed")) == want]
    for key, keep in (("end_date_min", lambda t, b: t >= b), ("end_date_max", lambda t, b: t <= b)):
        if q.get(key):
            bound = parse_api_time(q[key])
            if bound is None:
                raise _BadRequest(f"{key}={q[key]!r} is not a date")
            events = [e for e in events if (t := parse_api_time(e.get("endDate"))) is not None and keep(t, bound)]
    if q.get("ascending", "true").lower() == "false":
        events = events[::-1]
    limit = min(_int_param(q, "limit", GAMMA_MAX_LIMIT) or 0, GAMMA_MAX_LIMIT)
    offset = _int_param(q, "offset", 0) or 0
    return _ok(events[offset : offset + limit])


def _prices_history(world: Path, q: Mapping[str, str]) -> Response:
    token = q.get("market")
    if not token:
        raise _BadRequest("market (a token id) is required")
    fidelity = _int_param(q, "fidelity", 1, lo=1) or 1
    start, end = _int_param(q, "startTs", None), _int_param(q, "endTs", None)
    interval = q.get("interval")
    if interval is not None and (start is not None or end is not None):
        raise _BadRequest("interval and startTs/endTs are mutually exclusive")
    points = _series(world, "clob/prices-history", token)
    if interval is not None:
        if interval == "max":
            if fidelity < MAX_INTERVAL_MIN_FIDELITY and token in _world(world).resolved_tokens:
                return _ok({"history": []})
            start, end = None, None
        elif interval in _INTERVALS:
            end = int(time.time())
            start = end - _INTERVALS[interval]
        else:
            raise _BadRequest(f"interval={interval!r}: one of max, {', '.join(_INTERVALS)}")
    elif start is None and end is None:
        raise _BadRequest("give startTs and endTs, or interval")
    lo = -math.inf if start is None else start
    hi = math.inf if end is None else end
    buckets: dict[int, dict] = {}
    for pt in points:
        t = pt.get("t") if isinstance(pt, dict) else None
        if isinstance(t, (int, float)) and lo <= t <= hi:
            buckets[int(t) // (fidelity * 60)] = pt  # the last point of each fidelity bucket
    return _ok({"history": [buckets[b] for b in sorted(buckets)]})


def _trades(world: Path, q: Mapping[str, str]) -> Response:
    market = q.get("market")
    limit = min(_int_param(q, "limit", DATA_API_DEFAULT_LIMIT, lo=1) or 1, DATA_API_MAX_LIMIT)
    offset = _int_param(q, "offset", 0) or 0
    if offset > DATA_API_MAX_OFFSET:
        raise _BadRequest(f"offset {offset} is over the maximum of {DATA_API_MAX_OFFSET}")
    if not market:
        raise _BadRequest("market (a condition id) is required")
    rows = _series(world, "data/trades", market)
    rows = sorted(rows, key=lambda r: -float(r.get("timestamp") or 0) if isinstance(r, dict) else 0)
    return _ok(rows[offset : offset + limit])


def _ok(obj: object) -> Response:
    return 200, {"Content-Type": "application/json"}, _json(obj)


def _error(status: int, message: str, extra: Mapping[str, str] | None = None) -> Response:
    return status, {"Content-Type": "application/json", **(extra or {})}, _json({"error": message})


def _json(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def client_settings(base_url: str) -> list[str]:
    """The `--set` lines that point the Polymarket downloader at a served world at `base_url`."""
    base = base_url.rstrip("/")
    return [f"events.polymarket.gamma_url={base}{GAMMA_PREFIX}",
            f"events.polymarket.clob_url={base}{CLOB_PREFIX}",
            f"events.polymarket.data_url={base}{DATA_PREFIX}"]
