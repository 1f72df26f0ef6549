"""The timestamp cascades and the visibility time (docs/design.md §2.timestamps): every rule, fixed
priority, year range, UTC, and the three visibility rules with the day moves they report."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forecast_env.corpus_build.extract import Extracted, extract_page
from forecast_env.corpus_build.timestamps import MOVE_RULES, assign_timestamps
from forecast_env.errors import ConfigError

CRAWL = datetime(2026, 4, 1, 8, 0, tzinfo=UTC)


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
    assert (ts.t_rule, ts.day, ts.t_mod_rule) == ("url_date", date(2026, 3, 3), "http_last_modified")
    assert ts.moves == (("date_only", 1),)
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
    # Within meta_name_date, the documented name order (parsely-pub-date before date) wins.
    assert ext.pub_candidates[3] == ("meta_name_date", "2026-01-04")
    ts = assign_timestamps(ext, "https://x.com/2026/01/06/a", None, CRAWL)
    assert (ts.t_rule, ts.day) == ("jsonld_datePublished", date(2026, 1, 6))  # date-only: next UTC day


def test_out_of_range_years_and_bad_values_fall_through() -> None:
    head = (
        '<script type="application/ld+json">{"@type":"NewsArticle","datePublished":["1970-01-01","2099-05-05"]}</script>'
        '<meta property="article:published_time" content="not a date">'
        '<meta property="article:published_time" content="2026-02-02T00:00:00">'
    )
    ts = assign_timestamps(extract_page(_page(head=head), "https://x.com/a"), "https://x.com/a", None, CRAWL)
    assert (ts.t_rule, ts.t) == ("meta_article_published_time", datetime(2026, 2, 2, 12, tzinfo=UTC))
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
    ext = extract_page(_page(head=head), "https://x.com/a")
    ts = assign_timestamps(ext, "https://x.com/a", None, CRAWL, visibility="publication")
    assert ts.day == date(2026, 3, 14) and ts.t == datetime(2026, 3, 14, 23, 30, tzinfo=UTC)
    ts = assign_timestamps(ext, "https://x.com/a", None, CRAWL)  # naive: the latest instant
    assert ts.day == date(2026, 3, 15) and ts.t == datetime(2026, 3, 15, 11, 30, tzinfo=UTC)


def test_naive_crawl_time_is_utc() -> None:
    ts = assign_timestamps(Extracted(None, None, "b", None, [], []), "u", None, datetime(2026, 3, 1, 23))
    assert ts.t == datetime(2026, 3, 1, 23, tzinfo=UTC) and ts.day == date(2026, 3, 1)


def _ext(pub: list[tuple[str, str]] | None = None, mod: list[tuple[str, str]] | None = None) -> Extracted:
    return Extracted(None, None, "b", None, pub or [], mod or [])


def test_naive_evening_time_is_not_shown_a_day_early() -> None:
    # 21:00 local in New York (01:00 UTC the next day), written without an offset
    ext = _ext(pub=[("meta_article_published_time", "2026-03-14T21:00:00")])
    paper = assign_timestamps(ext, "u", None, CRAWL, visibility="publication")
    assert paper.day == date(2026, 3, 14)  # the paper's rule shows it on the 14th: a day early
    ts = assign_timestamps(ext, "u", None, CRAWL)
    assert ts.visible_at == datetime(2026, 3, 15, 9, tzinfo=UTC) and ts.day == date(2026, 3, 15)
    assert ts.visible_source == "pub" and ts.moves == (("naive_time", 1),)


def test_modified_page_is_visible_from_its_modification_day() -> None:
    ext = _ext(pub=[("jsonld_datePublished", "2026-03-10T10:00:00Z")],
               mod=[("jsonld_dateModified", "2026-03-13T08:00:00+00:00")])
    ts = assign_timestamps(ext, "u", None, CRAWL)
    assert (ts.t_source, ts.t, ts.t_mod) == ("pub", datetime(2026, 3, 10, 10, tzinfo=UTC), datetime(2026, 3, 13, 8, tzinfo=UTC))
    assert (ts.visible_at, ts.visible_source, ts.day) == (datetime(2026, 3, 13, 8, tzinfo=UTC), "mod", date(2026, 3, 13))
    assert ts.moves == (("modified", 3),)
    assert assign_timestamps(ext, "u", None, CRAWL, visibility="publication").day == date(2026, 3, 10)


def test_bogus_modification_after_crawl_is_rejected_and_the_cascade_continues() -> None:
    crawl = datetime(2026, 3, 14, 6, tzinfo=UTC)
    bogus = ("jsonld_dateModified", "2026-03-20T10:00:00Z")  # six days after the page was fetched
    ext = _ext(pub=[("jsonld_datePublished", "2026-03-10T10:00:00Z")],
               mod=[bogus, ("meta_article_modified_time", "2026-03-12T10:00:00Z")])
    ts = assign_timestamps(ext, "u", None, crawl)
    assert (ts.t_mod_rule, ts.day, ts.visible_source) == ("meta_article_modified_time", date(2026, 3, 12), "mod")
    # no publication time: the paper takes the bogus value as t; the default rule falls to the crawl
    ext = _ext(mod=[bogus])
    assert assign_timestamps(ext, "u", None, crawl, visibility="publication").day == date(2026, 3, 20)
    ts = assign_timestamps(ext, "u", None, crawl)
    assert (ts.t_mod, ts.t_source, ts.day) == (None, "crawl", date(2026, 3, 14))
    assert ts.moves == (("bogus_modified", -6),)
    # within a day of the crawl is clock skew, not bogus: kept, and v never passes the crawl
    ext = _ext(mod=[("jsonld_dateModified", "2026-03-14T20:00:00Z")])
    ts = assign_timestamps(ext, "u", None, crawl)
    assert ts.t_mod == datetime(2026, 3, 14, 20, tzinfo=UTC) and ts.visible_at == crawl


def test_date_only_moves_to_the_next_utc_day_and_the_crawl_caps_it() -> None:
    ext = _ext(pub=[("meta_name_date", "March 14, 2026")])
    assert assign_timestamps(ext, "u", None, CRAWL).day == date(2026, 3, 15)
    # crawled late on the 14th: the page existed then, as stored, so it is visible on the 14th
    late = datetime(2026, 3, 14, 23, tzinfo=UTC)
    ts = assign_timestamps(ext, "u", None, late)
    assert (ts.day, ts.visible_source, ts.moves) == (date(2026, 3, 14), "crawl", (("date_only", 1), ("crawl_cap", -1)))


def test_crawl_rule_is_the_latest_of_all_three() -> None:
    ext = _ext(pub=[("jsonld_datePublished", "2026-03-10T10:00:00Z")], mod=[("jsonld_dateModified", "2026-03-12T10:00:00Z")])
    ts = assign_timestamps(ext, "u", None, CRAWL, visibility="crawl")
    assert (ts.visible_at, ts.visible_source, ts.day) == (CRAWL, "crawl", CRAWL.date())
    assert ts.moves == (("modified", 2), ("crawl", 20))
    with pytest.raises(ConfigError, match="timestamps.visibility"):
        assign_timestamps(ext, "u", None, CRAWL, visibility="latest")


_VALUES = st.sampled_from(["2026-03-10", "2026-03-10T21:00:00", "2026-03-10T21:00:00-05:00", "2026-03-13T02:00:00Z",
                           "March 12, 2026", "2026-03-20T10:00:00Z", "2026-03-15T23:00:00", "garbage"])


@given(st.lists(_VALUES, max_size=2), st.lists(_VALUES, max_size=2),
       st.datetimes(min_value=datetime(2026, 3, 9), max_value=datetime(2026, 3, 22)))
def test_visibility_rules_are_ordered(pub: list[str], mod: list[str], crawl: datetime) -> None:
    """conservative never passes the crawl, crawl never precedes it; moves sum to the day change."""
    ext = _ext([("meta_name_date", p) for p in pub], [("meta_name_modified", m) for m in mod])
    crawl = crawl.replace(tzinfo=UTC)
    paper = assign_timestamps(ext, "u", None, crawl, visibility="publication")
    cons = assign_timestamps(ext, "u", None, crawl)
    strict = assign_timestamps(ext, "u", None, crawl, visibility="crawl")
    assert cons.visible_at <= crawl <= strict.visible_at
    assert paper.moves == () and paper.visible_at == paper.t
    for ts in (cons, strict):
        assert ts.day == ts.visible_at.date()
        assert paper.day + timedelta(days=sum(d for _, d in ts.moves)) == ts.day
        assert all(rule in MOVE_RULES and d != 0 for rule, d in ts.moves)
        # every self-reported time that was kept is no later than v (conservative: or v is the crawl)
        kept = [x for x in (ts.t_pub, ts.t_mod) if x is not None]
        assert all(x <= ts.visible_at for x in kept) or ts.visible_at == crawl


def test_a_naive_modification_is_bogus_only_if_no_zone_makes_it_possible() -> None:
    # modified "2026-03-14" (date-only), crawled at 05:00 UTC that day: possible east of UTC (already
    # the 14th there), so kept; its latest reading (the 15th, 12:00 UTC) is capped by the crawl
    crawl = datetime(2026, 3, 14, 5, tzinfo=UTC)
    ext = _ext(pub=[("jsonld_datePublished", "2026-03-10T10:00:00Z")], mod=[("jsonld_dateModified", "2026-03-14")])
    ts = assign_timestamps(ext, "u", None, crawl)
    assert ts.t_mod_rule == "jsonld_dateModified" and ts.visible_at == crawl and ts.day == date(2026, 3, 14)
    # "2026-03-16" cannot have happened by the 15th, 05:00 UTC in any zone: bogus
    ext = _ext(pub=[("jsonld_datePublished", "2026-03-10T10:00:00Z")], mod=[("jsonld_dateModified", "2026-03-16")])
    ts = assign_timestamps(ext, "u", None, crawl)
    assert ts.t_mod is None and ts.day == date(2026, 3, 10)


def _kept_rows(ws) -> dict[str, dict]:
    import polars as pl

    arts = pl.concat([pl.read_parquet(p) for p in sorted((ws / "corpus" / "articles").glob("*.parquet"))])
    return {r["url"]: r for r in arts.iter_rows(named=True)}


@pytest.mark.slow
def test_micro_world_visibility(micro_corpus, micro_truth) -> None:
    """Every kept page of the sample world is visible on the day truth.json gives under the default
    rule, from the timestamp it names; each planted visibility case is present and lands there."""
    import json

    kept = _kept_rows(micro_corpus)
    wrong, plants = [], {}
    for url, want in micro_truth["articles"].items():
        if want["expect"] != "keep":
            continue
        row = kept[url]
        got = (str(row["day"]), row["visible_source"], row["t_source"], row["t_rule"])
        if got != (want["day"], want["visible_source"], want["t_source"], want["t_rule"]):
            wrong.append((url, want.get("note"), got, want["day"], want["visible_source"]))
        plants.setdefault(want.get("note"), []).append((want, row))
    assert not wrong, wrong[:10]
    for want, row in plants["naive_evening"]:  # the paper's rule (naive = UTC) shows it a day early
        assert date.fromisoformat(want["day"]) == date.fromisoformat(want["t_pub"][:10]) + timedelta(days=1)
        assert [m["rule"] for m in row["visible_moves"]] == ["naive_time"]
    for want, row in plants["modified_later"]:
        assert want["visible_source"] == "mod" and want["day"] == want["t_mod"][:10] > want["t_pub"][:10]
    assert len(plants["bogus_modified"]) == 2
    for want, row in plants["bogus_modified"]:  # the bogus value (days after the crawl) was passed over
        assert row["t_mod"] is not None and row["t_mod"] <= row["t_crawl"]
    report = json.loads((micro_corpus / "corpus" / "report.json").read_text())
    rules = report["visibility"]["rules"]
    assert {"naive_time", "date_only", "modified"} <= set(rules) and rules["modified"]["days_max"] >= 2
    assert report["visibility"]["articles_moved"] == sum(n for d, n in report["visibility"]["net_days"].items() if d != "0")


def test_unknown_visibility_rule_stops_the_build_instead_of_dropping_records(micro_world) -> None:
    from forecast_env.config import load_config
    from forecast_env.corpus_build.pipeline import process_warc

    cfg = load_config("corpus")
    cfg["timestamps"]["visibility"] = "latest"
    with pytest.raises(ConfigError, match="conservative, crawl, publication"):
        process_warc(min((micro_world / "news").glob("*.warc.gz")), cfg)
    with pytest.raises(ConfigError, match="timestamps.visibility"):
        load_config("corpus", overrides=["timestamps.visibility=latest"])
