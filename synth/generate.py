"""`synthesize`: write a whole sample world (news WARCs, Polymarket cache, truth.json) to a folder."""

from __future__ import annotations

import json
import time
from pathlib import Path

from forecast_env.synth.corpus import (
    Doc,
    TitleBook,
    assign_urls,
    distractor_docs,
    event_docs,
    outcome_docs,
    write_corpus,
)
from forecast_env.synth.corpus_plants import planted_docs
from forecast_env.synth.exposure_plants import plant_exposures
from forecast_env.synth.phrasing import check_bank, default_bank
from forecast_env.synth.polymarket import write_polymarket
from forecast_env.synth.presets import PRESETS, Preset
from forecast_env.synth.world import CORPUS_START, PLANTS, Event, build_events


def build_docs(events: list[Event], preset: Preset, seed: int) -> list[Doc]:
    """Every document of the world: the events' news, distractors, the planted cases and (presets with
    `outcome_reports`) the outcome reports, with URLs. The outcome reports come last: URLs and date markup
    are drawn per index, so the documents before them are the same with or without them."""
    titles = TitleBook()
    docs = event_docs(events, preset, seed, titles)
    docs += distractor_docs(preset.n_distractors, seed, titles)
    docs += planted_docs(events, preset, seed, titles, docs)
    if preset.outcome_reports > 0:
        docs += outcome_docs(events, preset, seed, titles)
    assign_urls(docs, seed)
    return docs


def event_truth(ev: Event) -> dict:
    stage, reason = PLANTS.get(ev.plant, (None, None)) if ev.plant else (None, None)
    late = [leg.option for leg in ev.legs if leg.late]
    label: str | None = ev.label
    if ev.plant in ("unresolved",):
        label = None
    if ev.plant == "multiple_yes":
        label = None
    return {
        "expect": "exclude" if ev.plant else "keep",
        "stage": stage,
        "reason": reason,
        "type": ev.type,
        "options": list(ev.options),
        "label": label,
        "split": ev.split,
        "category": ev.scenario.category,
        "late_legs": late,
        "title": ev.facts.title,
        "t_start": ev.start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "t_close": ev.close.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "start_day": ev.days[0].isoformat(),
        "close_day": ev.days[-1].isoformat(),
        "n_days": len(ev.days),
        "plant": ev.plant,
        "clarification": ev.clarification.strip() or None,
        **ev.extra.get("truth", {}),  # event-side plants and the schedule they imply (synth/polymarket.py)
    }


def outcome_truth(docs: list[Doc], articles: dict[str, dict]) -> dict[str, dict]:
    """Per event with outcome reports: `outcome_reports` (their URLs in order of expected visibility, then
    publication) and `outcome_report_day` (the first one's expected visibility day, the article truth's `day`)."""
    by_event: dict[str, list[Doc]] = {}
    for d in docs:
        if d.kind == "outcome_report" and d.event_id is not None:
            by_event.setdefault(d.event_id, []).append(d)
    out = {}
    for eid, reps in by_event.items():
        reps.sort(key=lambda d: (articles[d.url]["visible_at"], d.t_true, d.url))
        out[eid] = {"outcome_reports": [d.url for d in reps],
                    "outcome_report_day": articles[reps[0].url]["day"]}
    return out


def synthesize(out_dir: str | Path, preset: str = "micro", seed: int = 0, progress: bool = True,
               phrasing: str | None = None) -> dict:
    """Write the sample world `preset` for `seed` under `out_dir`; same inputs give identical bytes.

    `phrasing` names the bank the news writes its evidence with (`phrasing.BANK_NAMES`; default: by
    the seed, `phrasing.default_bank`).

    Layout: OUT/news/*.warc.gz (CC-NEWS style; the `bench` preset writes OUT/articles/YYYY-MM.parquet
    in the ARTICLES schema instead), OUT/polymarket/{gamma,clob,data}/..., OUT/truth.json.
    Returns a summary with counts and the elapsed seconds.
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    p: Preset = PRESETS[preset]
    bank = check_bank(phrasing) if phrasing is not None else default_bank(seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    events = build_events(p, seed, phrasing=bank)
    exposures = plant_exposures(events, p, seed) if p.exposure_plants else None  # synth/exposure_plants.py
    pm = write_polymarket(out, events, seed)
    truth: dict = {"preset": p.name, "seed": seed, "phrasing": bank, "corpus_start": CORPUS_START.isoformat(),
                   "corpus_end": "2026-05-31",
                   "splits": {"train": ["2025-06-01", "2026-03-01"], "eval": ["2026-03-01", "2026-06-01"]},
                   "body_join": "\n"}
    summary: dict = {"preset": p.name, "seed": seed, "phrasing": bank, "out": str(out), "events": pm["events"],
                     "events_keep": sum(1 for e in events if not e.plant),
                     "events_eval_keep": sum(1 for e in events if not e.plant and e.split == "eval"),
                     "events_train_keep": sum(1 for e in events if not e.plant and e.split == "train"),
                     "price_histories": pm["price_histories"], "trades": pm["trades"]}
    outcomes: dict[str, dict] = {}
    if p.bench_articles:
        from forecast_env.synth.bench import write_bench_articles

        n = write_bench_articles(out, events, p, seed, progress)
        truth["articles"] = {}
        truth["files"] = {}
        summary.update({"articles": n, "warc_files": 0, "article_store": str(out / "articles")})
    else:
        docs = build_docs(events, p, seed)
        corpus = write_corpus(out, docs, p, seed, progress)
        truth["articles"] = corpus["articles"]
        truth["files"] = corpus["files"]
        outcomes = outcome_truth(docs, corpus["articles"])
        if p.outcome_reports:
            summary["outcome_reports"] = sum(len(v["outcome_reports"]) for v in outcomes.values())
        arts = corpus["articles"].values()
        summary.update({
            "articles": len(corpus["articles"]),
            "articles_expect_keep": sum(1 for a in arts if a["expect"] == "keep"),
            "warc_files": len(corpus["files"]),
        })
    truth["events"] = {e.event_id: event_truth(e) for e in sorted(events, key=lambda e: int(e.gamma_id))}
    for eid, extra in outcomes.items():  # events with outcome reports only (presets with `outcome_reports`)
        truth["events"][eid].update(extra)
    if exposures is not None:
        truth["exposures"] = exposures  # which follow-up exposes which event, from when (docs/design.md §4)
    (out / "truth.json").write_text(json.dumps(truth, indent=1, sort_keys=True, ensure_ascii=False),
                                    encoding="utf-8")
    summary["seconds"] = round(time.perf_counter() - t0, 2)
    if progress:
        print(f"sample world {p.name} (seed {seed}) -> {out}: {summary['articles']} articles, "
              f"{summary['warc_files']} WARC files, {summary['events']} events "
              f"({summary['events_keep']} expected kept) in {summary['seconds']} s")
    return summary
