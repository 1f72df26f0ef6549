"""ForecastBench question and resolution sets (Forecasting Research Institute, issue 40, first step).

Reads a folder laid out as the `forecastbench-datasets` repository (CC BY-SA 4.0):

    datasets/question_sets/YYYY-MM-DD-llm.json          {forecast_due_date, question_set, questions: [...]}
    datasets/resolution_sets/YYYY-MM-DD_resolution_set.json
                                                        {forecast_due_date, question_set, resolutions: [...]}

`latest-llm.json` (a pointer file holding a file name) and the `-human.json` sets are not rounds and are
never read. A bare git mirror is read by extracting it into a folder first (`git archive` or `git show`
per file); blobs the mirror lacks are then absent files, reported like every other problem.

Nothing here raises on bad data: a missing, empty, Git LFS pointer, truncated or malformed file, and a
record missing a key or holding a bad value, each become a line in `Round.errors` that names the file,
the key and how many records it hit. What could be read is kept.

The market and dataset sources are those of the ForecastBench code (`src/helpers/question_curation.py`,
`FREEZE_QUESTION_MARKET_SOURCES` and `FREEZE_QUESTION_DATA_SOURCES`). Combination questions (an id that is a
list of ids) are kept, flagged `combo`, with the id written as the JSON list; the leaderboard drops them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MARKET_SOURCES = frozenset({"manifold", "metaculus", "infer", "polymarket"})
DATASET_SOURCES = frozenset({"acled", "dbnomics", "fred", "wikipedia", "yfinance"})

QUESTION_SETS = "datasets/question_sets"
RESOLUTION_SETS = "datasets/resolution_sets"
_QUESTION_FILE = re.compile(r"^(\d{4}-\d{2}-\d{2})-llm\.json$")
_RESOLUTION_FILE = re.compile(r"^(\d{4}-\d{2}-\d{2})_resolution_set\.json$")
_LFS_HEADER = b"version https://git-lfs"


def kind_of(source: str) -> str | None:
    """'market', 'dataset', or None for a source ForecastBench does not score."""
    if source in MARKET_SOURCES:
        return "market"
    if source in DATASET_SOURCES:
        return "dataset"
    return None


@dataclass(frozen=True)
class Question:
    id: str  # a combination question's id is its JSON list, e.g. '["a", "b"]'
    source: str
    kind: str | None  # "market", "dataset" or None (unknown source)
    combo: bool
    question: str
    resolution_criteria: str
    background: str
    freeze_datetime: str
    freeze_value: float | None  # None where the value is not a number (wikipedia's "Yes"/"No", "N/A")
    freeze_value_text: str  # the value as published, as text
    url: str


@dataclass(frozen=True)
class Resolution:
    id: str
    source: str
    kind: str | None
    combo: bool
    resolution_date: str
    resolved_to: float | None
    resolved: bool
    direction: str = ""  # a combination question's directions as JSON (e.g. "[1, -1]"), else ""


@dataclass
class Round:
    due_date: str
    questions: list[Question] = field(default_factory=list)
    resolutions: dict[tuple[str, str, str, str], Resolution] = field(default_factory=dict)
    """keyed by (source, id, direction, resolution_date)"""
    errors: list[str] = field(default_factory=list)


def _id(value: Any) -> tuple[str, bool] | None:
    if isinstance(value, str) and value:
        return value, False
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return json.dumps(list(value)), True
    return None


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if out == out else None  # NaN -> None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _load(path: Path, list_key: str, due_date: str, errors: list[str]) -> list[Any] | None:
    """The record list of one file, or None with one error line."""
    name = f"{path.parent.name}/{path.name}"
    if not path.is_file():
        errors.append(f"{name}: file missing")
        return None
    raw = path.read_bytes()
    if not raw.strip():
        errors.append(f"{name}: empty file, skipped")
        return None
    if raw.startswith(_LFS_HEADER):
        errors.append(f"{name}: Git LFS pointer, not the data")
        return None
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        errors.append(
            f"{name}: not valid JSON (truncated?): {exc.__class__.__name__} at {getattr(exc, 'pos', '?')}"
        )
        return None
    if not isinstance(doc, dict):
        errors.append(f"{name}: top level is {type(doc).__name__}, not an object")
        return None
    if doc.get("forecast_due_date") != due_date:
        errors.append(f"{name}: key forecast_due_date is {doc.get('forecast_due_date')!r}, not {due_date!r}")
    records = doc.get(list_key)
    if not isinstance(records, list):
        errors.append(f"{name}: key {list_key} missing or not a list")
        return None
    return records


def _flush(name: str, bad: Counter[str], errors: list[str]) -> None:
    for what, n in sorted(bad.items()):
        errors.append(f"{name}: {n} record(s) {what}")


def _questions(records: list[Any], name: str, errors: list[str]) -> list[Question]:
    out: list[Question] = []
    bad: Counter[str] = Counter()
    for rec in records:
        if not isinstance(rec, dict):
            bad["not an object, dropped"] += 1
            continue
        qid = _id(rec.get("id"))
        source = rec.get("source")
        if qid is None:
            bad["with key id missing or bad, dropped"] += 1
            continue
        if not isinstance(source, str) or not source:
            bad["with key source missing or bad, dropped"] += 1
            continue
        kind = kind_of(source)
        if kind is None:
            bad[f"with key source unknown ({source}), kept with kind None"] += 1
        raw_value = rec.get("freeze_datetime_value")
        value = _float(raw_value)
        if not isinstance(raw_value, (str, int, float, type(None))):
            bad["with key freeze_datetime_value not a number or text, kept as None"] += 1
        out.append(
            Question(
                id=qid[0],
                source=source,
                kind=kind,
                combo=qid[1],
                question=_str(rec.get("question")),
                resolution_criteria=_str(rec.get("resolution_criteria")),
                background=_str(rec.get("background")),
                freeze_datetime=_str(rec.get("freeze_datetime")),
                freeze_value=value,
                freeze_value_text="" if raw_value is None else str(raw_value),
                url=_str(rec.get("url")),
            )
        )
    _flush(name, bad, errors)
    return out


def _resolutions(
    records: list[Any], name: str, errors: list[str]
) -> dict[tuple[str, str, str, str], Resolution]:
    out: dict[tuple[str, str, str, str], Resolution] = {}
    bad: Counter[str] = Counter()
    for rec in records:
        if not isinstance(rec, dict):
            bad["not an object, dropped"] += 1
            continue
        rid = _id(rec.get("id"))
        source = rec.get("source")
        date = rec.get("resolution_date")
        if rid is None:
            bad["with key id missing or bad, dropped"] += 1
            continue
        if not isinstance(source, str) or not source:
            bad["with key source missing or bad, dropped"] += 1
            continue
        if not isinstance(date, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
            bad["with key resolution_date missing or bad, dropped"] += 1
            continue
        resolved = rec.get("resolved")
        if not isinstance(resolved, bool):
            bad["with key resolved missing or not a bool, dropped"] += 1
            continue
        value = _float(rec.get("resolved_to"))
        if resolved and (value is None or not 0.0 <= value <= 1.0):
            bad["resolved with key resolved_to missing or outside [0, 1], dropped"] += 1
            continue
        raw_direction = rec.get("direction")
        direction = "" if raw_direction is None else json.dumps(raw_direction)
        key = (source, rid[0], direction, date)
        if key in out:
            bad["duplicating (source, id, direction, resolution_date), later one dropped"] += 1
            continue
        kind = kind_of(source)
        if kind is None:
            bad[f"with key source unknown ({source}), kept with kind None"] += 1
        out[key] = Resolution(rid[0], source, kind, rid[1], date, value, resolved, direction)
    _flush(name, bad, errors)
    return out


def read_round(root: str | Path, due_date: str) -> Round:
    """One round: its question set and resolution set under `root` (either may be absent: an error)."""
    root = Path(root)
    rnd = Round(due_date=due_date)
    qpath = root / QUESTION_SETS / f"{due_date}-llm.json"
    records = _load(qpath, "questions", due_date, rnd.errors)
    if records is not None:
        rnd.questions = _questions(records, f"{qpath.parent.name}/{qpath.name}", rnd.errors)
    rpath = root / RESOLUTION_SETS / f"{due_date}_resolution_set.json"
    records = _load(rpath, "resolutions", due_date, rnd.errors)
    if records is not None:
        rnd.resolutions = _resolutions(records, f"{rpath.parent.name}/{rpath.name}", rnd.errors)
    return rnd


def due_dates(root: str | Path) -> list[str]:
    """Every due date with a question set or a resolution set file (pointer and human sets excluded)."""
    root = Path(root)
    found: set[str] = set()
    for folder, pattern in ((QUESTION_SETS, _QUESTION_FILE), (RESOLUTION_SETS, _RESOLUTION_FILE)):
        if (root / folder).is_dir():
            for path in (root / folder).iterdir():
                match = pattern.match(path.name)
                if match:
                    found.add(match.group(1))
    return sorted(found)


def read_rounds(root: str | Path, first: str | None = None, last: str | None = None) -> list[Round]:
    """The rounds whose due date is in [first, last] (ISO dates, inclusive; None: unbounded), oldest first."""
    return [
        read_round(root, d)
        for d in due_dates(root)
        if (first is None or d >= first) and (last is None or d <= last)
    ]
