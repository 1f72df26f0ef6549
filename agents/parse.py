"""Reading a final forecast from what a model writes when it answers in text instead of a tool call.

Accepted: JSON objects (bare, inside ```json fences, with trailing commas, single quotes or Python
literals; nested under "probabilities"/"forecast"; lists aligned with the options; lists of
{"option": ..., "probability": ...}), and prose such as "Yes: 70%", "A - 0.3, B - 0.7",
"probability of Yes is 0.62", "**Team A** (45%)". Option names are matched to the exact offered
labels ignoring case, whitespace, quotes and markdown, or by an unambiguous prefix. Percentages
become fractions. For two options, one stated probability implies the other.
"""

from __future__ import annotations

import ast
import json
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

_FENCE_RE = re.compile(r"```(?:[a-zA-Z0-9_+-]*)\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA_RE = re.compile(r",\s*([}\]])")
_NUM_RE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?|\.\d+)\s*(%|percent\b|per cent\b)?", re.IGNORECASE)
_NESTED_KEYS = ("probabilities", "probability", "forecast", "forecasts", "probs", "distribution", "answer",
                "final_forecast", "final")


def _norm(label: str) -> str:
    text = unicodedata.normalize("NFKC", str(label)).casefold()
    text = re.sub(r"[*_`\"'“”‘’]", "", text)
    return re.sub(r"\s+", " ", text).strip(" .:;,-–—()[]")


def match_label(name: Any, options: Sequence[str]) -> str | None:
    """The offered label `name` refers to (exact, then normalized, then unambiguous prefix), else None."""
    if not isinstance(name, str):
        return None
    if name in options:
        return name
    key = _norm(name)
    if not key:
        return None
    exact = [o for o in options if _norm(o) == key]
    if len(exact) == 1:
        return exact[0]
    prefix = [o for o in options if _norm(o).startswith(key) or key.startswith(_norm(o))]
    if len(prefix) == 1 and len(key) >= 2:
        return prefix[0]
    return None


def _to_prob(value: Any) -> float | None:
    """A number, numeric string or percentage string as a float (percent kept as given, flagged)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*(%|percent)?\s*", value, re.IGNORECASE)
        if m:
            v = float(m.group(1))
            return v / 100.0 if m.group(2) else v
    return None


_JSON_WORD_RE = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|\b(true|false|null)\b""")
_PY_WORD = {"true": "True", "false": "False", "null": "None"}


def loads_lenient(text: str) -> Any:
    """Parse one JSON-ish value: strict JSON, then with trailing commas removed, then Python literal."""
    text = text.strip()
    attempts = [text, _TRAILING_COMMA_RE.sub(r"\1", text)]
    for t in attempts:
        try:
            return json.loads(t)
        except (json.JSONDecodeError, ValueError):
            pass
    pythonish = _TRAILING_COMMA_RE.sub(r"\1", text)
    # JSON's keywords become Python's outside quoted strings only: a label such as 'null' stays itself
    pythonish = _JSON_WORD_RE.sub(lambda m: m.group(1) or _PY_WORD[m.group(2)], pythonish)
    try:
        return ast.literal_eval(pythonish)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _json_candidates(text: str) -> list[Any]:
    """JSON-ish values found in `text`: fenced blocks first, then balanced {...} / [...] spans."""
    blocks = [m.group(1) for m in _FENCE_RE.finditer(text)]
    spans: list[tuple[int, int, int, str]] = []
    for n, source in enumerate(blocks + [text]):
        for opener, closer in (("{", "}"), ("[", "]")):
            start = source.find(opener)
            while start != -1:
                depth, in_str, quote = 0, False, ""
                for i in range(start, len(source)):
                    ch = source[i]
                    if in_str:
                        if ch == "\\":
                            continue
                        if ch == quote:
                            in_str = False
                    elif ch in "\"'":
                        in_str, quote = True, ch
                    elif ch == opener:
                        depth += 1
                    elif ch == closer:
                        depth -= 1
                        if depth == 0:
                            spans.append((n, start, -(i + 1 - start), source[start: i + 1]))
                            break
                start = source.find(opener, start + 1)
    out = []
    for s in blocks + [span[3] for span in sorted(spans)]:
        v = loads_lenient(s)
        if isinstance(v, (dict, list)):
            out.append(v)
    return out


def _from_value(value: Any, options: Sequence[str], depth: int = 0) -> dict[str, float] | None:
    if depth > 4:
        return None
    if isinstance(value, Mapping):
        found: dict[str, float] = {}
        for key, raw in value.items():
            label = match_label(key, options)
            prob = _to_prob(raw)
            if label is not None and prob is not None:
                found[label] = prob
        if found:
            return found
        for key in _NESTED_KEYS:
            for k, v in value.items():
                if isinstance(k, str) and _norm(k) == key:
                    sub = _from_value(v, options, depth + 1)
                    if sub:
                        return sub
        label = None
        prob = None
        for k, v in value.items():
            if isinstance(k, str) and _norm(k) in ("option", "label", "outcome", "name", "answer", "choice"):
                label = match_label(v, options)
            if isinstance(k, str) and _norm(k) in ("probability", "prob", "p", "value", "confidence"):
                prob = _to_prob(v)
        if label is not None and prob is not None:
            return {label: prob}
        return None
    if isinstance(value, (list, tuple)):
        if len(value) == len(options) and value and all(_to_prob(v) is not None for v in value):
            return {o: _to_prob(v) for o, v in zip(options, value)}  # type: ignore[misc]
        merged: dict[str, float] = {}
        for item in value:
            if isinstance(item, Mapping):
                sub = _from_value(item, options, depth + 1)
                if sub:
                    merged.update(sub)
        return merged or None
    return None


def _from_prose(text: str, options: Sequence[str]) -> dict[str, float] | None:
    """Label mentions followed (within the line, before the next label) by a number."""
    clean = re.sub(r"[*_`]", "", text)
    folded = clean.casefold()
    taken = [False] * len(folded)
    mentions: list[tuple[int, int, str]] = []
    for opt in sorted(options, key=lambda o: len(o), reverse=True):
        key = re.sub(r"\s+", " ", opt.strip().casefold())
        if not key:
            continue
        pat = re.compile(r"(?<!\w)" + r"\s+".join(re.escape(p) for p in key.split(" ")) + r"(?!\w)")
        for m in pat.finditer(folded):
            if not any(taken[m.start(): m.end()]):
                mentions.append((m.start(), m.end(), opt))
                for i in range(m.start(), m.end()):
                    taken[i] = True
    if not mentions:
        return None
    mentions.sort()
    found: dict[str, float] = {}
    for idx, (_start, end, opt) in enumerate(mentions):
        stop = mentions[idx + 1][0] if idx + 1 < len(mentions) else len(clean)
        window = clean[end: min(stop, end + 60)]
        window = window.split("\n", 1)[0] if window.strip() else window
        num = _NUM_RE.search(window)
        if not num:
            continue
        v = float(num.group(1))
        found[opt] = v / 100.0 if num.group(2) else v
    return found or None


def _complete(found: dict[str, float], options: Sequence[str]) -> dict[str, float]:
    if len(found) == len(options) - 1 and all(0.0 <= v <= 1.0 for v in found.values()):
        rest = max(0.0, 1.0 - sum(found.values()))
        missing = next(o for o in options if o not in found)
        found = {**found, missing: rest}
    return {o: found[o] for o in options if o in found} | {k: v for k, v in found.items() if k not in options}


def _rescale(found: dict[str, float]) -> dict[str, float]:
    values = list(found.values())
    if values and any(v > 1.0 for v in values) and all(v <= 100.0 for v in values):
        return {k: v / 100.0 for k, v in found.items()}
    return found


def parse_forecast(text: str | None, options: Sequence[str]) -> dict[str, float] | None:
    """Probabilities keyed by the exact offered labels, read from a model's text; None if none found."""
    if not text or not options:
        return None
    options = [str(o) for o in options]
    for value in _json_candidates(text):
        found = _from_value(value, options)
        if found:
            return _complete(_rescale(found), options)
    found = _from_prose(text, options)
    if found:
        return _complete(_rescale(found), options)
    return None


def parse_arguments(raw: Any) -> dict[str, Any] | None:
    """A tool call's `arguments` (a JSON string, possibly malformed) as a dict, or None."""
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str):
        return None
    if not raw.strip():
        return {}
    value = loads_lenient(raw)
    if isinstance(value, dict):
        return value
    for cand in _json_candidates(raw):
        if isinstance(cand, dict):
            return cand
    return None
