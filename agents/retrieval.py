"""The retrieval agent: a non-LLM baseline that reads the news through the environment's tools.

Per forecast date (within `max_calls_per_date` calls, and never past the date's budget):
search the question; search question + option for each offered option (Yes/No questions: the
question's key terms instead); open the newest relevant articles not yet read; write one notebook
entry (date_observed = the newest opened article's day); forecast.

Scoring reads every sentence of the evidence gathered so far in the episode (hit titles and
summaries, opened bodies), weighted by recency (half-life in days), and counts general news cue
words: positive ("expected to", "leads", "favored", "ahead", "secured", "backing"...) minus
negative ("unlikely", "trails", "doubts", "rejected", "injury", "delayed"...); a cue preceded by a
negation ("not", "no longer") flips. Multi-option / named-option events: a sentence's cue balance
(plus a small mention bonus, except in cue-less lists of several options) goes to the option
mentioned first in it (the sentence's subject);
softmax over options. Yes/No events: the cue balance of sentences in documents about the
question's subject; logistic. Both are shrunk toward the uniform forecast.
"""

from __future__ import annotations

import math
import re
from collections.abc import Generator, Mapping
from datetime import date
from typing import Any

from forecast_env.agents.base import forecast_action, parse_observation, uniform_probabilities

from forecast_env.config import load_config
from forecast_env.retrieval.tokenize import tokenize

POSITIVE = (
    "expected to", "expects to", "likely", "favored", "favoured", "favorite", "favourite", "frontrunner",
    "front-runner", "leads", "leading", "lead", "ahead", "momentum", "surge", "surged", "gained", "gains",
    "rose", "rising", "rises", "boost", "backing", "backed", "endorsed", "endorsement", "support",
    "supported", "secured", "confident", "approved", "advanced", "passed", "on track", "agreement",
    "agreed", "cleared", "clearing", "win", "won", "wins", "winning", "victory", "unbeaten", "tipped",
    "strong", "stronger", "record", "beat", "outpaced", "dominant", "shortened", "optimistic",
    "progress", "breakthrough", "on schedule", "green light", "poised", "set to", "boosted", "improved",
)
NEGATIVE = (
    "unlikely", "trails", "trailing", "trail", "behind", "doubts", "doubt", "falls behind", "fell",
    "falling", "slipped", "slump", "lost ground", "losing", "rejected", "reject", "oppose", "opposed",
    "block", "blocked", "delayed", "delay", "postponed", "threatened", "threat", "struggled",
    "struggling", "injury", "injured", "without", "suspension", "suspended", "disrupted", "setback",
    "problems", "concerns", "warned", "warning", "criticism", "unpopular", "scandal", "withdrew",
    "collapse", "stalled", "failed", "fails", "weak", "weaker", "crisis", "dispute", "lengthened",
    "pessimistic", "cut", "downgraded", "skeptical", "sceptical", "dropped", "stumbled", "hurdles",
)
NEGATORS = ("not", "no", "never", "no longer", "hardly", "unlikely to", "n't", "nor")

_SENT_RE = re.compile(r"(?<=[.!?])\s+|\n+")


def _phrase_re(phrases: tuple[str, ...]) -> re.Pattern[str]:
    alts = sorted((re.escape(p) for p in phrases), key=len, reverse=True)
    return re.compile(r"\b(?:" + "|".join(alts) + r")\b", re.IGNORECASE)


_POS_RE = _phrase_re(POSITIVE)
_NEG_RE = _phrase_re(NEGATIVE)
_NEGATOR_RE = re.compile(r"\b(?:not|no|never|no longer|hardly|nor)\b|n't\b", re.IGNORECASE)


def _is_yes_no(options: list[str]) -> bool:
    return len(options) == 2 and {o.strip().lower() for o in options} == {"yes", "no"}


def _as_date(value: Any) -> date | None:
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value)[:10])
    except (TypeError, ValueError):
        return None


def cue_balance(sentence: str) -> float:
    """Positive minus negative cue count of one sentence; a cue after a nearby negation flips."""
    score = 0.0
    for pattern, sign in ((_POS_RE, 1.0), (_NEG_RE, -1.0)):
        for m in pattern.finditer(sentence):
            before = sentence[max(0, m.start() - 25): m.start()]
            score += -sign if _NEGATOR_RE.search(before) else sign
    return score


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT_RE.split(text or "") if s and s.strip()]


def _option_pattern(option: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(option.strip()) + r"(?!\w)", re.IGNORECASE)


def score_options(
    docs: Mapping[str, Mapping[str, Any]],
    question: str,
    options: list[str],
    as_of: date | None,
    *,
    shrink: float = 0.35,
    temperature: float = 1.0,
    half_life_days: float = 7.0,
) -> dict[str, float]:
    """Evidence-based probabilities over `options` from `docs` (doc_id -> {day, title, summary, body})."""
    if not options:
        return {}
    k = len(options)
    uniform = 1.0 / k

    def weight(doc: Mapping[str, Any]) -> float:
        day = _as_date(doc.get("day"))
        if as_of is None or day is None:
            return 1.0
        age = max((as_of - day).days, 0)
        return 0.5 ** (age / half_life_days) if half_life_days > 0 else 1.0

    def text_of(doc: Mapping[str, Any]) -> str:
        parts = [doc.get("title") or "", doc.get("summary") or "", doc.get("body") or ""]
        return "\n".join(str(p) for p in parts if p)

    if _is_yes_no(options):
        keys = set(tokenize(question)) - {"will", "yes", "no"}
        total, mass = 0.0, 0.0
        for doc in docs.values():
            head = set(tokenize(f"{doc.get('title') or ''} {doc.get('summary') or ''}"))
            need = min(2, len(keys))
            if len(keys & head) < need:
                continue  # not about the question's subject
            w = weight(doc)
            for sent in split_sentences(text_of(doc)):
                b = cue_balance(sent)
                total += w * b
                mass += w
        if mass == 0:
            return uniform_probabilities(options)
        z = total / (temperature * math.sqrt(mass + 1.0))
        p_yes = 1.0 / (1.0 + math.exp(-max(min(z, 30.0), -30.0)))
        p_yes = (1 - shrink) * p_yes + shrink * 0.5
        return {o: (p_yes if o.strip().lower() == "yes" else 1.0 - p_yes) for o in options}

    patterns = [_option_pattern(o) for o in options]
    scores = [0.0] * k
    mass = 0.0
    for doc in docs.values():
        w = weight(doc)
        for sent in split_sentences(text_of(doc)):
            first, first_pos, mentioned = None, None, 0
            for i, pat in enumerate(patterns):
                m = pat.search(sent)
                if m:
                    mentioned += 1
                    if first_pos is None or m.start() < first_pos:
                        first, first_pos = i, m.start()
            if first is None:
                continue
            balance = cue_balance(sent)
            if mentioned > 1 and balance == 0:
                continue  # a plain list of contenders says nothing about any of them
            scores[first] += w * (0.5 + balance)
            mass += w
    if mass == 0:
        return uniform_probabilities(options)
    scale = temperature * math.sqrt(mass / k + 1.0)
    logits = [s / scale for s in scores]
    top = max(logits)
    exps = [math.exp(v - top) for v in logits]
    z = sum(exps)
    return {o: (1 - shrink) * e / z + shrink * uniform for o, e in zip(options, exps)}


class RetrievalAgent:
    """Searches, reads and counts cue words; see the module docstring."""

    name = "retrieval"

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        cfg = dict(load_config("benchmark")["retrieval"])
        cfg.update(config or {})
        cfg.update(overrides)
        self.cfg = cfg
        self.reset()

    def reset(self, *, seed: int | None = None) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self.opened: set[str] = set()
        self._plan: Generator[dict, dict, None] | None = None
        self._plan_step: Any = None

    async def aact(self, observation: str, info: dict) -> dict:
        return self.act(observation, info)

    def act(self, observation: str, info: dict) -> dict:
        obs = parse_observation(observation, info)
        if self._plan is not None and obs.get("step") == self._plan_step:
            try:
                return self._plan.send(obs)
            except StopIteration:
                pass
        self._plan_step = obs.get("step")
        self._plan = self._date_plan(obs)
        return next(self._plan)

    # -- per-date plan -----------------------------------------------------------------------

    def _absorb(self, obs: Mapping[str, Any]) -> None:
        result = obs.get("tool_result")
        if not isinstance(result, Mapping) or obs.get("error"):
            return
        for hit in result.get("hits") or []:
            if isinstance(hit, Mapping) and hit.get("doc_id"):
                doc = self.docs.setdefault(str(hit["doc_id"]), {})
                for key in ("day", "title", "summary", "url"):
                    doc.setdefault(key, hit.get(key))
                doc["best_rank"] = min(doc.get("best_rank", 10**9), int(hit.get("rank") or 10**9))
        art = result.get("article")
        if art is None and "body" in result:
            art = result  # open_article may return the article itself
        if isinstance(art, Mapping) and art.get("doc_id"):
            doc = self.docs.setdefault(str(art["doc_id"]), {})
            doc.update({k: art.get(k) for k in ("day", "title", "summary", "url", "body")})
            self.opened.add(str(art["doc_id"]))

    def _date_plan(self, obs: dict) -> Generator[dict, dict, None]:
        options = [str(o) for o in obs.get("options") or []]
        question = str(obs.get("question") or "")
        as_of = _as_date(obs.get("forecast_date"))
        budget = obs.get("budget_left")
        limit = int(self.cfg["max_calls_per_date"])
        if isinstance(budget, int):
            limit = min(limit, budget)
        k = int(self.cfg["search_k"])
        n_open = int(self.cfg["open_articles"])
        calls = 0

        def left() -> int:
            return limit - calls

        # reserve: the forecast, one notebook entry, the opens
        queries = [question] if question else []
        if _is_yes_no(options):
            keys = " ".join(dict.fromkeys(tokenize(question)))
            if keys and keys != question.lower():
                queries.append(keys)
        else:
            queries += [f"{question} {o}".strip() for o in options[: int(self.cfg["option_searches"])]]
        for q in queries:
            if left() <= 2 + n_open:
                break
            calls += 1
            obs = yield {"tool": "search", "args": {"query": q[:500], "k": k, "mode": "hybrid"}}
            self._absorb(obs)

        # open the newest well-ranked articles not read yet
        candidates = [d for d in self.docs if d not in self.opened and _as_date(self.docs[d].get("day")) is not None]
        candidates.sort(key=lambda d: (_as_date(self.docs[d]["day"]), -self.docs[d].get("best_rank", 10**9)),
                        reverse=True)
        new_reads: list[str] = []
        for doc_id in candidates[:n_open]:
            if left() <= 2:
                break
            calls += 1
            obs = yield {"tool": "open_article", "args": {"doc_id": doc_id}}
            self._absorb(obs)
            if doc_id in self.opened:
                new_reads.append(doc_id)

        probs = score_options(self.docs, question, options, as_of, shrink=float(self.cfg["shrink"]),
                              temperature=float(self.cfg["temperature"]),
                              half_life_days=float(self.cfg["half_life_days"]))
        if new_reads and left() >= 2:
            days = [_as_date(self.docs[d].get("day")) for d in new_reads]
            newest = max(d for d in days if d is not None)
            titles = "; ".join(str(self.docs[d].get("title") or d) for d in new_reads)
            lean = max(probs, key=probs.get) if probs else ""
            claim = f"Read: {titles}. Evidence so far leans toward {lean!r} ({probs.get(lean, 0):.2f})."
            calls += 1
            obs = yield {"tool": "notebook_add",
                         "args": {"claim": claim[:1000], "date_observed": newest.isoformat(), "doc_ids": new_reads}}
        yield forecast_action(probs)
