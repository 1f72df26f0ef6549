"""Event descriptions as they could have read on a forecast date (docs/design.md §4 "Descriptions").

Gamma snapshots are taken after resolution, so a description may carry paragraphs appended later.
A paragraph that opens with an appendix marker is cut when it is dated after the forecast date,
and cut whatever the date when it is undated and its marker is an amendment ("Update",
"Clarification", "Edit", "Correction", "Addendum", "Amendment", "Additional context"): such text is
appended after the market opened, and nothing tells us when. An undated "Note" is kept (rule
texts open paragraphs with "Note:" from the start); a dated one is treated like any marker.
"""

from __future__ import annotations

import re
from datetime import date, datetime

from forecast_env.timeparse import MONTH_PATTERN, month_number

_DATE_PATTERNS = [
    re.compile(r"(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})"),
    re.compile(r"(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4}|\d{2})\b"),
    re.compile(rf"(?P<mon>{MONTH_PATTERN})\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}})", re.IGNORECASE),
    re.compile(rf"(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{MONTH_PATTERN}),?\s+(?P<y>\d{{4}})", re.IGNORECASE),
]
#: Markers of text appended after a market opened; cut even when undated.
_AMENDMENT = r"update[sd]?|clarifications?|clarified|edit(?:ed)?|corrections?|addend(?:um|a)|amendments?|additional context"
_MARKER_RE = re.compile(
    rf"^[\s*_#>\-\[(]*(?P<kind>{_AMENDMENT}|note)\b(?P<rest>.*)$", re.IGNORECASE
)
_LEAD_RE = re.compile(r"[\s(\[:\-\u2013\u2014,@*_]*(?:(?:on|as of|posted|added|at)\s*)?[\s(\[:\-\u2013\u2014,@*_]*",
                      re.IGNORECASE)
_HEADING_RE = re.compile(r"[\s*_)\]]*[:\-\u2013\u2014]")


def _match_date(m: re.Match[str]) -> date | None:
    g = m.groupdict()
    try:
        y = int(g["y"])
        if y < 100:
            y += 2000
        month = month_number(g["mon"]) if g.get("mon") else int(g["m"])
        return date(y, month, int(g["d"])) if month else None
    except ValueError:
        return None


def find_date(text: str) -> tuple[date, int] | None:
    """The first calendar date written in `text` (ISO, m/d/Y, 'April 12, 2026', '12 Apr 2026') and its offset."""
    best: tuple[date, int] | None = None
    for pattern in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            d = _match_date(m)
            if d is not None:
                if best is None or m.start() < best[1]:
                    best = (d, m.start())
                break
    return best


def _marker(line: str) -> tuple[bool, date | None] | None:
    """(is an amendment marker, its date) when `line` opens an appendix paragraph, else None."""
    m = _MARKER_RE.match(line)
    if not m:
        return None
    amendment = m.group("kind").lower() != "note"
    rest = m.group("rest")
    found = find_date(rest[:60])
    # The date must belong to the marker ("Update (2026-04-12):", "Note on April 12, 2026 -"),
    # not sit deep inside an undated note's sentence.
    if found is not None and _LEAD_RE.fullmatch(rest[: found[1]]):
        return amendment, found[0]
    # Undated: a heading ("Update:", "**Clarification** -"), not a sentence ("Updates will follow").
    return (amendment, None) if _HEADING_RE.match(rest) else None


def description_as_of(description: str | None, day: date) -> str:
    """The description as it could have read on `day` (see the module docstring for the rule).

    A cut starts at a marker line and runs to the next blank line or the next marker line.
    """
    if not description:
        return ""
    if isinstance(day, datetime):
        day = day.date()
    kept: list[str] = []
    cutting = False
    for line in description.split("\n"):
        if not line.strip():
            cutting = False
            kept.append(line)
            continue
        mark = _marker(line)
        if mark is not None:
            amendment, d = mark
            cutting = d > day if d is not None else amendment
        if not cutting:
            kept.append(line)
    text = "\n".join(kept)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()
