"""The `bench` preset: the article store written directly (no WARC files), for scale runs.

OUT/articles/YYYY-MM.parquet in the ARTICLES schema of forecast_env/schema.py, rows sorted by
(day, doc_id). Bodies are combinations of a pool of generated distractor texts (vectorized with
pyarrow), plus the real news of the preset's few events, so retrieval has something to find.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forecast_env.schema import ARTICLES
from forecast_env.synth import grammar as g
from forecast_env.synth.corpus import TitleBook, event_docs
from forecast_env.synth.presets import Preset
from forecast_env.synth.prose import DISTRACTOR_TOPICS, distractor_article
from forecast_env.synth.world import CORPUS_END, CORPUS_START, UTC, Event

POOL = 3000
PUB_RULES = np.array(["jsonld_datePublished", "meta_article_published_time", "meta_og_published_time",
                      "itemprop_datePublished", "meta_name_date", "time_pubdate", "url_date"])
MOD_RULES = np.array(["jsonld_dateModified", "meta_article_modified_time", "meta_og_updated_time",
                      "http_last_modified"])


def _months(lo: date, hi: date) -> list[date]:
    out, d = [], date(lo.year, lo.month, 1)
    while d <= hi:
        out.append(d)
        d = date(d.year + (d.month == 12), d.month % 12 + 1, 1)
    return out


def write_bench_articles(out: Path, events: list[Event], preset: Preset, seed: int, progress: bool) -> int:
    """Write `preset.bench_articles` articles (plus event news) as monthly Parquet shards."""
    root = out / "articles"
    root.mkdir(parents=True, exist_ok=True)
    rng = g.sub_rng(seed, "bench-pool")
    topics = list(DISTRACTOR_TOPICS)
    texts = [distractor_article(rng, topics[i % len(topics)]) for i in range(POOL)]
    titles = pa.array([t.title for t in texts])
    summaries = pa.array([t.summary for t in texts])
    bodies = pa.array([t.body for t in texts])
    cities = pa.array(g.CITIES)
    hosts = np.array(g.OUTLETS)
    nrng = np.random.default_rng(g.stable_int(seed, "bench"))

    days = np.arange(np.datetime64(CORPUS_START), np.datetime64(CORPUS_END) + 1)
    w = np.where((days.astype("datetime64[D]").view("int64") - 4) % 7 >= 5, 0.55, 1.0)
    w = w * nrng.choice([0.5, 1.0, 1.5, 2.5], size=len(days))
    counts = nrng.multinomial(preset.bench_articles, w / w.sum())

    ev_docs = event_docs(events, preset, seed, TitleBook())
    total = 0
    months = _months(CORPUS_START, CORPUS_END)
    it = months
    if progress:
        from tqdm import tqdm

        it = tqdm(months, desc="bench shards", unit="month", leave=False)
    spill = None
    for m in it:
        nxt = date(m.year + (m.month == 12), m.month % 12 + 1, 1)
        sel = (days >= np.datetime64(m)) & (days < np.datetime64(nxt))
        n = int(counts[sel].sum())
        day_arr = np.repeat(days[sel], counts[sel])
        secs = nrng.integers(0, 86400, n)
        t_us = day_arr.astype("datetime64[us]") + secs.astype("timedelta64[s]")
        ids = nrng.integers(0, 2**63, n, dtype=np.int64)
        doc_id = np.array([f"{x:016x}" for x in ids.tolist()], dtype=object)
        a, b = nrng.integers(0, POOL, n), nrng.integers(0, POOL, n)
        c = nrng.integers(0, len(g.CITIES), n)
        title = pc.binary_join_element_wise(titles.take(pa.array(a)), cities.take(pa.array(c)), ", ")
        body = pc.binary_join_element_wise(bodies.take(pa.array(a)), bodies.take(pa.array(b)), "\n")
        summary = summaries.take(pa.array(a))
        src = nrng.choice(3, size=n, p=[0.6, 0.28, 0.12])
        crawl = t_us + nrng.integers(1800, 3 * 86400, n).astype("timedelta64[s]")
        t_mod = np.where(src == 2, np.datetime64("NaT"), t_us + nrng.integers(0, 3600, n).astype(
            "timedelta64[s]"))
        t_mod = np.where(src == 0, np.where(nrng.random(n) < 0.5, t_mod, np.datetime64("NaT")), t_mod)
        t_pub = np.where(src == 0, t_us, np.datetime64("NaT"))
        t = np.where(src == 0, t_pub, np.where(src == 1, t_mod, crawl))
        none = np.array(None, dtype=object)  # a rule left empty (numpy's stubs take no bare None here)
        pub_rule = np.where(src == 0, PUB_RULES[nrng.integers(0, len(PUB_RULES), n)], none)
        mod_rule = np.where(np.isnat(t_mod), none, MOD_RULES[nrng.integers(0, len(MOD_RULES), n)])
        rule = np.where(src == 0, pub_rule, np.where(src == 1, mod_rule, "crawl"))
        source = np.array(["pub", "mod", "crawl"])[src]
        host = hosts[nrng.integers(0, len(hosts), n)]
        url = np.array([f"https://{h}/news/{d}" for h, d in zip(host.tolist(), doc_id.tolist())],
                       dtype=object)
        cols = {
            "doc_id": pa.array(doc_id, pa.string()),
            "url": pa.array(url, pa.string()),
            "canonical_url": pa.nulls(n, pa.string()),
            "title": title,
            "summary": summary,
            "body": body,
            "t_pub": pa.array(t_pub, ARTICLES.field("t_pub").type),
            "t_mod": pa.array(t_mod, ARTICLES.field("t_mod").type),
            "t_crawl": pa.array(crawl, ARTICLES.field("t_crawl").type),
            "t": pa.array(t, ARTICLES.field("t").type),
            "t_source": pa.array(source, pa.string()),
            "t_rule": pa.array(rule, pa.string()),
            "t_pub_rule": pa.array(pub_rule, pa.string()),
            "t_mod_rule": pa.array(mod_rule, pa.string()),
            "visible_at": pa.array(t, ARTICLES.field("visible_at").type),  # v = t: written with offsets
            "visible_source": pa.array(source, pa.string()),
            "visible_moves": pa.nulls(n, ARTICLES.field("visible_moves").type),
            "day": pa.array(t.astype("datetime64[D]"), pa.date32()),
            "lang_score": pa.array(nrng.uniform(0.8, 1.0, n).astype(np.float32)),
            "leak_flag": pa.array(np.zeros(n, dtype=bool)),
            "leak_reason": pa.nulls(n, pa.string()),
            "market_quote": pa.array(np.zeros(n, dtype=bool)),
            "warc_file": pa.nulls(n, pa.string()),
            "warc_offset": pa.nulls(n, pa.int64()),
        }
        tab = pa.table(cols, schema=ARTICLES)
        extra = [d for d in ev_docs if m <= d.t_true.date() < nxt]
        if extra:
            tab = pa.concat_tables([tab, _event_rows(extra, seed)])
        if spill is not None:
            tab = pa.concat_tables([tab, spill])
        # rows whose assigned day fell into the next month (mod/crawl later than pub) move with it
        later = pc.greater_equal(tab["day"], pa.scalar(nxt, pa.date32()))
        spill = tab.filter(later)
        tab = tab.filter(pc.invert(later))
        tab = tab.sort_by([("day", "ascending"), ("doc_id", "ascending")])
        pq.write_table(tab, root / f"{m.year:04d}-{m.month:02d}.parquet", compression="zstd")
        total += tab.num_rows
    return total


def _event_rows(docs: list, seed: int) -> pa.Table:
    rows = []
    for d in docs:
        did = format(g.stable_int(seed, "bench-doc", d.url or d.title, d.t_true), "016x")
        t = d.t_true.astimezone(UTC)
        rows.append({
            "doc_id": did, "url": f"https://{d.host}/news/{did}", "canonical_url": None,
            "title": d.title, "summary": d.summary, "body": "\n".join(d.paragraphs),
            "t_pub": t, "t_mod": None, "t_crawl": d.crawl, "t": t, "t_source": "pub",
            "t_rule": "jsonld_datePublished", "t_pub_rule": "jsonld_datePublished", "t_mod_rule": None,
            "visible_at": t, "visible_source": "pub", "visible_moves": None, "market_quote": False,
            "day": t.date(), "lang_score": 0.95, "leak_flag": False, "leak_reason": None,
            "warc_file": None, "warc_offset": None,
        })
    return pa.Table.from_pylist(rows, schema=ARTICLES)
