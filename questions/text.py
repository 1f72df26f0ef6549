"""Text helpers every step of the question pipeline shares: whitespace, option labels, verbatim quotes."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

_SPACE = re.compile(r"\s+")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-",
                         "\u00a0": " "})


def normalize(text: str) -> str:
    """NFKC, typographic quotes and dashes made plain, whitespace collapsed, stripped."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", str(text or "")).translate(_QUOTES)).strip()


def options_of(raw: Any) -> list[str] | None:
    """2-8 distinct non-empty labels (Yes/No spelled so), or None."""
    if not isinstance(raw, list) or not 2 <= len(raw) <= 8:
        return None
    opts = [normalize(str(o)) for o in raw if isinstance(o, (str, int, float)) and not isinstance(o, bool)]
    if len(opts) != len(raw) or any(not o or len(o) > 120 for o in opts):
        return None
    if {o.casefold() for o in opts} == {"yes", "no"}:
        return ["Yes", "No"]
    if len({o.casefold() for o in opts}) != len(opts):
        return None
    return opts


def quote_in(quote: str, text: str, min_chars: int = 12) -> bool:
    """Whether `quote` (at least `min_chars` long, after normalizing) occurs verbatim in `text`, case-insensitively."""
    q = normalize(quote).casefold().strip(" .\"'")
    return len(q) >= min_chars and q in normalize(text).casefold()
