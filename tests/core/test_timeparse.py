"""The one time parser: every format its callers meet, and the two rules for a value without offset."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forecast_env.timeparse import (
    MONTH_PATTERN,
    MONTHS,
    month_number,
    parse_api_time,
    parse_article_time,
    parse_day,
    parse_time,
)

# (raw, as read under the API rule, naive, date_only); cases from the corpus timestamps and the
# Polymarket cache, the two parsers this module replaces.
CASES: list[tuple[Any, datetime, bool, bool]] = [
    # pages
    ("2026-03-14T10:00:00Z", datetime(2026, 3, 14, 10, tzinfo=UTC), False, False),
    ("2026-03-14T23:30:00-04:00", datetime(2026, 3, 15, 3, 30, tzinfo=UTC), False, False),
    ("2026-03-14T10:00:00.123456789+0000", datetime(2026, 3, 14, 10, 0, 0, 123456, tzinfo=UTC), False, False),
    ("2026-03-14T10:00:00+05:30", datetime(2026, 3, 14, 4, 30, tzinfo=UTC), False, False),
    ("2026-03-14", datetime(2026, 3, 14, tzinfo=UTC), True, True),
    ("20260314", datetime(2026, 3, 14, tzinfo=UTC), True, True),
    ("2026-03-14 10:00:00", datetime(2026, 3, 14, 10, tzinfo=UTC), True, False),
    ("2026-03-14 10:00:00 UTC", datetime(2026, 3, 14, 10, tzinfo=UTC), False, False),
    ("2026-03-14t10:00:00z", datetime(2026, 3, 14, 10, tzinfo=UTC), False, False),
    ("Tue, 14 Mar 2026 10:00:00 GMT", datetime(2026, 3, 14, 10, tzinfo=UTC), False, False),
    ("Sat, 14 Mar 2026 10:00:00 -0000", datetime(2026, 3, 14, 10, tzinfo=UTC), True, False),  # RFC 2822: zone unknown
    ("1773482400", datetime(2026, 3, 14, 10, tzinfo=UTC), False, False),
    ("1773482400000", datetime(2026, 3, 14, 10, tzinfo=UTC), False, False),
    ("March 14, 2026", datetime(2026, 3, 14, tzinfo=UTC), True, True),
    ("14 March 2026 10:00 EST", datetime(2026, 3, 14, 15, tzinfo=UTC), False, False),
    ("Published: March 14, 2026 at 9:30 a.m. EDT", datetime(2026, 3, 14, 13, 30, tzinfo=UTC), False, False),
    ("March 14, 2026 9 PM", datetime(2026, 3, 14, 21, tzinfo=UTC), True, False),
    # Polymarket
    ("2021-12-04T19:35:03.796Z", datetime(2021, 12, 4, 19, 35, 3, 796000, tzinfo=UTC), False, False),
    ("2021-12-05 20:37:01+00", datetime(2021, 12, 5, 20, 37, 1, tzinfo=UTC), False, False),
    ("2021-12-05T22:37:01+02:00", datetime(2021, 12, 5, 20, 37, 1, tzinfo=UTC), False, False),
    ("2025-03-02T09:00:00.5Z", datetime(2025, 3, 2, 9, 0, 0, 500000, tzinfo=UTC), False, False),
    ("2025-01-05T18:49:12.543209123Z", datetime(2025, 1, 5, 18, 49, 12, 543209, tzinfo=UTC), False, False),
    ("2021-12-04T10:00:00", datetime(2021, 12, 4, 10, tzinfo=UTC), True, False),
    (1638576000, datetime(2021, 12, 4, tzinfo=UTC), False, False),
    (1638576000.5, datetime(2021, 12, 4, 0, 0, 0, 500000, tzinfo=UTC), False, False),
    (1638576000000, datetime(2021, 12, 4, tzinfo=UTC), False, False),
    ("1638576000123", datetime(2021, 12, 4, 0, 0, 0, 123000, tzinfo=UTC), False, False),
    (b"2021-12-04T00:00:00Z", datetime(2021, 12, 4, tzinfo=UTC), False, False),
    (date(2021, 12, 4), datetime(2021, 12, 4, tzinfo=UTC), True, True),
    (datetime(2021, 12, 4, 1), datetime(2021, 12, 4, 1, tzinfo=UTC), True, False),
    (datetime(2021, 12, 4, 1, tzinfo=timezone(timedelta(hours=-5))), datetime(2021, 12, 4, 6, tzinfo=UTC), False, False),
]


@pytest.mark.parametrize("raw,instant,naive,date_only", CASES)
def test_every_format(raw: Any, instant: datetime, naive: bool, date_only: bool) -> None:
    got = parse_time(raw)
    assert got is not None
    assert (got.instant, got.naive, got.date_only) == (instant, naive, date_only)
    assert got.instant.utcoffset() == timedelta(0)
    assert parse_api_time(raw) == instant


@pytest.mark.parametrize(
    "raw",
    ["", "garbage", "March 14", "March 2026", "2026-03", "not a date 99", "2026-13-45", "2021-12-04T25:00:00Z",
     None, True, float("nan"), float("inf"), [2021], {}, b"\xff\xfe", "x" * 200],
)
def test_unreadable_is_none(raw: Any) -> None:
    assert parse_time(raw) is None and parse_api_time(raw) is None and parse_article_time(raw) is None


def test_article_rule_reads_the_latest_instant() -> None:
    # an evening article in the Americas without offset: read at UTC-12, the next UTC day
    assert parse_article_time("2026-03-14T21:00:00") == datetime(2026, 3, 15, 9, tzinfo=UTC)
    assert parse_api_time("2026-03-14T21:00:00") == datetime(2026, 3, 14, 21, tzinfo=UTC)
    # a date-only value moves to the next UTC day (the end of the day at UTC-12)
    assert parse_article_time("2026-03-14") == datetime(2026, 3, 15, 12, tzinfo=UTC)
    assert parse_article_time("March 14, 2026") == datetime(2026, 3, 15, 12, tzinfo=UTC)
    assert parse_article_time(date(2026, 3, 14)) == datetime(2026, 3, 15, 12, tzinfo=UTC)
    # a value with an offset is exact under both rules
    for raw in ("2026-03-14T21:00:00-05:00", "Tue, 14 Mar 2026 10:00:00 GMT", "1773482400"):
        assert parse_article_time(raw) == parse_api_time(raw)


@given(st.datetimes(min_value=datetime(2010, 1, 1), max_value=datetime(2030, 12, 31)),
       st.integers(-12 * 4, 14 * 4), st.booleans())
def test_article_rule_never_shows_a_page_early(local: datetime, quarter_hours: int, date_only: bool) -> None:
    """Whatever zone the writer was in, the article reading is no earlier than the true instant."""
    local = local.replace(microsecond=0)
    zone = timezone(timedelta(minutes=15 * quarter_hours))
    raw = local.date().isoformat() if date_only else local.isoformat()
    true_latest = (datetime.combine(local.date(), datetime.max.time()) if date_only else local).replace(tzinfo=zone)
    got = parse_article_time(raw)
    assert got is not None and got >= true_latest.astimezone(UTC)
    assert got >= parse_api_time(raw)


def test_parse_day() -> None:
    assert parse_day("2026-03-14") == date(2026, 3, 14)
    assert parse_day("2026-03-14T23:00:00-05:00") == date(2026, 3, 14)  # the written calendar day
    assert parse_day(datetime(2026, 3, 14, 23, tzinfo=timezone(timedelta(hours=-5)))) == date(2026, 3, 15)
    assert parse_day(date(2026, 3, 14)) == date(2026, 3, 14)
    assert parse_day("March 14, 2026") == date(2026, 3, 14)
    assert parse_day("2026-02-30") is None and parse_day("soon") is None and parse_day(None) is None


def test_month_table() -> None:
    import re

    assert MONTHS["sept"] == MONTHS["sep"] == MONTHS["september"] == 9
    assert month_number("Dec.") == 12 and month_number("Mayo") is None
    found = re.findall(MONTH_PATTERN, "Sept. 3, May 4, Dec 5, march 6")
    assert found == ["Sept.", "May", "Dec"]  # case-sensitive: the verb "march" stays out
