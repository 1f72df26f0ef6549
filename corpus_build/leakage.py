"""Stage 7 of the corpus builder (SPEC 2.7): content-level leakage screen.

An article is flagged when its text shows it was written or updated after its assigned day t:

* an "Updated" / "Last updated" / "Last modified" / "Editor's note ... updated" stamp (at the
  start of a line or after a separator) whose date is later than t's day -> "updated_stamp:DATE";
* an event reported in the past tense ("voted", "won", "was announced", "said on", "On March 18,
  the Senate approved ...") on a date after t's day -> "past_event:DATE".

Precision matters more than recall: previews and schedules ("scheduled for March 14", "will vote
on", "is set to", "expected on", "ahead of the March 14 vote") are the most useful evidence, so any
sentence carrying a future/preview cue is never flagged, and the past verb must sit next to the
date. Dates without a year take the year of t that puts them closest to t (so "Jan. 3" written on
Dec. 30 is next year, "Dec. 30" written on Jan. 3 is last year).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

__all__ = ["find_dates", "screen_leakage"]

_MONTHS = {
    "jan": 1,
    "january": 1,
    "feb": 2,
    "february": 2,
    "mar": 3,
    "march": 3,
    "apr": 4,
    "april": 4,
    "may": 5,
    "jun": 6,
    "june": 6,
    "jul": 7,
    "july": 7,
    "aug": 8,
    "august": 8,
    "sep": 9,
    "sept": 9,
    "september": 9,
    "oct": 10,
    "october": 10,
    "nov": 11,
    "november": 11,
    "dec": 12,
    "december": 12,
}
_MONTH_RE = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December|"
    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?"
)
# Month names are matched case-sensitively: "may"/"march" as verbs stay out.
_DATE_RE = re.compile(
    r"(?P<iso>(?<![0-9])(?P<iy>20[0-9]{2})-(?P<im>[01][0-9])-(?P<id>[0-3][0-9])(?![0-9]))"
    r"|(?P<md>(?P<m1>" + _MONTH_RE + r")\s+(?P<d1>[0-3]?[0-9])(?:st|nd|rd|th)?(?![0-9]|:[0-9])"
    r"(?:,?\s+(?P<y1>20[0-9]{2})(?![0-9]))?)"
    r"|(?P<dm>(?<![0-9])(?P<d2>[0-3]?[0-9])(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m2>" + _MONTH_RE + r")"
    r"(?:,?\s+(?P<y2>20[0-9]{2})(?![0-9]))?)"
)

_STAMP_RE = re.compile(
    r"(?:^|[(\[|•·—–]\s*|\s-\s)\**\s*(?:last\s+updated|updated|last\s+modified|modified|"
    r"editor['’]s\s+note\b[^\n]{0,160}?\bupdated)\b\s*(?:on|at)?\s*:?",
    re.IGNORECASE | re.MULTILINE,
)
_PAST_VERBS = (
    r"voted|won|lost|approved|announced|said|passed|signed|rejected|elected|defeated|beat|"
    r"died|resigned|released|reported|confirmed|launched|ruled|struck|closed|rose|fell|"
    r"dropped|killed|held|took\s+place|occurred|happened|declared|unveiled|finished|ended|"
    r"acquired|agreed|filed|fired|named|appointed|sentenced|convicted|arrested|raised|cut|"
    r"hiked|scored|clinched|claimed|wrote|told|testified|vetoed|ratified|enacted|completed|"
    r"collapsed|surged|plunged|crashed|conceded|withdrew|nominated|sworn\s+in|swore|"
    r"was\s+(?:announced|approved|passed|signed|elected|held|released|confirmed|killed|arrested)|"
    r"were\s+(?:announced|approved|passed|signed|elected|held|released|confirmed|killed|arrested)"
)
_PAST_VERB = re.compile(r"\b(?:" + _PAST_VERBS + r")\b", re.IGNORECASE)
_PREVIEW = re.compile(
    r"\b(?:will|won't|would|shall|scheduled|schedule|reschedul\w*|set\s+to|set\s+for|is\s+set|"
    r"are\s+set|expected|expects|expecting|expect|planned|plans?\s+to|planning|upcoming|ahead\s+of|"
    r"next|due|slated|poised|could|(?-i:may)|might|until|deadline|postpone\w*|delay\w*|preview|"
    r"later\s+this|coming|awaits?|awaiting|to\s+be\s+held|is\s+to|are\s+to|going\s+to|"
    r"forecast|projected|likely|if|unless|intends?|aims?\s+to|hopes?\s+to|before|"
    r"anticipated|tentative(?:ly)?|proposed|pending|starting|begins?|opens?|takes?\s+effect)\b",
    re.IGNORECASE,
)
# Cues that make a whole sentence a preview wherever they stand.
_STRONG_PREVIEW = re.compile(
    r"\b(?:scheduled|reschedul\w*|slated|upcoming|ahead\s+of|preview\w*|set\s+(?:to|for)|"
    r"expected|will\s+be\s+held|to\s+be\s+held)\b",
    re.IGNORECASE,
)
_SENT_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“(]?[A-Z])|\n+")
_VERB_GAP = 60  # characters allowed between a past verb and its date
# A verb form right after a modal or infinitive marker is not a past report ("will be reported
# on March 13", "is to be signed on", "could be announced").
_NOT_PAST_BEFORE = re.compile(
    r"\b(?:will|would|shall|should|could|can|may|might|must|to|be|being|won't|cannot|not)\s+(?:\w+\s+){0,1}$",
    re.IGNORECASE,
)


def _resolve(month: int, day: int, year: int | None, t_day: date) -> date | None:
    if year is not None:
        try:
            return date(year, month, day)
        except ValueError:
            return None
    best = None
    for y in (t_day.year - 1, t_day.year, t_day.year + 1):
        try:
            d = date(y, month, day)
        except ValueError:
            continue
        if best is None or abs((d - t_day).days) < abs((best - t_day).days):
            best = d
    return best


def find_dates(text: str, t_day: date) -> list[tuple[int, int, date]]:
    """(start, end, date) of every date mention in text; yearless ones resolved near t_day."""
    out = []
    for m in _DATE_RE.finditer(text):
        if m.group("iso"):
            d = _resolve(int(m.group("im")), int(m.group("id")), int(m.group("iy")), t_day)
        elif m.group("md"):
            month = _MONTHS[m.group("m1").rstrip(".").lower()]
            y = m.group("y1")
            d = _resolve(month, int(m.group("d1")), int(y) if y else None, t_day)
        else:
            month = _MONTHS[m.group("m2").rstrip(".").lower()]
            y = m.group("y2")
            d = _resolve(month, int(m.group("d2")), int(y) if y else None, t_day)
        if d is not None:
            out.append((m.start(), m.end(), d))
    return out


def _stamp_leak(text: str, t_day: date) -> date | None:
    for m in _STAMP_RE.finditer(text):
        window = text[m.end() : m.end() + 60].split("\n", 1)[0]
        dates = find_dates(window, t_day)
        if dates:
            d = dates[0][2]
            if d > t_day:
                return d
    return None


def _sentence_leak(sentence: str, t_day: date) -> date | None:
    dates = [(s, e, d) for s, e, d in find_dates(sentence, t_day) if d > t_day]
    if not dates or _STRONG_PREVIEW.search(sentence):
        return None
    for start, end, d in dates:
        # "... voted 52-48 on March 18" / "announced on March 17 that ...": a past verb shortly
        # before the date, nothing but plain words between them (no clause break, no future cue).
        lo = max(0, start - _VERB_GAP)
        verbs = list(_PAST_VERB.finditer(sentence, lo, start))
        if verbs:
            span = sentence[verbs[-1].start() : start]
            before = sentence[max(0, verbs[-1].start() - 30) : verbs[-1].start()]
            if (not re.search(r"[,;:]", span) and not _PREVIEW.search(span)
                    and not _NOT_PAST_BEFORE.search(before)):
                return d
        # "On March 18, the Senate approved ...": the date leads its clause.
        lead = sentence[:start].strip().lower()
        if lead in ("", "on"):
            clause = re.split(r"[;:]", sentence[end : end + _VERB_GAP], maxsplit=1)[0]
            if _PAST_VERB.search(clause) and not _PREVIEW.search(clause):
                return d
    return None


def screen_leakage(body: str, title: str | None, t: datetime) -> tuple[bool, str | None]:
    """(leak_flag, reason) for an article assigned time t; reasons "updated_stamp:D", "past_event:D"."""
    if t.tzinfo is not None:
        t = t.astimezone(UTC)
    t_day = t.date()
    text = "\n".join(x for x in (title, body) if x)
    if not text:
        return False, None
    d = _stamp_leak(text, t_day)
    if d is not None:
        return True, f"updated_stamp:{d.isoformat()}"
    for sentence in _SENT_END.split(text):
        if not sentence or not any(ch.isdigit() for ch in sentence):
            continue
        d = _sentence_leak(sentence, t_day)
        if d is not None:
            return True, f"past_event:{d.isoformat()}"
    return False, None
