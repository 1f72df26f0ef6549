"""A scripted question model for the pipeline's tests: it proposes questions about the truth's events from their
seed articles, rates them, and resolves them with quotes from the outcome reports, with planted faults.

It is test input for the code that checks the model (the schema, the quotes, the vote, the vetting), not a stand-in
for a model: tests/questions/test_real_model.py replays a real model's recorded answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from tests.support.chat_server import text


@dataclass
class WorldFacts:
    """What the script knows: each truth event, and the corpus's doc ids per event and kind."""

    events: dict[str, dict[str, Any]]
    event_of_doc: dict[str, str]
    reports: dict[str, list[dict[str, Any]]]  # event id -> outcome report rows (doc_id, day, title, body)
    news: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # event id -> news rows before close


def world_facts(root: Path) -> WorldFacts:
    truth = json.loads((root / "world" / "truth.json").read_text())
    arts = pl.read_parquet(sorted((root / "ws" / "corpus" / "articles").glob("*.parquet")),
                           columns=["doc_id", "url", "day", "title", "body"])
    meta = truth["articles"]
    event_of_doc, reports, news = {}, {}, {}
    for r in arts.sort(["day", "doc_id"]).iter_rows(named=True):
        a = meta.get(r["url"]) or {}
        eid = a.get("event_id")
        if not eid:
            continue
        event_of_doc[r["doc_id"]] = eid
        (reports if a.get("kind") == "outcome_report" else news).setdefault(eid, []).append(r)
    events = {k: v for k, v in truth["events"].items() if v["expect"] == "keep"}
    return WorldFacts(events, event_of_doc, reports, news)


def first_sentence(body: str) -> str:
    return re.split(r"(?<=[.!?])\s+", body.strip())[0]


def reply(obj: Any) -> dict:
    return text(json.dumps(obj))


def _prompt(body: dict) -> str:
    return "\n".join(str(m.get("content") or "") for m in body["messages"] if m["role"] == "user")


def question_for(ev: dict[str, Any]) -> str:
    if ev["options"] == ["Yes", "No"]:
        return ev["title"] if ev["title"].endswith("?") else f"Will {ev['title']} happen?"
    return f"Who will win: {ev['title']}?"


def scripted_model(facts: WorldFacts, *, wrong_resolver: int | None = None, fabricate: bool = False,
                   early_quote: bool = False) -> Callable[[dict], dict]:
    """A chat-completions handler: proposals from the seed's truth event, "great" verdicts, resolutions quoting the
    outcome reports (`wrong_resolver`: that resolver answers another option; `fabricate`: every quote is made up;
    `early_quote`: resolvers cite a news article from before D)."""

    def handle(body: dict) -> dict:
        prompt = _prompt(body)
        if body.get("tools"):
            return text("DONE")
        if prompt.startswith("You write forecasting questions from the news. Today is"):
            d = date.fromisoformat(re.search(r"Today is (\d{4}-\d{2}-\d{2})", prompt).group(1))
            seed = re.search(r"Seed article \(id (\w+)", prompt).group(1)
            eid = facts.event_of_doc.get(seed)
            ev = facts.events.get(eid or "")
            if ev is None:
                return reply({"questions": []})
            close = date.fromisoformat(ev["close_day"])
            if not d + timedelta(days=7) <= close <= d + timedelta(days=60):
                return reply({"questions": []})
            return reply({"questions": [{"question": question_for(ev), "options": ev["options"],
                                         "resolution_criteria": f"Settled by official results reported by {close}.",
                                         "resolution_date": close.isoformat(), "seed_article_ids": [seed],
                                         "category": ev["category"]}]})
        if prompt.startswith("You write forecasting questions from news that reports outcomes"):
            src = re.search(r"Article \(id (\w+)", prompt).group(1)
            eid = facts.event_of_doc.get(src)
            rows = [r for r in facts.reports.get(eid or "", []) if r["doc_id"] == src]
            if not rows:
                return reply({"questions": []})
            ev = facts.events[eid]
            return reply({"questions": [{"question": question_for(ev), "options": ev["options"], "answer": ev["label"],
                                         "answer_quote": first_sentence(rows[0]["body"]),
                                         "resolution_criteria": "Settled by official results.",
                                         "category": ev["category"]}]})
        if "Rate its QUALITY" in prompt or "Rate how UNAMBIGUOUS" in prompt:
            return reply({"rating": "great", "reason": "clear"})
        if "very likely report the fact" in prompt:
            return reply({"rating": "very certainly yes", "reason": "reported"})
        if "Give your forecast" in prompt:
            opts = [o.strip() for o in re.search(r"Options: (.*)", prompt).group(1).split(";")]
            return reply({"probabilities": {o: round(1 / len(opts), 4) for o in opts}})
        if prompt.startswith("You resolve a forecasting question"):
            q = re.search(r"Question: (.*)", prompt).group(1)
            d = date.fromisoformat(re.search(r"It was asked on (\d{4}-\d{2}-\d{2})", prompt).group(1))
            ev_id = next((k for k, v in facts.events.items() if question_for(v) == q), None)
            if ev_id is None or not facts.reports.get(ev_id):
                return reply({"answer": "unresolvable", "evidence": []})
            ev = facts.events[ev_id]
            seed = body.get("seed", 0)
            answer = ev["label"]
            if wrong_resolver is not None and seed == wrong_resolver:
                answer = next(o for o in ev["options"] if o != ev["label"])
            rep = facts.reports[ev_id][0]
            quote = first_sentence(rep["body"])
            doc = rep["doc_id"]
            if fabricate:
                quote = f"Officials confirmed that {answer} prevailed in a landslide"
            if early_quote:
                early = [r for r in facts.news.get(ev_id, []) if r["day"] <= d]
                if early:
                    doc, quote = early[0]["doc_id"], first_sentence(early[0]["body"])
            return reply({"answer": answer, "evidence": [{"doc_id": doc, "quote": quote}]})
        return text("I cannot help with that.")

    return handle
