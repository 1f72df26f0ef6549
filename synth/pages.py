"""HTML pages with publication/modification metadata laid out over every rule of the timestamp cascades (docs/design.md §2.timestamps).

`date_markup` decides which rule should fire and renders it (plus decoys: out-of-range years that
must be skipped, lower-priority rules with other values, tags in varying document order), and
returns the truth the corpus builder must reproduce. `render_html` lays the story out in one of the
real-world `LAYOUTS` (div paragraphs, boilerplate-named wrappers, comment threads, table layouts);
`layout_truth` gives the body the extractor must find on each.
"""

from __future__ import annotations

import html
import json
import random
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import overload

PUB_RULES = ["jsonld_datePublished", "jsonld_dateCreated", "meta_article_published_time",
             "meta_og_published_time", "itemprop_datePublished", "meta_name_date", "time_pubdate",
             "url_date"]
MOD_RULES = ["jsonld_dateModified", "meta_article_modified_time", "meta_og_updated_time",
             "itemprop_dateModified", "meta_name_modified", "time_updated", "http_last_modified"]
PUB_META_NAMES = ["parsely-pub-date", "sailthru.date", "dcterms.issued", "DC.date.issued",
                  "citation_publication_date", "pubdate", "publishdate", "article_date_original", "date"]
MOD_META_NAMES = ["dcterms.modified", "DC.date.modified", "lastmod", "last-modified", "modified"]
OFFSETS = [timedelta(hours=5, minutes=30), timedelta(hours=-4), timedelta(hours=1), timedelta(hours=9),
           timedelta(hours=-7)]


@overload
def iso_z(dt: datetime) -> str: ...


@overload
def iso_z(dt: None) -> None: ...


def iso_z(dt: datetime | None) -> str | None:
    """`dt` in UTC as YYYY-MM-DDTHH:MM:SSZ (None stays None)."""
    return None if dt is None else dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fmt_value(rng: random.Random, dt: datetime, offset: timedelta | None = None,
              allow_date_only: bool = True) -> tuple[str, datetime]:
    """A rendered timestamp and the UTC instant it denotes (date-only values mean midnight UTC)."""
    dt = dt.astimezone(UTC).replace(microsecond=0)
    r = rng.random()
    if offset is not None or r < 0.18:
        off = offset if offset is not None else rng.choice(OFFSETS)
        local = (dt + off).replace(tzinfo=None)
        sign = "+" if off >= timedelta(0) else "-"
        mins = abs(int(off.total_seconds())) // 60
        return local.strftime("%Y-%m-%dT%H:%M:%S") + f"{sign}{mins // 60:02d}:{mins % 60:02d}", dt
    if r < 0.45:
        return dt.strftime("%Y-%m-%dT%H:%M:%SZ"), dt
    if r < 0.6:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.000Z"), dt
    if r < 0.72:
        return dt.strftime("%Y-%m-%dT%H:%M:%S+00:00"), dt
    if r < 0.84:
        return dt.strftime("%Y-%m-%dT%H:%M:%S"), dt  # naive: UTC
    if r < 0.92:
        return dt.strftime("%Y-%m-%d %H:%M:%S"), dt  # naive: UTC
    if allow_date_only:
        d0 = datetime(dt.year, dt.month, dt.day, tzinfo=UTC)
        return dt.strftime("%Y-%m-%d"), d0
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ"), dt


def http_date(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")


BAD_VALUES = ["1970-01-01T00:00:00Z", "2099-12-31T23:59:59Z", "0001-01-01", "1999-11-30T00:00:00+00:00",
              "2045-06-01"]


@dataclass
class DateMarkup:
    head: list[str] = field(default_factory=list)  # meta tags
    jsonld: dict = field(default_factory=dict)  # article-node fields
    jsonld_form: str = "top"  # top | graph | none
    jsonld_type: str = "NewsArticle"
    time_tags: list[str] = field(default_factory=list)
    url_date: str | None = None  # "YYYY/MM/DD" to put in the URL
    last_modified: str | None = None
    t_pub: datetime | None = None
    t_mod: datetime | None = None
    t_source: str = "crawl"
    t_rule: str = "crawl"
    t_pub_rule: str | None = None
    t_mod_rule: str | None = None
    pub_raw: str | None = None  # the value written under t_pub_rule, as written
    mod_raw: str | None = None  # the value written under t_mod_rule, as written


def _emit(m: DateMarkup, rule: str, value: str, rng: random.Random) -> None:
    """Render `value` under `rule` into the markup."""
    if rule == "jsonld_datePublished":
        m.jsonld["datePublished"] = value
    elif rule == "jsonld_dateCreated":
        m.jsonld["dateCreated"] = value
    elif rule == "jsonld_dateModified":
        m.jsonld["dateModified"] = value
    elif rule == "meta_article_published_time":
        m.head.append(f'<meta property="article:published_time" content="{value}">')
    elif rule == "meta_og_published_time":
        prop = rng.choice(["og:published_time", "og:article:published_time"])
        m.head.append(f'<meta property="{prop}" content="{value}">')
    elif rule == "itemprop_datePublished":
        m.head.append(f'<meta itemprop="datePublished" content="{value}">')
    elif rule == "meta_name_date":
        m.head.append(f'<meta name="{rng.choice(PUB_META_NAMES)}" content="{value}">')
    elif rule == "time_pubdate":
        if rng.random() < 0.5:
            m.time_tags.append(f'<time pubdate datetime="{value}">{{vis}}</time>')
        else:
            m.time_tags.append(f'<time class="published" datetime="{value}">{{vis}}</time>')
    elif rule == "meta_article_modified_time":
        m.head.append(f'<meta property="article:modified_time" content="{value}">')
    elif rule == "meta_og_updated_time":
        prop = rng.choice(["og:updated_time", "og:modified_time"])
        m.head.append(f'<meta property="{prop}" content="{value}">')
    elif rule == "itemprop_dateModified":
        m.head.append(f'<meta itemprop="dateModified" content="{value}">')
    elif rule == "meta_name_modified":
        m.head.append(f'<meta name="{rng.choice(MOD_META_NAMES)}" content="{value}">')
    elif rule == "time_updated":
        m.time_tags.append(f'<time class="updated" datetime="{value}">{{vis}}</time>')
    else:
        raise ValueError(rule)


def date_markup(rng: random.Random, t_true: datetime, crawl: datetime, source: str | None = None,
                pub_rule: str | None = None, mod_rule: str | None = None,
                offset: timedelta | None = None, decoys: bool = True) -> DateMarkup:
    """Metadata for a page first published at `t_true` and crawled at `crawl`."""
    m = DateMarkup()
    m.jsonld_type = rng.choice(["NewsArticle", "NewsArticle", "Article", "BlogPosting"])
    m.jsonld_form = rng.choice(["top", "top", "graph"])
    if source is None:
        r = rng.random()
        source = "pub" if r < 0.6 else "mod" if r < 0.87 else "crawl"
    if source == "pub":
        rule = pub_rule or rng.choice(PUB_RULES)
        i = PUB_RULES.index(rule)
        if rule == "url_date":
            d0 = datetime(t_true.year, t_true.month, t_true.day, tzinfo=UTC)
            m.url_date = t_true.strftime("%Y/%m/%d")
            m.t_pub, m.pub_raw = d0, m.url_date
        else:
            val, m.t_pub = fmt_value(rng, t_true, offset, allow_date_only=rule != "time_pubdate")
            _emit(m, rule, val, rng)
            m.pub_raw = val
        m.t_pub_rule = rule
        if decoys and i > 0 and rng.random() < 0.35:  # an out-of-range value on a higher rule
            hi = rng.choice([r for r in PUB_RULES[:i] if r != "url_date"])
            _emit(m, hi, rng.choice(BAD_VALUES), rng)
        if decoys and i < len(PUB_RULES) - 2 and rng.random() < 0.25:  # a lower rule, other value
            lo = rng.choice([r for r in PUB_RULES[i + 1 :] if r not in ("url_date",)])
            _emit(m, lo, fmt_value(rng, t_true + timedelta(hours=rng.randint(1, 30)))[0], rng)
        m.t_source, m.t_rule = "pub", rule
        if mod_rule or rng.random() < 0.5:
            _add_mod(m, rng, mod_rule or rng.choice(MOD_RULES), t_true, crawl, later=True, decoys=decoys)
    elif source == "mod":
        if decoys and rng.random() < 0.35:  # a publication value out of range: t_pub stays empty
            _emit(m, rng.choice(["jsonld_datePublished", "meta_article_published_time",
                                 "meta_name_date"]), rng.choice(BAD_VALUES), rng)
        _add_mod(m, rng, mod_rule or rng.choice(MOD_RULES), t_true, crawl, later=False, decoys=decoys,
                 offset=offset)
        m.t_source, m.t_rule = "mod", m.t_mod_rule or "crawl"
    else:
        if decoys and rng.random() < 0.5:
            _emit(m, rng.choice(["jsonld_datePublished", "meta_og_updated_time", "meta_name_date"]),
                  rng.choice(BAD_VALUES), rng)
        m.t_source, m.t_rule = "crawl", "crawl"
    return m


def _add_mod(m: DateMarkup, rng: random.Random, rule: str, t_true: datetime, crawl: datetime,
             later: bool, decoys: bool, offset: timedelta | None = None) -> None:
    room = max((crawl - t_true).total_seconds() - 120, 60)
    t = t_true + timedelta(seconds=int(rng.uniform(60, room))) if later else t_true
    i = MOD_RULES.index(rule)
    if rule == "http_last_modified":
        t = t.replace(microsecond=0)
        m.last_modified = http_date(t)
        m.t_mod, m.mod_raw = t, m.last_modified
    else:
        val, m.t_mod = fmt_value(rng, t, offset, allow_date_only=rule != "time_updated")
        _emit(m, rule, val, rng)
        m.mod_raw = val
    m.t_mod_rule = rule
    if decoys and i > 0 and rng.random() < 0.3:
        hi = rng.choice([r for r in MOD_RULES[:i] if r != "http_last_modified"])
        _emit(m, hi, rng.choice(BAD_VALUES), rng)
    if decoys and i < len(MOD_RULES) - 1 and rng.random() < 0.25:
        lo = rng.choice(MOD_RULES[i + 1 :])
        t2 = t - timedelta(minutes=rng.randint(5, 300))
        if lo == "http_last_modified":
            m.last_modified = http_date(t2)
        else:
            _emit(m, lo, fmt_value(rng, t2)[0], rng)


# ---------------------------------------------------------------------------------------------
# Page chrome
# ---------------------------------------------------------------------------------------------

NAV = ["World", "Politics", "Business", "Sport", "Science", "Culture", "Opinion", "Local"]
RELATED = ["Five walks to try this spring", "Readers' letters: the week in review",
           "Photo gallery: a year on the coast", "How our reporters cover elections",
           "The best new books of the season", "Ask the expert: saving on energy bills",
           "Listen: the weekly news podcast", "Crossword and puzzles"]


#: Page layouts real news sites use (docs/design.md §2.extraction): "classic" (<article> with <p>s),
#: "div_paragraphs" (paragraphs as BEM-classed <div>s with data attributes), "layout_classes" (the
#: article inside wrappers whose class names contain boilerplate words: l-sidebar-fixed, has-paywall),
#: "comments" (no article markup, a reader-comment thread with more paragraph text than the story),
#: "table" (an old table layout: a navigation cell, the story as loose text split by <br><br>).
LAYOUTS = ("classic", "div_paragraphs", "layout_classes", "comments", "table")
_LAYOUT_WEIGHTS = (60, 10, 10, 10, 10)
COMMENT_LINES = [
    "I have lived here for thirty years and nobody ever asked us what we think about any of this.",
    "Thanks for the reporting, but the article leaves out what happened at the last council meeting.",
    "My neighbour works there and says the real numbers are much worse than anyone admits in public.",
    "This is exactly what was promised before the last election, and then nothing happened for years.",
    "Does anyone know whether the new rules apply to small businesses as well or only to the big ones?",
    "Same story every spring. Wait and see, it will be quietly dropped again before the summer break.",
    "Good to see some progress at last, even if it comes far too late for most families in our street.",
    "The comment above is spot on. People should write to their representatives instead of complaining.",
]


def page_layout(url: str, paragraphs: list[str] | None) -> str:
    """The layout of a page, fixed by its URL (no random draw: the world's other draws stay as they
    were). Only prose pages (every paragraph >= 8 words) get a non-classic layout: pages of short
    lines exist to trip the quality filters, and a short text <div> reads as page chrome."""
    if not paragraphs or any(len(p.split()) < 8 for p in paragraphs):
        return "classic"
    k = zlib.crc32(url.encode("utf-8")) % sum(_LAYOUT_WEIGHTS)
    for layout, w in zip(LAYOUTS, _LAYOUT_WEIGHTS):
        if k < w:
            return layout
        k -= w
    return LAYOUTS[0]


def layout_truth(url: str, paragraphs: list[str] | None) -> dict:
    """truth.json fields of a rendered page: its layout and, for the non-classic layouts, the body
    the extractor must return (paragraphs, blank-line separated)."""
    layout = page_layout(url, paragraphs)
    out: dict = {"layout": layout}
    if layout != "classic":
        out["body"] = "\n\n".join(" ".join(p.split()) for p in paragraphs or [])
    return out


def site_name(host: str) -> str:
    base = host.split(".")[0]
    return base.replace("-", " ").title()


def render_html(
    rng: random.Random,
    *,
    url: str,
    host: str,
    title: str,
    summary: str,
    paragraphs: list[str] | None,
    markup: DateMarkup,
    author: str,
    canonical: str | None = None,
    lang: str = "en",
    charset: str | None = "utf-8",
    raw_body_html: str | None = None,
    layout: str | None = None,
) -> str:
    """A realistic news page: cookie banner, nav, byline, the story in one of `LAYOUTS` (default: the
    URL's `page_layout`), related links, footer. Every layout's body text is the paragraphs."""
    e = html.escape
    head = [f'<meta charset="{charset}">' if charset else "",
            f"<title>{e(title)}</title>",
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f'<meta name="description" content="{e(summary)}">',
            f'<meta property="og:title" content="{e(title)}">',
            f'<meta property="og:description" content="{e(summary)}">',
            '<meta property="og:type" content="article">',
            f'<meta property="og:url" content="{e(canonical or url)}">',
            f'<meta property="og:site_name" content="{e(site_name(host))}">']
    head += markup.head
    if canonical:
        head.append(f'<link rel="canonical" href="{e(canonical)}">')
    fixed, movable = head[:2], head[2:]
    rng.shuffle(movable)  # real pages list their tags in any order
    if markup.jsonld_form != "none" and (markup.jsonld or rng.random() < 0.5):
        node = {"@type": markup.jsonld_type, "headline": title,
                "author": {"@type": "Person", "name": author}, **markup.jsonld,
                "publisher": {"@type": "Organization", "name": site_name(host)}}
        if markup.jsonld_form == "graph":
            doc = {"@context": "https://schema.org",
                   "@graph": [{"@type": "WebSite", "name": site_name(host), "url": f"https://{host}/"},
                              {"@type": "WebPage", "url": canonical or url, "name": title}, node]}
        else:
            doc = {"@context": "https://schema.org", **node}
        movable.insert(rng.randrange(len(movable) + 1),
                       '<script type="application/ld+json">' + json.dumps(doc, ensure_ascii=False)
                       + "</script>")
    movable.append('<link rel="stylesheet" href="/static/site.css">')
    nav = "".join(f'<li><a href="/{n.lower()}">{n}</a></li>' for n in NAV)
    vis = ""
    times = " ".join(t.replace("{vis}", vis) for t in markup.time_tags)
    layout = layout or page_layout(url, paragraphs)
    paras = paragraphs or []
    if raw_body_html is not None:
        body_html = raw_body_html
    elif layout == "div_paragraphs":
        body_html = "\n".join(
            f'<div class="article-body__paragraph" data-component="text-block" data-index="{i}">{e(p)}</div>'
            for i, p in enumerate(paras))
    else:
        body_html = "\n".join(f"<p>{e(p)}</p>" for p in paras)
    related = "".join(f'<li><a href="/r/{i}">{e(t)}</a></li>'
                      for i, t in enumerate(rng.sample(RELATED, 3)))
    site = e(site_name(host))
    head_html = chr(10).join(h for h in fixed + movable if h)
    if layout == "table" and raw_body_html is None:
        links = "<br>".join(f'<a href="/{n.lower()}">{n} news and more from the region</a>' for n in NAV)
        story = "<br><br>\n".join(e(p) for p in paras)
        return f"""<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN">
<html lang="{lang}">
<head>
{head_html}
</head>
<body bgcolor="#ffffff">
<table width="100%" border="0" cellpadding="4"><tr><td colspan="2"><font size="+2"><b>{site}</b></font></td></tr>
<tr><td width="180" valign="top" bgcolor="#eeeeee"><font size="-1">{links}</font></td>
<td valign="top"><font face="Arial, Helvetica">
<h1>{e(title)}</h1>
<i>By {e(author)}</i> {times}<br><br>
{story}
</font></td></tr>
<tr><td colspan="2"><font size="-2">Copyright {site}. All rights reserved. <a href="/privacy">Privacy Policy</a></font></td></tr>
</table>
</body>
</html>
"""
    if layout == "comments" and raw_body_html is None:
        crng = random.Random(zlib.crc32(url.encode("utf-8")))
        long_reply = "".join(f"<p>{e(line)}</p>" for line in crng.sample(COMMENT_LINES, 6) * 3)
        replies = "".join(
            f'<li class="comment" id="comment-{i}"><div class="comment-author vcard">reader{crng.randrange(1000)}</div>'
            f'<div class="comment-content">'
            + (long_reply if i == 1 else f"<p>{e(crng.choice(COMMENT_LINES))}</p>") + "</div></li>"
            for i in range(4))
        story = f"""<div class="post-wrap"><div class="post">
<h1>{e(title)}</h1>
<div class="byline">By <span class="author">{e(author)}</span> {times}</div>
{body_html}
</div>
<div id="comments" class="comments-area"><h3>{4 + crng.randrange(20)} comments</h3><ol class="commentlist">{replies}</ol></div>
</div>"""
    elif layout == "layout_classes" and raw_body_html is None:
        story = f"""<div class="l-sidebar-fixed l-segment l-article-body-segment"><div class="l-col__main">
<div class="byline">By <span class="author">{e(author)}</span> {times}</div>
<article class="has-paywall">
<h1>{e(title)}</h1>
<div class="paywall-content article__body">
{body_html}
</div>
</article>
</div>
<div class="l-col__sidebar sidebar"><h2>Most read</h2><ul>{related}</ul></div>
</div>"""
    else:
        story = f"""<div class="byline">By <span class="author">{e(author)}</span> {times}</div>
<article>
<h1>{e(title)}</h1>
{body_html}
</article>
<aside class="related"><h2>Related stories</h2><ul>{related}</ul></aside>"""
    return f"""<!DOCTYPE html>
<html lang="{lang}">
<head>
{head_html}
</head>
<body>
<div id="cookie-banner" class="cookie-notice"><p>We use cookies to improve your experience. By continuing to browse you agree to our <a href="/privacy">Privacy Policy</a> and <a href="/cookies">Cookie Policy</a>.</p><button type="button">Accept</button></div>
<header class="site-header"><a class="logo" href="/">{site}</a><nav><ul>{nav}</ul></nav></header>
<main>
{story}
</main>
<footer><p>Copyright {site}. All rights reserved.</p><ul><li><a href="/privacy">Privacy Policy</a></li><li><a href="/terms">Terms of Use</a></li><li><a href="/contact">Contact us</a></li></ul></footer>
</body>
</html>
"""
