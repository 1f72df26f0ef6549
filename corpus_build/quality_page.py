"""Stage 5 of the corpus builder (docs/design.md §2), the page rule: is this page an article at all (the
`news` profile's first filter, docs/corpus_quality.md), over the signals of the page's one parse, by a score
or by a linear model fitted on the tuning pages.
"""

from __future__ import annotations

import math
import re
from typing import Protocol

from forecast_env.corpus_build.quality_text import FilterResult, _drop
from forecast_env.errors import ConfigError

__all__ = [
    "COLLECTION_TYPES",
    "PAGE_FEATURES",
    "PAGE_MODEL",
    "PageRule",
    "PageSignalsLike",
    "page_features",
    "strip_article_metadata",
]

class PageSignalsLike(Protocol):
    """What `PageRule` reads of `corpus_build.extract.PageSignals` (kept structural: quality_page.py does not
    import the extractor)."""

    og_type: str | None
    jsonld_types: tuple[str, ...]
    has_pub_meta: bool
    n_article_tags: int
    n_link_headings: int
    text_words: int
    password_input: bool
    error_title: bool
    url_shape: str
    n_paragraphs: int
    n_long_paragraphs: int
    p_words: int
    url_date: bool

    @property
    def link_share(self) -> float: ...

    @property
    def article_meta(self) -> bool: ...

_META_ARTICLE = re.compile(r"<meta\b[^>]*?\b(?:property|name)\s*=\s*[\"']?(?:og|article):[^>]*>", re.IGNORECASE)
_JSONLD_SCRIPT = re.compile(r"<script\b[^>]*?\btype\s*=\s*[\"']?application/ld\+json[^>]*>.*?</script\s*>",
                            re.IGNORECASE | re.DOTALL)
_MICRODATA_ATTR = re.compile(r"\s(?:itemscope|itemtype|itemprop|itemid|pubdate)(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>]+))?",
                             re.IGNORECASE)
_ARTICLE_TAG = re.compile(r"<(/?)article\b", re.IGNORECASE)


def strip_article_metadata(html: str) -> str:
    """The page without what declares it an article: og:* / article:* <meta>, JSON-LD scripts, microdata
    attributes (itemscope, itemtype, itemprop, itemid) and <time pubdate>, and <article> turned into
    <div>. The measurement of the page rule on pages with no article metadata (small and older sites)
    uses it (benchmarks/corpus/quality_profile_keep.py --strip-metadata)."""
    html = _JSONLD_SCRIPT.sub("", html)
    html = _META_ARTICLE.sub("", html)
    html = re.sub(r"<[a-zA-Z][^>]*>", lambda m: _MICRODATA_ATTR.sub("", m.group(0)), html)
    return _ARTICLE_TAG.sub(lambda m: f"<{m.group(1)}div", html)


#: JSON-LD types that declare a page of many items (a category, a search result, a shop grid, a profile)
COLLECTION_TYPES = frozenset(("collectionpage", "itemlist", "searchresultspage", "productgroup", "product",
                              "offercatalog", "profilepage"))
_COOKIE_WORDS = re.compile(r"\bcookies?\b|\bconsent\b|\bgdpr\b", re.IGNORECASE)
_LOGIN_WORDS = re.compile(r"\b(?:log ?in|sign ?in|sign up|password|username|register|subscribe)\b", re.IGNORECASE)


#: The page rule's linear model's inputs (`page_features`), in order.
PAGE_FEATURES = ("url_home", "url_listing", "url_section", "url_date", "link_share", "body_share", "log_body_words",
                 "log_text_words", "collection_type", "og_not_article", "log_teasers", "article_meta", "pub_meta",
                 "p_share", "log_long_paragraphs", "long_paragraph_share", "log_mean_paragraph_words")


def page_features(body_words: int, page: PageSignalsLike) -> list[float]:
    """The page's inputs to the page rule's linear model, in `PAGE_FEATURES` order (plain floats)."""
    text_words = page.text_words
    og = page.og_type or ""
    return [
        float(page.url_shape == "home"), float(page.url_shape == "listing"), float(page.url_shape == "section"),
        float(page.url_date),
        page.link_share,
        min(1.0, body_words / text_words) if text_words else 1.0,
        math.log1p(body_words),
        math.log1p(text_words),
        float(bool(set(page.jsonld_types) & COLLECTION_TYPES) or og.startswith("product")),
        float(bool(og) and not og.startswith("article")),
        math.log1p(max(page.n_article_tags, page.n_link_headings)),
        float(page.article_meta),
        float(page.has_pub_meta),
        min(1.0, page.p_words / text_words) if text_words else 0.0,
        math.log1p(page.n_long_paragraphs),
        page.n_long_paragraphs / page.n_paragraphs if page.n_paragraphs else 0.0,
        math.log1p(page.p_words / page.n_paragraphs) if page.n_paragraphs else 0.0,
    ]


#: The page rule's linear model (`PageRule(method="linear")`): a logistic regression over `page_features`
#: fitted on the tuning pages only (benchmarks/log/2026-12-03-issue30-page-rule.md; the article pages twice, as they are
#: and with their article metadata stripped). Plain numbers, in `PAGE_FEATURES` order.
PAGE_MODEL: dict = {
    "intercept": 2.7281,
    "weights": (2.6371, 1.2309, 1.7296, -2.4587, 0.8079, -1.4483, -0.5451, 0.3576, 2.8288, 1.8528, -0.0723, 0.1525,
                -0.8554, -1.0057, -0.4119, -0.6066, -0.2614),
}


class PageRule:
    """Is this page an article? A page-level rule over the signals of the page's one parse
    (`corpus_build.extract.PageSignals`) and the body's length; a news corpus keeps articles only.

    Three short-page rules, for pages whose body is under `short_body_words` words and whose metadata does
    not declare an article (a short wire item about cookies, or a podcast called "The 404", is kept):
    `page_error` (the title or first <h1> says 404 / not found / server error), `page_login` (a password
    field and login / sign-up words in the body), `page_cookie_wall` (the body talks of cookies or consent).

    Then `page_listing`, a score: one point for each listing sign, the URL's shape (home page, /tag/,
    /category/, /page/N, /search, a bare section path); at least `max_link_share` of the page's words
    inside links; the body under `min_body_share` of the page's words (the extractor found a small part
    of a page of teasers); a collection-typed JSON-LD object (`COLLECTION_TYPES`) or og:type product;
    at least `min_teasers` <article> blocks or link headlines. Minus `article_weight` for article
    metadata (og:type article, an article-typed JSON-LD object) and again for a publication-date
    candidate in the page's metadata. The page is dropped when the score is >= `drop_score`.

    Without signals (`page=None`: a caller that does not pass them) the document is kept."""

    name = "page"
    needs_page = True

    def __init__(
        self,
        drop_score: int | None = 2,
        article_weight: int = 2,
        max_link_share: float = 0.4,
        min_body_share: float = 0.6,
        min_teasers: int = 10,
        short_body_words: int = 150,
        listing: bool = True,
        error: bool = True,
        login: bool = True,
        cookie_wall: bool = True,
        method: str = "score",
        linear_threshold: float = 0.0,
    ):
        self.drop_score = drop_score
        self.article_weight = article_weight
        self.max_link_share = max_link_share
        self.min_body_share = min_body_share
        self.min_teasers = min_teasers
        self.short_body_words = short_body_words
        self.listing = listing
        self.error = error
        self.login = login
        self.cookie_wall = cookie_wall
        if method not in ("score", "linear"):
            raise ConfigError(f"quality.page.method: {method!r} is not score or linear; see docs/corpus_quality.md")
        self.method = method
        self.linear_threshold = linear_threshold

    @staticmethod
    def linear_score(text: str, page: PageSignalsLike) -> float:
        """The linear model's listing score (`PAGE_MODEL` over `page_features`): >= the threshold is a listing."""
        feats = page_features(len(text.split()), page)
        return PAGE_MODEL["intercept"] + sum(w * f for w, f in zip(PAGE_MODEL["weights"], feats, strict=True))

    def score(self, text: str, page: PageSignalsLike) -> tuple[int, list[str]]:
        """The listing score and the signs that made it (for the drop's detail)."""
        body_words = len(text.split())
        signs: list[str] = []
        if page.url_shape != "other":
            signs.append(f"url={page.url_shape}")
        if page.link_share >= self.max_link_share:
            signs.append(f"link_share={page.link_share:.2f}")
        share = body_words / page.text_words if page.text_words else 1.0
        if share < self.min_body_share:
            signs.append(f"body_share={share:.2f}")
        og = (page.og_type or "")
        if set(page.jsonld_types) & COLLECTION_TYPES or og.startswith("product"):
            signs.append("collection_type")
        teasers = max(page.n_article_tags, page.n_link_headings)
        if teasers >= self.min_teasers:
            signs.append(f"teasers={teasers}")
        score = len(signs)
        if page.article_meta:
            score -= self.article_weight
            signs.append("article_meta")
        if page.has_pub_meta:
            score -= self.article_weight
            signs.append("pub_meta")
        return score, signs

    def filter(self, text: str, page: PageSignalsLike | None = None) -> FilterResult:
        if page is None:
            return FilterResult(True, None, None, text)
        body_words = len(text.split())
        if body_words < self.short_body_words and not (page.article_meta or page.has_pub_meta):
            if self.error and page.error_title:
                return _drop("page_error", f"body_words={body_words}", text)
            if self.login and page.password_input and _LOGIN_WORDS.search(text):
                return _drop("page_login", f"body_words={body_words}", text)
            if self.cookie_wall and _COOKIE_WORDS.search(text):
                return _drop("page_cookie_wall", f"body_words={body_words}", text)
        if self.listing and self.method == "linear":
            z = self.linear_score(text, page)
            if z >= self.linear_threshold:
                return _drop("page_listing", f"linear={z:.2f}", text)
        elif self.listing and self.drop_score is not None:
            score, signs = self.score(text, page)
            if score >= self.drop_score:
                return _drop("page_listing", f"score={score} ({', '.join(signs)})", text)
        return FilterResult(True, None, None, text)
