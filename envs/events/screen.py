"""Corpus-side screen (docs/design.md §4): evidence sufficiency and leakage at tau* = the last eligible day.

1. Decompose the event into 4-7 predictive and 4-7 background queries (never searching for the
   outcome): `decompose_offline` (from the question, option names and key terms) or
   `LLMDecomposer` (prompt `envs/events/prompts/decompose.md`, JSON answer).
2. Build the evidence set `searcher.evidence_set(queries, corpus_start, tau*)` (per query dense
   top-10 + BM25 top-10, RRF, 15 unique documents) and open each article as of tau*.
3. Judge it: `Judge.judge(event_view, evidence) -> Verdict(verdict, leak, reasons)`. The event view
   holds ONLY question, description (as of tau*), options and tau*: never the label, prices or
   the market trajectory. `OfflineJudge` (default, no model) uses retrieval coverage for
   sufficiency and option names next to resolution language / dates after tau* for leakage;
   `LLMJudge` asks any OpenAI-compatible chat-completions endpoint (prompt `envs/events/prompts/judge.md`).

Keep iff the verdict is Sufficient and there is no leakage. An endpoint that fails after retries
gives the verdict "error" (the event is excluded with reason `judge_error`).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from forecast_env.chat import ChatClient as HttpChatClient
from forecast_env.envs.events.descriptions import find_date
from forecast_env.errors import EndpointError

if TYPE_CHECKING:
    from forecast_env.retrieval import Searcher

VERDICTS = ("Sufficient", "Partial", "Insufficient")
#: The only keys a judge ever receives about an event.
EVENT_VIEW_KEYS = ("question", "description", "options", "tau_star")

_STOP = frozenset(
    ["a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "by", "for", "with", "from", "as", "is", "are", "be", "been", "was", "were", "will", "would", "shall", "should", "can", "could", "may", "might", "must", "do", "does", "did", "this", "that", "these", "those", "it", "its", "than", "then", "there", "their", "they", "them", "he", "she", "his", "her", "who", "whom", "which", "what", "when", "where", "why", "how", "any", "all", "each", "other", "another", "more", "most", "less", "least", "into", "over", "under", "before", "after", "between", "during", "until", "about", "above", "below", "up", "down", "out", "off", "again", "further", "once", "not", "no", "yes", "if", "so", "such", "only", "own", "same", "too", "very", "just", "also", "we", "you", "your", "our", "us", "i", "me", "my", "vs", "via", "per", "new", "next", "first", "last", "end", "ends", "ending", "happen", "happens", "occur", "occurs", "reach", "reaches", "hit", "hits", "get", "gets", "have", "has", "having", "one", "two", "three", "2020", "2021", "2022", "2023", "2024", "2025", "2026", "2027", "2028", "2029", "2030", "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "week", "month", "year", "day", "today", "tomorrow", "market", "markets", "question", "resolve", "resolves", "resolution", "resolved", "source", "sources", "according", "official", "officially", "announce", "announced"]
)
#: Outcome words a query must never contain (docs/design.md §4: never search for the outcome).
FORBIDDEN_QUERY_WORDS = frozenset(
    ["won", "win", "wins", "winner", "winners", "result", "results", "resolved", "resolves", "outcome", "outcomes", "defeated", "elected", "final", "victory", "victorious", "concedes", "conceded", "clinched", "announced", "declared"]
)
_GENERIC_OPTIONS = frozenset({"yes", "no", "other", "none", "over", "under", "up", "down"})
_RESOLUTION_RE = re.compile(
    r"\b(won|wins the|has won|was elected|were elected|elected as|defeated|defeats|resolved|final result|"
    r"final results|declared (?:the )?winner|declared victory|clinched|conceded defeat|secured victory|"
    r"was named|was confirmed as|was approved|were approved|was rejected|came out on top|prevailed|"
    r"took the title|claimed victory|won the)\b",
    re.IGNORECASE,
)
_PAST_RE = re.compile(
    r"\b(was|were|had|took place|happened|ended|concluded|was held|were held|announced|reported|"
    r"confirmed|finished|closed)\b",
    re.IGNORECASE,
)


@dataclass
class Verdict:
    """A judge's answer: verdict in VERDICTS (or "error"), a leakage flag, and the reasons."""

    verdict: str
    leak: bool
    reasons: str


class EventView(TypedDict):
    """The only information about an event a judge or decomposer receives (`EVENT_VIEW_KEYS`)."""

    question: str
    description: str
    options: list[str]
    tau_star: str  # ISO date


class Judge(Protocol):
    """Anything that judges an event view against its evidence set."""

    name: str

    def judge(self, event_view: EventView, evidence: list[dict]) -> Verdict: ...


#: Turns an event view into predictive and background queries (`decompose_offline`, `LLMDecomposer`).
Decomposer = Callable[["EventView"], "Decomposition"]


def make_event_view(question: str, description: str, options: Sequence[str], tau_star: date) -> EventView:
    """The only information about an event a judge or decomposer receives."""
    return {"question": question, "description": description, "options": list(options),
            "tau_star": tau_star.isoformat()}


def load_prompt(name: str) -> str:
    """The text of `envs/events/prompts/<name>.md`."""
    return resources.files("forecast_env.envs.events.prompts").joinpath(f"{name}.md").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Query decomposition
# ---------------------------------------------------------------------------------------------


@dataclass
class Decomposition:
    """Predictive and background queries of one event."""

    predictive: list[str]
    background: list[str]

    @property
    def queries(self) -> list[str]:
        return self.predictive + self.background


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z][A-Za-z0-9'&.-]*[A-Za-z0-9]|[A-Za-z]", text or "")


def key_terms(text: str, limit: int = 12) -> list[str]:
    """Content words of `text` in order of appearance (no stop words, no outcome words), deduplicated."""
    out: list[str] = []
    seen: set[str] = set()
    for w in _words(text):
        low = w.lower().strip(".'")
        if len(low) < 3 or low in _STOP or low in FORBIDDEN_QUERY_WORDS or low in seen:
            continue
        seen.add(low)
        out.append(w.strip(".'"))
        if len(out) >= limit:
            break
    return out


def _clean_query(q: str) -> str:
    words = [w for w in q.split() if w.lower().strip("?.,:;!'\"()") not in FORBIDDEN_QUERY_WORDS]
    return re.sub(r"\s+", " ", " ".join(words)).strip(" ?.,:;")


def named_options(options: Sequence[str]) -> list[str]:
    """Options that are names (not Yes/No/Other)."""
    return [o for o in options if o.strip().lower() not in _GENERIC_OPTIONS]


def _fit(queries: list[str], extra: list[str], lo: int, hi: int) -> list[str]:
    out: list[str] = []
    for q in queries + extra:
        q = _clean_query(q)
        if q and q.lower() not in {x.lower() for x in out}:
            out.append(q)
        if len(out) >= hi:
            break
    i = 0
    while len(out) < lo:  # tiny questions: pad with numbered variants so counts stay in range
        out.append(f"{out[0] if out else 'news'} {['outlook', 'analysis', 'update', 'context'][i % 4]}")
        i += 1
    return out[:hi]


def decompose_offline(view: EventView, min_queries: int = 4, max_queries: int = 7) -> Decomposition:
    """Deterministic queries from the question, the option names and the description's key terms."""
    question = str(view["question"])
    terms = key_terms(question)
    topic = " ".join(terms[:4]) or question
    desc_terms = [t for t in key_terms(str(view.get("description") or ""), limit=20) if t not in terms]
    opts = named_options(view["options"])
    predictive = [re.sub(r"^(will|is|are|does|do|did|has|have|can|could|who|which|what)\s+", "", question.strip(" ?"), flags=re.IGNORECASE)]
    predictive += [f"{o} {' '.join(terms[:3])}" for o in opts[: max_queries - 3]]
    predictive += [f"{topic} latest news", f"{topic} expectations", f"{topic} polls forecast odds"]
    background = [f"{topic} background", f"{topic} history", f"{' '.join(terms[:2])} previous"]
    background += [f"{' '.join(terms[:2])} {t}" for t in desc_terms[:3]]
    background += [f"{o} profile" for o in opts[:2]]
    background += [f"{topic} analysis", f"{topic} context"]
    return Decomposition(
        _fit(predictive, [], min_queries, max_queries),
        _fit(background, [], min_queries, max_queries),
    )


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible chat client
# ---------------------------------------------------------------------------------------------


@dataclass
class ChatClient:
    """Asks an OpenAI-compatible endpoint for one JSON answer (the core `forecast_env.chat` client
    does the HTTP and transient retries; an unreadable answer is asked again, up to `max_retries`)."""

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout_seconds: float = 60.0
    max_retries: int = 3
    backoff_seconds: float = 1.0
    calls: int = 0

    @classmethod
    def from_config(cls, llm: Mapping[str, Any]) -> ChatClient:
        return cls(base_url=str(llm["base_url"]), model=str(llm["model"]), api_key_env=str(llm["api_key_env"]),
                   temperature=float(llm["temperature"]), max_tokens=int(llm["max_tokens"]),
                   timeout_seconds=float(llm["timeout_seconds"]), max_retries=int(llm["max_retries"]),
                   backoff_seconds=float(llm.get("backoff_seconds", 1.0)))

    def __post_init__(self) -> None:
        self._http = HttpChatClient(self.base_url, api_key=os.environ.get(self.api_key_env),
                                    timeout_seconds=self.timeout_seconds, max_retries=self.max_retries,
                                    backoff_seconds=self.backoff_seconds)

    def complete_json(self, system: str, user: str) -> dict:
        """Send one conversation; return the first JSON object of the answer."""
        body = {"model": self.model, "temperature": self.temperature, "max_tokens": self.max_tokens,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        last = "no attempt"
        for attempt in range(self.max_retries + 1):
            if attempt and self.backoff_seconds > 0:
                time.sleep(self.backoff_seconds * 2 ** (attempt - 1))
            self.calls += 1
            result = self._http.complete(body)  # EndpointError after its own retries
            try:
                return parse_json_object(result.message.get("content"))
            except ValueError as exc:
                last = f"unreadable answer ({exc})"
        raise EndpointError(f"{self._http.url} (model {self.model}) gave no readable JSON answer in "
                            f"{self.max_retries + 1} attempt(s): {last}")


def parse_json_object(text: object) -> dict:
    """The first JSON object in an LLM answer (code fences and surrounding prose tolerated); anything
    but text (a missing `content`) is a ValueError like an unreadable answer."""
    if not isinstance(text, str):
        raise ValueError("answer is not text")
    t = re.sub(r"```(?:json)?", "", text)
    start = t.find("{")
    while start != -1:
        depth = 0
        in_str = esc = False
        for i in range(start, len(t)):
            c = t[i]
            if in_str:
                esc = (c == "\\") and not esc
                if c == '"' and not esc:
                    in_str = False
                continue
            if c == '"':
                in_str = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    try:
                        obj = json.loads(t[start : i + 1])
                    except json.JSONDecodeError:
                        break
                    if isinstance(obj, dict):
                        return obj
                    break
        start = t.find("{", start + 1)
    raise ValueError("no JSON object in the answer")


def _verdict_from(obj: Mapping[str, Any]) -> Verdict:
    raw = str(obj.get("verdict") or obj.get("sufficiency") or "").strip().lower()
    verdict = next((v for v in VERDICTS if v.lower() == raw), None)
    if verdict is None:
        raise ValueError(f"verdict {raw!r} is not one of {', '.join(VERDICTS)}")
    leak = obj.get("leak", obj.get("leakage", False))
    if isinstance(leak, str):
        leak = leak.strip().lower() in ("true", "yes", "1")
    reasons = obj.get("reasons", obj.get("reason", ""))
    if isinstance(reasons, list):
        reasons = "; ".join(map(str, reasons))
    return Verdict(verdict, bool(leak), str(reasons))


class LLMDecomposer:
    """Query decomposition by an LLM (prompt `decompose.md`), clipped to [min, max] queries each."""

    def __init__(self, client: ChatClient, min_queries: int = 4, max_queries: int = 7) -> None:
        self.client, self.min_queries, self.max_queries = client, min_queries, max_queries

    def __call__(self, view: EventView) -> Decomposition:
        obj = self.client.complete_json(load_prompt("decompose"), json.dumps(dict(view), ensure_ascii=False))
        fallback = decompose_offline(view, self.min_queries, self.max_queries)
        pred = [str(q) for q in obj.get("predictive", []) if isinstance(q, str)]
        back = [str(q) for q in obj.get("background", []) if isinstance(q, str)]
        return Decomposition(
            _fit(pred, fallback.predictive, self.min_queries, self.max_queries),
            _fit(back, fallback.background, self.min_queries, self.max_queries),
        )


class LLMJudge:
    """Sufficiency and leakage judged by an OpenAI-compatible chat endpoint (prompt `judge.md`)."""

    def __init__(self, client: ChatClient, max_doc_chars: int = 2000) -> None:
        self.client = client
        self.max_doc_chars = max_doc_chars
        self.name = f"llm:{client.model}"

    def judge(self, event_view: EventView, evidence: list[dict]) -> Verdict:
        docs = [{"doc_id": e.get("doc_id"), "day": str(e.get("day")), "title": e.get("title"),
                 "text": (e.get("text") or e.get("summary") or "")[: self.max_doc_chars]} for e in evidence]
        user = json.dumps({"event": dict(event_view), "evidence": docs}, ensure_ascii=False)
        last: Exception | None = None
        for _ in range(self.client.max_retries + 1):
            obj = self.client.complete_json(load_prompt("judge"), user)  # EndpointError propagates
            try:
                return _verdict_from(obj)
            except ValueError as exc:
                last = exc
        raise EndpointError(f"{self.client.base_url}: no valid verdict after retries ({last})")


# ---------------------------------------------------------------------------------------------
# Offline judge
# ---------------------------------------------------------------------------------------------

_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


def _mentions(text_low: str, phrase: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(phrase.lower()) + r"(?!\w)", text_low) is not None


def relevance(text: str, terms: Sequence[str], opts: Sequence[str], min_term_hits: int) -> tuple[list[str], bool]:
    """The offline judge's relevance rule (docs/design.md §4 screen): the named options `opts` that `text`
    mentions, and whether `text` is about the event (it names an option, or at least `min_term_hits` of the
    question's key `terms`, lower-cased; whole words, case-insensitive)."""
    low = text.lower()
    named = [o for o in opts if _mentions(low, o)]
    hits = sum(1 for t in terms if _mentions(low, t))
    need = min(min_term_hits, len(terms)) if terms else 1
    return named, bool(named) or hits >= need


@dataclass
class OfflineJudge:
    """A judge with no model: coverage thresholds for sufficiency, resolution language for leakage.

    A document is relevant when it mentions a named option or at least `min_term_hits` of the
    question's key terms (and its retrieval score exceeds `min_score`). Sufficient: at least
    `min_relevant_docs` relevant documents and at least `min_option_coverage` of the named options
    mentioned in them; Partial: at least one relevant document; else Insufficient. Leakage: a
    sentence with a named option (or >= 2 key terms of a yes/no question) next to resolution language
    ("won", "was elected", "defeated", "resolved", "final result", ...), or a date after tau*
    written as past ("was held on April 12, 2026").
    """

    min_relevant_docs: int = 5
    min_option_coverage: float = 0.5
    min_score: float = 0.0
    min_term_hits: int = 2
    name: str = "offline"

    @classmethod
    def from_config(cls, off: Mapping[str, Any]) -> OfflineJudge:
        return cls(min_relevant_docs=int(off["min_relevant_docs"]),
                   min_option_coverage=float(off["min_option_coverage"]),
                   min_score=float(off["min_score"]), min_term_hits=int(off.get("min_term_hits", 2)))

    def judge(self, event_view: EventView, evidence: list[dict]) -> Verdict:
        tau = date.fromisoformat(str(event_view["tau_star"]))
        terms = [t.lower() for t in key_terms(str(event_view["question"]))]
        opts = named_options(event_view["options"])
        option_words = {w.lower() for o in opts for w in _words(o)}
        distinct = [t for t in terms if t not in option_words][:3]  # what names the event itself
        relevant = 0
        covered: set[str] = set()
        leaks: list[str] = []
        for e in evidence:
            text = "\n".join(str(e.get(k) or "") for k in ("title", "summary", "text"))  # headlines: own sentence
            named, about = relevance(text, terms, opts, self.min_term_hits)
            score = e.get("score")
            if about and (score is None or float(score) > self.min_score):
                relevant += 1
                covered.update(named)
            leak = self._leak(text, opts, distinct, tau)
            if leak:
                leaks.append(f"{e.get('doc_id')}: {leak}")
        coverage = len(covered) / len(opts) if opts else 1.0
        if relevant >= self.min_relevant_docs and coverage >= self.min_option_coverage:
            verdict = "Sufficient"
        elif relevant >= 1:
            verdict = "Partial"
        else:
            verdict = "Insufficient"
        reasons = (f"{relevant}/{len(evidence)} relevant docs (need {self.min_relevant_docs}); "
                   f"option coverage {coverage:.2f} (need {self.min_option_coverage})")
        if leaks:
            reasons += "; leakage: " + " | ".join(leaks[:3])
        return Verdict(verdict, bool(leaks), reasons)

    def _leak(self, text: str, opts: list[str], terms: list[str], tau: date) -> str | None:

        for sent in _SENT_SPLIT.split(text):
            if not sent.strip():
                continue
            low = sent.lower()
            if _RESOLUTION_RE.search(sent):
                # The sentence must be about this event (its distinctive terms), not a precursor
                # ("won the guild award", "won 9 of their last ten games").
                named = [o for o in opts if _mentions(low, o)]
                about = sum(1 for t in terms if _mentions(low, t))
                if (named and about >= min(2, len(terms))) or (not opts and about >= min(3, len(terms))):
                    return f"resolution language: {sent.strip()[:160]!r}"
            found = find_date(sent)
            if found is not None and found[0] > tau and _PAST_RE.search(sent):
                return f"date {found[0]} after tau* written as past: {sent.strip()[:160]!r}"
        return None


# ---------------------------------------------------------------------------------------------
# Screening one event
# ---------------------------------------------------------------------------------------------


@dataclass
class ScreenResult:
    """One row of the SCREEN table."""

    event_id: str
    judge: str
    tau_star: date
    queries: list[str]
    evidence_doc_ids: list[str]
    verdict: str
    leak: bool
    reasons: str
    exclusion: tuple[str, str] | None = field(default=None)  # (reason, detail) when not kept

    def row(self) -> dict[str, Any]:
        return {"event_id": self.event_id, "judge": self.judge, "tau_star": self.tau_star,
                "queries": self.queries, "evidence_doc_ids": self.evidence_doc_ids,
                "verdict": self.verdict, "leak": self.leak, "reasons": self.reasons}


def collect_evidence(searcher: Searcher, queries: list[str], start: date, end: date, per_query: int,
                     size: int) -> list[dict]:
    """The evidence set of an event, each document opened as of `end` (title, summary, body)."""
    hits = searcher.evidence_set(queries, start, end, per_query=per_query, size=size)
    out = []
    for h in hits:
        art = searcher.open_article(h.doc_id, end)
        out.append({"doc_id": h.doc_id, "day": h.day, "title": h.title, "url": h.url, "summary": h.summary,
                    "text": getattr(art, "body", "") or "", "score": float(h.score), "rank": int(h.rank)})
    return out


def screen_event(
    event_id: str,
    view: EventView,
    searcher: Searcher | None,
    judge: Judge,
    decompose: Decomposer,
    corpus_start: date,
    per_query: int = 10,
    size: int = 15,
) -> ScreenResult:
    """Decompose, retrieve and judge one event (the view is all the judge sees)."""
    assert tuple(view) == EVENT_VIEW_KEYS, f"event view must hold only {EVENT_VIEW_KEYS}"
    tau = date.fromisoformat(view["tau_star"])
    try:
        dec = decompose(view)
    except EndpointError as exc:
        return ScreenResult(event_id, judge.name, tau, [], [], "error", False, str(exc), ("judge_error", str(exc)[:200]))
    queries = dec.queries
    evidence = (collect_evidence(searcher, queries, corpus_start, tau, per_query, size)
                if searcher is not None and tau >= corpus_start else [])
    doc_ids = [e["doc_id"] for e in evidence]
    try:
        v = judge.judge(view, evidence)
    except EndpointError as exc:
        return ScreenResult(event_id, judge.name, tau, queries, doc_ids, "error", False, str(exc),
                            ("judge_error", str(exc)[:200]))
    exclusion = None
    if v.leak:
        exclusion = ("leakage", v.reasons[:300])
    elif v.verdict != "Sufficient":
        exclusion = (v.verdict.lower(), v.reasons[:300])
    return ScreenResult(event_id, judge.name, tau, queries, doc_ids, v.verdict, v.leak, v.reasons, exclusion)


def make_judge(cfg: Mapping[str, Any], kind: str | None = None) -> tuple[Judge, Decomposer]:
    """(judge, decomposer) for `screen.judge` (offline | llm) of an events config."""
    sc = cfg["screen"]
    kind = kind or sc["judge"]
    lo, hi = int(sc["min_queries"]), int(sc["max_queries"])
    if kind == "llm":
        client = ChatClient.from_config(sc["llm"])
        return LLMJudge(client, int(sc["llm"].get("max_doc_chars", 2000))), LLMDecomposer(client, lo, hi)
    if kind != "offline":
        from forecast_env.errors import ConfigError

        raise ConfigError(f"events.screen.judge = {kind!r}; choose offline or llm")
    return OfflineJudge.from_config(sc["offline"]), (lambda view: decompose_offline(view, lo, hi))
