"""The news side of the sample world: every document, its page, its WARC record and its truth.

Documents are event news (evidence grows toward the latent outcome), previews of scheduled events,
distractors, and planted cases for every corpus stage (language, quality, time, dedup, leakage,
broken records, charsets). `build_docs` decides what exists; `render` turns a document into HTTP
bytes and the truth the corpus builder must reproduce.
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
from forecast_env.synth import planted
from forecast_env.synth.checks import first_quality_reason
from forecast_env.synth.presets import Preset
from forecast_env.synth.prose import (
    DISTRACTOR_TOPICS,
    Text,
    distractor_article,
    event_article,
    market_mention_sentences,
    market_quote_sentence,
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
    dup_of: str | None = None
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


def _crawl_after(rng: random.Random, t: datetime, lo_h: float = 0.7, hi_h: float = 72.0) -> datetime:
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


def _rand_dt(rng: random.Random, lo: datetime, hi: datetime) -> datetime:
    s = rng.uniform(0, max((hi - lo).total_seconds(), 1))
    return (lo + timedelta(seconds=int(s))).replace(microsecond=0)


def _day_dt(d: date, h: int = 0, m: int = 0) -> datetime:
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
                t = _rand_dt(rng, lo + (hi - lo) * 0.4, hi)
                frac = min(max((t - ev.start) / (ev.close - ev.start), 0.0), 1.0)
            text = event_article(rng, sc, ev.facts, probs / probs.sum(), frac, preview=preview)
            host = rng.choice(g.OUTLETS)
            title = titles.claim(rng, text.title, ev.facts.slots["city"])
            docs.append(Doc(url="", kind="preview" if preview else "event_news", title=title,
                            summary=text.summary, paragraphs=text.paragraphs, t_true=t,
                            crawl=_crawl_after(rng, t), host=host, event_id=ev.event_id,
                            note=ev.scenario.category))
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
        t = _day_dt(d) + timedelta(seconds=rng.randint(3600, 22 * 3600))
        text = distractor_article(rng, topics[i % len(topics)])
        title = titles.claim(rng, text.title, rng.choice(g.CITIES))
        out.append(Doc(url="", kind="distractor", title=title, summary=text.summary,
                       paragraphs=text.paragraphs, t_true=t, crawl=_crawl_after(rng, t),
                       host=rng.choice(g.OUTLETS)))
    return out


def _text_doc(rng: random.Random, kind: str, text: Text, t: datetime, **kw) -> Doc:
    return Doc(url="", kind=kind, title=text.title, summary=text.summary, paragraphs=text.paragraphs,
               t_true=t, crawl=kw.pop("crawl", None) or _crawl_after(rng, t),
               host=kw.pop("host", None) or rng.choice(g.OUTLETS), **kw)


def _jaccard5(a: str, b: str) -> float:
    def grams(s: str) -> set[str]:
        w = re.findall(r"\w+", s.lower())
        return {" ".join(w[i : i + 5]) for i in range(len(w) - 4)}

    ga, gb = grams(a), grams(b)
    return len(ga & gb) / max(len(ga | gb), 1)


def _markup(pub: tuple[str, str, datetime] | None = None, mod: tuple[str, str, datetime] | None = None,
            decoys: tuple[tuple[str, str], ...] = ()) -> Callable[[random.Random], pg.DateMarkup]:
    """Hand-written date metadata: `pub`/`mod` = (rule, value as written, the instant it denotes
    when a value without offset is read as UTC); `decoys` are (rule, value) emitted first."""

    def make(rng: random.Random) -> pg.DateMarkup:
        m = pg.DateMarkup()
        for rule, raw in decoys:
            pg._emit(m, rule, raw, rng)
        if pub is not None:
            pg._emit(m, pub[0], pub[1], rng)
            m.t_pub_rule, m.pub_raw, m.t_pub = pub
        if mod is not None:
            if mod[0] == "http_last_modified":
                m.last_modified = mod[1]
            else:
                pg._emit(m, mod[0], mod[1], rng)
            m.t_mod_rule, m.mod_raw, m.t_mod = mod
        source = "pub" if pub else "mod" if mod else "crawl"
        m.t_source, m.t_rule = source, pub[0] if pub else mod[0] if mod else "crawl"
        return m

    return make


def visibility_plants(rng: random.Random, fresh: Callable[..., Doc], when: Callable[[], datetime]) -> list[Doc]:
    """Pages whose visibility day differs from the paper's (docs/design.md §2.timestamps)."""
    out = []
    # 21:xx in New York (UTC-5) written without an offset: the paper shows it a day early
    d0 = when().date()
    local = datetime(d0.year, d0.month, d0.day, 21, rng.randint(0, 59))
    true = (local + timedelta(hours=5)).replace(tzinfo=UTC)
    d = fresh("distractor", true, source="pub", decoys=False, note="naive_evening",
              crawl=true + timedelta(minutes=rng.randint(60, 30 * 60)))
    d.plant_markup = _markup(pub=("meta_article_published_time", local.strftime("%Y-%m-%dT%H:%M:%S"),
                                  local.replace(tzinfo=UTC)))
    out.append(d)
    # modified days after publication, crawled after the modification: visible as modified
    t = when().replace(hour=rng.randint(6, 14))
    t_mod = t + timedelta(days=rng.randint(2, 5), hours=rng.randint(1, 8))
    d = fresh("distractor", t, source="pub", decoys=False, note="modified_later",
              crawl=t_mod + timedelta(hours=rng.randint(3, 20)))
    d.plant_markup = _markup(pub=("jsonld_datePublished", pg.iso_z(t), t),
                             mod=("jsonld_dateModified", pg.iso_z(t_mod), t_mod))
    out.append(d)
    # a dateModified days after the crawl (bogus) over a genuine one: the genuine one is used
    t = when().replace(hour=8, minute=0)
    crawl = t + timedelta(days=1, hours=rng.randint(1, 10))
    bogus = pg.iso_z(crawl + timedelta(days=5))
    d = fresh("distractor", t, source="pub", decoys=False, note="bogus_modified", crawl=crawl)
    d.plant_markup = _markup(pub=("jsonld_datePublished", pg.iso_z(t), t),
                             mod=("meta_article_modified_time", pg.iso_z(t + timedelta(hours=3)), t + timedelta(hours=3)),
                             decoys=(("jsonld_dateModified", bogus),))
    out.append(d)
    # no publication time, a bogus dateModified and the HTTP Last-Modified: the header is used
    t = when()
    crawl = t + timedelta(days=2, hours=rng.randint(1, 10))
    d = fresh("distractor", t, source="mod", decoys=False, note="bogus_modified", crawl=crawl)
    d.plant_markup = _markup(mod=("http_last_modified", pg.http_date(t), t.replace(microsecond=0)),
                             decoys=(("jsonld_dateModified", pg.iso_z(crawl + timedelta(days=6))),))
    out.append(d)
    return out


def planted_docs(events: list[Event], preset: Preset, seed: int, titles: TitleBook,
                 pool: list[Doc]) -> list[Doc]:
    """Every planted corpus case (`plant_copies` of each, at least one)."""
    rng = g.sub_rng(seed, "planted")
    copies = max(1, preset.plant_copies)
    out: list[Doc] = []
    span_lo = _day_dt(date(2025, 4, 1))
    span_hi = _day_dt(date(2026, 5, 20))
    topics = list(DISTRACTOR_TOPICS)

    def when() -> datetime:
        return _rand_dt(rng, span_lo, span_hi)

    def fresh(kind: str, t: datetime | None = None, **kw) -> Doc:
        text = distractor_article(rng, rng.choice(topics))
        title = titles.claim(rng, text.title, rng.choice(g.CITIES))
        text = Text(title, text.summary, text.paragraphs)
        return _text_doc(rng, kind, text, t or when(), **kw)

    for c in range(copies):
        # language
        for code, title, paras in planted.FOREIGN:
            out.append(Doc(url="", kind="lang", title=title, summary=paras[0], paragraphs=paras,
                           t_true=when(), crawl=None, host=rng.choice(g.OUTLETS), lang=code,
                           expect="drop", stage="lang", reason="not_english", source="pub"))
        # quality
        for reason, title, lines in planted.quality_pages(rng.choice(g.CITIES), g.person_name(rng)):
            r1 = first_quality_reason("\n".join(lines))
            r2 = first_quality_reason("\n\n".join(lines))
            assert r1 == reason or r2 == reason, (reason, r1, r2)
            title = titles.claim(rng, title, rng.choice(g.CITIES))
            out.append(Doc(url="", kind="quality", title=title, summary=lines[0][:150], paragraphs=lines,
                           t_true=when(), crawl=None, host=rng.choice(g.OUTLETS), expect="drop",
                           stage="quality", reason=r1, reason_alt=[r2] if r2 != r1 else [],
                           source="pub"))
        # time: published before corpus_start, crawled in the first days of the corpus
        for t_old in (datetime(2024, 11, 5, 9, 30, tzinfo=UTC), datetime(2023, 6, 20, 16, 0, tzinfo=UTC)):
            d = fresh("old", t_old, expect="drop", stage="time", reason="before_corpus_start",
                      source="pub", decoys=False,
                      crawl=_day_dt(CORPUS_START + timedelta(days=rng.randint(0, 5)), 3, 20 + c))
            d.plant_markup = _markup(pub=("jsonld_datePublished", pg.iso_z(t_old), t_old))
            out.append(d)
        # leakage: content written after the metadata date
        t = when()
        d = fresh("leak", t, leak=True, source="pub", decoys=False,
                  crawl=t + timedelta(days=14, hours=rng.randint(1, 20)))
        upd = t + timedelta(days=10)
        d.leak_day = upd.date()
        d.plant_markup = _markup(pub=("meta_article_published_time", pg.iso_z(t), t))
        d.paragraphs = d.paragraphs + [
            (f"Updated {upd.strftime('%B')} {upd.day}, {upd.year}: officials confirmed the final "
             f"figures on {upd.strftime('%A')} and said no further changes were expected.")]
        out.append(d)
        t = when()
        d = fresh("leak", t, leak=True, source="pub", decoys=False,
                  crawl=t + timedelta(days=12, hours=rng.randint(1, 20)))
        v = t + timedelta(days=8)
        d.leak_day = v.date()
        d.plant_markup = _markup(pub=("jsonld_datePublished", pg.iso_z(t), t))
        d.paragraphs = d.paragraphs[:2] + [
            (f"On {v.strftime('%B')} {v.day}, the committee voted to approve the plan, and the first "
             f"contracts were signed the same afternoon.")] + d.paragraphs[2:]
        out.append(d)
        # timezone offsets whose local day differs from the UTC day
        for off, hh in ((timedelta(hours=5, minutes=30), 20), (timedelta(hours=-4), 2)):
            t = _day_dt(when().date(), hh, 15)
            out.append(fresh("distractor", t, source="pub", pub_rule="meta_article_published_time",
                             offset=off, decoys=False, note="tz_flip"))
        # out-of-range year on a higher rule, which the cascade must skip
        out.append(fresh("distractor", source="pub", pub_rule="meta_article_published_time",
                         force_decoy=True, note="bad_year_skipped"))
        out.append(fresh("distractor", source="mod", mod_rule="meta_og_updated_time",
                         force_decoy=True, note="bad_year_skipped"))
        out += visibility_plants(rng, fresh, when)
        # market quotes: event news quoting the market's odds, and a story naming the venues without odds
        for orig in [d for d in pool if d.kind == "event_news"][c * 7 + 5 : c * 7 + 7]:
            ev = next(e for e in events if e.event_id == orig.event_id)
            probs = ev.probs[ev.day_index(orig.t_true.date())].copy()
            probs[np.isnan(probs)] = 0.0
            k = int(np.argmax(probs))
            side = "a yes outcome" if ev.scenario.kind == "yesno" else ev.options[k]
            if ev.scenario.kind == "yesno":
                k = 0
            quote = market_quote_sentence(rng, side, float(probs[k] / max(probs.sum(), 1e-9)))
            paras = list(orig.paragraphs)
            paras[min(1, len(paras) - 1)] += " " + quote
            if first_quality_reason("\n".join([orig.title, *paras])) is None:
                orig.paragraphs, orig.market_quote = paras, True
        d = fresh("distractor", note="market_mention")
        d.paragraphs = d.paragraphs[:1] + [" ".join(market_mention_sentences(rng))] + d.paragraphs[1:]
        out.append(d)
        # dedup: syndicated copies (near-identical text, later, elsewhere, other title)
        news = [d for d in pool if d.kind == "event_news"]
        for orig in news[c * 7 : c * 7 + 2]:
            ev = next(e for e in events if e.event_id == orig.event_id)
            probs = ev.probs[ev.day_index(orig.t_true.date())].copy()
            probs[np.isnan(probs)] = 0.0
            more = event_article(rng, ev.scenario, ev.facts, probs / probs.sum(), 0.5)
            have = set(" ".join(orig.paragraphs).split(". "))
            extra = [p for p in more.paragraphs[1:] if not set(p.split(". ")) & have]
            longer = orig.paragraphs + extra
            if first_quality_reason("\n".join([orig.title] + longer)) is None:
                orig.paragraphs = longer  # a long original, so one edited word keeps J >= 0.95
            orig.source, orig.pub_rule, orig.decoys = "pub", "jsonld_datePublished", False
            # crawled within hours, so the original is visible before its copy whatever its dateModified
            orig.crawl = orig.t_true + timedelta(minutes=rng.randint(40, 360))
            paras = list(orig.paragraphs)
            words = paras[-1].rstrip(".").split(" ")
            words[-1] = {"week": "month"}.get(words[-1], "week")
            paras[-1] = " ".join(words) + "."
            t = orig.t_true + timedelta(days=1, hours=rng.randint(1, 12))
            host = rng.choice([h for h in g.OUTLETS if h != orig.host])
            copy = Doc(url="", kind="syndicated", title=orig.title + " - wire report",
                       summary=orig.summary, paragraphs=paras, t_true=t, crawl=_crawl_after(rng, t),
                       host=host, event_id=orig.event_id, expect="drop", stage="dedup",
                       reason="dup_minhash", source="pub", pub_rule="meta_article_published_time",
                       decoys=False)
            j_all = _jaccard5(orig.title + "\n" + "\n".join(orig.paragraphs),
                              copy.title + "\n" + "\n".join(paras))
            j_body = _jaccard5("\n".join(orig.paragraphs), "\n".join(paras))
            copy.note = f"jaccard5 body={j_body:.3f} title+body={j_all:.3f}"
            copy.dup_of = orig  # resolved to a URL after rendering
            out.append(copy)
        # related-but-distinct pair: same event, same day, another outlet, other words
        for orig in [d for d in pool if d.kind == "event_news"][c * 7 + 3 : c * 7 + 5]:
            ev = next(e for e in events if e.event_id == orig.event_id)
            probs = ev.probs[ev.day_index(orig.t_true.date())].copy()
            probs[np.isnan(probs)] = 0.0
            text = event_article(rng, ev.scenario, ev.facts, probs / probs.sum(), 0.5)
            title = titles.claim(rng, text.title, ev.facts.slots["city"])
            rel = _text_doc(rng, "related", Text(title, text.summary, text.paragraphs),
                            orig.t_true + timedelta(hours=2), event_id=ev.event_id)
            j = _jaccard5("\n".join(orig.paragraphs), "\n".join(text.paragraphs))
            rel.note = f"jaccard5={j:.3f}"
            rel.dup_of = None
            rel.reason_alt = []
            rel.pair = orig  # type: ignore[attr-defined]
            out.append(rel)
        # URL variants of one kept article
        base = fresh("distractor", source="pub", decoys=False)
        base.canonical = "self"
        out.append(base)
        for variant in ("utm", "www", "http", "fragment", "canonical"):
            v = Doc(url="", kind="url_variant", title=base.title, summary=base.summary,
                    paragraphs=base.paragraphs, t_true=base.t_true,
                    crawl=base.crawl + timedelta(hours=rng.randint(2, 40)), host=base.host,
                    expect="drop", stage="dedup", reason="dup_canonical_url", note=variant)
            v.dup_of = base
            v.same_as = base if variant != "canonical" else None
            if variant == "canonical":
                # the AMP copy appears after the original was crawled: visible after it
                v.source, v.pub_rule, v.decoys = base.source, "jsonld_datePublished", False
                v.t_true = base.crawl + timedelta(minutes=rng.randint(5, 60))
            out.append(v)
        # same-title reposts: within 7 days -> dup_title; 12 days later -> kept
        t = when()
        orig = fresh("distractor", t, source="pub", decoys=False)
        orig.title = titles.claim(rng, f"{rng.choice(g.CITIES)} council approves new plan for the "
                                       f"harbor district", "")
        out.append(orig)
        for days, expect in ((3, "drop"), (12, "keep")):
            rp = fresh("title_repost", t + timedelta(days=days, hours=1), source="pub", decoys=False)
            rp.title = orig.title
            if expect == "drop":
                rp.expect, rp.stage, rp.reason, rp.dup_of = "drop", "dedup", "dup_title", orig
            out.append(rp)
        # a generic short title repeated daily: kept
        t = when()
        host = rng.choice(g.OUTLETS)
        for k in range(5):
            mb = fresh("title_repost", t + timedelta(days=k), source="pub", decoys=False, host=host)
            mb.title = "Morning Briefing"
            mb.note = "generic_title"
            out.append(mb)
        # broken records
        t = when()
        out.append(Doc(url="", kind="broken", title="", summary="", paragraphs=[], t_true=t,
                       crawl=_crawl_after(rng, t), host=rng.choice(g.OUTLETS), expect="drop",
                       stage="read", reason="http_status", status="404 Not Found",
                       raw_payload=b"<html><head><title>Not Found</title></head><body><h1>404 Not Found"
                                   b"</h1><p>The page you requested could not be found.</p></body></html>",
                       note="http_404"))
        out.append(Doc(url="", kind="broken", title="", summary="", paragraphs=[], t_true=t,
                       crawl=_crawl_after(rng, t), host=rng.choice(g.OUTLETS), expect="drop",
                       stage="read", reason="non_html", content_type="application/pdf",
                       header_charset=None,
                       raw_payload=b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"
                                   b"trailer\n<< /Root 1 0 R >>\n%%EOF\n", note="pdf"))
        out.append(Doc(url="", kind="broken", title="", summary="", paragraphs=[], t_true=t,
                       crawl=_crawl_after(rng, t), host=rng.choice(g.OUTLETS), expect="drop",
                       stage="read", reason="non_html", content_type="image/jpeg", header_charset=None,
                       raw_payload=b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
                                   + bytes(range(256)) + b"\xff\xd9", note="jpeg"))
        out.append(Doc(url="", kind="broken", title="", summary="", paragraphs=[], t_true=t,
                       crawl=_crawl_after(rng, t), host=rng.choice(g.OUTLETS), expect="drop",
                       stage="read", reason="empty_payload", raw_payload=b"", note="empty"))
        # charsets
        title, paras = planted.CP1252_TEXT
        out.append(Doc(url="", kind="charset", title=title, summary=paras[0], paragraphs=paras,
                       t_true=when(), crawl=None, host=rng.choice(g.OUTLETS), encoding="cp1252",
                       charset="utf-8", header_charset="utf-8", source="pub", decoys=False,
                       note="declared utf-8, bytes cp1252: decodes with a fallback, English, kept"))
        title, paras = planted.RUSSIAN
        out.append(Doc(url="", kind="charset", title=title, summary=paras[0], paragraphs=paras,
                       t_true=when(), crawl=None, host=rng.choice(g.OUTLETS), encoding="cp1251",
                       charset="windows-1251", header_charset="windows-1251", lang="ru", expect="drop",
                       stage="lang", reason="not_english", source="pub", decoys=False,
                       note="declared windows-1251 Russian"))
        title, paras = planted.NO_CHARSET_TEXT
        out.append(Doc(url="", kind="charset", title=title, summary=paras[0], paragraphs=paras,
                       t_true=when(), crawl=None, host=rng.choice(g.OUTLETS), charset=None,
                       header_charset=None, source="pub", decoys=False,
                       note="utf-8 bytes, no charset declared"))
    for d in out:
        if d.crawl is None:
            d.crawl = _crawl_after(rng, d.t_true)
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
        section = SECTIONS.get(d.note if d.kind in ("event_news", "preview") else None, "local")
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
        elif d.kind == "url_variant" and d.note == "canonical":
            base = d.dup_of
            d.url = f"https://{base.host}/amp/{_slug(base.title)}-{g.stable_int(d.title) % 10**6}"
            d.canonical = base.url
    for d in docs:
        if d.canonical == "self":
            d.canonical = d.url


def _force_decoy(rng: random.Random, d: Doc) -> None:
    m = d.markup
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
    html = pg.render_html(rng, url=d.url, host=d.host.split("/")[0], title=d.title, summary=d.summary,
                          paragraphs=d.paragraphs, markup=d.markup, author=author,
                          canonical=d.canonical, lang=d.lang if d.lang != "en" else "en",
                          charset=d.charset)
    d.payload = html.encode(d.encoding, errors="strict")
    ct = d.content_type + (f"; charset={d.header_charset}" if d.header_charset else "")
    d.headers = [("Content-Type", ct), ("Content-Length", str(len(d.payload))),
                 ("Server", rng.choice(["nginx", "Apache", "cloudflare"])),
                 ("Date", pg.http_date(d.crawl))]
    if d.markup.last_modified:
        d.headers.insert(rng.randint(1, 3), ("Last-Modified", d.markup.last_modified))


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


def build_docs(events: list[Event], preset: Preset, seed: int) -> list[Doc]:
    titles = TitleBook()
    docs = event_docs(events, preset, seed, titles)
    docs += distractor_docs(preset.n_distractors, seed, titles)
    docs += planted_docs(events, preset, seed, titles, docs)
    assign_urls(docs, seed)
    return docs
