"""The news profile's page rule on small hand-written pages (issue 30): an article is kept with and
without its article metadata (og / JSON-LD / microdata / <article> stripped, as on a small or older
site), a section listing, an error page, a login page and a cookie wall are dropped; and the
metadata-stripping helper the benchmark uses removes exactly the article declarations."""

from __future__ import annotations

import json

from forecast_env.corpus_build.extract import extract_page, normalize_text
from forecast_env.corpus_build.quality import (
    PAGE_FEATURES,
    PAGE_MODEL,
    PROFILES,
    PageRule,
    apply_filters,
    build_filters,
    page_features,
    strip_article_metadata,
)

NAV = "<nav><ul>" + "".join(f'<li><a href="/s{i}">Section {i}</a></li>' for i in range(25)) + "</ul></nav>"
FOOTER = "<footer>" + "".join(f'<a href="/f{i}">About link {i}</a> ' for i in range(15)) + "</footer>"
STORY = [
    "The county council voted 7 to 2 on Tuesday night to close the Elm Street bridge for eight months of "
    "repairs, after engineers found that two of its steel girders had lost a third of their thickness to rust.",
    "Drivers who cross the river each morning will be sent over the Mill Road bridge, which the council said "
    "could carry the extra traffic, although residents there told the meeting they feared long queues.",
    "The repairs will cost about 4.2 million dollars, most of it from a state grant awarded last year, and "
    "the contractor expects to begin work in the first week of May if the weather allows it.",
    "Council member Ruth Alvarez, who voted against the plan, said the town should have been warned earlier "
    "and asked why the inspection report from two years ago had not been made public at the time.",
    "The engineer who led the inspection told the council that the bridge was not in danger of falling but "
    "that its weight limit would have had to be cut by half within a year without the work.",
    "Shops on Elm Street asked for help with signs and parking during the closure, and the mayor said the "
    "town would meet their owners next week to discuss what it could offer them.",
    "A temporary footbridge for pedestrians and cyclists will stay open for most of the closure, except for "
    "two weekends in the summer when the new girders are lifted into place by crane.",
    "The council will publish a schedule of the work on its website and hold a public meeting in April, "
    "where residents can ask the contractor and the engineers questions about the project.",
]
LD = {"@context": "https://schema.org", "@type": "NewsArticle", "headline": "Bridge to close",
      "datePublished": "2025-03-14T09:00:00Z"}
ARTICLE_HEAD = ('<meta property="og:type" content="article"><meta name="description" content="The bridge closes.">'
                '<meta property="article:published_time" content="2025-03-14T09:00:00Z">'
                f'<script type="application/ld+json">{json.dumps(LD)}</script>')


def _html(title: str, main: str, head: str = "") -> str:
    return (f"<html><head><title>{title}</title>{head}</head><body><header>{NAV}</header><main>{main}</main>"
            f"{FOOTER}</body></html>")


def _article(url_path: str = "/news/2025/03/14/elm-street-bridge-to-close") -> tuple[str, str]:
    body = "".join(f"<p>{p}</p>" for p in STORY)
    main = (f'<article itemscope itemtype="https://schema.org/NewsArticle"><h1>Elm Street bridge to close for '
            f'eight months</h1><time itemprop="datePublished" datetime="2025-03-14">March 14, 2025</time>'
            f'{body}</article>')
    return _html("Elm Street bridge to close for eight months | Valley Herald", main, ARTICLE_HEAD), \
        f"https://valleyherald.example{url_path}"


def _listing() -> tuple[str, str]:
    teasers = "".join(
        f'<div class="teaser"><h3><a href="/news/2025/03/{i:02d}/story-{i}">Council news headline number {i} '
        f'about the town</a></h3><p>A short teaser of the story {i}, two lines long.</p></div>' for i in range(1, 25))
    return _html("Local news | Valley Herald", f"<h1>Local news</h1>{teasers}",
                 '<meta property="og:type" content="website">'), "https://valleyherald.example/local"


def _verdict(html: str, url: str):
    ext = extract_page(html, url)
    body = normalize_text(ext.body or "")
    return apply_filters(body, build_filters({"profile": "news"}), ext.page), ext


def test_article_is_kept_with_and_without_its_metadata():
    html, url = _article()
    res, ext = _verdict(html, url)
    assert ext.page.article_meta and ext.page.has_pub_meta
    assert res.keep, (res.reason, res.detail)
    stripped, ext2 = _verdict(strip_article_metadata(html), url)
    assert not ext2.page.article_meta and not ext2.page.has_pub_meta and ext2.page.n_article_tags == 0
    assert stripped.keep, (stripped.reason, stripped.detail)
    # a small site: no metadata and no date in the URL either
    bare, _ = _verdict(strip_article_metadata(html), "https://valleyherald.example/elm-street-bridge-to-close.html")
    assert bare.keep, (bare.reason, bare.detail)


def test_section_listing_is_dropped_as_listing():
    res, ext = _verdict(*_listing())
    assert ext.page.n_link_headings >= 20
    assert not res.keep and res.reason == "page_listing", (res.reason, res.detail)


def test_error_login_and_cookie_pages_are_dropped():
    err = _html("404 Not Found | Valley Herald", "<h1>Page not found</h1><p>Sorry, the page you asked for "
                "does not exist. It may have moved, or the address may be wrong. Try the search box or go back to "
                "the home page of the site to find what you were looking for.</p>")
    res, _ = _verdict(err, "https://valleyherald.example/news/2025/03/14/missing")
    assert not res.keep and res.reason == "page_error"
    login = _html("Sign in | Valley Herald", '<form><p>Sign in to your account to read this story. Enter the '
                  'username and password you chose when you registered with the Valley Herald, or register now for '
                  'free to read ten stories each month.</p><input type="text" name="u"><input type="password" '
                  'name="p"></form>')
    res, _ = _verdict(login, "https://valleyherald.example/account/login")
    assert not res.keep and res.reason == "page_login"
    cookie = _html("Valley Herald", "<div><p>We use cookies and similar technologies to run this site, measure "
                   "its audience and show you adverts. Choose Accept to give your consent, or Manage to choose which "
                   "cookies we may set. You can change your choice at any time in the settings.</p></div>")
    res, _ = _verdict(cookie, "https://valleyherald.example/")
    assert not res.keep and res.reason == "page_cookie_wall"


def test_news_profile_uses_the_linear_model_and_its_numbers_fit_the_features():
    assert PROFILES["news"]["page"]["method"] == "linear"
    assert len(PAGE_MODEL["weights"]) == len(PAGE_FEATURES)
    assert any(w != 0 for w in PAGE_MODEL["weights"])
    html, url = _article()
    ext = extract_page(html, url)
    body = normalize_text(ext.body)
    feats = page_features(len(body.split()), ext.page)
    assert len(feats) == len(PAGE_FEATURES) and all(isinstance(f, float) for f in feats)
    rule = PageRule(method="linear", linear_threshold=0.0)
    # the model is a plain linear function of the features: an article page scores below a listing
    lhtml, lurl = _listing()
    lext = extract_page(lhtml, lurl)
    assert rule.linear_score(body, ext.page) < rule.linear_score(normalize_text(lext.body or ""), lext.page)


def test_strip_article_metadata_removes_only_the_article_declarations():
    html, _ = _article()
    out = strip_article_metadata(html)
    for gone in ("og:type", "article:published_time", "application/ld+json", "itemscope", "itemtype", "itemprop",
                 "<article", "</article>"):
        assert gone not in out, gone
    assert '<meta name="description" content="The bridge closes.">' in out
    assert "<title>Elm Street bridge to close for eight months | Valley Herald</title>" in out
    for para in STORY:
        assert para in out
    assert out.count("<div") == html.count("<div") + 1 and 'datetime="2025-03-14"' in out
    # text that merely mentions the words is left alone
    assert strip_article_metadata("<p>the itemprop of an article: og:type</p>") == \
        "<p>the itemprop of an article: og:type</p>"
