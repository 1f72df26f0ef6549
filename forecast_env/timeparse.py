"""The one place that reads dates and times (docs/design.md §2.timestamps).

Every stage that turns text or API values into instants calls this module: the corpus timestamps,
the leakage screen's month names, the Polymarket cache and events, the agents. It reads ISO 8601
with or without an offset (`Z`, `+00`, `+0000`, `+05:30`, ` UTC`), fractional seconds of any
length, RFC 2822 / HTTP dates, month-name dates ("March 14, 2026", "14 Mar 2026 10:00 EST"), unix
seconds or milliseconds (numbers or numeric strings), `date` / `datetime` objects and date-only
values. Results never depend on "today": a value without a year or without a day is unreadable.

A value that names no offset is ambiguous. The two callers resolve it by two explicit rules:

* an API timestamp (Polymarket, config values): `parse_api_time`, read as UTC;
* an article's self-reported time: `parse_article_time`, read as the latest instant it can denote,
  so a timezone guess can delay an article but never show it early: a naive time is local time at
  UTC-12 (+12 h), a date-only value D is the end of D at UTC-12 (D+1 12:00 UTC, the next UTC day).

`parse_time` returns the reading with both facts (`naive`, `date_only`) for callers that need
them (the visibility rules of `corpus_build/timestamps.py` report how far each rule moved a day).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

from dateutil import parser as _du_parser

__all__ = [
    "MONTHS",
    "MONTH_NAMES",
    "MONTH_PATTERN",
    "NAIVE_EARLIEST_OFFSET",
    "NAIVE_LATEST_OFFSET",
    "WEEKDAY_NAMES",
    "ParsedTime",
    "month_number",
    "parse_api_time",
    "parse_article_time",
    "parse_day",
    "parse_time",
    "to_utc",
]

#: Full English month names, January first.
MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
               "october", "november", "december")
#: Full English weekday names, Monday first.
WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
#: Lower-case month names and abbreviations (`jan`, `sept`, ...) -> month number.
MONTHS: dict[str, int] = {
    **{name: i + 1 for i, name in enumerate(MONTH_NAMES)},
    **{name[:3]: i + 1 for i, name in enumerate(MONTH_NAMES)},
    "sept": 9,
}
#: A month name or abbreviation with an optional period, capitalized (match it case-sensitively to
#: keep "may"/"march" as verbs out, or with re.IGNORECASE); longer alternatives first.
MONTH_PATTERN = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December|"
    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?"
)
#: How much later than UTC a naive article time is read (local time at UTC-12, the latest zone).
NAIVE_LATEST_OFFSET = timedelta(hours=12)
#: How much earlier than UTC a naive value can be at the most (local time at UTC+14, the earliest zone).
NAIVE_EARLIEST_OFFSET = timedelta(hours=14)

# Zone abbreviations dateutil does not know (it knows only UTC/GMT and the local zone).
_TZ_HOURS = {
    "UTC": 0, "GMT": 0, "Z": 0, "UT": 0, "EST": -5, "EDT": -4, "ET": -5, "CST": -6, "CDT": -5, "CT": -6,
    "MST": -7, "MDT": -6, "MT": -7, "PST": -8, "PDT": -7, "PT": -8, "AKST": -9, "AKDT": -8, "HST": -10,
    "BST": 1, "IST": 5.5, "CET": 1, "CEST": 2, "EET": 2, "EEST": 3, "WET": 0, "WEST": 1, "MSK": 3,
    "JST": 9, "KST": 9, "AEST": 10, "AEDT": 11, "ACST": 9.5, "AWST": 8, "NZST": 12, "NZDT": 13,
    "SGT": 8, "HKT": 8, "PHT": 8, "WIB": 7, "SAST": 2, "WAT": 1, "EAT": 3, "PKT": 5,
}
_TZINFOS = {k: int(v * 3600) for k, v in _TZ_HOURS.items()}
_MAX_CHARS = 100  # longer strings are prose, not a timestamp
# Unix times at or above this are milliseconds (1e11 s is the year 5138; 1e11 ms is 1973).
_MS_THRESHOLD = 1e11
_NUMBER = re.compile(r"^[+-]?[0-9]+(?:\.[0-9]+)?$")
_BASIC_DATE = re.compile(r"^[0-9]{8}$")  # ISO basic date 20260314 (not a unix time)
_ISO_HEAD = re.compile(r"^[0-9]{4}-[0-9]{2}")
_ISO_DATE_ONLY = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_LONG_FRACTION = re.compile(r"(\.[0-9]{6})[0-9]+")
_ZONE_SUFFIX = re.compile(r"\s*(?:UTC|GMT|Z)$", re.IGNORECASE)
_SHORT_OFFSET = re.compile(r"([+-][0-9]{2})$")
_PREFIX = re.compile(
    r"^\s*(?:(?:first\s+)?published|posted|updated|last\s+updated|modified|last\s+modified|date|"
    r"on|am|le)\s*[:\-]?\s*",
    re.IGNORECASE,
)
# dateutil fills missing fields from its default; two different defaults reveal which were missing
_DEFAULT_A = datetime(1900, 1, 1, 0, 0, 0)
_DEFAULT_B = datetime(1904, 2, 2, 1, 1, 1)


@dataclass(frozen=True, slots=True)
class ParsedTime:
    """A parsed value: the instant read as UTC, and whether it named an offset and a time of day."""

    instant: datetime  # aware UTC; a naive value read as UTC, a date-only value as its 00:00 UTC
    naive: bool  # no UTC offset was given (date-only values are naive too)
    date_only: bool  # no time of day was given

    def as_api(self) -> datetime:
        """The API rule: a naive value is UTC, a date-only value its midnight UTC."""
        return self.instant

    def as_article(self) -> datetime:
        """The article rule: the latest instant the value can denote (docs/design.md §2.timestamps)."""
        if self.date_only:
            return self.instant + timedelta(days=1) + NAIVE_LATEST_OFFSET
        if self.naive:
            return self.instant + NAIVE_LATEST_OFFSET
        return self.instant

    def as_earliest(self) -> datetime:
        """The earliest instant the value can denote (a naive or date-only value at UTC+14)."""
        return self.instant - NAIVE_EARLIEST_OFFSET if self.naive else self.instant


def to_utc(dt: datetime) -> datetime:
    """An aware UTC datetime (a naive one is taken as UTC)."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def month_number(name: str) -> int | None:
    """The month number of an English month name or abbreviation ("Sept.", "march"), else None."""
    return MONTHS.get(name.strip().rstrip(".").lower())


def parse_time(raw: Any) -> ParsedTime | None:
    """Read any supported date/time value; None when it cannot be read (never raises)."""
    try:
        return _parse_time(raw)
    except (OverflowError, ValueError):  # an offset of 24 h or more, a UTC instant outside years 1-9999
        return None


def _parse_time(raw: Any) -> ParsedTime | None:
    if raw is None or isinstance(raw, bool):
        return None
    if isinstance(raw, datetime):
        return ParsedTime(to_utc(raw), raw.tzinfo is None, False)
    if isinstance(raw, date):
        return ParsedTime(datetime(raw.year, raw.month, raw.day, tzinfo=UTC), True, True)
    if isinstance(raw, (int, float)):
        return _from_unix(float(raw))
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = raw.decode("ascii")
        except UnicodeDecodeError:
            return None
    if not isinstance(raw, str):
        return None
    s = raw.strip()
    if not s or len(s) > _MAX_CHARS:
        return None
    if _NUMBER.match(s) and not _BASIC_DATE.match(s):
        return _from_unix(float(s))
    if _ISO_HEAD.match(s) or _BASIC_DATE.match(s):
        parsed = _parse_iso(s)
        if parsed is not None:
            return parsed
    if s[:3].isalpha() and "," in s[:5]:  # RFC 2822 / HTTP date: "Tue, 14 Mar 2026 10:00:00 GMT"
        try:
            dt = parsedate_to_datetime(s)
        except (TypeError, ValueError, IndexError):
            dt = None
        if dt is not None:
            return ParsedTime(to_utc(dt), dt.tzinfo is None, False)
    return _parse_free_text(s)


def parse_api_time(raw: Any) -> datetime | None:
    """An API timestamp as an aware UTC datetime (no offset: UTC); None when unreadable."""
    parsed = parse_time(raw)
    return parsed.as_api() if parsed is not None else None


def parse_article_time(raw: Any) -> datetime | None:
    """An article's self-reported time as the latest instant it can denote; None when unreadable."""
    parsed = parse_time(raw)
    return parsed.as_article() if parsed is not None else None


def parse_day(value: Any) -> date | None:
    """The calendar day of a date, a datetime (its UTC day) or a string starting `YYYY-MM-DD`."""
    if isinstance(value, datetime):
        return to_utc(value).date() if value.tzinfo is not None else value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        head = value.strip()[:10]
        if _ISO_DATE_ONLY.match(head):
            try:
                return date.fromisoformat(head)
            except ValueError:
                return None
    parsed = parse_time(value)
    return parsed.instant.date() if parsed is not None else None


def _from_unix(value: float) -> ParsedTime | None:
    if not math.isfinite(value):
        return None
    if abs(value) >= _MS_THRESHOLD:
        value /= 1000.0
    try:
        return ParsedTime(datetime.fromtimestamp(value, tz=UTC), False, False)
    except (OverflowError, OSError, ValueError):
        return None


def _iso(s: str) -> datetime | None:
    try:
        return datetime.fromisoformat(s)
    except ValueError:
        return None


def _parse_iso(s: str) -> ParsedTime | None:
    date_only = bool(_ISO_DATE_ONLY.match(s) or _BASIC_DATE.match(s))
    dt = _iso(s)
    if dt is None:
        # variants fromisoformat (3.11) rejects: nanosecond fractions, " UTC"/" GMT" suffixes,
        # "+00" offsets, a lower-case "t" or "z"
        t = s[:10] + "T" + s[11:] if len(s) > 10 and s[10] == "t" else s
        t = _LONG_FRACTION.sub(r"\1", t)
        t = _ZONE_SUFFIX.sub("+00:00", t)
        t = _SHORT_OFFSET.sub(r"\1:00", t) if len(t) > 10 else t
        dt = _iso(t) if t != s else None
    if dt is None:
        return None
    return ParsedTime(to_utc(dt), dt.tzinfo is None, date_only)


def _parse_free_text(s: str) -> ParsedTime | None:
    """dateutil for the long tail ("March 14, 2026", "14 March 2026 10:00 EST", "03/14/2026")."""
    s = _PREFIX.sub("", s)
    s = s.replace(" at ", " ").replace("a.m.", "AM").replace("p.m.", "PM")
    if not any(ch.isdigit() for ch in s):
        return None
    try:
        a = _du_parser.parse(s, default=_DEFAULT_A, tzinfos=_TZINFOS)
        b = _du_parser.parse(s, default=_DEFAULT_B, tzinfos=_TZINFOS)
    except (ValueError, OverflowError, TypeError, LookupError, _du_parser.ParserError):
        return None
    if a.year != b.year or a.month != b.month or a.day != b.day:
        return None  # no year, month or day in the value: unavailable, never guessed
    date_only = a.hour != b.hour
    if date_only:
        a = a.replace(hour=0, minute=0, second=0, microsecond=0)
    return ParsedTime(to_utc(a), a.tzinfo is None, date_only)
