"""The news profile's page rule (corpus_build/quality.py PageRule) and the page signals it reads
(corpus_build/extract.py PageSignals): real-looking article pages are kept, planted boilerplate pages
(a tag listing, a login page, a cookie wall, a 404 page) are dropped, paper is unchanged, and a caller
without signals keeps the document."""

from __future__ import annotations

import json

import pytest

from forecast_env.corpus_build.extract import PageSignals, extract_page, normalize_text, url_shape
from forecast_env.corpus_build.quality import (
    PROFILES,
    PageRule,
    apply_filters,
    build_filters,
    profile_verdicts,
    resolve_quality,
)
from forecast_env.schema import CORPUS_REASONS

NAV = "<nav><ul>" + "".join(f'<li><a href="/s{i}">Section {i}</a></li>' for i in range(30)) + "</ul></nav>"
FOOTER = "<footer>" + "".join(f'<a href="/f{i}">Footer link {i}</a> ' for i in range(20)) + "</footer>"


def _page(title: str, body: str, head: str = "") -> str:
    return (f"<html><head><title>{title}</title>{head}</head><body>{NAV}<main>{body}</main>{FOOTER}"
            "</body></html>")


def _article_head(kind: str = "NewsArticle", date: str = "2026-03-14T09:00:00Z") -> str:
    ld = {"@context": "https://schema.org", "@type": kind, "headline": "x", "datePublished": date}
    return ('<meta property="og:type" content="article">'
            f'<meta property="article:published_time" content="{date}">'
            f'<script type="application/ld+json">{json.dumps(ld)}</script>')


SPORTS = [
    "City beat United 3-1 on Saturday at the Etihad, their 12th win in 14 league games, and moved 5 points "
    "clear at the top of the table with 61 points from 25 matches.",
    "Haaland scored twice, in the 23rd and 67th minutes, to take his tally to 27 goals in 24 league games; "
    "Foden added the third in the 81st minute after United had pulled one back through Rashford (58').",
    "Possession: City 64%, United 36%. Shots: 18-7. Shots on target: 9-3. Corners: 8-2. Fouls: 11-14. "
    "Attendance: 53,211, the ground's highest this season.",
    "Results elsewhere: Arsenal 2-0 Fulham, Liverpool 4-2 Brentford, Chelsea 1-1 Everton, Spurs 0-2 "
    "Villa, Newcastle 3-3 West Ham, Brighton 2-1 Wolves.",
    "The table: 1. City 61 pts (+38), 2. Arsenal 56 (+31), 3. Liverpool 55 (+29), 4. Villa 49 (+15), "
    "5. Spurs 44 (+9), 6. Newcastle 41 (+12).",
    "United, who have won 2 of their last 9 away games, stay 8th with 38 points, 11 behind the top four.",
    "City's manager said the team had been better than in the 1-1 draw at Old Trafford in October and "
    "that the title was still far from won with 13 matches left to play.",
    "City play at Brentford on Wednesday (20:30 GMT); United host Forest on Sunday at 14:00.",
]
MARKETS = [
    "The S&P 500 rose 1.2% to 5,123.41 on Tuesday, its 14th record close this year, while the Nasdaq "
    "gained 1.6% to 16,091.92 and the Dow added 0.4% (152.3 points) to 38,989.83.",
    "Ten-year Treasury yields fell 6 basis points to 4.12%; the 2-year yield slipped to 4.58%.",
    "Brent crude settled at $82.34 a barrel, up 0.9%, and WTI at $78.01; gold rose $11 to $2,158.20 an ounce.",
    "Shares of Nvidia climbed 4.1% to $878.37 after the chipmaker's results, while Apple fell 1.3% to $170.12.",
    "The dollar index was flat at 103.2; the euro traded at $1.0927 and the yen at 147.6 per dollar.",
    "Traders now price a 68% chance of a rate cut in June, up from 52% a week ago, according to futures data.",
    "Volume on U.S. exchanges was 11.8 billion shares, against a 20-day average of 12.4 billion.",
]


def _article_html(paragraphs: list[str], title: str = "City beat United 3-1 to go five points clear") -> str:
    body = (f"<article><h1>{title}</h1>" + "".join(f"<p>{p}</p>" for p in paragraphs)
            + '<aside><h3><a href="/r1">Related story one</a></h3><h3><a href="/r2">Related story two</a></h3>'
            "</aside></article>")
    return _page(title, body, _article_head())


def _tag_page_html(n: int = 20) -> str:
    teasers = "".join(
        f'<article class="teaser"><h2><a href="/2026/03/{i:02d}/story-{i}">Election update number {i}: '
        f"candidates trade barbs over turnout</a></h2><p>By Staff, March {i}</p></article>"
        for i in range(1, n + 1))
    return _page("Election news | Daily Planet", f"<h1>Election</h1>{teasers}",
                 '<meta property="og:type" content="website">')


def _login_html() -> str:
    form = ('<h1>Sign in to your account</h1><form action="/login" method="post">'
            "<p>Enter your email address and password to sign in. New here? Register for free to read "
            "more stories and manage your newsletters.</p>"
            '<label>Email</label><input type="email" name="email"><label>Password</label>'
            '<input type="password" name="password"><button>Log in</button>'
            '<p><a href="/forgot">Forgot your password?</a></p></form>')
    return _page("Sign in | Daily Planet", form)


def _cookie_html() -> str:
    wall = ("<div class='consent'><h1>Before you continue</h1><p>We use cookies and similar technologies "
            "to run this site, measure our audience and show personalised advertising. Select Accept all "
            "to consent to this use, or Manage options to choose. You can change your choices at any time "
            "in the privacy settings.</p><p>Accept all</p><p>Manage options</p></div>")
    return _page("Daily Planet", wall)


def _error_html() -> str:
    body = ("<h1>Page not found</h1><p>Sorry, the page you were looking for does not exist or has been "
            "moved. Check the address, or go back to the home page to find the latest news.</p>")
    return _page("404 - Page not found | Daily Planet", body)


def _judge(html: str, url: str, profile: str = "news", page: bool = True):
    ext = extract_page(html, url)
    body = normalize_text(ext.body or "")
    assert body, "the planted page must reach the quality stage with a body"
    return apply_filters(body, build_filters({"profile": profile}), ext.page if page else None), ext


# ------------------------------------------------------------------------------------------------
# the signals
# ------------------------------------------------------------------------------------------------


def test_signals_from_html_jsonld_og_links_and_chrome():
    ld = {"@context": "https://schema.org", "@graph": [
        {"@type": ["NewsArticle", "Thing"], "datePublished": "2026-01-02"},
        {"@type": "https://schema.org/WebPage"},
        {"@type": "Organization", "name": "Pub", "logo": {"@type": "ImageObject"}},
    ]}
    html = ("<html><head><meta property='og:type' content='Article'>"
            f"<script type='application/ld+json'>{json.dumps(ld)}</script><title>T</title></head><body>"
            "<header><a href='/'>Home page link</a></header>"
            "<p>one two three four <a href='/x'>five six</a> seven eight</p>"
            "<article><h2><a href='/a'>Linked headline words</a></h2></article>"
            "<h3>Plain heading <a href='/b'>x</a></h3>"
            "<script>var a = 'not text at all';</script><input type='password'>"
            "<footer>foot words here</footer></body></html>")
    sig = extract_page(html, "https://example.com/2026/01/02/story.html").page
    assert sig is not None
    assert sig.og_type == "article"
    assert sig.jsonld_types == ("newsarticle", "organization", "thing", "webpage")  # publisher's logo not walked
    assert sig.article_meta and sig.has_pub_meta
    # visible words outside header/footer: 8 in <p>, 3 in the <article> headline, 3 in the <h3>
    assert sig.text_words == 14
    assert sig.link_words == 2 + 3 + 1
    assert sig.link_share == pytest.approx(6 / 14)
    assert sig.n_article_tags == 1 and sig.n_link_headings == 1  # the <h3> is mostly not a link
    assert sig.password_input
    assert not sig.error_title
    assert sig.url_shape == "other"


def test_signals_without_metadata_and_error_title():
    sig = extract_page(_error_html(), "https://example.com/some/missing-page").page
    assert sig.og_type is None and sig.jsonld_types == () and not sig.has_pub_meta and not sig.article_meta
    assert sig.error_title
    # "The 404" as a name is not an error title only through the length of the body (see the test below);
    # a headline number is not an error
    ok = extract_page(_page("Dow falls 500 points as yields jump", "<p>x</p>"), "https://e.com/a").page
    assert not ok.error_title


@pytest.mark.parametrize("url, shape", [
    ("https://example.com/", "home"),
    ("https://example.com/index.html", "home"),
    ("https://example.com/tag/elections/", "listing"),
    ("https://example.com/category/world/page/3", "listing"),
    ("https://example.com/search?q=vote", "listing"),
    ("https://example.com/news?page=2", "listing"),
    ("https://example.com/politics/", "section"),
    ("https://example.com/world-news", "section"),
    ("https://example.com/2026/03/14/city-beat-united", "other"),
    ("https://example.com/politics/senate-passes-budget-bill-51-49", "other"),
    ("https://example.com/story.html", "other"),
    ("", "other"),
])
def test_url_shape(url, shape):
    assert url_shape(url) == shape


# ------------------------------------------------------------------------------------------------
# the rule
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("paragraphs", [SPORTS, MARKETS], ids=["sports_results", "market_update"])
def test_number_heavy_article_is_kept_under_news(paragraphs):
    res, ext = _judge(_article_html(paragraphs), "https://news.example.com/2026/03/14/city-beat-united")
    assert ext.page.article_meta
    assert res.keep, (res.reason, res.detail)


def test_number_heavy_article_without_metadata_is_kept():
    """A blog or wire page with no og:type / JSON-LD: nothing says listing, so it is kept."""
    html = _page("Vote count", "<article><h1>Vote count</h1>" + "".join(f"<p>{p}</p>" for p in SPORTS) + "</article>")
    res, ext = _judge(html, "https://blog.example.com/posts/vote-count-results")
    assert not ext.page.article_meta
    assert res.keep, (res.reason, res.detail)


def test_article_named_404_is_not_an_error_page():
    res, ext = _judge(_article_html(MARKETS, "The 404 1,310: where it's love at first swipe"),
                      "https://www.example.com/the-404-1310-podcast/")
    assert ext.page.error_title  # the title says 404 ...
    assert res.keep, (res.reason, res.detail)  # ... but a full article body is not an error page


@pytest.mark.parametrize("make, url, reason", [
    (_tag_page_html, "https://news.example.com/tag/election/", "page_listing"),
    (_login_html, "https://news.example.com/account/signin", "page_login"),
    (_cookie_html, "https://news.example.com/2026/03/14/city-beat-united", "page_cookie_wall"),
    (_error_html, "https://news.example.com/2026/03/14/city-beat-united", "page_error"),
], ids=["tag_listing", "login", "cookie_wall", "error_404"])
def test_boilerplate_pages_are_dropped_under_news(make, url, reason):
    res, ext = _judge(make(), url)
    assert not res.keep
    assert res.reason == reason, (res.reason, res.detail)
    assert reason in CORPUS_REASONS["quality"]


def test_listing_score_reads_teasers_and_url_without_the_url():
    """20 teaser blocks and a page of links score as a listing even on an article-like URL (the sign
    score, `quality.page.method=score`; the linear model reads a dated URL as an article's, issue 30)."""
    url = "https://news.example.com/2026/03/14/roundup"
    ext = extract_page(_tag_page_html(), url)
    res = apply_filters(normalize_text(ext.body or ""), build_filters({"profile": "news", "page": {"method": "score"}}),
                        ext.page)
    assert ext.page.n_article_tags == 20 and ext.page.n_link_headings == 20
    assert not res.keep and res.reason == "page_listing", (res.reason, res.detail)
    assert "teasers=20" in res.detail


def test_article_metadata_protects_a_page_with_some_listing_signs():
    rule = PageRule()
    sig = PageSignals(og_type="article", has_pub_meta=True, text_words=1000, link_words=600, url_shape="section",
                      n_article_tags=30)
    text = " ".join(["word"] * 100)  # body share 0.1: three listing signs and a fourth from teasers
    score, signs = rule.score(text, sig)
    assert score == 4 - 2 - 2 and "article_meta" in signs and "pub_meta" in signs
    assert rule.filter(text, sig).keep
    # the same page without its metadata is a listing
    bare = PageSignals(text_words=1000, link_words=600, url_shape="section", n_article_tags=30)
    assert not rule.filter(text, bare).keep


@pytest.mark.parametrize("make", [_tag_page_html, _login_html, _cookie_html, _error_html])
def test_missing_page_signals_keep_the_document(make):
    res, _ = _judge(make(), "https://news.example.com/tag/election/", page=False)
    assert not (res.reason or "").startswith("page_")
    assert PageRule().filter("any text at all", None).keep


@pytest.mark.parametrize("make", [_tag_page_html, _login_html, _cookie_html, _error_html,
                                  lambda: _article_html(SPORTS)])
def test_paper_verdicts_do_not_depend_on_page_signals(make):
    ext = extract_page(make(), "https://news.example.com/tag/election/")
    body = normalize_text(ext.body or "")
    paper = build_filters({"profile": "paper"})
    assert all(f.name != "page" for f in paper)
    with_page, without = apply_filters(body, paper, ext.page), apply_filters(body, paper)
    assert (with_page.keep, with_page.reason, with_page.detail, with_page.text) == (
        without.keep, without.reason, without.detail, without.text)
    both = profile_verdicts(body, {"paper": paper, "news": build_filters({"profile": "news"})}, ext.page)
    assert both["paper"].keep == without.keep


def test_paper_has_no_page_section_and_news_can_switch_it():
    assert "page" not in PROFILES["paper"]
    assert "page" not in resolve_quality({"profile": "paper"})["filters"]
    assert resolve_quality({"profile": "news"})["filters"]["page"]["enabled"] is True
    assert resolve_quality({"profile": "news", "page": {"enabled": None}})["filters"]["page"]["enabled"] is True
    assert all(f.name != "page" for f in build_filters({"profile": "news", "page": {"enabled": False}}))
    on_paper = resolve_quality({"profile": "paper", "page": {"enabled": True, "drop_score": 3}})["filters"]["page"]
    assert on_paper["enabled"] is True and on_paper["drop_score"] == 3
    rule = next(f for f in build_filters({"profile": "news", "page": {"min_teasers": 5}}) if f.name == "page")
    assert rule.min_teasers == 5


def test_page_rule_is_configurable_from_the_shipped_config():
    from forecast_env.config import load_config

    cfg = load_config("corpus", overrides=["quality.page.min_teasers=5", "quality.profile=news"])
    rule = next(f for f in build_filters(cfg["quality"]) if f.name == "page")
    assert rule.min_teasers == 5 and rule.max_link_share == PROFILES["news"]["page"]["max_link_share"]
    off = load_config("corpus", overrides=["quality.page.enabled=false"])
    assert all(f.name != "page" for f in build_filters(off["quality"], "news"))
    # the shipped config (all nulls) leaves paper without a page section: its resolved thresholds unchanged
    assert "page" not in resolve_quality(load_config("corpus")["quality"], "paper")["filters"]
