"""Stage 7 of the corpus builder: content screens (docs/design.md §2.leakage, §2.market quotes).

Leakage: an article is flagged when its text shows it was written or updated after its visibility
day (the UTC day of v, `timestamps.py`):

* an "Updated" / "Last updated" / "Last modified" / "Editor's note ... updated" stamp (at the
  start of a line or after a separator) whose date is later than that day -> "updated_stamp:DATE";
* an event reported in the past tense ("voted", "won", "was announced", "said on", "On March 18,
  the Senate approved ...") on a date after that day -> "past_event:DATE".

Precision matters more than recall: previews and schedules ("scheduled for March 14", "will vote
on", "is set to", "expected on", "ahead of the March 14 vote") are the most useful evidence, so any
sentence carrying a future/preview cue is never flagged, and the past verb must sit next to the
date. Dates without a year take the year that puts them closest to the day (so "Jan. 3" written on
Dec. 30 is next year, "Dec. 30" written on Jan. 3 is last year).

Market quotes: `find_market_quote` finds a sentence that quotes the odds of a betting or
prediction market ("Polymarket gives X a 70% chance", "bettors on Kalshi put the odds at 3-1"):
such an article carries the market's belief into the evidence and is hidden by default.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

from forecast_env.timeparse import MONTH_PATTERN, MONTHS

__all__ = ["find_dates", "find_market_quote", "screen_leakage"]

# Month names are matched case-sensitively: "may"/"march" as verbs stay out.
_DATE_RE = re.compile(
    r"(?P<iso>(?<![0-9])(?P<iy>20[0-9]{2})-(?P<im>[01][0-9])-(?P<id>[0-3][0-9])(?![0-9]))"
    r"|(?P<md>(?P<m1>" + MONTH_PATTERN + r")\s+(?P<d1>[0-3]?[0-9])(?:st|nd|rd|th)?(?![0-9]|:[0-9])"
    r"(?:,?\s+(?P<y1>20[0-9]{2})(?![0-9]))?)"
    r"|(?P<dm>(?<![0-9])(?P<d2>[0-3]?[0-9])(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m2>" + MONTH_PATTERN + r")"
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
            month = MONTHS[m.group("m1").rstrip(".").lower()]
            y = m.group("y1")
            d = _resolve(month, int(m.group("d1")), int(y) if y else None, t_day)
        else:
            month = MONTHS[m.group("m2").rstrip(".").lower()]
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


def screen_leakage(body: str, title: str | None, visible_at: datetime) -> tuple[bool, str | None]:
    """(leak_flag, reason) for an article visible from `visible_at`; reasons "updated_stamp:D", "past_event:D"."""
    if visible_at.tzinfo is not None:
        visible_at = visible_at.astimezone(UTC)
    t_day = visible_at.date()
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


# ---------------------------------------------------------------------------------------------
# market quotes
# ---------------------------------------------------------------------------------------------

# Where people bet on outcomes: prediction markets, betting exchanges, bookmakers. Named venues are
# matched case-sensitively (so "manifold reasons" or "the coral reef" stay out).
_VENUE_NAMED = re.compile(
    r"\b(?:Polymarket|Kalshi|PredictIt|Manifold(?=\s+Markets|\s+users|\s+traders|\s+bettors)|Metaculus|"
    r"Betfair|Smarkets|Augur|Insight\s+Prediction|DraftKings|FanDuel|BetMGM|Caesars\s+Sportsbook|"
    r"William\s+Hill|Ladbrokes|Paddy\s+Power|[Bb]et365|Oddschecker|Sky\s+Bet|Coral\s+(?:bookmakers|odds))\b"
)
_VENUE_GENERIC = re.compile(
    r"\b(?:prediction[- ]markets?|betting[- ](?:markets?|exchanges?|sites?|odds|platforms?)|"
    r"event[- ]contracts?|bookmakers?|bookies|oddsmakers?|sportsbooks?|bettors|punters|gamblers|"
    r"wagering\s+(?:markets?|sites?))\b",
    re.IGNORECASE,
)
# Lower-case stems of every venue above: an article holding none of them quotes no market.
_VENUE_WORDS = ("polymarket", "kalshi", "predictit", "manifold", "metaculus", "betfair", "smarkets", "augur",
                "insight prediction", "draftkings", "fanduel", "betmgm", "caesars", "william hill", "ladbrokes",
                "paddy power", "bet365", "oddschecker", "sky bet", "coral", "prediction", "betting",
                "event contract", "event-contract", "bookmaker", "bookies", "oddsmaker", "sportsbook", "bettors",
                "punters", "gamblers", "wagering")
# A probability or odds figure: 70%, 70 percent, 62 cents, 3-1 / 3 to 1 / 5/2, +150, odds-on.
_ODDS_FIGURE = re.compile(
    r"(?<![\w.$£€])[0-9]{1,3}(?:\.[0-9]+)?\s?(?:%|per\s?cent\b|percent\b)"
    r"|(?<![\w.$£€])[0-9]{1,2}(?:\.[0-9]+)?\s?(?:¢|cents?\b)"
    r"|(?<![\w.:$£€-])[0-9]{1,3}\s?(?:-|/|\bto\b)\s?[0-9]{1,3}(?![\w.:%-])"
    r"|(?<![\w.])[+-][1-9][0-9]{2,3}\b"
    r"|\bodds-on\b|\beven[- ]money\b",  # "odds-on", never "the odds on X"
    re.IGNORECASE,
)
# What makes the figure a belief about the outcome (not a volume, a stake or a vote share).
_ODDS_FRAME = re.compile(
    r"\b(?:chances?|odds|probabilit(?:y|ies)|likelihood|favou?rites?|underdogs?|implied|shot|"
    r"pric(?:ed|ing)(?:\s+in)?|prices\s+in|trad(?:e|es|ed|ing)\s+at|bet(?:s|ting)?\s+(?:on|that)|wager(?:s|ed|ing)?\s+(?:on|that))\b",
    re.IGNORECASE,
)
# A figure followed by one of these is a change or a share of something, not a probability.
_NOT_ODDS_AFTER = re.compile(
    r"\s*(?:more|less|fewer|higher|lower|increase|decrease|rise|jump|drop|fall|gain|growth|stake|"
    r"of\s+(?:its|the|their|all)\s+(?:volume|users|traders|bets|trades|revenue|market))\b",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"[0-9]")
_FRAME_GAP = 80  # characters allowed between the frame word and the figure


def _quotes_odds(sentence: str) -> bool:
    frames = [m.span() for m in _ODDS_FRAME.finditer(sentence)]
    if not frames:
        return False
    for m in _ODDS_FIGURE.finditer(sentence):
        if _NOT_ODDS_AFTER.match(sentence, m.end()):
            continue
        if any(max(0, s - m.end(), m.start() - e) <= _FRAME_GAP for s, e in frames):
            return True
    return False


def find_market_quote(body: str | None, title: str | None = None, summary: str | None = None) -> str | None:
    """The first sentence quoting a betting or prediction market's odds, else None.

    A sentence quotes odds when it names a venue (Polymarket, Kalshi, PredictIt, a betting exchange,
    bookmakers, bettors...), a frame (chance, odds, probability, favourite, priced, trading at...)
    and a figure near that frame (70%, 62 cents, 3-1, +150). A story about the companies
    themselves (funding, volume, regulation) or about polls has no such sentence.
    """
    text = "\n".join(x for x in (title, summary, body) if x)
    low = text.lower()
    if not any(word in low for word in _VENUE_WORDS):
        return None  # most articles name no venue: substring scans, no regex, no sentence split
    for sentence in _SENT_END.split(text):
        lower = sentence.lower() if sentence else ""
        if not any(word in lower for word in _VENUE_WORDS):
            continue
        if not (_DIGIT.search(sentence) or "odds" in lower):
            continue
        if not (_VENUE_NAMED.search(sentence) or _VENUE_GENERIC.search(sentence)):
            continue
        if _quotes_odds(sentence):
            return sentence.strip()
    return None
