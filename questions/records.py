"""The records of the question pipeline and the JSON schemas the model's answers must follow.

A `Draft` is a question at any point of the pipeline (its `status` and `drop` say where it stopped);
a `Vote` is one resolver's answer with its evidence; a `Drop` is why something left the funnel.
Everything serializes to plain JSON (`to_dict` / `from_dict`) with sorted keys, so a rerun writes the
same bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import date
from datetime import date as Day  # the Draft has a field named `date`
from typing import Any

#: what a question can be: answered after D (the seed's design) or written back from a report (OpenForesight's)
ROUTES = ("prospective", "retrospective")
UNRESOLVABLE = "unresolvable"
#: the verifiers' rating scales (the seed's: quality and ambiguity "great", resolvability "very certainly yes")
SCALES: dict[str, tuple[str, ...]] = {
    "quality": ("poor", "fair", "good", "great"),
    "ambiguity": ("poor", "fair", "good", "great"),
    "resolvability": ("very certainly no", "probably no", "unsure", "probably yes", "very certainly yes"),
}


@dataclass(frozen=True)
class Drop:
    """Why an item left the funnel: the stage, a reason code and a human-readable detail."""

    stage: str
    reason: str
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class Evidence:
    """One cited article and the verbatim quote from it (`problem`: why the code rejected it, else None)."""

    doc_id: str
    quote: str
    day: date | None = None
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"doc_id": self.doc_id, "quote": self.quote, "day": self.day.isoformat() if self.day else None,
                "problem": self.problem}


@dataclass
class Vote:
    """One resolver's answer: an option, "unresolvable", or None when its reply was unreadable."""

    resolver: str
    answer: str | None
    evidence: list[Evidence] = field(default_factory=list)
    problem: str | None = None  # why the vote does not count (a reason code), else None

    @property
    def valid(self) -> bool:
        return self.problem is None

    def to_dict(self) -> dict[str, Any]:
        return {"resolver": self.resolver, "answer": self.answer, "problem": self.problem,
                "evidence": [e.to_dict() for e in self.evidence]}


@dataclass
class Draft:
    """One generated question."""

    qid: str
    route: str
    date: Day  # D: the day it is asked
    resolution_date: Day  # R
    question: str
    options: list[str]
    criteria: str
    description: str = ""
    category: str | None = None
    seed_ids: list[str] = field(default_factory=list)
    answer: str | None = None  # retrospective: the answer its source article states
    answer_quote: str | None = None
    source_id: str | None = None  # retrospective: the article that reports the outcome
    verdicts: dict[str, Any] = field(default_factory=dict)  # verifier -> rating (triviality: probabilities)
    votes: list[Vote] = field(default_factory=list)
    resolved: str | None = None  # the vote's verdict
    known_day: Day | None = None  # the first visible report of the outcome (valid evidence, earliest day)
    status: str = "draft"  # draft | verified | pending | accepted | dropped
    drop: Drop | None = None

    @property
    def kind(self) -> str:
        return "binary" if [o.lower() for o in self.options] == ["yes", "no"] else "multi"

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k not in ("votes", "drop", "date", "resolution_date",
                                                                 "known_day")}
        d["date"] = self.date.isoformat()
        d["resolution_date"] = self.resolution_date.isoformat()
        d["known_day"] = self.known_day.isoformat() if self.known_day else None
        d["votes"] = [v.to_dict() for v in self.votes]
        d["drop"] = self.drop.to_dict() if self.drop else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Draft:
        votes = [Vote(v["resolver"], v.get("answer"), [
            Evidence(e["doc_id"], e["quote"], date.fromisoformat(e["day"]) if e.get("day") else None, e.get("problem"))
            for e in v.get("evidence") or []], v.get("problem")) for v in d.get("votes") or []]
        drop = Drop(**d["drop"]) if d.get("drop") else None
        return cls(qid=d["qid"], route=d["route"], date=date.fromisoformat(d["date"]),
                   resolution_date=date.fromisoformat(d["resolution_date"]), question=d["question"],
                   options=list(d["options"]), criteria=d.get("criteria") or "", description=d.get("description") or "",
                   category=d.get("category"), seed_ids=list(d.get("seed_ids") or []), answer=d.get("answer"),
                   answer_quote=d.get("answer_quote"), source_id=d.get("source_id"),
                   verdicts=dict(d.get("verdicts") or {}), votes=votes, resolved=d.get("resolved"),
                   known_day=date.fromisoformat(d["known_day"]) if d.get("known_day") else None,
                   status=d.get("status") or "draft", drop=drop)


# ---------------------------------------------------------------------------------------------
# JSON schemas of the model's answers (sent as response_format where the endpoint takes one)
# ---------------------------------------------------------------------------------------------

_STR = {"type": "string"}


def draft_schema(max_questions: int) -> dict[str, Any]:
    """The prospective drafts: 0..max_questions questions about outcomes after D."""
    item = {"type": "object", "additionalProperties": False,
            "required": ["question", "options", "resolution_criteria", "resolution_date", "seed_article_ids"],
            "properties": {"question": _STR, "options": {"type": "array", "items": _STR, "minItems": 2, "maxItems": 8},
                           "resolution_criteria": _STR, "description": _STR, "category": _STR,
                           "resolution_date": {"type": "string", "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                           "seed_article_ids": {"type": "array", "items": _STR}}}
    return {"type": "object", "additionalProperties": False, "required": ["questions"],
            "properties": {"questions": {"type": "array", "items": item, "maxItems": max_questions}}}


def retro_schema() -> dict[str, Any]:
    """The retrospective route: at most one question whose answer the article states (or none)."""
    item = {"type": "object", "additionalProperties": False,
            "required": ["question", "options", "answer", "answer_quote", "resolution_criteria"],
            "properties": {"question": _STR, "options": {"type": "array", "items": _STR, "minItems": 2, "maxItems": 8},
                           "answer": _STR, "answer_quote": _STR, "resolution_criteria": _STR, "description": _STR,
                           "category": _STR}}
    return {"type": "object", "additionalProperties": False, "required": ["questions"],
            "properties": {"questions": {"type": "array", "items": item, "maxItems": 1}}}


def rating_schema(scale: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": ["rating", "reason"],
            "properties": {"rating": {"type": "string", "enum": list(scale)}, "reason": _STR}}


def forecast_schema(options: list[str]) -> dict[str, Any]:
    """The triviality verifier's forecast: a probability per option."""
    return {"type": "object", "additionalProperties": False, "required": ["probabilities"],
            "properties": {"probabilities": {"type": "object", "additionalProperties": False, "required": list(options),
                                             "properties": {o: {"type": "number", "minimum": 0, "maximum": 1}
                                                            for o in options}}}}


def resolution_schema(options: list[str]) -> dict[str, Any]:
    """A resolver's answer: an option or "unresolvable", with cited articles and verbatim quotes."""
    ev = {"type": "object", "additionalProperties": False, "required": ["doc_id", "quote"],
          "properties": {"doc_id": _STR, "quote": _STR}}
    return {"type": "object", "additionalProperties": False, "required": ["answer", "evidence"],
            "properties": {"answer": {"type": "string", "enum": [*options, UNRESOLVABLE]},
                           "evidence": {"type": "array", "items": ev, "maxItems": 4}}}
