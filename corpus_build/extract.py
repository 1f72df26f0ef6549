"""Stages 2-3 of the corpus builder (docs/design.md §2): one lxml parse per page, then title, summary,
body text, canonical link and every publication/modification timestamp candidate.

The body comes from `body.article_body` (our fast extractor, which hands the pages it doubts to
trafilatura's main-content extraction on the same tree, without trafilatura's metadata or date
search: our cascades in `timestamps.py` do that). ``benchmarks/corpus/extract_speed.py`` measures speed,
``benchmarks/corpus/extract_quality.py`` quality on real pages with ground truth.

Timestamp candidates are returned per rule, in the cascade priority of docs/design.md §2.timestamps (never document
order); `timestamps.assign_timestamps` picks the first one that parses within the year range.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import lxml.etree

from forecast_env.corpus_build.body import (
    DEFAULT_BODY_MODE,
    article_body,
    block_text,
    text_of,
)

__all__ = [
    "MOD_RULES",
    "PUB_RULES",
    "Extracted",
    "PageSignals",
    "extract_page",
    "normalize_text",
    "page_signals",
    "url_date",
    "url_shape",
]

#: Publication cascade (docs/design.md §2.timestamps), highest priority first.
PUB_RULES = (
    "jsonld_datePublished",
    "jsonld_dateCreated",
    "meta_article_published_time",
    "meta_og_published_time",
    "itemprop_datePublished",
    "meta_name_date",
    "time_pubdate",
    "url_date",
)
#: Modification cascade (docs/design.md §2.timestamps), highest priority first (`http_last_modified` is added by
#: `timestamps.assign_timestamps` from the HTTP header).
MOD_RULES = (
    "jsonld_dateModified",
    "meta_article_modified_time",
    "meta_og_updated_time",
    "itemprop_dateModified",
    "meta_name_modified",
    "time_updated",
    "http_last_modified",
)

# <meta name=...> publication names in cascade priority order (lower index wins).
_META_PUB_NAMES = {
    name: i
    for i, group in enumerate(
        (
            ("parsely-pub-date",),
            ("sailthru.date",),
            ("dcterms.issued", "dc.date.issued", "dcterms.created", "dc.date"),
            ("citation_publication_date",),
            ("pubdate", "publishdate", "publish-date", "publication_date"),
            ("article_date_original",),
            ("date",),
        )
    )
    for name in group
}
_META_MOD_NAMES = {
    name: i
    for i, group in enumerate(
        (("dcterms.modified", "dc.date.modified"), ("lastmod", "last-modified", "modified"))
    )
    for name in group
}
_META_SIMPLE = {
    "article:published_time": "meta_article_published_time",
    "og:published_time": "meta_og_published_time",
    "og:article:published_time": "meta_og_published_time",
    "article:modified_time": "meta_article_modified_time",
    "og:updated_time": "meta_og_updated_time",
    "og:modified_time": "meta_og_updated_time",
    "og:article:modified_time": "meta_og_updated_time",
}
_ARTICLE_TYPES = {
    "article",
    "newsarticle",
    "blogposting",
    "reportagenews",
    "analysisnewsarticle",
    "opinionnewsarticle",
    "reviewnewsarticle",
    "backgroundnewsarticle",
    "askpublicnewsarticle",
    "satiricalarticle",
    "liveblogposting",
    "socialmediaposting",
    "scholarlyarticle",
    "techarticle",
    "report",
}
_JSONLD_KEYS = (
    ("datePublished", "jsonld_datePublished", "pub"),
    ("dateCreated", "jsonld_dateCreated", "pub"),
    ("dateModified", "jsonld_dateModified", "mod"),
)

# A full date in a URL path: /2026/03/14/ or /2026-03-14/ (also ...-2026-03-14.html).
_URL_DATE = re.compile(r"(?<![0-9])((?:19|20)[0-9]{2})([/_-])([01]?[0-9])\2([0-3]?[0-9])(?![0-9])")
_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u200e\u200f\u2028\u2029\ufeff]")
_HSPACE = re.compile(r"[^\S\n]+")
_MANY_NL = re.compile(r"\n{3,}")
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>", re.IGNORECASE)


@dataclass(frozen=True)
class PageSignals:
    """Page-level signals of "is this page an article?", read from the page's one parse (the quality
    stage's `page` rule judges them, `corpus_build.quality.PageRule`).

    Counts are of whitespace-separated words of the visible text of <body> (script, style, noscript,
    template, svg, iframe and form controls' text left out), so they do not depend on the body
    extractor."""

    #: og:type, lowercased ("article", "website", ...), None when the page has none
    og_type: str | None = None
    #: every JSON-LD @type on the page (lowercased, the part after the last / : or #), sorted
    jsonld_types: tuple[str, ...] = ()
    #: an article:published_time / og:published_time / itemprop datePublished / JSON-LD datePublished
    #: or dateCreated / <time pubdate> candidate (the URL's date and <meta name=date> not counted)
    has_pub_meta: bool = False
    #: number of <article> elements outside the chrome (a listing page repeats one per teaser)
    n_article_tags: int = 0
    #: number of <h2>/<h3>/<h4> elements whose text is (mostly) a link: teaser headlines
    n_link_headings: int = 0
    #: words of visible text in <body> outside its chrome (<nav>, <header>, <footer>, <aside> and elements
    #: with a navigation / banner / contentinfo / complementary / menu role), and of it the words inside <a>
    text_words: int = 0
    link_words: int = 0
    #: an <input type=password> on the page (a login or registration form)
    password_input: bool = False
    #: the <title> / first <h1> says the page is an error (404, "page not found", 500, access denied)
    error_title: bool = False
    #: the URL's path shape: "home" (no path), "listing" (/tag/, /category/, /page/N, /search, ...),
    #: "section" (one short path segment, no digits, no file suffix), else "other"
    url_shape: str = "other"
    #: <p> elements outside the chrome holding text, those of >= 30 words, and the words inside them
    n_paragraphs: int = 0
    n_long_paragraphs: int = 0
    p_words: int = 0
    #: the URL's path holds a full date (/2026/03/14/, -2026-03-14): a story's address on most news sites
    url_date: bool = False

    @property
    def link_share(self) -> float:
        """Share of the visible words that sit inside links (0 when the page has no text)."""
        return self.link_words / self.text_words if self.text_words else 0.0

    @property
    def article_meta(self) -> bool:
        """The page declares itself an article: og:type article or an article-typed JSON-LD object."""
        return (self.og_type or "").startswith("article") or bool(set(self.jsonld_types) & _ARTICLE_TYPES)


@dataclass
class Extracted:
    """What stage 2 found on one page (texts normalized; candidates raw, in cascade order).

    `page`: the page-level signals (None from callers that build an `Extracted` themselves: the
    quality stage's page rule then keeps the document). `gate_score`: set when the language gate
    (`langid.LanguageGate`) found the page confidently not English; its body was then not extracted."""

    title: str | None
    summary: str | None
    body: str | None  # None or "" -> dropped as "no_body"
    canonical_url: str | None
    pub_candidates: list[tuple[str, str]] = field(default_factory=list)
    mod_candidates: list[tuple[str, str]] = field(default_factory=list)
    page: PageSignals | None = None
    gate_score: float | None = None


def normalize_text(text: str) -> str:
    """Unicode NFC, control characters removed, spaces collapsed per line, <= 1 blank line in a row."""
    if not text:
        return ""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = _CTRL.sub("", text.replace("\t", " "))
    text = "\n".join(_HSPACE.sub(" ", line).strip() for line in text.split("\n"))
    return _MANY_NL.sub("\n\n", text).strip()


def _clean_inline(text: str | None) -> str | None:
    """Normalize a one-line field (title, summary); None when empty."""
    if not text:
        return None
    text = normalize_text(text).replace("\n", " ").strip()
    return text or None


def _parse(html: str) -> lxml.etree._Element | None:
    """Parse once with lxml; tolerant of missing <body>, broken tags, encoding declarations.

    Plain etree elements, not lxml.html's: its per-element Python class lookup costs more than
    everything else we do with the tree."""
    if not html or not html.strip():
        return None
    html = _XML_DECL.sub("", html, count=1)
    parser = lxml.etree.HTMLParser(encoding="utf-8", huge_tree=True, remove_comments=True)
    try:
        root = lxml.etree.fromstring(html.encode("utf-8", "replace"), parser=parser)
    except (lxml.etree.ParserError, ValueError, lxml.etree.XMLSyntaxError):
        return None
    return root if root is not None and isinstance(root.tag, str) else None


def url_date(url: str | None) -> str | None:
    """A full YYYY/MM/DD (or YYYY-MM-DD) date in a URL's path, as 'YYYY-MM-DD', else None."""
    if not url:
        return None
    try:
        path = urlsplit(url).path
    except ValueError:
        path = url
    for m in _URL_DATE.finditer(path):
        year, month, day = int(m.group(1)), int(m.group(3)), int(m.group(4))
        if 1 <= month <= 12 and 1 <= day <= 31:
            return f"{year:04d}-{month:02d}-{day:02d}"
    return None


# ------------------------------------------------------------------------------------------------
# JSON-LD
# ------------------------------------------------------------------------------------------------

_JSON_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_JSON_CDATA = re.compile(r"<!\[CDATA\[|\]\]>|<!--|-->")
_JSON_LOOSE = {key: re.compile(r'"' + key + r'"\s*:\s*"([^"]{4,64})"') for key, _, _ in _JSONLD_KEYS}


def _load_jsonld(raw: str):
    """json.loads tolerant of CDATA, HTML comments, trailing commas, raw control characters."""
    raw = _JSON_CDATA.sub("", raw).strip().rstrip(";")
    try:
        return json.loads(raw, strict=False)
    except ValueError:
        pass
    try:
        return json.loads(_JSON_TRAILING_COMMA.sub(r"\1", raw), strict=False)
    except ValueError:
        pass
    # Several objects concatenated in one <script>.
    objs: list[Any] = []
    dec, i = json.JSONDecoder(strict=False), 0
    while True:
        while i < len(raw) and raw[i] in " \t\r\n,":
            i += 1
        if i >= len(raw):
            break
        try:
            obj, i = dec.raw_decode(raw, i)
        except ValueError:
            return objs or None
        objs.append(obj)
    return objs or None


def _types(obj: dict) -> set[str]:
    t = obj.get("@type")
    items = t if isinstance(t, list) else [t]
    out = set()
    for item in items:
        if isinstance(item, str):
            out.add(re.split(r"[/:#]", item)[-1].strip().lower())
    return out


def _date_values(value) -> list[str]:
    """Strings inside a JSON-LD date value (str, number, list, {"@value": ...})."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [str(int(value))]
    if isinstance(value, list):
        return [s for v in value for s in _date_values(v)]
    if isinstance(value, dict):
        return _date_values(value.get("@value"))
    return []


def _walk_jsonld(data, depth: int, articles: list[dict], others: list[dict]) -> None:
    """Collect article-typed objects anywhere (depth-limited) and other top-level/@graph objects."""
    if depth > 8:
        return
    if isinstance(data, list):
        for item in data:
            _walk_jsonld(item, depth + 1, articles, others)
        return
    if not isinstance(data, dict):
        return
    if _types(data) & _ARTICLE_TYPES:
        articles.append(data)
    elif depth <= 2:
        others.append(data)
    for key, value in data.items():
        if isinstance(value, (dict, list)) and key not in ("author", "publisher", "image", "video"):
            _walk_jsonld(value, depth + 1, articles, others)


def _jsonld_candidates(scripts: list[str], pub: dict, mod: dict) -> list:
    """Date candidates of the JSON-LD scripts into pub / mod; returns the parsed scripts."""
    articles: list[dict] = []
    others: list[dict] = []
    loose: list[str] = []
    parsed: list = []
    for raw in scripts:
        data = _load_jsonld(raw)
        if data is None:
            loose.append(raw)
            continue
        parsed.append(data)
        _walk_jsonld(data, 0, articles, others)
    for obj in articles + others:
        for key, rule, kind in _JSONLD_KEYS:
            if key in obj:
                target = pub if kind == "pub" else mod
                target.setdefault(rule, []).extend(_date_values(obj[key]))
    # Unparseable JSON-LD: still read the dates with a regex, after every parsed object.
    for raw in loose:
        for key, rule, kind in _JSONLD_KEYS:
            target = pub if kind == "pub" else mod
            target.setdefault(rule, []).extend(m.group(1) for m in _JSON_LOOSE[key].finditer(raw))
    return parsed


def _jsonld_types(data, depth: int, out: set[str]) -> None:
    """Every @type of the parsed JSON-LD (depth-limited; author / publisher / image objects skipped:
    a page's publisher is an Organization whatever the page is)."""
    if depth > 8:
        return
    if isinstance(data, list):
        for item in data:
            _jsonld_types(item, depth + 1, out)
        return
    if not isinstance(data, dict):
        return
    out.update(t for t in _types(data) if t)
    for key, value in data.items():
        if isinstance(value, (dict, list)) and key not in ("author", "publisher", "image", "video", "logo", "creator"):
            _jsonld_types(value, depth + 1, out)


# ------------------------------------------------------------------------------------------------
# Page signals
# ------------------------------------------------------------------------------------------------

_NO_TEXT_TAGS = frozenset(("script", "style", "noscript", "template", "svg", "iframe", "select", "option",
                           "textarea", "button", "head"))
_LINK_HEADINGS = frozenset(("h2", "h3", "h4"))
#: the page's chrome: a site's menus, header, footer and side bars are links on every page, article or not
_CHROME_TAGS = frozenset(("nav", "header", "footer", "aside"))
_CHROME_ROLES = frozenset(("navigation", "banner", "contentinfo", "complementary", "menu", "menubar"))
_PUB_META_RULES = ("jsonld_datePublished", "jsonld_dateCreated", "meta_article_published_time",
                   "meta_og_published_time", "itemprop_datePublished", "time_pubdate")
_ERROR_TITLE = re.compile(
    r"\b404\b|\berror\s*(?:404|410|500|502|503)\b|\b(?:410 gone|500 internal|502 bad gateway|503 service)|"
    r"\b(?:page|file|url|document|content|article|story)s?\s+(?:was\s+|is\s+)?not\s+(?:be\s+)?found\b|^\s*not found\b|"
    r"\bpage (?:does not|doesn't|cannot|can't|could not|couldn't) (?:exist|be found)|internal server error|"
    r"\baccess denied\b|\b403 forbidden\b",
    re.IGNORECASE,
)
_LISTING_SEGMENTS = frozenset((
    "tag", "tags", "category", "categories", "topic", "topics", "section", "sections", "author", "authors",
    "archive", "archives", "search", "page", "label", "labels", "keyword", "keywords", "collections",
    "collection", "index", "sitemap", "latest", "feed", "list", "lists",
))
_PAGE_QUERY = re.compile(r"(?:^|&)(?:page|paged|p|pg|s|q|query|search|tag|cat|category)=", re.IGNORECASE)
_FILE_SUFFIX = re.compile(r"\.(?:s?html?|php|aspx?|jsp|cfm)$", re.IGNORECASE)


def url_shape(url: str | None) -> str:
    """"home", "listing", "section" or "other" (see `PageSignals.url_shape`)."""
    if not url:
        return "other"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "other"
    segments = [seg for seg in parts.path.split("/") if seg]
    low = [seg.lower() for seg in segments]
    if any(seg in _LISTING_SEGMENTS for seg in low) or _PAGE_QUERY.search(parts.query or ""):
        return "listing"
    if not segments or (len(segments) == 1 and low[0] in ("index.html", "index.htm", "index.php", "default.aspx")):
        return "home" if not parts.query else "other"
    if (len(segments) == 1 and not any(c.isdigit() for c in low[0]) and not _FILE_SUFFIX.search(low[0])
            and low[0].count("-") <= 1):
        return "section"
    return "other"


def _visible_words(root) -> tuple[int, int, int, int, bool, tuple[int, int, int]]:
    """(words of visible text, of it inside <a>, <article> elements, link headings, password input,
    (<p> with text, <p> of >= 30 words, words in <p>)) under root, in one walk of the tree."""
    total = link = n_article = n_link_head = 0
    paragraphs: list = []
    password = False
    stack: list[tuple[Any, bool]] = [(root, False)]  # lxml elements (lxml ships no type stubs)
    heading_stack: list = []
    while stack:
        el, in_link = stack.pop()
        tag = el.tag
        if not isinstance(tag, str):
            continue
        if tag == "input":
            if (el.get("type") or "").strip().lower() == "password":
                password = True
            continue
        if tag in _NO_TEXT_TAGS or tag in _CHROME_TAGS or (el.get("role") or "").strip().lower() in _CHROME_ROLES:
            continue
        if tag == "a":
            in_link = True
        elif tag == "article":
            n_article += 1
        elif tag in _LINK_HEADINGS:
            heading_stack.append(el)
        elif tag == "p":
            paragraphs.append(el)
        if el.text:
            n = len(el.text.split())
            total += n
            link += n if in_link else 0
        for child in el:
            if child.tail:
                n = len(child.tail.split())
                total += n
                link += n if in_link else 0
            stack.append((child, in_link))
    for h in heading_stack:
        words = len(" ".join(h.itertext()).split())
        if not words:
            continue
        linked = sum(len(" ".join(a.itertext()).split()) for a in h.iter("a"))
        if linked * 2 >= words:
            n_link_head += 1
    p_counts = [len(" ".join(p.itertext()).split()) for p in paragraphs]
    p_stats = (sum(1 for n in p_counts if n), sum(1 for n in p_counts if n >= 30), sum(p_counts))
    return total, link, n_article, n_link_head, password, p_stats


def _url_has_date(url: str | None) -> bool:
    """The URL's path holds a full date (see `PageSignals.url_date`)."""
    try:
        return bool(url and _URL_DATE.search(urlsplit(url).path))
    except ValueError:
        return False


def page_signals(tree, url: str, og_type: str | None, jsonld: list, pub: dict, title: str | None) -> PageSignals:
    """The page's `PageSignals` from its parse (before the body extractor sees the tree)."""
    types: set[str] = set()
    for data in jsonld:
        _jsonld_types(data, 0, types)
    body = tree.find(".//body")
    total, link, n_article, n_link_head, password, p_stats = _visible_words(body if body is not None else tree)
    h1 = tree.find(".//h1")
    heads = [title or "", block_text(h1) if h1 is not None else ""]
    return PageSignals(
        og_type=(og_type or "").strip().lower() or None,
        jsonld_types=tuple(sorted(types)),
        has_pub_meta=any(pub.get(rule) for rule in _PUB_META_RULES),
        n_article_tags=n_article,
        n_link_headings=n_link_head,
        text_words=total,
        link_words=link,
        password_input=password,
        error_title=any(_ERROR_TITLE.search(h) for h in heads if h),
        url_shape=url_shape(url),
        n_paragraphs=p_stats[0],
        n_long_paragraphs=p_stats[1],
        p_words=p_stats[2],
        url_date=_url_has_date(url),
    )


# ------------------------------------------------------------------------------------------------
# Page
# ------------------------------------------------------------------------------------------------


_TITLE_SEP = re.compile(r"\s+[|\u2013\u2014\u00b7:-]{1,2}\s+|\s*\|\s*")


def _site_key(name: str) -> str:
    name = name.strip().lower().removeprefix("@").removeprefix("www.")
    if re.fullmatch(r"[a-z0-9-]+(\.[a-z0-9-]+)+", name):  # a domain ("DW.COM"): its registrable label
        name = _host_label(f"http://{name}/")
    return re.sub(r"[^a-z0-9]", "", name)


def _host_label(url: str) -> str:
    """The registrable label of a URL's host ("www.dw.com" -> "dw", "news.bbc.co.uk" -> "bbc")."""
    host = urlsplit(url).hostname or ""
    labels = [x for x in host.split(".") if x and x != "www"]
    if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in ("co", "com", "org", "net", "ac", "gov"):
        labels = labels[:-2]
    elif len(labels) >= 2:
        labels = labels[:-1]
    return labels[-1] if labels else ""


def strip_site_suffix(title: str | None, site_names: list[str]) -> str | None:
    """Cut a trailing " | Site" / " - Site ..." from a title when the segment names the site (its
    og:site_name, application-name, twitter:site, or the URL's host label); other titles are kept."""
    names = {k for k in (_site_key(n) for n in site_names if n) if len(k) >= 2}
    if not title or not names:
        return title
    for m in _TITLE_SEP.finditer(title):
        head = title[: m.start()].strip()
        segment = _TITLE_SEP.split(title[m.end():], maxsplit=1)[0]
        if len(head.split()) >= 2 and _site_key(segment) in names:
            return head
    return title


def extract_page(html: str, url: str, use_trafilatura_fallback: bool = True,
                 body_mode: str = DEFAULT_BODY_MODE, gate: Callable[[Any], float | None] | None = None) -> Extracted:
    """Parse one HTML page once and extract text fields, canonical link and timestamp candidates
    (`body_mode`: how the body is chosen, `corpus_build.body.article_body`). `gate` (e.g. a
    `langid.LanguageGate`) sees the parse before the body: when it returns a score, the page is not
    English and comes back without a body (`Extracted.gate_score`)."""
    tree = _parse(html)
    if tree is None:
        u = url_date(url)
        return Extracted(None, None, None, None, [("url_date", u)] if u else [], [])

    pub: dict[str, list[str]] = {}
    mod: dict[str, list[str]] = {}
    meta_pub_named: list[tuple[int, int, str]] = []
    meta_mod_named: list[tuple[int, int, str]] = []
    og_title = og_type = description = og_description = twitter_description = None
    site_names: list[str] = []

    for i, meta in enumerate(tree.iter("meta")):
        content = meta.get("content")
        if content is None:
            continue
        content = content.strip()
        itemprop = (meta.get("itemprop") or "").strip().lower()
        if itemprop == "datepublished":
            pub.setdefault("itemprop_datePublished", []).append(content)
        elif itemprop == "datemodified":
            mod.setdefault("itemprop_dateModified", []).append(content)
        for attr in ("property", "name"):
            key = (meta.get(attr) or "").strip().lower()
            if not key:
                continue
            rule = _META_SIMPLE.get(key)
            if rule is not None:
                (mod if "modified" in rule or "updated" in rule else pub).setdefault(rule, []).append(content)
            elif key in _META_PUB_NAMES:
                meta_pub_named.append((_META_PUB_NAMES[key], i, content))
            elif key in _META_MOD_NAMES:
                meta_mod_named.append((_META_MOD_NAMES[key], i, content))
            elif key == "og:title" and og_title is None:
                og_title = content
            elif key == "og:type" and og_type is None:
                og_type = content
            elif key in ("og:site_name", "application-name", "twitter:site"):
                site_names.append(content)
            elif key == "description" and description is None:
                description = content
            elif key == "og:description" and og_description is None:
                og_description = content
            elif key == "twitter:description" and twitter_description is None:
                twitter_description = content
            break  # property= wins over name= on the same element
    if meta_pub_named:
        pub["meta_name_date"] = [c for _, _, c in sorted(meta_pub_named)]
    if meta_mod_named:
        mod["meta_name_modified"] = [c for _, _, c in sorted(meta_mod_named)]

    # itemprop on elements other than <meta>: <time datetime>, content=, else text.
    for el in tree.xpath("//*[@itemprop][not(self::meta)]"):
        prop = (el.get("itemprop") or "").strip().lower()
        if prop not in ("datepublished", "datemodified"):
            continue
        value = el.get("datetime") or el.get("content") or block_text(el)
        if value:
            rule = "itemprop_datePublished" if prop == "datepublished" else "itemprop_dateModified"
            (pub if prop == "datepublished" else mod).setdefault(rule, []).append(value.strip())

    for el in tree.iter("time"):
        classes = set((el.get("class") or "").lower().split())
        value = (el.get("datetime") or block_text(el) or "").strip()
        if not value:
            continue
        if el.get("pubdate") is not None or "published" in classes:
            pub.setdefault("time_pubdate", []).append(value)
        elif "updated" in classes or "modified" in classes:
            mod.setdefault("time_updated", []).append(value)

    scripts = [s.text for s in tree.iter("script") if s.text and "ld+json" in (s.get("type") or "").lower()]
    jsonld: list = []
    if scripts:
        jpub: dict[str, list[str]] = {}
        jmod: dict[str, list[str]] = {}
        jsonld = _jsonld_candidates(scripts, jpub, jmod)
        pub.update(jpub)
        mod.update(jmod)

    canonical = None
    for link in tree.iter("link"):
        rel = (link.get("rel") or "").lower().split()
        href = (link.get("href") or "").strip()
        if "canonical" in rel and href:
            try:
                canonical = urljoin(url, href)
            except ValueError:
                canonical = None
            break

    for candidate in (url, canonical):
        u = url_date(candidate)
        if u:
            pub.setdefault("url_date", []).append(u)

    title = _clean_inline(og_title)
    if title is None:
        t = tree.find(".//title")
        title = _clean_inline(text_of(t) if t is not None else None)
    title = strip_site_suffix(title, [*site_names, _host_label(url)])
    if title is None:
        h1 = tree.find(".//h1")
        title = _clean_inline(block_text(h1) if h1 is not None else None)
    summary = (
        _clean_inline(description) or _clean_inline(og_description) or _clean_inline(twitter_description)
    )

    pub_candidates = [(rule, v) for rule in PUB_RULES for v in pub.get(rule, ()) if v]
    mod_candidates = [(rule, v) for rule in MOD_RULES for v in mod.get(rule, ()) if v]
    if gate is not None:
        score = gate(tree)
        if score is not None:
            return Extracted(title, summary, None, canonical, pub_candidates, mod_candidates, gate_score=score)
    page = page_signals(tree, url, og_type, jsonld, pub, title)
    body = normalize_text(article_body(tree, html, url, use_fallback=use_trafilatura_fallback,
                                             body_mode=body_mode))

    if not any(ch.isalnum() for ch in body):
        body = ""
    return Extracted(title, summary, body or None, canonical, pub_candidates, mod_candidates, page)
