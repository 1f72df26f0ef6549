"""`resolve_questions`: resolvers vote on each verified question, the code checks their evidence, the vetting
runs, and the accepted questions become events (source `generated`).

Resolution (docs/design.md §4): once R + grace is inside the corpus, each resolver researches articles
visible after D and up to R + g (the environment's tools over that window) and answers with an option
or "unresolvable", citing article ids and verbatim quotes. A vote counts only when every cited article
exists, is visible after D and by R + g, and contains its quote; an option needs at least one such
quote. A strict majority of the configured resolvers decides; otherwise a tie-breaking resolver votes
and a strict plurality of two or more decides. A split vote, "unresolvable" or a retrospective answer
the vote disputes drops the question with its reason. The first visible report of the outcome (the
earliest valid evidence for the verdict) is the question's `known_day`.

Vetting (`vet.py`, independent of the model): post-D facts in the text and near-duplicates before the
resolvers run (they cost nothing and save model calls), then answer-public-at-D, cross-question exposure
and label balance.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from tqdm import tqdm

from forecast_env.config import load_config
from forecast_env.errors import ArticleUnavailableError, QuestionsError
from forecast_env.questions import vet
from forecast_env.questions.agent import Window, research
from forecast_env.questions.model import RecordedModel
from forecast_env.questions.records import UNRESOLVABLE, Draft, Drop, Evidence, Vote, resolution_schema
from forecast_env.questions.store import (
    QuestionFiles,
    hash_config,
    prompt_text,
    questions_config,
    read_drafts,
    text_sha,
    write_drafts,
    write_info,
    write_jsonl,
)
from forecast_env.questions.text import normalize, quote_in
from forecast_env.retrieval import Searcher
from forecast_env.store import Workspace


def check_vote(vote: Vote, draft: Draft, searcher: Searcher, until: date, min_quote_chars: int) -> Vote:
    """Check every cited article and quote of `vote` (sets each evidence's `problem` and the vote's)."""
    if vote.answer is None:
        vote.problem = vote.problem or "unreadable"
        return vote
    for ev in vote.evidence:
        try:
            art = searcher.open_article(ev.doc_id, until)
        except ArticleUnavailableError:
            ev.problem = "unknown_article"  # not in the corpus, hidden, or visible only after R + g
            continue
        ev.day = art.day
        if art.day <= draft.date:
            ev.problem = "evidence_before_D"
        elif not quote_in(ev.quote, f"{art.title}\n{art.summary}\n{art.body}", min_quote_chars):
            ev.problem = "fabricated_quote"
    bad = [ev.problem for ev in vote.evidence if ev.problem]
    if bad:
        vote.problem = bad[0]
    elif vote.answer != UNRESOLVABLE and not vote.evidence:
        vote.problem = "no_evidence"
    return vote


def tally(votes: list[Vote], n_voters: int) -> str | None:
    """The verdict of the first `n_voters` votes (a strict majority of them), or with a tie-breaker's vote (a strict
    plurality of at least two); None when split."""
    first = Counter(v.answer for v in votes[:n_voters] if v.valid and v.answer is not None)
    if first:
        (top, c1), *rest = first.most_common()
        if c1 * 2 > n_voters:
            return top
    if len(votes) > n_voters:
        allv = Counter(v.answer for v in votes if v.valid and v.answer is not None)
        ranked = allv.most_common()
        if ranked and ranked[0][1] >= 2 and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
            return ranked[0][0]
    return None


def needs_tiebreak(votes: list[Vote], n_voters: int) -> bool:
    first = Counter(v.answer for v in votes[:n_voters] if v.valid and v.answer is not None)
    return not first or first.most_common(1)[0][1] * 2 <= n_voters


def ask_resolver(model: RecordedModel, searcher: Searcher, draft: Draft, index: int, until: date,
                 cfg: Mapping[str, Any]) -> Vote:
    """One resolver's vote (resolvers differ by their sampling seed), unchecked."""
    rc = cfg["resolve"]
    fields = dict(date=draft.date.isoformat(), resolution_date=draft.resolution_date.isoformat(), until=until.isoformat(),
                  question=draft.question, options="; ".join(draft.options), criteria=draft.criteria,
                  options_json=json.dumps(list(draft.options)))
    prompt = prompt_text("resolve").format(**fields)
    kw: dict[str, Any] = {"temperature": float(rc["temperature"]), "seed": index}
    found = research(model, searcher, Window(until=until, after=draft.date), prompt, 2, int(rc["search_k"]),
                     int(rc["article_chars"]), "resolve:research", int(cfg["prospective"]["research_max_tokens"]), **kw)
    final = prompt
    if found.notes:
        final += "\n\nWhat your research found:\n" + "\n\n".join(found.notes)
    final += "\n\n" + prompt_text("resolve_final").format(**fields)
    obj, _ = model.ask_json([{"role": "user", "content": final}], resolution_schema(draft.options), "resolve", **kw)
    name = f"resolver-{index}"
    if obj is None:
        return Vote(name, None, problem="unreadable")
    ev = [Evidence(str(e["doc_id"]), normalize(str(e["quote"]))) for e in obj["evidence"]]
    return Vote(name, str(obj["answer"]), ev)


def decide(draft: Draft, votes: list[Vote], n_voters: int) -> Draft:
    """Set the verdict, known_day and status of `draft` from its checked votes."""
    draft.votes = votes
    verdict = tally(votes, n_voters)
    if verdict is None:
        why = Counter(v.problem or v.answer or "none" for v in votes)
        reason = "no_valid_votes" if not any(v.valid for v in votes) else "split_vote"
        draft.drop = Drop("resolve", reason, "votes: " + ", ".join(f"{k} x{n}" for k, n in sorted(why.items())))
    elif verdict == UNRESOLVABLE:
        draft.drop = Drop("resolve", "unresolvable", "the resolvers found no report that settles it")
    elif draft.route == "retrospective" and draft.answer is not None and verdict != draft.answer:
        draft.drop = Drop("resolve", "answer_disputed", f"the source says {draft.answer!r}, the vote {verdict!r}")
    else:
        draft.resolved = verdict
        days = [e.day for v in votes if v.valid and v.answer == verdict for e in v.evidence if e.day is not None]
        draft.known_day = min(days) if days else None
    draft.status = "dropped" if draft.drop else "resolved"
    return draft


def accepted_record(d: Draft, model: str) -> dict[str, Any]:
    """An accepted question in the own-questions JSONL format (envs/events/questions.py), with its provenance."""
    desc = d.description
    desc = (desc + "\n\n" if desc else "") + f"Resolution criteria: {d.criteria}"
    return {"id": d.qid, "question": d.question, "options": d.options, "open_date": d.date.isoformat(),
            "close_date": d.resolution_date.isoformat(), "resolved_option": d.resolved, "description": desc,
            "category": d.category, "known_date": d.known_day.isoformat() if d.known_day else None,
            "provenance": {"route": d.route, "seed_ids": d.seed_ids, "model": model,
                           "votes": [v.to_dict() for v in d.votes]}}


def _split_of(events_cfg: Mapping[str, Any]) -> Callable[[Draft], str | None]:
    from datetime import UTC, datetime

    from forecast_env.envs.events.splits import Splits

    splits = Splits.from_config(events_cfg)

    def split(d: Draft) -> str | None:
        t0 = datetime(d.date.year, d.date.month, d.date.day, tzinfo=UTC)
        t1 = datetime(d.resolution_date.year, d.resolution_date.month, d.resolution_date.day, tzinfo=UTC)
        name, reason = splits.assign(t0, t1)
        return name if reason is None else None

    return split


def resolve_questions(workspace: str | Path, config: Mapping[str, Any] | None = None, *,
                      events_config: Mapping[str, Any] | None = None, progress: bool = True) -> dict[str, Any]:
    """Resolve and vet the verified drafts of WS/questions/drafts.jsonl; write questions.jsonl and accepted.jsonl
    and (unless `import_events` is false) put the accepted questions into WS/events as source "generated" (replacing the
    generated events of an earlier resolve, so none stays that is no longer accepted)."""
    t0 = time.perf_counter()
    cfg = questions_config(config)
    ecfg = load_config("events", overrides=dict(events_config or {}))
    ws = Workspace.at(workspace)
    files = QuestionFiles.of(ws)
    drafts = read_drafts(files.drafts)
    if not drafts:
        raise QuestionsError(f"{files.drafts}: no drafts; run `forecast-env questions generate` first")
    rc, vc = cfg["resolve"], cfg["vet"]
    searcher = Searcher.open(ws.root)
    last = searcher.last_day
    assert last is not None
    model = RecordedModel(cfg["llm"], files.recording, str(cfg["replay"]))
    todo = [d for d in drafts if d.status == "verified"]
    for d in todo:  # a rerun starts from the verified drafts again
        d.votes, d.resolved, d.known_day, d.drop = [], None, None, None
    try:
        # vetting that needs no answer: post-D facts in the text, near-duplicates (the earliest D stays)
        for d in tqdm(todo, desc="vet text", unit="q", disable=not progress):
            d.drop = vet.post_d_text(d, searcher, int(vc["max_terms"]))
        live = [d for d in todo if d.drop is None]
        for qid, drop in vet.find_duplicates(live, searcher.embedder.encode_queries, float(vc["duplicate_cosine"]),
                                             float(vc["duplicate_jaccard"])).items():
            next(d for d in live if d.qid == qid).drop = drop
        grace = timedelta(days=int(rc["grace_days"]))
        n_voters = int(rc["resolvers"])
        for d in tqdm([d for d in todo if d.drop is None], desc="questions resolve", unit="q", disable=not progress):
            until = d.resolution_date + grace
            if until > last:
                d.status = "pending"  # R + g is not inside the corpus yet
                continue
            votes = [check_vote(ask_resolver(model, searcher, d, i, until, cfg), d, searcher, until,
                                int(rc["min_quote_chars"])) for i in range(n_voters)]
            if rc["tiebreak"] and needs_tiebreak(votes, n_voters):
                votes.append(check_vote(ask_resolver(model, searcher, d, n_voters, until, cfg), d, searcher, until,
                                        int(rc["min_quote_chars"])))
            decide(d, votes, n_voters)
            if d.drop is None and d.route == "retrospective" and d.source_id:
                try:
                    src_day = searcher.open_article(d.source_id, until).day
                    d.known_day = src_day if d.known_day is None else min(d.known_day, src_day)
                except ArticleUnavailableError:
                    pass
            model.save()
        resolved = [d for d in todo if d.status == "resolved"]
        for d in tqdm(resolved, desc="vet public at D", unit="q", disable=not progress):
            d.drop = vet.public_at_d(d, searcher, int(vc["public_search_k"]))
        live = [d for d in resolved if d.drop is None]
        dropped_exp, _later = vet.find_exposed(live, vet.market_question_texts(ws.root))
        for d in live:
            if d.qid in dropped_exp:
                d.drop = dropped_exp[d.qid]
        live = [d for d in live if d.drop is None]
        bal_drops, balance = vet.rebalance(live, _split_of(ecfg), float(cfg["balance"]["max_majority_share"]),
                                           int(cfg["balance"]["seed"]))
        for d in live:
            if d.qid in bal_drops:
                d.drop = bal_drops[d.qid]
        for d in todo:
            if d.drop is not None:
                d.status = "dropped"
            elif d.status == "resolved":
                d.status = "accepted"
    finally:
        model.close()
        searcher.close()
    write_drafts(files.resolved, drafts)
    accepted = sorted((d for d in drafts if d.status == "accepted"), key=lambda d: d.qid)
    write_jsonl(files.accepted, (accepted_record(d, model.model) for d in accepted))
    status = Counter(d.status for d in todo)
    reasons = Counter(f"{d.drop.stage}:{d.drop.reason}" for d in todo if d.drop)
    info = {"questions": len(todo), "config_hash": hash_config(cfg), "status": dict(sorted(status.items())), "drops": dict(sorted(reasons.items())),
            "balance": balance, "model": model.model, "usage": model.usage.to_dict(),
            "prompts": {n: text_sha(prompt_text(n)) for n in ("resolve", "resolve_final")},
            "resolvers": n_voters, "tiebreak": bool(rc["tiebreak"]), "grace_days": int(rc["grace_days"])}
    write_info(files.resolve_info, info)
    events: dict[str, Any] | None = None
    if cfg["import_events"]:
        from forecast_env.envs.events.build import import_questions

        events = import_questions(files.accepted, ws.root, config=events_config, progress=False, source="generated")
    from forecast_env.questions.report import write_questions_report

    write_questions_report(ws.root)
    summary = {**info, "events": events, "live_calls": model.usage.live, "replayed_calls": model.usage.replayed,
               "seconds": round(time.perf_counter() - t0, 2), "output": str(files.accepted)}
    if progress:
        kept = (events or {}).get("kept")
        print(f"questions resolve: {len(todo)} verified -> {status.get('accepted', 0)} accepted, "
              f"{status.get('pending', 0)} pending, {status.get('dropped', 0)} dropped"
              + (f"; {kept} became events" if kept is not None else "") + f" in {summary['seconds']} s -> {files.accepted}")
    return summary
