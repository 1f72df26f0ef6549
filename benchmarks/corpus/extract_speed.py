"""Benchmark the per-document stages 2-7: extract_page + assign_timestamps (+ langid, + quality
filters, + leakage screen) vs trafilatura.bare_extraction with metadata, on ~180 KiB news pages.

Pages are generated: an article of 12-20 paragraphs wrapped in heavy page chrome (navigation with
hundreds of links, inline scripts and styles, JSON-LD, teaser sidebars, footer), as CC-NEWS pages
are. Usage: .venv/bin/python -m benchmarks.corpus.extract_speed [--pages 60] [--kib 180]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from datetime import UTC, datetime

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "that",
    "for",
    "on",
    "with",
    "as",
    "was",
    "is",
    "by",
    "said",
    "at",
    "from",
    "it",
    "his",
    "an",
    "were",
    "are",
    "which",
    "this",
    "government",
    "minister",
    "council",
    "election",
    "market",
    "prices",
    "company",
    "percent",
    "year",
    "officials",
    "report",
    "city",
    "state",
    "police",
    "court",
    "week",
    "president",
    "vote",
    "bill",
    "senate",
    "shares",
    "investors",
    "economy",
    "growth",
    "inflation",
    "bank",
    "rates",
    "trade",
    "deal",
    "talks",
    "leaders",
    "country",
    "people",
    "health",
    "school",
    "budget",
    "plan",
    "energy",
    "oil",
    "climate",
    "team",
    "season",
    "match",
    "players",
    "coach",
    "win",
    "final",
    "league",
    "players",
    "fans",
    "record",
]


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(10, 24))]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def article_html(rng: random.Random) -> tuple[str, str]:
    paras = [" ".join(sentence(rng) for _ in range(rng.randint(2, 5))) for _ in range(rng.randint(12, 20))]
    title = " ".join(rng.choice(WORDS) for _ in range(8)).capitalize()
    return title, "".join(f"<p>{p}</p>" for p in paras)


def chrome(rng: random.Random, kib: int, body: str, title: str, i: int) -> str:
    day = 1 + i % 28
    head = (
        f"<title>{title} | Example News</title>"
        f"<meta property='og:title' content='{title}'><meta name='description' content='{title}.'>"
        f"<meta property='article:published_time' content='2026-03-{day:02d}T10:00:00-04:00'>"
        f"<meta property='article:modified_time' content='2026-03-{day:02d}T12:00:00-04:00'>"
        f"<link rel='canonical' href='https://news.example.com/2026/03/{day:02d}/story-{i}'>"
        "<script type='application/ld+json'>"
        + json.dumps(
            {
                "@context": "https://schema.org",
                "@graph": [
                    {"@type": "WebSite", "name": "Example"},
                    {
                        "@type": ["NewsArticle"],
                        "headline": title,
                        "datePublished": f"2026-03-{day:02d}T10:00:00Z",
                        "dateModified": f"2026-03-{day:02d}T12:00:00Z",
                        "author": {"@type": "Person", "name": "A B"},
                    },
                ],
            }
        )
        + "</script>"
        "<style>" + ".c{color:#333;margin:0 auto;padding:4px}" * 300 + "</style>"
        "<script>" + "window.dataLayer=window.dataLayer||[];dataLayer.push({'k':'v'});" * 300 + "</script>"
    )
    nav = (
        "<header><nav><ul>"
        + "".join(
            f"<li><a href='/section/{k}'>{rng.choice(WORDS).capitalize()} {rng.choice(WORDS)}</a></li>"
            for k in range(300)
        )
        + "</ul></nav></header>"
    )
    aside = (
        "<aside class='related'>"
        + "".join(
            f"<div class='teaser'><a href='/t/{k}'><img src='/i/{k}.jpg' alt=''><h3>{sentence(rng)}</h3></a>"
            f"<p>{sentence(rng)}</p></div>"
            for k in range(30)
        )
        + "</aside>"
    )
    footer = (
        "<footer><p>Copyright 2026 Example News. Terms of use. Privacy policy.</p>"
        + "".join(f"<a href='/f/{k}'>{rng.choice(WORDS)}</a>" for k in range(200))
        + "</footer>"
    )
    article = f"<main><article><h1>{title}</h1><div class='byline'>By A B</div><div class='article-body'>{body}</div></article></main>"
    page = f"<!DOCTYPE html><html><head>{head}</head><body>{nav}{article}{aside}{footer}"
    pad = max(0, kib * 1024 - len(page))
    page += "<script>" + ("var x=1;" * (pad // 8)) + "</script>" if pad > 0 else ""
    return page + "</body></html>"


def timed(fn, pages) -> float:
    t0 = time.perf_counter()
    for p in pages:
        fn(p)
    return len(pages) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pages", type=int, default=60)
    ap.add_argument("--kib", type=int, default=180)
    args = ap.parse_args()

    import trafilatura

    from forecast_env.config import load_config
    from forecast_env.corpus_build.extract import extract_page
    from forecast_env.corpus_build.langid import LanguageIdentifier
    from forecast_env.corpus_build.leakage import screen_leakage
    from forecast_env.corpus_build.quality import apply_filters, build_filters
    from forecast_env.corpus_build.timestamps import assign_timestamps

    rng = random.Random(0)
    pages = []
    for i in range(args.pages):
        title, body = article_html(rng)
        pages.append((f"https://news.example.com/story-{i}", chrome(rng, args.kib, body, title, i)))
    mean_kib = sum(len(h) for _, h in pages) / len(pages) / 1024
    crawl = datetime(2026, 4, 1, tzinfo=UTC)
    lid = LanguageIdentifier()
    filters = build_filters(load_config("corpus")["quality"])

    def ours_extract(p):
        url, html = p
        ext = extract_page(html, url, body_mode="own")
        return assign_timestamps(ext, url, None, crawl), ext

    def ours_full(p):
        ts, ext = ours_extract(p)
        if ext.body:
            lid.english_score(ext.body)
            res = apply_filters(ext.body, filters)
            screen_leakage(res.text, ext.title, ts.t)

    def ours_no_fallback(p):
        url, html = p
        extract_page(html, url, use_trafilatura_fallback=False, body_mode="own")

    def traf_meta(p):
        url, html = p
        trafilatura.bare_extraction(html, url=url, with_metadata=True)

    def traf_body(p):
        url, html = p
        trafilatura.bare_extraction(html, url=url, with_metadata=False, fast=True, include_comments=False)

    ours_full(pages[0]), traf_meta(pages[0])  # warm-up (model load, imports)
    sample = ours_extract(pages[0])
    rows = [
        ("extract_page + assign_timestamps", timed(ours_extract, pages)),
        ("  + langid + quality filters + leakage", timed(ours_full, pages)),
        ("trafilatura.bare_extraction(with_metadata=True)", timed(traf_meta, pages)),
        ("trafilatura.bare_extraction(no metadata, fast)", timed(traf_body, pages)),
    ]
    print(f"pages: {len(pages)}  mean size: {mean_kib:.0f} KiB  (1 core)")
    print(f"sample: t_rule={sample[0].t_rule} day={sample[0].day} body_chars={len(sample[1].body or '')}")
    for name, rate in rows:
        print(f"{name:50s} {rate:8.1f} pages/s")


if __name__ == "__main__":
    main()
