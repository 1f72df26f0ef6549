"""The news side of the sample world: every document, its page, its WARC record and its truth.

Documents are event news (evidence grows toward the latent outcome), previews of scheduled events,
outcome reports (after an event closed; presets with `outcome_reports`), distractors, and planted cases
for every corpus stage (language, quality, time, dedup, leakage, broken records, charsets).
`generate.build_docs` decides what exists; `render` turns a document into HTTP bytes and the truth the
corpus builder must reproduce.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

import numpy as np

from forecast_env.synth import grammar as g
from forecast_env.synth import pages as pg
from forecast_env.synth.presets import Preset
from forecast_env.synth.prose import (
    DISTRACTOR_TOPICS,
    distractor_article,
    event_article,
    outcome_article,
)
from forecast_env.synth.scenarios import SCENARIO_BY_NAME
from forecast_env.synth.warc import Record, record_id, warc_date, write_warc
from forecast_env.synth.world import CORPUS_END, CORPUS_START, UTC, Event

SECTIONS = {"politics": "politics", "sports": "sport", "business": "business", "science": "science",
            "entertainment": "culture", None: "local"}
LAST_CRAWL = datetime(CORPUS_END.year, CORPUS_END.month, CORPUS_END.day, 23, 30, tzinfo=UTC)


@dataclass
class Doc:
    url: str
    kind: str
    title: str
    summary: str
    paragraphs: list[str]
    t_true: datetime
    crawl: datetime
    host: str
    event_id: str | None = None
    expect: str = "keep"
    stage: str | None = None
    reason: str | None = None
    reason_alt: list[str] = field(default_factory=list)
    kept_by: list[str] = field(default_factory=list)  # quality profiles that keep this planted drop (truth)
    dup_of: Doc | None = None  # the page it duplicates (written as its URL in the truth)
    leak: bool = False
    leak_day: date | None = None  # the day the planted leak reports (flagged when after the visibility day)
    market_quote: bool = False  # the text quotes a market's odds
    lang: str = "en"
    note: str | None = None
    # rendering
    source: str | None = None
    pub_rule: str | None = None
    mod_rule: str | None = None
    offset: timedelta | None = None
    decoys: bool = True
    force_decoy: bool = False
    canonical: str | None = None
    charset: str | None = "utf-8"
    encoding: str = "utf-8"
    header_charset: str | None = "utf-8"
    status: str = "200 OK"
    content_type: str = "text/html"
    raw_payload: bytes | None = None
    same_as: Doc | None = None  # URL variant: identical page bytes
    plant_markup: Callable[[random.Random], pg.DateMarkup] | None = None  # hand-written date metadata
    truncated: bool = False
    # filled by render()
    markup: pg.DateMarkup | None = None
    payload: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)


def _slug(text: str, n: int = 8) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", text.lower())[:n])


def make_url(rng: random.Random, host: str, title: str, section: str, key: object,
             date_path: str | None = None) -> str:
    if not _slug(title):
        title = "story"
    num = str(g.stable_int("url", key) % 10**7).zfill(7)
    www = "www." if rng.random() < 0.7 else ""
    if date_path:
        path = f"{section}/{date_path}/{_slug(title)}-{num}"
    else:
        path = rng.choice([f"{section}/{_slug(title)}-{num}", f"news/{num}/{_slug(title)}.html",
                           (f"{section}/{rng.choice(['2025', '2026'])}/{rng.randint(1, 12):02d}/"
                            f"{_slug(title)}-{num}"), f"article/{_slug(title, 6)}-{num}"])
    return f"https://{www}{host}/{path}"


def crawl_after(rng: random.Random, t: datetime, lo_h: float = 0.7, hi_h: float = 72.0) -> datetime:
    c = t + timedelta(seconds=int(rng.uniform(lo_h, hi_h) * 3600))
    if c > LAST_CRAWL:
        c = max(t + timedelta(minutes=30), LAST_CRAWL)
    return c


def _norm_title(t: str) -> str:
    return " ".join(re.findall(r"\w+", t.lower()))


class TitleBook:
    """Keeps generated titles unique, so only planted pages share a title."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def claim(self, rng: random.Random, title: str, city: str) -> str:
        cand = title
        for extra in ["", f" in {city}", " this week", f", {rng.choice(g.CITIES)} report",
                      f" ({rng.randint(2, 999)})"]:
            cand = title + extra
            if _norm_title(cand) not in self.seen:
                break
        self.seen.add(_norm_title(cand))
        return cand


def rand_dt(rng: random.Random, lo: datetime, hi: datetime) -> datetime:
    s = rng.uniform(0, max((hi - lo).total_seconds(), 1))
    return (lo + timedelta(seconds=int(s))).replace(microsecond=0)


def day_dt(d: date, h: int = 0, m: int = 0) -> datetime:
    return datetime(d.year, d.month, d.day, h, m, tzinfo=UTC)


def event_docs(events: list[Event], preset: Preset, seed: int, titles: TitleBook) -> list[Doc]:
    docs: list[Doc] = []
    for ev in events:
        rng = g.sub_rng(seed, "news", ev.gamma_id)
        sc = SCENARIO_BY_NAME[ev.scenario.name]
        n = rng.randint(*preset.articles_per_event)
        lo = ev.start - timedelta(days=4)
        hi = ev.close - timedelta(hours=14)
        n_prev = 1 + (n >= 20)
        for i in range(n):
            u = rng.random() ** 0.75
            t = (lo + (hi - lo) * u).replace(microsecond=0)
            frac = min(max((t - ev.start) / (ev.close - ev.start), 0.0), 1.0)
            probs = ev.probs[ev.day_index(t.date())]
            probs = probs.copy()
            probs[np.isnan(probs)] = 0.0  # legs not started yet carry no evidence
            if probs.sum() <= 0:
                probs[:] = 1.0
            preview = i < n_prev
            if preview:
                t = rand_dt(rng, lo + (hi - lo) * 0.4, hi)
                frac = min(max((t - ev.start) / (ev.close - ev.start), 0.0), 1.0)
            text = event_article(rng, sc, ev.facts, probs / probs.sum(), frac, preview=preview)
            host = rng.choice(g.OUTLETS)
            title = titles.claim(rng, text.title, ev.facts.slots["city"])
            docs.append(Doc(url="", kind="preview" if preview else "event_news", title=title,
                            summary=text.summary, paragraphs=text.paragraphs, t_true=t,
                            crawl=crawl_after(rng, t), host=host, event_id=ev.event_id,
                            note=ev.scenario.category))
    return docs


#: outcome reports appear between these delays after the event's close (t_true)
OUTCOME_DELAY = (timedelta(hours=6), timedelta(days=4))
#: the latest t_true of an outcome report: its crawl (>= t_true + 30 min, capped at the last crawl) and so
#: its visibility then fall inside the corpus (CORPUS_END)
OUTCOME_LATEST = LAST_CRAWL - timedelta(hours=1)


def outcome_docs(events: list[Event], preset: Preset, seed: int, titles: TitleBook) -> list[Doc]:
    """`preset.outcome_reports` articles per good (non-planted) event that report its realised outcome,
    published 6 h to 4 days after its close; a report that would fall after `OUTCOME_LATEST` is skipped."""
    docs: list[Doc] = []
    if preset.outcome_reports <= 0:
        return docs
    lo, hi = (int(x.total_seconds()) for x in OUTCOME_DELAY)
    for ev in events:
        if ev.plant:
            continue
        rng = g.sub_rng(seed, "outcome", ev.gamma_id)
        sc = SCENARIO_BY_NAME[ev.scenario.name]
        for _ in range(preset.outcome_reports):
            t = (ev.close + timedelta(seconds=rng.randint(lo + 1, hi))).replace(microsecond=0)
            if t > OUTCOME_LATEST:
                continue
            text = outcome_article(rng, sc, ev.facts, ev.label)
            host = rng.choice(g.OUTLETS)
            title = titles.claim(rng, text.title, ev.facts.slots["city"])
            docs.append(Doc(url="", kind="outcome_report", title=title, summary=text.summary,
                            paragraphs=text.paragraphs, t_true=t, crawl=crawl_after(rng, t), host=host,
                            event_id=ev.event_id, note=ev.scenario.category))
    return docs


def distractor_docs(n: int, seed: int, titles: TitleBook, tag: str = "d") -> list[Doc]:
    rng = g.sub_rng(seed, "distractors", tag)
    days = [CORPUS_START + timedelta(days=i) for i in range((CORPUS_END - CORPUS_START).days + 1)]
    # uneven activity: weekday rhythm and bursty weeks
    burst = {i: rng.choice([0.5, 1.0, 1.0, 1.5, 2.5]) for i in range(len(days) // 7 + 1)}
    weights = [(0.55 if d.weekday() >= 5 else 1.0) * burst[i // 7] for i, d in enumerate(days)]
    topics = list(DISTRACTOR_TOPICS)
    out = []
    for i in range(n):
        d = rng.choices(days, weights=weights)[0]
        t = day_dt(d) + timedelta(seconds=rng.randint(3600, 22 * 3600))
        text = distractor_article(rng, topics[i % len(topics)])
        title = titles.claim(rng, text.title, rng.choice(g.CITIES))
        out.append(Doc(url="", kind="distractor", title=title, summary=text.summary,
                       paragraphs=text.paragraphs, t_true=t, crawl=crawl_after(rng, t),
                       host=rng.choice(g.OUTLETS)))
    return out


# every rule of both cascades appears at least once (then the draw is random)
COVERAGE = ([("pub", r, None) for r in pg.PUB_RULES] + [("mod", None, r) for r in pg.MOD_RULES]
            + [("crawl", None, None)] * 2)


def assign_urls(docs: list[Doc], seed: int) -> None:
    """Fix each document's date layout (markup) and URL; variants copy their original's."""
    cov = 0
    for i, d in enumerate(docs):
        if d.same_as is not None:
            continue
        if d.source is None and d.kind in ("event_news", "distractor", "preview") and cov < len(COVERAGE):
            d.source, d.pub_rule, d.mod_rule = COVERAGE[cov]
            cov += 1
        mrng = g.sub_rng(seed, "markup", i)
        if d.plant_markup is not None:
            d.markup = d.plant_markup(mrng)
        else:
            d.markup = pg.date_markup(mrng, d.t_true, d.crawl, source=d.source, pub_rule=d.pub_rule,
                                      mod_rule=d.mod_rule, offset=d.offset,
                                      decoys=d.decoys or d.force_decoy)
        if d.force_decoy:
            _force_decoy(mrng, d)
        section = SECTIONS.get(d.note if d.kind in ("event_news", "preview", "outcome_report") else None, "local")
        d.url = make_url(mrng, d.host, d.title or "page", section, (seed, i), d.markup.url_date)
    for d in docs:
        if d.same_as is not None:
            base = d.same_as
            d.markup = base.markup
            u = base.url
            if d.note == "utm":
                d.url = u + "?utm_source=twitter&utm_medium=social&utm_campaign=share"
            elif d.note == "www":
                d.url = u.replace("://www.", "://") if "://www." in u else u.replace("://", "://www.")
            elif d.note == "http":
                d.url = u.replace("https://", "http://")
            elif d.note == "fragment":
                d.url = u + "#comments"
        elif d.kind == "url_variant" and d.note == "canonical" and d.dup_of is not None:
            base = d.dup_of
            d.url = f"https://{base.host}/amp/{_slug(base.title)}-{g.stable_int(d.title) % 10**6}"
            d.canonical = base.url
    for d in docs:
        if d.canonical == "self":
            d.canonical = d.url


def _markup_of(d: Doc) -> pg.DateMarkup:
    """`d`'s date markup, drawn by the markup pass that every page goes through before it is rendered."""
    if d.markup is None:
        raise ValueError(f"{d.kind} page {d.url or d.title!r} has no date markup: draw it before rendering")
    return d.markup


def _force_decoy(rng: random.Random, d: Doc) -> None:
    m = _markup_of(d)
    if m.t_source == "pub":
        i = pg.PUB_RULES.index(m.t_rule)
        pg._emit(m, pg.PUB_RULES[0] if i > 0 else pg.PUB_RULES[1], "1970-01-01T00:00:00Z", rng)
    else:
        pg._emit(m, "jsonld_dateModified" if m.t_rule != "jsonld_dateModified" else "meta_name_modified",
                 "2099-12-31T23:59:59Z", rng)


def render(d: Doc, seed: int, index: int) -> None:
    """Fill `payload` and HTTP `headers` of `d`."""
    rng = g.sub_rng(seed, "render", index)
    if d.same_as is not None:
        d.payload = d.same_as.payload
        d.headers = list(d.same_as.headers)
        return
    if d.raw_payload is not None:
        d.payload = d.raw_payload
        ct = d.content_type + (f"; charset={d.header_charset}" if d.header_charset else "")
        d.headers = [("Content-Type", ct), ("Content-Length", str(len(d.payload))), ("Server", "nginx")]
        return
    author = g.person_name(rng)
    markup = _markup_of(d)
    html = pg.render_html(rng, url=d.url, host=d.host.split("/")[0], title=d.title, summary=d.summary,
                          paragraphs=d.paragraphs, markup=markup, author=author,
                          canonical=d.canonical, lang=d.lang if d.lang != "en" else "en",
                          charset=d.charset)
    d.payload = html.encode(d.encoding, errors="strict")
    ct = d.content_type + (f"; charset={d.header_charset}" if d.header_charset else "")
    d.headers = [("Content-Type", ct), ("Content-Length", str(len(d.payload))),
                 ("Server", rng.choice(["nginx", "Apache", "cloudflare"])),
                 ("Date", pg.http_date(d.crawl))]
    if markup.last_modified:
        d.headers.insert(rng.randint(1, 3), ("Last-Modified", markup.last_modified))


_WRITTEN_DATE_ONLY = re.compile(r"^[0-9]{4}[-/][0-9]{2}[-/][0-9]{2}$")
_WRITTEN_ZONE = re.compile(r"(?:Z|GMT|[+-][0-9]{2}:?[0-9]{2})$")


def _latest(raw: str | None, instant: datetime | None) -> datetime | None:
    """The instant a value this generator wrote denotes under the default visibility rule: with a
    zone, itself; without one, the latest it can denote (+12 h; a date-only value, its day +36 h)."""
    if instant is None:
        return None
    if raw is None or _WRITTEN_ZONE.search(raw):
        return instant
    if _WRITTEN_DATE_ONLY.match(raw):
        return instant + timedelta(hours=36)
    return instant + timedelta(hours=12)


def expected_visibility(m: pg.DateMarkup, crawl: datetime) -> tuple[datetime, str]:
    """(v, which timestamp gave it) under `timestamps.visibility: conservative`: the later of the
    publication and modification readings, else the crawl, never later than the crawl."""
    t_pub, t_mod = _latest(m.pub_raw, m.t_pub), _latest(m.mod_raw, m.t_mod)
    v, source = (t_pub, "pub") if t_pub is not None else (t_mod, "mod") if t_mod is not None else (crawl, "crawl")
    if t_pub is not None and t_mod is not None and t_mod > t_pub:
        v, source = t_mod, "mod"
    if v > crawl:
        v, source = crawl, "crawl"
    return v, source


def truth_of(d: Doc) -> dict:
    m = d.markup
    read_drop = d.stage == "read"
    visible_at = visible_source = None
    if m is None or read_drop:
        t_pub = t_mod = None
        source = rule = None
        day = day_t = None
    else:
        t_pub, t_mod = m.t_pub, m.t_mod
        source = m.t_source
        rule = m.t_rule
        t = t_pub if source == "pub" else t_mod if source == "mod" else d.crawl
        if t is None:
            raise ValueError(f"{d.url}: its markup dates it by {source} but holds no such time")
        day_t = t.astimezone(UTC).date().isoformat()
        visible_at, visible_source = expected_visibility(m, d.crawl)
        day = visible_at.astimezone(UTC).date().isoformat()
    leak = d.leak and day is not None and (d.leak_day is None or d.leak_day.isoformat() > day)
    dup = d.dup_of.url if isinstance(d.dup_of, Doc) else d.dup_of
    out = {
        "kind": d.kind,
        "event_id": d.event_id,
        "expect": d.expect,
        "stage": d.stage,
        "reason": d.reason,
        "reason_alt": list(d.reason_alt),
        "kept_by": list(d.kept_by),
        "dup_of": dup,
        "t_pub": pg.iso_z(t_pub),
        "t_mod": pg.iso_z(t_mod),
        "t_crawl": pg.iso_z(d.crawl),
        "t_source": source,
        "t_rule": rule,
        "t_pub_rule": m.t_pub_rule if m and not read_drop else None,
        "t_mod_rule": m.t_mod_rule if m and not read_drop else None,
        "visible_at": pg.iso_z(visible_at),
        "visible_source": visible_source,
        "day_t": day_t,  # UTC day of the assigned t (t_pub, else t_mod, else crawl; no offset: UTC)
        "day": day,  # UTC day of the visibility time under the default rule
        "leak": leak,
        "market_quote": d.market_quote,
        "lang": d.lang,
        "title": d.title or None,
        "note": d.note if d.kind not in ("event_news", "preview") else None,
    }
    pair = getattr(d, "pair", None)
    if pair is not None:
        out["pair_of"] = pair.url
    src = d.same_as if d.same_as is not None else d  # a copy carries its original's page
    if src.raw_payload is None and not read_drop:
        out.update(pg.layout_truth(src.url, src.paragraphs))
    return out


def write_corpus(out: Path, docs: list[Doc], preset: Preset, seed: int, progress: bool) -> dict:
    """Render every document, write the WARC files, and return the truth of articles and files."""
    news = out / "news"
    news.mkdir(parents=True, exist_ok=True)
    it = range(len(docs))
    if progress:
        from tqdm import tqdm

        it = tqdm(it, desc="render pages", unit="doc", leave=False)
    for i in it:
        if docs[i].same_as is None:
            render(docs[i], seed, i)
    for i, d in enumerate(docs):
        if d.same_as is not None:
            render(d, seed, i)
    order = sorted(range(len(docs)), key=lambda i: (docs[i].crawl, docs[i].url))
    per = preset.records_per_warc
    chunks = [order[k : k + per] for k in range(0, len(order), per)]
    # the file whose last record is cut mid-stream: a throwaway page appended to the second file
    trunc_file = min(1, len(chunks) - 1)
    tr_rng = g.sub_rng(seed, "truncated")
    last = docs[chunks[trunc_file][-1]]
    text = distractor_article(tr_rng, "weather")
    tdoc = Doc(url="", kind="broken", title=text.title, summary=text.summary, paragraphs=text.paragraphs,
               t_true=last.crawl - timedelta(hours=5), crawl=last.crawl + timedelta(minutes=1),
               host="harbortimes.com", expect="drop", stage="read", reason=None, truncated=True,
               note="truncated gzip member (last record of its file, cut mid-stream)", source="pub")
    docs.append(tdoc)
    tdoc.markup = pg.date_markup(tr_rng, tdoc.t_true, tdoc.crawl, source="pub")
    tdoc.url = make_url(tr_rng, tdoc.host, tdoc.title, "local", (seed, "trunc"), tdoc.markup.url_date)
    render(tdoc, seed, len(docs) - 1)
    chunks[trunc_file].append(len(docs) - 1)
    files: dict[str, dict] = {}
    articles: dict[str, dict] = {}
    serial = g.stable_int(seed, "serial") % 50000
    for fi, chunk in enumerate(chunks):
        first = docs[chunk[0]].crawl
        name = f"CC-NEWS-{first.strftime('%Y%m%d%H%M%S')}-{serial + fi:05d}.warc.gz"
        recs = []
        for i in chunk:
            d = docs[i]
            recs.append(Record(url=d.url, crawl=d.crawl, payload=d.payload, status=d.status,
                               headers=d.headers, record_id=record_id(seed, d.url, warc_date(d.crawl))))
        offsets = write_warc(news / name, recs, seed, truncate_last=fi == trunc_file)
        files[name] = {"truncated": fi == trunc_file, "records": len(recs),
                       "records_readable": len(recs) - (fi == trunc_file)}
        for i, off in zip(chunk, offsets):
            d = docs[i]
            t = truth_of(d)
            t["warc_file"] = name
            t["warc_offset"] = off
            t["record_id"] = record_id(seed, d.url, warc_date(d.crawl))
            assert d.url not in articles, d.url
            articles[d.url] = t
    return {"articles": articles, "files": files}
