"""Planted documents of the sample world: one case (or a few) for every corpus stage and rule.

Language, quality and repetition filters, each timestamp rule and the visibility rules (naive evening
times, pages modified after publication, bogus modification dates), dedup (syndicated copies, AMP
variants, near duplicates and related-but-distinct stories), leakage and market quotes, broken records
and charsets. `generate.build_docs` adds them to the news; each carries what truth.json says of it.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from datetime import date, datetime, timedelta

import numpy as np

from forecast_env.synth import grammar as g
from forecast_env.synth import pages as pg
from forecast_env.synth import planted
from forecast_env.synth.checks import first_quality_reason
from forecast_env.synth.corpus import Doc, TitleBook, crawl_after, day_dt, rand_dt
from forecast_env.synth.presets import Preset
from forecast_env.synth.prose import (
    DISTRACTOR_TOPICS,
    Text,
    distractor_article,
    event_article,
    market_mention_sentences,
    market_quote_sentence,
)
from forecast_env.synth.world import CORPUS_START, UTC, Event

#: A plant's crawl time still to be drawn: drawn after every plant of the batch is made, in their order.
CRAWL_LATER = datetime(1, 1, 1, tzinfo=UTC)


def _text_doc(rng: random.Random, kind: str, text: Text, t: datetime, **kw) -> Doc:
    return Doc(url="", kind=kind, title=text.title, summary=text.summary, paragraphs=text.paragraphs,
               t_true=t, crawl=kw.pop("crawl", None) or crawl_after(rng, t),
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
    span_lo = day_dt(date(2025, 4, 1))
    span_hi = day_dt(date(2026, 5, 20))
    topics = list(DISTRACTOR_TOPICS)

    def when() -> datetime:
        return rand_dt(rng, span_lo, span_hi)

    def fresh(kind: str, t: datetime | None = None, **kw) -> Doc:
        text = distractor_article(rng, rng.choice(topics))
        title = titles.claim(rng, text.title, rng.choice(g.CITIES))
        text = Text(title, text.summary, text.paragraphs)
        return _text_doc(rng, kind, text, t or when(), **kw)

    for c in range(copies):
        # language
        for code, title, paras in planted.FOREIGN:
            out.append(Doc(url="", kind="lang", title=title, summary=paras[0], paragraphs=paras,
                           t_true=when(), crawl=CRAWL_LATER, host=rng.choice(g.OUTLETS), lang=code,
                           expect="drop", stage="lang", reason="not_english_page", source="pub"))
        # quality
        for reason, title, lines in planted.quality_pages(rng.choice(g.CITIES), g.person_name(rng)):
            r1 = first_quality_reason("\n".join(lines))
            r2 = first_quality_reason("\n\n".join(lines))
            assert r1 == reason or r2 == reason, (reason, r1, r2)
            title = titles.claim(rng, title, rng.choice(g.CITIES))
            out.append(Doc(url="", kind="quality", title=title, summary=lines[0][:150], paragraphs=lines,
                           t_true=when(), crawl=CRAWL_LATER, host=rng.choice(g.OUTLETS), expect="drop",
                           stage="quality", reason=r1, reason_alt=[r2] if r2 is not None and r2 != r1 else [],
                           kept_by=["news"] if reason in planted.NEWS_KEEPS else [],
                           source="pub"))
        # time: published before corpus_start, crawled in the first days of the corpus
        for t_old in (datetime(2024, 11, 5, 9, 30, tzinfo=UTC), datetime(2023, 6, 20, 16, 0, tzinfo=UTC)):
            d = fresh("old", t_old, expect="drop", stage="time", reason="before_corpus_start",
                      source="pub", decoys=False,
                      crawl=day_dt(CORPUS_START + timedelta(days=rng.randint(0, 5)), 3, 20 + c))
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
        vote = t + timedelta(days=8)
        d.leak_day = vote.date()
        d.plant_markup = _markup(pub=("jsonld_datePublished", pg.iso_z(t), t))
        d.paragraphs = d.paragraphs[:2] + [
            (f"On {vote.strftime('%B')} {vote.day}, the committee voted to approve the plan, and the first "
             f"contracts were signed the same afternoon.")] + d.paragraphs[2:]
        out.append(d)
        # timezone offsets whose local day differs from the UTC day
        for off, hh in ((timedelta(hours=5, minutes=30), 20), (timedelta(hours=-4), 2)):
            t = day_dt(when().date(), hh, 15)
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
                       summary=orig.summary, paragraphs=paras, t_true=t, crawl=crawl_after(rng, t),
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
                       crawl=crawl_after(rng, t), host=rng.choice(g.OUTLETS), expect="drop",
                       stage="read", reason="http_status", status="404 Not Found",
                       raw_payload=b"<html><head><title>Not Found</title></head><body><h1>404 Not Found"
                                   b"</h1><p>The page you requested could not be found.</p></body></html>",
                       note="http_404"))
        out.append(Doc(url="", kind="broken", title="", summary="", paragraphs=[], t_true=t,
                       crawl=crawl_after(rng, t), host=rng.choice(g.OUTLETS), expect="drop",
                       stage="read", reason="non_html", content_type="application/pdf",
                       header_charset=None,
                       raw_payload=b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"
                                   b"trailer\n<< /Root 1 0 R >>\n%%EOF\n", note="pdf"))
        out.append(Doc(url="", kind="broken", title="", summary="", paragraphs=[], t_true=t,
                       crawl=crawl_after(rng, t), host=rng.choice(g.OUTLETS), expect="drop",
                       stage="read", reason="non_html", content_type="image/jpeg", header_charset=None,
                       raw_payload=b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
                                   + bytes(range(256)) + b"\xff\xd9", note="jpeg"))
        out.append(Doc(url="", kind="broken", title="", summary="", paragraphs=[], t_true=t,
                       crawl=crawl_after(rng, t), host=rng.choice(g.OUTLETS), expect="drop",
                       stage="read", reason="empty_payload", raw_payload=b"", note="empty"))
        # charsets
        title, paras = planted.CP1252_TEXT
        out.append(Doc(url="", kind="charset", title=title, summary=paras[0], paragraphs=paras,
                       t_true=when(), crawl=CRAWL_LATER, host=rng.choice(g.OUTLETS), encoding="cp1252",
                       charset="utf-8", header_charset="utf-8", source="pub", decoys=False,
                       note="declared utf-8, bytes cp1252: decodes with a fallback, English, kept"))
        title, paras = planted.RUSSIAN
        out.append(Doc(url="", kind="charset", title=title, summary=paras[0], paragraphs=paras,
                       t_true=when(), crawl=CRAWL_LATER, host=rng.choice(g.OUTLETS), encoding="cp1251",
                       charset="windows-1251", header_charset="windows-1251", lang="ru", expect="drop",
                       stage="lang", reason="not_english_page", source="pub", decoys=False,
                       note="declared windows-1251 Russian"))
        title, paras = planted.NO_CHARSET_TEXT
        out.append(Doc(url="", kind="charset", title=title, summary=paras[0], paragraphs=paras,
                       t_true=when(), crawl=CRAWL_LATER, host=rng.choice(g.OUTLETS), charset=None,
                       header_charset=None, source="pub", decoys=False,
                       note="utf-8 bytes, no charset declared"))
    for d in out:
        if d.crawl is CRAWL_LATER:
            d.crawl = crawl_after(rng, d.t_true)
    return out
