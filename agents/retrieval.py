"""The retrieval agent: a non-LLM baseline that reads the news through the environment's tools.

Per forecast date (within `max_calls_per_date` calls, and never past the date's budget):
search the question; then either search each offered option with the question (named options), or
the question's named entities (Yes/No questions); open the most relevant unread articles, newest
first; write one notebook entry (the titles read, date_observed = the newest opened article's
day); forecast. One session per date (docs/design.md §5): what was searched and read on an earlier
date is forgotten; with memory on, the active notebook entries in the observation (the titles read
on earlier dates, dated by their `date_observed`) count as evidence too.

Reading (`score_options`), the way a hurried news reader would:
* Relevance. The question's named entities (capitalized spans such as "Tern-6", "Veritas Energy",
  "Coastal Protection Act", "Fentria") must appear in a document for it to count fully; a document
  naming only some of them counts in proportion (squared), one naming none is ignored. Options that
  are names count as entities of multi-option questions.
* Cues. Each sentence's cue balance is the sum of the polarity weights (-1..+1) of its words in a
  general-purpose English polarity lexicon (Pattern's, shipped with TextBlob: `lexicon.cue_lexicon`),
  never words from the sample world's generator (`docs/design.md §7`); a cue within three words
  after a negation ("not", "no longer", "without") flips; direct quotes (spokespeople talking up
  their side) are skipped.
* Recency. A document's weight halves every `half_life_days` before the forecast date.
* Yes/No: every sentence of the documents about the question counts, its balance centred on the
  background tone, the mean balance of the sentences of the unrelated documents the same searches
  returned (news reads positive on average; only a departure from that says something);
  z = sum of weighted centred balances over sqrt(1 + their weight), p(Yes) = logistic(z /
  yes_no_temperature). A general lexicon reads Yes/No outcome news weakly (benchmarks/log/2026-11-30-acceptance.md),
  so the default temperature is high: the reader stays near 50% unless the evidence is strong
  and one-sided.
* Named / multi options: a sentence's balance goes to the option it mentions first (its subject),
  plus a small mention bonus (none for cue-less lists of several options); softmax over options.
* Calibration: the result is shrunk toward the uniform forecast by `shrink`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Generator, Mapping
from datetime import date
from typing import Any

from forecast_env.agents.base import forecast_action, parse_observation, uniform_probabilities
from forecast_env.agents.lexicon import NEGATORS, cue_lexicon
from forecast_env.config import load_config
from forecast_env.retrieval.tokenize import tokenize
from forecast_env.timeparse import MONTH_NAMES, WEEKDAY_NAMES, parse_day

_SENT_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_QUOTE_START = ("\"", "\u201c", "'", "\u2018")


_CUE_WEIGHT = cue_lexicon()  # docs/design.md §7: a general-purpose lexicon, not the generator's words
_NEGATOR_RE = re.compile(
    r"\b(?:" + "|".join(re.escape(n) for n in sorted(NEGATORS, key=len, reverse=True) if n != "n't") + r")\b|n't\b",
    re.IGNORECASE)
_WORD_RE = re.compile(r"[\w'’-]+")


def _is_yes_no(options: list[str]) -> bool:
    return len(options) == 2 and {o.strip().lower() for o in options} == {"yes", "no"}


def _negated(sentence: str, start: int) -> bool:
    """A negation among the three words before position `start`."""
    words = _WORD_RE.findall(sentence[max(0, start - 60): start])[-3:]
    return bool(_NEGATOR_RE.search(" ".join(words)))


def cue_balance(sentence: str) -> float:
    """Sum of the polarity weights of one sentence's cue words (`lexicon.cue_lexicon`); a cue right after a
    negation flips."""
    score = 0.0
    for m in _WORD_RE.finditer(sentence):
        weight = _CUE_WEIGHT.get(m.group(0).lower())
        if weight is not None:
            score += -weight if _negated(sentence, m.start()) else weight
    return score


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT_RE.split(text or "") if s and s.strip()]


def _is_quote(sentence: str) -> bool:
    return sentence.startswith(_QUOTE_START)


def _option_pattern(option: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(option.strip()) + r"(?!\w)", re.IGNORECASE)


_CAP_RE = re.compile(r"[A-Z][\w'’-]*|\d[\w-]*")
_CONNECT = {"of", "the", "over", "from", "and", "in", "on", "for", "to", "at", "de", "la"}
_NOT_ENTITY = {"will", "who", "which", "what", "when", "where", "how", "is", "are", "does", "do", "the", "a",
               "an", "by", "yes", "no", "next", "winner", "champion", "best", "picture"} | set(MONTH_NAMES) | set(WEEKDAY_NAMES)


def question_entities(question: str) -> list[str]:
    """Capitalized spans of the question ("Veritas Energy", "Tern-6", "Night over the Meadow"),
    without question words, dates and years; lower-cased."""
    words = re.findall(r"[\w'’-]+", question or "")
    spans: list[list[str]] = []
    cur: list[str] = []
    pending: list[str] = []
    for i, w in enumerate(words):
        cap = bool(_CAP_RE.fullmatch(w)) and w.lower() not in _NOT_ENTITY
        if cap and w.isdigit() and (len(w) == 4 or (i > 0 and words[i - 1].lower() in MONTH_NAMES)):
            cap = False  # a year or a day of a month
        if cap:
            if cur and pending:
                cur += pending
            elif pending:
                pass
            pending = []
            cur.append(w)
        elif cur and w.lower() in _CONNECT and len(pending) < 2:
            pending.append(w)
        else:
            if cur:
                spans.append(cur)
            cur, pending = [], []
    if cur:
        spans.append(cur)
    out = []
    for s in spans:
        text = " ".join(s).lower()
        if text not in out:
            out.append(text)
    return out


def _contains(text: str, phrase: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(phrase) + r"(?!\w)", text) is not None


def relevance(text: str, entities: list[str]) -> float:
    """Share of `entities` named in `text` (lower-cased), squared; 1 when there are none."""
    if not entities:
        return 1.0
    share = sum(_contains(text, e) for e in entities) / len(entities)
    return share * share


def score_options(
    docs: Mapping[str, Mapping[str, Any]],
    question: str,
    options: list[str],
    as_of: date | None,
    *,
    shrink: float = 0.35,
    temperature: float = 1.0,
    half_life_days: float = 7.0,
    yes_no_temperature: float = 8.0,
) -> dict[str, float]:
    """Evidence-based probabilities over `options` from `docs` (doc_id -> {day, title, summary, body}).

    `temperature` scales named options' softmax, `yes_no_temperature` the Yes/No logistic."""
    if not options:
        return {}
    k = len(options)
    uniform = 1.0 / k

    def weight(doc: Mapping[str, Any]) -> float:
        day = parse_day(doc.get("day"))
        if as_of is None or day is None:
            return 1.0
        age = max((as_of - day).days, 0)
        return 0.5 ** (age / half_life_days) if half_life_days > 0 else 1.0

    def text_of(doc: Mapping[str, Any]) -> str:
        parts = [doc.get("title") or "", doc.get("summary") or "", doc.get("body") or ""]
        return "\n".join(str(p) for p in parts if p)

    entities = question_entities(question)
    if _is_yes_no(options):
        if not entities:
            entities = [t for t in dict.fromkeys(tokenize(question)) if t not in {"will", "yes", "no"}][:3]
        about: list[tuple[float, float]] = []  # (weight, balance) of each sentence about the question
        background: list[float] = []  # balances of the sentences of unrelated documents
        for doc in docs.values():
            text = text_of(doc)
            rel = relevance(text.lower(), entities)
            w = weight(doc) * rel
            for sent in split_sentences(text):
                if _is_quote(sent):
                    continue
                if w > 0:
                    about.append((w, cue_balance(sent)))
                elif rel == 0:
                    background.append(cue_balance(sent))
        mass = sum(w for w, _ in about)
        if mass == 0:
            return uniform_probabilities(options)
        tone = sum(background) / len(background) if background else 0.0
        total = sum(w * (b - tone) for w, b in about)
        z = total / (yes_no_temperature * math.sqrt(mass + 1.0))
        p_yes = 1.0 / (1.0 + math.exp(-max(min(z, 30.0), -30.0)))
        p_yes = (1 - shrink) * p_yes + shrink * 0.5
        return {o: (p_yes if o.strip().lower() == "yes" else 1.0 - p_yes) for o in options}

    patterns = [_option_pattern(o) for o in options]
    scores = [0.0] * k
    mass = 0.0
    for doc in docs.values():
        text = text_of(doc)
        low = text.lower()
        w = weight(doc)
        if entities:  # documents about another event that shares a name count less
            w *= 0.5 + 0.5 * relevance(low, entities)
        for sent in split_sentences(text):
            if _is_quote(sent):
                continue
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


READ_MARK = "Read: "
LEAN_MARK = ". Evidence so far leans toward "


def notebook_docs(notebook: list[Any]) -> dict[str, dict[str, Any]]:
    """The active entries this agent wrote on earlier dates, as title-only evidence documents
    dated by `date_observed` (the lean it recorded is not reread: only what it read)."""
    docs: dict[str, dict[str, Any]] = {}
    for entry in notebook:
        if not isinstance(entry, Mapping) or entry.get("status", "active") != "active":
            continue
        claim = str(entry.get("claim") or "")
        if not claim.startswith(READ_MARK):
            continue
        titles = claim[len(READ_MARK):].split(LEAN_MARK, 1)[0]
        docs[f"notebook:{entry.get('entry_id')}"] = {"day": entry.get("date_observed"), "title": titles}
    return docs


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
        self.notes: dict[str, dict[str, Any]] = {}
        self.docs: dict[str, dict[str, Any]] = {}
        self.opened: set[str] = set()
        self._plan: Generator[dict, dict, None] | None = None
        self._plan_step: Any = None

    async def aact(self, observation: str, info: dict) -> dict:
        return self.act(observation, info)

    def act(self, observation: str, info: dict) -> dict:
        obs = parse_observation(observation, info)
        day = (obs.get("step"), obs.get("forecast_date"))
        if self._plan is not None and day == self._plan_step:
            try:
                return self._plan.send(obs)
            except StopIteration:
                pass
        self._plan_step = day
        # a fresh session: only the notebook carries over from earlier dates
        self.docs, self.opened = {}, set()
        self.notes = notebook_docs(obs.get("notebook") or [])
        self._plan = self._date_plan(obs)
        return next(self._plan)

    world_refresh = True  # in world mode every listed question is read about again every day

    def question_plan(self, view: dict[str, Any]) -> Generator[dict, dict, None]:
        """World mode: one question's plan on its own view (a fresh reading; its tagged notes count)."""
        self.docs, self.opened = {}, set()
        self.notes = notebook_docs(view.get("notebook") or [])
        return self._date_plan(view)

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
        as_of = parse_day(obs.get("forecast_date"))
        budget = obs.get("budget_left")
        limit = int(self.cfg["max_calls_per_date"])
        if isinstance(budget, int):
            limit = min(limit, budget)
        k = int(self.cfg["search_k"])
        n_open = int(self.cfg["open_articles"])
        calls = 0

        def left() -> int:
            return limit - calls

        entities = question_entities(question)
        yes_no = _is_yes_no(options)
        queries = [question] if question else []
        if yes_no:
            keys = " ".join(dict.fromkeys(entities + tokenize(question)))
            if keys and keys != question.lower():
                queries.append(keys)
        else:
            queries += [f"{question} {o}".strip() for o in options[: int(self.cfg["option_searches"])]]
        # reserve: the forecast, one notebook entry, and at least min(n_open, 2) opens
        reserve = 2 + min(n_open, 2)
        for q in queries:
            if left() <= reserve:
                break
            calls += 1
            obs = yield {"tool": "search", "args": {"query": q[:500], "k": k, "mode": "hybrid"}}
            self._absorb(obs)

        # open the most relevant unread articles, newest first
        option_names = [o.lower() for o in options]

        def rel(doc_id: str) -> float:
            d = self.docs[doc_id]
            text = f"{d.get('title') or ''}\n{d.get('summary') or ''}".lower()
            if yes_no:
                return relevance(text, entities)
            named = any(_contains(text, n) for n in option_names)
            return float(named) + 0.5 * relevance(text, entities) if entities else float(named)

        candidates = [d for d in self.docs if d not in self.opened and parse_day(self.docs[d].get("day")) is not None]
        candidates.sort(key=lambda d: (rel(d) > 0, rel(d), parse_day(self.docs[d]["day"]),
                                       -self.docs[d].get("best_rank", 10**9)), reverse=True)
        new_reads: list[str] = []
        for doc_id in candidates:
            if len(new_reads) >= n_open or left() <= 2:
                break
            calls += 1
            obs = yield {"tool": "open_article", "args": {"doc_id": doc_id}}
            self._absorb(obs)
            if doc_id in self.opened:
                new_reads.append(doc_id)

        probs = score_options({**self.notes, **self.docs}, question, options, as_of, shrink=float(self.cfg["shrink"]),
                              temperature=float(self.cfg["temperature"]),
                              half_life_days=float(self.cfg["half_life_days"]),
                              yes_no_temperature=float(self.cfg["yes_no_temperature"]))
        if new_reads and left() >= 2:
            days = [parse_day(self.docs[d].get("day")) for d in new_reads]
            newest = max(d for d in days if d is not None)
            titles = "; ".join(str(self.docs[d].get("title") or d) for d in new_reads)
            lean = max(probs, key=lambda o: probs[o]) if probs else ""
            claim = f"{READ_MARK}{titles}{LEAN_MARK}{lean!r} ({probs.get(lean, 0):.2f})."
            calls += 1
            obs = yield {"tool": "notebook_add",
                         "args": {"claim": claim[:1000], "date_observed": newest.isoformat(), "doc_ids": new_reads}}
        yield forecast_action(probs)
