"""`generate_questions`: draft forecasting questions from the frozen corpus, then let the verifiers rate them.

Two routes (docs/questions.md says which to prefer, from the measurements in benchmarks/RESULTS.md):

- **prospective** (the seed `question_generation_and_resolution.txt`): for each question date D, seed
  articles visible on D are sampled (seeded; spread over sources and days); the model may research with
  the environment's search and open_article as of D, then proposes questions about outcomes after D,
  each with options, resolution criteria, a resolution date R inside the horizon and its seed ids.
- **retrospective** (OpenForesight's): from an article visible on day R that reports an outcome, a
  question dated D = R - h whose answer the article states, with a verbatim quote the code checks.

Every draft is checked by code (the JSON schema, the options, the horizon, the quote), then rated by
the verifiers (`verify.py`). Every drop keeps its reason; `questions why ID` shows it.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import polars as pl
from tqdm import tqdm

from forecast_env.errors import QuestionsError
from forecast_env.questions.agent import Window, research
from forecast_env.questions.model import RecordedModel
from forecast_env.questions.records import Draft, Drop, draft_schema, retro_schema
from forecast_env.questions.store import (
    QuestionFiles,
    hash_config,
    prompt_text,
    questions_config,
    read_drafts,
    text_sha,
    write_drafts,
    write_info,
)
from forecast_env.questions.text import normalize, options_of, quote_in
from forecast_env.questions.verify import verify_draft
from forecast_env.retrieval import Searcher
from forecast_env.store import Workspace
from forecast_env.timeparse import parse_day

SEED_COLUMNS = ["doc_id", "url", "day", "leak_flag", "market_quote"]


def question_dates(first: date, last: date, every_days: int) -> list[date]:
    """A, A + every, ... up to B."""
    if last < first:
        raise QuestionsError(f"--dates {first}..{last}: the end is before the start")
    step = max(1, int(every_days))
    return [first + timedelta(days=i) for i in range(0, (last - first).days + 1, step)]


def parse_dates(text: str) -> tuple[date, date]:
    """`A..B` (ISO days) as two dates."""
    parts = str(text).split("..")
    a = parse_day(parts[0].strip()) if parts and parts[0].strip() else None
    b = parse_day(parts[1].strip()) if len(parts) == 2 and parts[1].strip() else None
    if a is None or b is None:
        raise QuestionsError(f"--dates {text!r}: expected A..B with ISO days, e.g. 2025-10-01..2026-02-28")
    return a, b


def load_articles(ws: Workspace, first: date, last: date) -> pl.DataFrame:
    """Corpus articles visible from `first` to `last` (the seed and source pool), readable ones only: ids, sources,
    topics, days and body lengths (the texts of the few sampled are read with `with_text`, not held for all)."""
    files = sorted(ws.articles_dir.glob("*.parquet"))
    if not files:
        raise QuestionsError(f"{ws.articles_dir}: no corpus; build it with `forecast-env corpus build` first")
    frame = (pl.scan_parquet(files).select(*SEED_COLUMNS, pl.col("body").str.len_chars().alias("chars"))
             .filter((pl.col("day") >= first) & (pl.col("day") <= last))
             .filter(~pl.col("leak_flag").fill_null(False) & ~pl.col("market_quote").fill_null(False))
             .collect())
    host = pl.col("url").str.extract(r"^[a-z]+://([^/:]+)", 1).fill_null("")
    # the topic: the URL's first path segment when it reads as a section name (/politics/, /sport/, /business/)
    topic = pl.col("url").str.extract(r"^[a-z]+://[^/]+/([A-Za-z][A-Za-z-]{2,19})/", 1).str.to_lowercase().fill_null("")
    return frame.with_columns(host.alias("host"), topic.alias("topic")).sort(["day", "doc_id"])


def sample_seeds(pool: pl.DataFrame, lo: date, hi: date, n: int, rng: random.Random, used: set[str],
                 min_chars: int, hosts: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Up to n articles visible in [lo, hi], spread over sources, topics and days (the least-used source, then topic,
    then day first; ties in a seeded random order)."""
    rows = pool.filter((pl.col("day") >= lo) & (pl.col("day") <= hi)
                       & (pl.col("chars") >= min_chars)).to_dicts()
    rows = [r for r in rows if r["doc_id"] not in used and (not hosts or r["host"] in hosts)]
    rng.shuffle(rows)
    by_host: Counter[str] = Counter()
    by_topic: Counter[str] = Counter()
    by_day: Counter[date] = Counter()
    out: list[dict[str, Any]] = []
    while rows and len(out) < n:
        best = min(range(len(rows)), key=lambda i: (by_host[rows[i]["host"]], by_topic[rows[i]["topic"]],
                                                    by_day[rows[i]["day"]], i))
        r = rows.pop(best)
        out.append(r)
        used.add(r["doc_id"])
        by_host[r["host"]] += 1
        by_topic[r["topic"]] += 1
        by_day[r["day"]] += 1
    return out


def with_text(searcher: Searcher, row: dict[str, Any]) -> dict[str, Any]:
    """A sampled article's row with its title and body, read from the index's text as of its own day."""
    art = searcher.open_article(row["doc_id"], row["day"])
    return {**row, "title": art.title, "body": art.body}


def _qid(route: str, d: date, doc_id: str, i: int) -> str:
    return f"{route[0]}{d:%Y%m%d}-{hashlib.sha1(doc_id.encode()).hexdigest()[:8]}-{i}"


def _article_text(row: Mapping[str, Any], chars: int) -> str:
    return normalize(str(row.get("body") or ""))[:chars]


def _check_common(item: Mapping[str, Any]) -> tuple[str, list[str], str] | Drop:
    q = normalize(str(item.get("question") or ""))
    crit = normalize(str(item.get("resolution_criteria") or ""))
    if not q or len(q) > 500:
        return Drop("draft", "bad_question", "empty or longer than 500 characters")
    opts = options_of(item.get("options"))
    if opts is None:
        return Drop("draft", "bad_options", f"options {item.get('options')!r}: need 2-8 distinct non-empty labels")
    if not crit:
        return Drop("draft", "bad_criteria", "no resolution criteria")
    return q, opts, crit


def propose(model: RecordedModel, searcher: Searcher, seed: Mapping[str, Any], d: date, cfg: Mapping[str, Any]
            ) -> list[Draft]:
    """The prospective route on one seed article: research as of D, then up to N drafts (or one dropped record)."""
    pc, hz = cfg["prospective"], cfg["horizon"]
    lo, hi = d + timedelta(days=int(hz["min_days"])), d + timedelta(days=int(hz["max_days"]))
    fields = dict(date=d.isoformat(), max_questions=int(pc["max_questions_per_seed"]), min_date=lo.isoformat(),
                  max_date=hi.isoformat(), seed_id=seed["doc_id"], seed_day=seed["day"].isoformat(),
                  seed_title=normalize(str(seed["title"] or "")), seed_text=_article_text(seed, int(pc["article_chars"])))
    prompt = prompt_text("propose").format(**fields)
    found = research(model, searcher, Window(until=d), prompt, int(pc["research_turns"]), int(pc["search_k"]),
                     int(pc["article_chars"]), "propose:research", int(pc["research_max_tokens"]))
    final = prompt
    if found.notes:
        final += "\n\nWhat your research found:\n" + "\n\n".join(found.notes)
    final += "\n\n" + prompt_text("propose_final").format(**fields)
    obj, _ = model.ask_json([{"role": "user", "content": final}], draft_schema(int(pc["max_questions_per_seed"])),
                            "propose")
    if obj is None:
        return [Draft(qid=_qid("prospective", d, seed["doc_id"], 0), route="prospective", date=d, resolution_date=d,
                      question="", options=[], criteria="", seed_ids=[seed["doc_id"]], status="dropped",
                      drop=Drop("draft", "unreadable", f"seed {seed['doc_id']}: no schema-valid reply after one correction"))]
    known = {seed["doc_id"], *(k for k, v in found.seen.items() if v <= d)}
    drafts = []
    for i, item in enumerate(obj["questions"]):
        qid = _qid("prospective", d, seed["doc_id"], i)
        checked = _check_common(item)
        r_day = parse_day(str(item.get("resolution_date") or ""))
        draft = Draft(qid=qid, route="prospective", date=d, resolution_date=r_day or d,
                      question=normalize(str(item.get("question") or "")), options=options_of(item.get("options")) or
                      [str(o) for o in item.get("options") or []], criteria=normalize(str(item.get("resolution_criteria") or "")),
                      description=normalize(str(item.get("description") or "")),
                      category=(normalize(str(item["category"])).lower() or None) if item.get("category") else None,
                      seed_ids=[seed["doc_id"], *sorted({str(s) for s in item.get("seed_article_ids") or []} & known
                                                       - {seed["doc_id"]})])
        if isinstance(checked, Drop):
            draft.drop = checked
        elif r_day is None or not lo <= r_day <= hi:
            draft.drop = Drop("draft", "horizon", f"resolution date {item.get('resolution_date')!r} not in "
                                                  f"{lo.isoformat()}..{hi.isoformat()}")
        draft.status = "dropped" if draft.drop else "draft"
        drafts.append(draft)
    return drafts


def retrospect(model: RecordedModel, source: Mapping[str, Any], h: int, cfg: Mapping[str, Any]) -> list[Draft]:
    """The retrospective route on one article visible on R: a question dated D = R - h (or none)."""
    r_day: date = source["day"]
    d = r_day - timedelta(days=h)
    text = _article_text(source, int(cfg["prospective"]["article_chars"]))
    prompt = prompt_text("retrospective").format(report_day=r_day.isoformat(), date=d.isoformat(),
                                                 source_id=source["doc_id"], source_title=normalize(str(source["title"] or "")),
                                                 source_text=text)
    obj, _ = model.ask_json([{"role": "user", "content": prompt}], retro_schema(), "retrospect")
    qid = _qid("retrospective", d, source["doc_id"], 0)
    if obj is None:
        return [Draft(qid=qid, route="retrospective", date=d, resolution_date=r_day, question="", options=[],
                      criteria="", source_id=source["doc_id"], status="dropped",
                      drop=Drop("draft", "unreadable", "no schema-valid reply after one correction"))]
    out = []
    for i, item in enumerate(obj["questions"][:1]):
        checked = _check_common(item)
        opts = options_of(item.get("options")) or [str(o) for o in item.get("options") or []]
        answer = next((o for o in opts if o.casefold() == normalize(str(item.get("answer") or "")).casefold()), None)
        quote = normalize(str(item.get("answer_quote") or ""))
        draft = Draft(qid=_qid("retrospective", d, source["doc_id"], i), route="retrospective", date=d,
                      resolution_date=r_day, question=normalize(str(item.get("question") or "")), options=opts,
                      criteria=normalize(str(item.get("resolution_criteria") or "")),
                      description=normalize(str(item.get("description") or "")),
                      category=(normalize(str(item["category"])).lower() or None) if item.get("category") else None,
                      seed_ids=[source["doc_id"]], answer=answer, answer_quote=quote, source_id=source["doc_id"])
        full = normalize(f"{source['title'] or ''} {source['body'] or ''}")
        if isinstance(checked, Drop):
            draft.drop = checked
        elif answer is None:
            draft.drop = Drop("draft", "answer_not_an_option", f"answer {item.get('answer')!r} is not one of {opts}")
        elif not quote_in(quote, full, int(cfg["resolve"]["min_quote_chars"])):
            draft.drop = Drop("draft", "quote_not_in_source", f"the quote {quote[:120]!r} is not in {source['doc_id']}")
        draft.status = "dropped" if draft.drop else "draft"
        out.append(draft)
    return out


def generate_questions(workspace: str | Path, dates: str | tuple[date, date], config: Mapping[str, Any] | None = None,
                       *, routes: Sequence[str] | None = None, progress: bool = True) -> dict[str, Any]:
    """Draft and verify questions for the question dates in `dates` (A..B); returns the run's summary.

    `config`: the `questions` section (defaults from configs/questions.yaml, e.g. `{"llm": {"model": ...}}`).
    Writes WS/questions/drafts.jsonl (every draft, with its verdicts or drop reason), generate.json and the
    recording. Drafts of other dates from an earlier run are kept; a date's drafts are replaced.
    """
    t0 = time.perf_counter()
    cfg = questions_config(config)
    first, last = parse_dates(dates) if isinstance(dates, str) else dates
    routes = list(routes or cfg["routes"])
    bad = [r for r in routes if r not in ("prospective", "retrospective")]
    if bad:
        raise QuestionsError(f"unknown route {bad[0]!r}; choose prospective and/or retrospective")
    ws = Workspace.at(workspace)
    files = QuestionFiles.of(ws)
    searcher = Searcher.open(ws.root)
    if searcher.last_day is None:
        raise QuestionsError(f"{ws.root}: the index is empty")
    grid = question_dates(first, min(last, searcher.last_day), int(cfg["dates"]["every_days"]))
    horizons = [int(h) for h in cfg["retrospective"]["horizons"]]
    window = int(cfg["seeds"]["window_days"])
    pool = load_articles(ws, first - timedelta(days=window), min(last, searcher.last_day) + timedelta(
        days=max(horizons) + int(cfg["dates"]["every_days"])))
    model = RecordedModel(cfg["llm"], files.recording, str(cfg["replay"]))
    rng = random.Random(f"questions-seeds-{cfg['seeds']['seed']}")
    used: set[str] = set()
    drafts: list[Draft] = []
    n_seeds: Counter[str] = Counter()
    try:
        jobs: list[tuple[str, date, dict[str, Any], int]] = []
        for d in grid:
            if "prospective" in routes:
                for s in sample_seeds(pool, d - timedelta(days=window - 1), d, int(cfg["seeds"]["per_date"]), rng,
                                      used, int(cfg["seeds"]["min_chars"]), cfg["seeds"]["hosts"]):
                    jobs.append(("prospective", d, with_text(searcher, s), 0))
            if "retrospective" in routes:
                h = rng.choice(horizons)
                span_end = d + timedelta(days=h + int(cfg["dates"]["every_days"]) - 1)
                for s in sample_seeds(pool, d + timedelta(days=h), min(span_end, searcher.last_day),
                                      int(cfg["seeds"]["per_date"]), rng, used, int(cfg["seeds"]["min_chars"]),
                                      cfg["seeds"]["hosts"]):
                    jobs.append(("retrospective", d, with_text(searcher, s), h))
        for route, d, s, h in tqdm(jobs, desc="questions generate", unit="seed", disable=not progress):
            n_seeds[route] += 1
            if route == "prospective":
                got = propose(model, searcher, s, d, cfg)
                if not got:
                    got = [Draft(qid=_qid(route, d, s["doc_id"], 0), route=route, date=d, resolution_date=d,
                                 question="", options=[], criteria="", seed_ids=[s["doc_id"]], status="dropped",
                                 drop=Drop("draft", "no_questions", f"seed {s['doc_id']}: the model proposed none"))]
            else:
                got = retrospect(model, s, h, cfg)
                if not got:
                    got = [Draft(qid=_qid(route, s["day"] - timedelta(days=h), s["doc_id"], 0), route=route,
                                 date=s["day"] - timedelta(days=h), resolution_date=s["day"], question="", options=[],
                                 criteria="", source_id=s["doc_id"], seed_ids=[s["doc_id"]], status="dropped",
                                 drop=Drop("draft", "no_outcome", f"source {s['doc_id']}: the model found no outcome"))]
            for draft in got:
                if draft.drop is None:
                    verify_draft(model, draft, cfg)
                drafts.append(draft)
            model.save()  # a stopped run keeps what it paid for
    finally:
        model.close()
        searcher.close()
    new_dates = set(grid)
    old = read_drafts(files.drafts)
    # a rerun replaces the drafts of its own dates and routes; drafts of other dates or routes stay
    by_id = {x.qid: x for x in old if x.date not in new_dates or x.route not in routes}
    for x in drafts:
        by_id[x.qid] = x
    write_drafts(files.drafts, by_id.values())
    status = Counter(x.status for x in drafts)
    reasons = Counter(f"{x.drop.stage}:{x.drop.reason}" for x in drafts if x.drop)
    prompts = {name: text_sha(prompt_text(name, cfg["verify"]["prompts"])) for name in (
        "propose", "propose_final", "retrospective", "verify_quality", "verify_ambiguity", "verify_resolvability",
        "verify_triviality")}
    info = {"dates": [first.isoformat(), last.isoformat()], "question_dates": len(grid), "routes": routes,
            "config_hash": hash_config(cfg),
            "model": model.model, "structured": model.structured, "prompts": prompts,
            "seeds": dict(sorted(n_seeds.items())), "drafts": len(drafts), "status": dict(sorted(status.items())),
            "drops": dict(sorted(reasons.items())), "usage": model.usage.to_dict()}
    write_info(files.generate_info, info)
    summary = {**info, "live_calls": model.usage.live, "replayed_calls": model.usage.replayed,
               "seconds": round(time.perf_counter() - t0, 2), "output": str(files.drafts)}
    if progress:
        print(f"questions generate: {sum(n_seeds.values())} seeds -> {len(drafts)} drafts, "
              f"{status.get('verified', 0)} verified ({model.usage.live} model calls, {model.usage.replayed} replayed) "
              f"in {summary['seconds']} s -> {files.drafts}")
    return summary
