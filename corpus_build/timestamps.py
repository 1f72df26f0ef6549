"""Stage 6 of the corpus builder (SPEC 2.6): publication / modification / crawl timestamps.

`parse_timestamp` turns the many formats found on real pages into aware UTC datetimes (fast
`datetime.fromisoformat` path first, then RFC 2822, epoch seconds/milliseconds, then dateutil as a
fallback with a fixed default so results never depend on "today"). `assign_timestamps` walks the
fixed-priority cascades of `extract.Extracted` and keeps the first value that parses with a year
inside [min_year, max_year]; t = t_pub, else t_mod, else the crawl time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime

from forecast_env.corpus_build.extract import Extracted, url_date

__all__ = ["Timestamps", "assign_timestamps", "parse_timestamp"]


# Common zone abbreviations (dateutil knows only UTC/GMT/local without this table).
_TZ_HOURS = {
    "UTC": 0,
    "GMT": 0,
    "Z": 0,
    "UT": 0,
    "EST": -5,
    "EDT": -4,
    "ET": -5,
    "CST": -6,
    "CDT": -5,
    "CT": -6,
    "MST": -7,
    "MDT": -6,
    "MT": -7,
    "PST": -8,
    "PDT": -7,
    "PT": -8,
    "AKST": -9,
    "AKDT": -8,
    "HST": -10,
    "BST": 1,
    "IST": 5.5,
    "CET": 1,
    "CEST": 2,
    "EET": 2,
    "EEST": 3,
    "WET": 0,
    "WEST": 1,
    "MSK": 3,
    "JST": 9,
    "KST": 9,
    "AEST": 10,
    "AEDT": 11,
    "ACST": 9.5,
    "AWST": 8,
    "NZST": 12,
    "NZDT": 13,
    "SGT": 8,
    "HKT": 8,
    "PHT": 8,
    "WIB": 7,
    "SAST": 2,
    "WAT": 1,
    "EAT": 3,
    "PKT": 5,
}
_TZINFOS = {k: int(v * 3600) for k, v in _TZ_HOURS.items()}
_EPOCH = re.compile(r"^-?[0-9]{9,13}(?:\.[0-9]+)?$")
_PREFIX = re.compile(
    r"^\s*(?:(?:first\s+)?published|posted|updated|last\s+updated|modified|last\s+modified|date|"
    r"on|am|le)\s*[:\-]?\s*",
    re.IGNORECASE,
)
_ISO_HEAD = re.compile(r"^[0-9]{4}-[0-9]{2}")
_DEFAULT = datetime(1900, 1, 1)  # dateutil fills missing fields from here (never from "today")


@dataclass
class Timestamps:
    """The three timestamps of an article, which rule gave each, and the assigned one (SPEC 2.6)."""

    t_pub: datetime | None
    t_pub_rule: str | None
    t_mod: datetime | None
    t_mod_rule: str | None
    t_crawl: datetime
    t: datetime
    t_source: str  # "pub" | "mod" | "crawl"
    t_rule: str  # rule that gave t ("crawl" for the crawl fallback)
    day: date  # UTC day of t


def _to_utc(dt: datetime) -> datetime:
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def _parse_iso(s: str) -> datetime | None:
    try:
        return datetime.fromisoformat(s)
    except ValueError:
        pass
    # fromisoformat (3.11) rejects a few common variants: " UTC"/" GMT" suffixes, "+00" offsets,
    # lowercase "t"/"z", a date followed by a zone name.
    t = s.replace("t", "T", 1) if len(s) > 10 and s[10] == "t" else s
    t = re.sub(r"\s*(?:UTC|GMT|z)$", "Z", t)
    t = re.sub(r"([+-][0-9]{2})$", r"\1:00", t)
    if t != s:
        try:
            return datetime.fromisoformat(t)
        except ValueError:
            return None
    return None


def parse_timestamp(raw: str) -> datetime | None:
    """Parse a date/time string in any common format to an aware UTC datetime (naive = UTC)."""
    if raw is None:
        return None
    s = str(raw).strip()
    if not s or len(s) > 100:
        return None
    dt: datetime | None = None
    if _EPOCH.match(s):
        value = float(s)
        if abs(value) >= 1e11:  # milliseconds
            value /= 1000.0
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if _ISO_HEAD.match(s):
        dt = _parse_iso(s)
        if dt is not None:
            return _to_utc(dt)
    if s[:3].isalpha() and "," in s[:5]:  # RFC 2822 / HTTP date: "Tue, 14 Mar 2026 10:00:00 GMT"
        try:
            dt = parsedate_to_datetime(s)
        except (TypeError, ValueError, IndexError):
            dt = None
        if dt is not None:
            return _to_utc(dt)
    return _parse_fallback(s)


def _parse_fallback(s: str) -> datetime | None:
    """dateutil for the long tail ("March 14, 2026", "14 March 2026 10:00 EST", "03/14/2026")."""
    try:
        from dateutil import parser as du_parser
    except ImportError:  # dateutil is optional (a transitive dependency); the ISO/RFC paths remain
        return None
    s = _PREFIX.sub("", s)
    s = s.replace(" at ", " ").replace("a.m.", "AM").replace("p.m.", "PM")
    if not any(ch.isdigit() for ch in s):
        return None
    try:
        dt = du_parser.parse(s, default=_DEFAULT, tzinfos=_TZINFOS)
    except (ValueError, OverflowError, TypeError, LookupError, du_parser.ParserError):
        return None
    if dt.year == _DEFAULT.year and str(_DEFAULT.year) not in s:
        return None  # no year in the value: unavailable, never guessed
    return _to_utc(dt)


def _first_valid(
    candidates: list[tuple[str, str]], min_year: int, max_year: int
) -> tuple[datetime | None, str | None]:
    for rule, raw in candidates:
        dt = parse_timestamp(raw)
        if dt is not None and min_year <= dt.year <= max_year:
            return dt, rule
    return None, None


def assign_timestamps(
    ext: Extracted,
    url: str,
    http_last_modified: str | None,
    crawl_time: datetime,
    min_year: int = 2010,
    max_year: int = 2030,
) -> Timestamps:
    """Run the publication and modification cascades; t = t_pub, else t_mod, else crawl time."""
    pub_candidates = list(ext.pub_candidates)
    if not any(rule == "url_date" for rule, _ in pub_candidates):
        u = url_date(url)
        if u:
            pub_candidates.append(("url_date", u))
    t_pub, pub_rule = _first_valid(pub_candidates, min_year, max_year)
    mod_candidates = list(ext.mod_candidates)
    if http_last_modified:
        mod_candidates.append(("http_last_modified", http_last_modified))
    t_mod, mod_rule = _first_valid(mod_candidates, min_year, max_year)
    t_crawl = _to_utc(crawl_time)
    if t_pub is not None:
        t, source, rule = t_pub, "pub", pub_rule
    elif t_mod is not None:
        t, source, rule = t_mod, "mod", mod_rule
    else:
        t, source, rule = t_crawl, "crawl", "crawl"
    return Timestamps(
        t_pub=t_pub,
        t_pub_rule=pub_rule,
        t_mod=t_mod,
        t_mod_rule=mod_rule,
        t_crawl=t_crawl,
        t=t,
        t_source=source,
        t_rule=rule,
        day=t.date(),
    )


def utc_day(dt: datetime) -> date:
    """The UTC calendar day of an aware (or naive = UTC) datetime."""
    return _to_utc(dt).date()
