"""Timestamp parsing and the SPEC 2.6 cascades: every rule, fixed priority, year range, UTC."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from forecast_env.corpus_build.extract import Extracted, extract_page
from forecast_env.corpus_build.timestamps import assign_timestamps, parse_timestamp

CRAWL = datetime(2026, 4, 1, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("2026-03-14T10:00:00Z", datetime(2026, 3, 14, 10, tzinfo=UTC)),
        ("2026-03-14T23:30:00-04:00", datetime(2026, 3, 15, 3, 30, tzinfo=UTC)),
        ("2026-03-14T10:00:00.123456789+0000", datetime(2026, 3, 14, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2026-03-14T10:00:00+05:30", datetime(2026, 3, 14, 4, 30, tzinfo=UTC)),
        ("2026-03-14", datetime(2026, 3, 14, tzinfo=UTC)),
        ("2026-03-14 10:00:00", datetime(2026, 3, 14, 10, tzinfo=UTC)),
        ("2026-03-14 10:00:00 UTC", datetime(2026, 3, 14, 10, tzinfo=UTC)),
        ("Tue, 14 Mar 2026 10:00:00 GMT", datetime(2026, 3, 14, 10, tzinfo=UTC)),
        ("1773482400", datetime(2026, 3, 14, 10, tzinfo=UTC)),
        ("1773482400000", datetime(2026, 3, 14, 10, tzinfo=UTC)),
        ("March 14, 2026", datetime(2026, 3, 14, tzinfo=UTC)),
        ("14 March 2026 10:00 EST", datetime(2026, 3, 14, 15, tzinfo=UTC)),
        ("Published: March 14, 2026 at 9:30 a.m. EDT", datetime(2026, 3, 14, 13, 30, tzinfo=UTC)),
    ],
)
def test_parse_formats(raw: str, expected: datetime) -> None:
    assert parse_timestamp(raw) == expected


@pytest.mark.parametrize("raw", ["", "garbage", "March 14", "not a date 99", "2026-13-45"])
def test_unparseable_is_none(raw: str) -> None:
    assert parse_timestamp(raw) is None


def _page(head: str = "", body: str = "") -> str:
    return f"<html><head>{head}</head><body>{body}<p>{'Words in a sentence. ' * 30}</p></body></html>"


PUB_CASES = {
    "jsonld_datePublished": '<script type="application/ld+json">{"@type":"NewsArticle","datePublished":"2026-03-01T10:00:00Z"}</script>',
    "jsonld_dateCreated": '<script type="application/ld+json">{"@type":"Article","dateCreated":"2026-03-01T10:00:00Z"}</script>',
    "meta_article_published_time": '<meta property="article:published_time" content="2026-03-01T10:00:00Z">',
    "meta_og_published_time": '<meta property="og:published_time" content="2026-03-01T10:00:00Z">',
    "itemprop_datePublished": '<meta itemprop="datePublished" content="2026-03-01T10:00:00Z">',
    "meta_name_date": '<meta name="DC.date.issued" content="2026-03-01T10:00:00Z">',
    "time_pubdate": '<time pubdate datetime="2026-03-01T10:00:00Z">March 1</time>',
}
MOD_CASES = {
    "jsonld_dateModified": '<script type="application/ld+json">{"@graph":[{"@type":"WebSite"},{"@type":["NewsArticle"],"dateModified":"2026-03-01T10:00:00Z"}]}</script>',
    "meta_article_modified_time": '<meta property="article:modified_time" content="2026-03-01T10:00:00Z">',
    "meta_og_updated_time": '<meta property="og:updated_time" content="2026-03-01T10:00:00Z">',
    "itemprop_dateModified": '<span itemprop="dateModified">2026-03-01T10:00:00Z</span>',
    "meta_name_modified": '<meta name="Last-Modified" content="2026-03-01T10:00:00Z">',
    "time_updated": '<time class="updated" datetime="2026-03-01T10:00:00Z">x</time>',
}


@pytest.mark.parametrize("rule", list(PUB_CASES))
def test_each_publication_rule(rule: str) -> None:
    snippet = PUB_CASES[rule]
    html = _page(body=snippet) if snippet.startswith(("<time", "<span")) else _page(head=snippet)
    ts = assign_timestamps(extract_page(html, "https://x.com/a"), "https://x.com/a", None, CRAWL)
    assert (ts.t_pub_rule, ts.t_rule, ts.t_source) == (rule, rule, "pub")
    assert ts.t == datetime(2026, 3, 1, 10, tzinfo=UTC) and ts.day == date(2026, 3, 1)


@pytest.mark.parametrize("rule", list(MOD_CASES))
def test_each_modification_rule(rule: str) -> None:
    snippet = MOD_CASES[rule]
    html = _page(body=snippet) if snippet.startswith(("<time", "<span")) else _page(head=snippet)
    ts = assign_timestamps(extract_page(html, "https://x.com/a"), "https://x.com/a", None, CRAWL)
    assert ts.t_pub is None and (ts.t_mod_rule, ts.t_rule, ts.t_source) == (rule, rule, "mod")
    assert ts.day == date(2026, 3, 1)


def test_url_date_http_last_modified_and_crawl() -> None:
    ext = extract_page(_page(), "https://x.com/news/2026/03/02/story")
    ts = assign_timestamps(ext, "https://x.com/news/2026/03/02/story", "Tue, 03 Mar 2026 10:00:00 GMT", CRAWL)
    assert (ts.t_rule, ts.day, ts.t_mod_rule) == ("url_date", date(2026, 3, 2), "http_last_modified")
    ext = extract_page(_page(), "https://x.com/news/story-2026-03-05.html")
    assert assign_timestamps(ext, "https://x.com/s", None, CRAWL).t_rule == "url_date"
    ext = extract_page(_page(), "https://x.com/a")
    ts = assign_timestamps(ext, "https://x.com/a", "Tue, 03 Mar 2026 10:00:00 GMT", CRAWL)
    assert (ts.t_source, ts.t_rule, ts.day) == ("mod", "http_last_modified", date(2026, 3, 3))
    ts = assign_timestamps(ext, "https://x.com/a", None, CRAWL)
    assert (ts.t_source, ts.t_rule, ts.t, ts.day) == ("crawl", "crawl", CRAWL, date(2026, 4, 1))


def test_priority_is_fixed_not_document_order() -> None:
    # Lower-priority tags come first in the document; JSON-LD (last) must win.
    head = (
        '<meta name="date" content="2026-01-01">'
        '<meta property="og:published_time" content="2026-01-02">'
        '<meta property="article:published_time" content="2026-01-03">'
        '<meta name="parsely-pub-date" content="2026-01-04">'
        '<script type="application/ld+json">{"@type":"NewsArticle","datePublished":"2026-01-05"}</script>'
    )
    ext = extract_page(_page(head=head), "https://x.com/2026/01/06/a")
    assert [r for r, _ in ext.pub_candidates] == [
        "jsonld_datePublished",
        "meta_article_published_time",
        "meta_og_published_time",
        "meta_name_date",
        "meta_name_date",
        "url_date",
    ]
    # Within meta_name_date, the SPEC's name order (parsely-pub-date before date) wins.
    assert ext.pub_candidates[3] == ("meta_name_date", "2026-01-04")
    ts = assign_timestamps(ext, "https://x.com/2026/01/06/a", None, CRAWL)
    assert (ts.t_rule, ts.day) == ("jsonld_datePublished", date(2026, 1, 5))


def test_out_of_range_years_and_bad_values_fall_through() -> None:
    head = (
        '<script type="application/ld+json">{"@type":"NewsArticle","datePublished":["1970-01-01","2099-05-05"]}</script>'
        '<meta property="article:published_time" content="not a date">'
        '<meta property="article:published_time" content="2026-02-02T00:00:00">'
    )
    ts = assign_timestamps(extract_page(_page(head=head), "https://x.com/a"), "https://x.com/a", None, CRAWL)
    assert (ts.t_rule, ts.t) == ("meta_article_published_time", datetime(2026, 2, 2, tzinfo=UTC))
    ts = assign_timestamps(
        Extracted(None, None, "b", None, [("url_date", "2005-01-01")], []),
        "https://x.com/a",
        None,
        CRAWL,
        min_year=2010,
        max_year=2030,
    )
    assert ts.t_source == "crawl"


def test_offset_converted_to_utc_day() -> None:
    head = '<meta property="article:published_time" content="2026-03-14T23:30:00-04:00">'
    ts = assign_timestamps(extract_page(_page(head=head), "https://x.com/a"), "https://x.com/a", None, CRAWL)
    assert ts.day == date(2026, 3, 15) and ts.t.tzinfo is not None and ts.t.utcoffset().total_seconds() == 0
    head = '<meta property="article:published_time" content="2026-03-14T23:30:00">'
    ts = assign_timestamps(extract_page(_page(head=head), "https://x.com/a"), "https://x.com/a", None, CRAWL)
    assert ts.day == date(2026, 3, 14) and ts.t == datetime(2026, 3, 14, 23, 30, tzinfo=UTC)


def test_naive_crawl_time_is_utc() -> None:
    ts = assign_timestamps(Extracted(None, None, "b", None, [], []), "u", None, datetime(2026, 3, 1, 23))
    assert ts.t == datetime(2026, 3, 1, 23, tzinfo=UTC) and ts.day == date(2026, 3, 1)
