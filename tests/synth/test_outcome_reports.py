"""Outcome reports (synth/corpus.py `outcome_docs`): articles published after an event closed that state its
realised outcome, in the `questions` preset only; every other preset writes what it wrote before."""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from forecast_env.synth import PRESETS, synthesize
from forecast_env.synth.corpus import LAST_CRAWL, OUTCOME_DELAY, OUTCOME_LATEST, TitleBook, outcome_docs
from forecast_env.synth.generate import build_docs
from forecast_env.synth.world import CORPUS_END, Event, build_events

#: what a "No" outcome sentence says (synth/prose.py OUTCOMES); a "Yes" one says none of it
NEGATIVE = re.compile(r"\b(?:not|failed|fell short|fell through|rejected|voted down|missed)\b")
#: the slots that name an event (its country, bill, league, company, ...), where its scenario has them
NAMING_SLOTS = ("country", "bill", "league", "company", "target", "mission", "drug", "award", "film")


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _ts(s: str) -> datetime:
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("questions") / "w"
    synthesize(out, "questions", seed=0, progress=False)
    return out


@pytest.fixture(scope="module")
def truth(world: Path) -> dict:
    return json.loads((world / "truth.json").read_text())


@pytest.fixture(scope="module")
def built() -> tuple[list[Event], list]:
    p = PRESETS["questions"]
    events = build_events(p, 0)
    return events, build_docs(events, p, 0)


def test_preset():
    p = PRESETS["questions"]
    assert (p.n_train, p.n_eval, p.plant_copies, p.articles_per_event, p.n_distractors, p.records_per_warc,
            p.max_days, p.outcome_reports) == (8, 8, 0, (6, 9), 60, 250, 30, 2)
    assert [n for n, q in PRESETS.items() if q.outcome_reports] == ["questions", "questions_large"]


def test_reports_per_event_dated_after_close(built):
    events, docs = built
    reports = [d for d in docs if d.kind == "outcome_report"]
    assert docs[-len(reports):] == reports  # appended after every other document
    lo, hi = OUTCOME_DELAY
    n_full = 0
    for ev in events:
        mine = [d for d in reports if d.event_id == ev.event_id]
        if ev.plant:
            assert not mine
            continue
        # a report drawn after the corpus's end is skipped; an event closing early enough has all of them
        assert len(mine) <= PRESETS["questions"].outcome_reports
        if ev.close + hi <= OUTCOME_LATEST:
            assert len(mine) == PRESETS["questions"].outcome_reports, ev.event_id
            n_full += 1
        for d in mine:
            assert ev.close + lo <= d.t_true <= ev.close + hi, (ev.event_id, ev.close, d.t_true)
            assert d.t_true <= OUTCOME_LATEST and d.crawl <= LAST_CRAWL
            assert d.note == ev.scenario.category and d.expect == "keep"
    assert n_full >= 12
    assert len({d.title for d in reports}) == len(reports)


def test_reports_state_the_outcome_and_name_the_event(built):
    events, docs = built
    by_id = {ev.event_id: ev for ev in events}
    kinds = set()
    for d in docs:
        if d.kind != "outcome_report":
            continue
        ev = by_id[d.event_id]
        text = "\n".join([d.title, *d.paragraphs])
        outcome = d.paragraphs[0]  # the outcome sentence and its restatement
        kinds.add(ev.scenario.kind)
        if ev.scenario.kind == "yesno":
            assert bool(NEGATIVE.search(outcome)) == (ev.label == "No"), (ev.label, outcome)
        else:
            assert ev.label in outcome, (ev.label, outcome)
        names = [ev.facts.slots[k] for k in NAMING_SLOTS if k in ev.facts.slots]
        assert names, ev.scenario.name
        for name in names:
            assert name in outcome, (name, outcome)
        assert len(text.split()) >= 80
    assert kinds == {"yesno", "named", "multi"}


def test_fallback_for_another_scenario():
    """A scenario without its own templates is reported by its subject and market title."""
    from forecast_env.synth.prose import outcome_article
    from forecast_env.synth.scenarios import SCENARIO_BY_NAME

    ev = next(e for e in build_events(PRESETS["questions"], 0) if e.scenario.kind == "yesno")
    for label in ("Yes", "No"):
        sc = replace(SCENARIO_BY_NAME[ev.scenario.name], name="unknown")
        text = outcome_article(random.Random(1), sc, ev.facts, label)
        assert ev.facts.title in text.paragraphs[0]
        assert bool(NEGATIVE.search(text.paragraphs[0])) == (label == "No")


def test_truth_lists_reports_and_their_day(world, truth):
    arts = truth["articles"]
    reports = {u for u, a in arts.items() if a["kind"] == "outcome_report"}
    listed: set[str] = set()
    for eid, ev in truth["events"].items():
        if "outcome_reports" not in ev:
            assert "outcome_report_day" not in ev
            assert not any(arts[u]["event_id"] == eid for u in reports)
            continue
        urls = ev["outcome_reports"]
        assert urls and ev["expect"] == "keep"
        assert all(arts[u]["kind"] == "outcome_report" and arts[u]["event_id"] == eid for u in urls)
        assert [arts[u]["visible_at"] for u in urls] == sorted(arts[u]["visible_at"] for u in urls)
        assert ev["outcome_report_day"] == arts[urls[0]]["day"] == min(arts[u]["day"] for u in urls)
        assert ev["outcome_report_day"] >= ev["close_day"]
        for u in urls:
            a = arts[u]
            assert a["expect"] == "keep" and not a["leak"]
            assert _ts(a["visible_at"]) >= _ts(ev["t_close"]) + OUTCOME_DELAY[0]
            assert a["day"] <= CORPUS_END.isoformat() == truth["corpus_end"]
        listed.update(urls)
    assert listed == reports and len(reports) >= 24


def test_same_seed_gives_identical_bytes(world, tmp_path):
    synthesize(tmp_path / "again", "questions", seed=0, progress=False)
    assert _digests(world) == _digests(tmp_path / "again")


def test_other_presets_have_no_reports(micro_truth):
    assert PRESETS["micro"].outcome_reports == 0 and PRESETS["tiny"].outcome_reports == 0
    p = PRESETS["micro"]
    events = build_events(p, 0)
    docs = build_docs(events, p, 0)
    assert not [d for d in docs if d.kind == "outcome_report"]
    assert outcome_docs(build_events(PRESETS["tiny"], 0), PRESETS["tiny"], 0, TitleBook()) == []
    # the written micro world: no report, no new event key
    assert not [a for a in micro_truth["articles"].values() if a["kind"] == "outcome_report"]
    assert not [e for e in micro_truth["events"].values() if {"outcome_reports", "outcome_report_day"} & e.keys()]
    # with reports turned on, every earlier document keeps its URL, title, text and date markup
    more = build_docs(build_events(p, 0), replace(p, outcome_reports=2), 0)
    assert len(more) > len(docs) and all(d.kind == "outcome_report" for d in more[len(docs):])
    for a, b in zip(docs, more):
        assert (a.url, a.title, a.paragraphs, a.t_true, a.crawl, a.markup) == (
            b.url, b.title, b.paragraphs, b.t_true, b.crawl, b.markup)


@pytest.mark.slow
def test_corpus_build_keeps_every_report_on_its_day(world, truth, tmp_path):
    """The corpus builder keeps each outcome report, visible on the day the truth says (a few seconds)."""
    import polars as pl

    from forecast_env.corpus_build.pipeline import build_corpus

    build_corpus(sorted((world / "news").glob("*.warc.gz")), tmp_path / "ws", workers=1, progress=False)
    df = pl.concat([pl.read_parquet(f) for f in sorted((tmp_path / "ws" / "corpus" / "articles").glob("*.parquet"))])
    kept = {u: (str(d), bool(f)) for u, d, f in zip(df["url"], df["day"], df["leak_flag"])}
    for eid, ev in truth["events"].items():
        for u in ev.get("outcome_reports", []):
            assert kept.get(u) == (truth["articles"][u]["day"], False), (eid, u)
        if "outcome_report_day" in ev:
            assert min(kept[u][0] for u in ev["outcome_reports"]) == ev["outcome_report_day"]


def test_report_window_constants():
    assert (timedelta(hours=6), timedelta(days=4)) == OUTCOME_DELAY
    assert OUTCOME_LATEST.date() <= CORPUS_END
