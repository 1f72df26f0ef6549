"""Your own questions (docs/design.md §4): a JSONL file of questions becomes events (source "questions").

One JSON object per line:

    {"id": "fqa-17",                       optional; the event id is "q-<id>" (else "q-<line number>")
     "question": "Will ...?",
     "options": ["Yes", "No"],             >= 2 distinct labels
     "open_date": "2026-03-05",            ISO date or timestamp (UTC)
     "close_date": "2026-04-20",
     "resolved_option": "No",              one of options
     "description": "...",                 optional
     "category": "politics",               optional
     "daily_probabilities": {"2026-03-05": {"Yes": 0.4, "No": 0.6}, ...}   optional; or a list of
                                           {"date": "2026-03-05", "probabilities": {...}}
     "known_date": "2026-04-18",           optional: the first day a visible report gave the outcome away
                                           (the schedule ends the day before, as at d_known)
    }

Other keys (provenance such as a generated question's route, seeds and model) are ignored. Generated
questions (questions/, source "generated") use the same format with ids "g-<id>".

With daily probabilities, the scalar market probability of an option on a day is the given value
(for two options, a missing one is 1 - the other); without them there is no market (the log score
vs market is None). Bad lines are reported with their line number and key, and counted in the
funnel; they never stop the import.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forecast_env.envs.events.candidate import Candidate, Leg
from forecast_env.errors import EventsError
from forecast_env.timeparse import parse_api_time, parse_day


class _LineError(Exception):
    pass


@dataclass
class ParsedQuestions:
    """Valid questions as event candidates, and (event id, "line N: key: problem") per bad line."""

    candidates: list[Candidate] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)


def _when(value: Any, key: str) -> datetime:
    if isinstance(value, str) and value.strip():
        d = parse_api_time(value)  # no offset: UTC
        if d is None:
            raise _LineError(f"key {key!r}: {value!r} is not an ISO date (YYYY-MM-DD)")
        return d
    raise _LineError(f"key {key!r}: missing or not a date string")


def _prob(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _LineError(f"key 'daily_probabilities' {where}: {value!r} is not a number")
    p = float(value)
    if not math.isfinite(p) or p < 0 or p > 1:
        raise _LineError(f"key 'daily_probabilities' {where}: {p} is outside [0, 1]")
    return p


def _daily(raw: Any, options: list[str]) -> list[tuple[int, int, float]]:
    items: list[tuple[Any, Any]]
    if isinstance(raw, Mapping):
        items = list(raw.items())
    elif isinstance(raw, list):
        items = []
        for i, row in enumerate(raw):
            if not isinstance(row, Mapping) or "date" not in row:
                raise _LineError(f"key 'daily_probabilities'[{i}]: expected an object with 'date'")
            probs = row.get("probabilities", {k: v for k, v in row.items() if k != "date"})
            items.append((row["date"], probs))
    else:
        raise _LineError("key 'daily_probabilities': expected an object {date: {option: p}} or a list")
    out: list[tuple[int, int, float]] = []
    for day_raw, probs in items:
        d = parse_day(str(day_raw))
        if d is None:
            raise _LineError(f"key 'daily_probabilities': {day_raw!r} is not a date")
        if not isinstance(probs, Mapping):
            raise _LineError(f"key 'daily_probabilities' {d}: expected {{option: probability}}")
        got = {}
        for opt, p in probs.items():
            if opt not in options:
                raise _LineError(f"key 'daily_probabilities' {d}: {opt!r} is not one of the options")
            got[opt] = _prob(p, f"{d} {opt!r}")
        if len(options) == 2 and len(got) == 1:
            (only, p), = got.items()
            got[options[1 - options.index(only)]] = 1.0 - p
        t = int(datetime(d.year, d.month, d.day, 12, tzinfo=UTC).timestamp())
        out.extend((options.index(o), t, p) for o, p in got.items())
    return out


def parse_question(obj: Any, line_no: int, source: str = "questions") -> Candidate:
    """One JSONL object as an event candidate (raises _LineError naming the key)."""
    if not isinstance(obj, Mapping):
        raise _LineError("not a JSON object")
    q = obj.get("question")
    if not isinstance(q, str) or not q.strip():
        raise _LineError("key 'question': missing or empty")
    options = obj.get("options")
    if (not isinstance(options, list) or len(options) < 2
            or not all(isinstance(o, str) and o.strip() for o in options)):
        raise _LineError("key 'options': expected a list of >= 2 non-empty strings")
    options = [o.strip() for o in options]
    if len(set(options)) != len(options):
        raise _LineError("key 'options': labels must be distinct")
    t_start = _when(obj.get("open_date"), "open_date")
    t_close = _when(obj.get("close_date"), "close_date")
    if t_close < t_start:
        raise _LineError("key 'close_date': before open_date")
    label = obj.get("resolved_option")
    if not isinstance(label, str) or label.strip() not in options:
        raise _LineError(f"key 'resolved_option': {label!r} is not one of the options {options}")
    desc = obj.get("description") or ""
    if not isinstance(desc, str):
        raise _LineError("key 'description': not a string")
    cat = obj.get("category")
    if cat is not None and not isinstance(cat, str):
        raise _LineError("key 'category': not a string")
    qid = obj.get("id")
    if qid is not None and (isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid).strip() == ""):
        raise _LineError(f"key 'id': {qid!r} is not a string or integer")
    prefix = "g-" if source == "generated" else "q-"
    eid = f"{prefix}{qid}" if qid is not None else f"{prefix}{line_no}"
    known = _when(obj["known_date"], "known_date").date() if obj.get("known_date") is not None else None
    prices = _daily(obj["daily_probabilities"], options) if obj.get("daily_probabilities") is not None else []
    legs = [Leg(o, k, None, None, None, t_start, t_close, t_close, market_index=k) for k, o in enumerate(options)]
    return Candidate(
        event_id=eid, source=source, slug=None, question=q.strip(), description=desc, options=options,
        type="binary" if len(options) == 2 else "multi", category=cat, tags=[], t_start=t_start, t_close=t_close,
        t_end=t_close,
        label=label.strip(), volume=None, legs=legs, prices=prices, known=known,
    )


def read_questions(path: str | Path, source: str = "questions") -> ParsedQuestions:
    """Read and validate a JSONL file of questions (`source`: "questions", or "generated": ids "g-<id>")."""
    path = Path(path)
    if not path.is_file():
        raise EventsError(f"{path}: no such questions file (expected JSONL, one question object per line)")
    out = ParsedQuestions()
    seen: set[str] = set()
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            obj: Any = None
            try:
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise _LineError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
                cand = parse_question(obj, n, source)
                if cand.event_id in seen:
                    raise _LineError(f"key 'id': duplicate event id {cand.event_id!r}")
                seen.add(cand.event_id)
                out.candidates.append(cand)
            except _LineError as exc:
                qid = obj.get("id") if isinstance(obj, Mapping) else None
                pre = "g-" if source == "generated" else "q-"
                eid = f"{pre}{qid}" if qid is not None and f"{pre}{qid}" not in seen else f"{pre}line{n}"
                out.errors.append((eid, f"{path.name} line {n}: {exc}"))
    return out
