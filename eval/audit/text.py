"""Audit check 4: text leakage in what the agent sees at each scheduled date (docs/design.md §8 check 4).

A detector written for the audit, independent of the corpus build's leakage screen and of the
events screen's judge, reads every text the environment shows at a scheduled (event, date): the
question, the options and the description as cut for that date, and the results of a scripted
reader's tool calls (search hits: title and summary; opened articles: title, summary, body). It
counts two kinds of statements:

* `post_date_fact`: a clause that reports as having happened (a past-tense verb, no future, modal or
  scheduling cue) something dated after the forecast date (an explicit date later than it), and
  "Updated/Last modified <date>" stamps dated after it;
* `resolution`: an option (for a binary event: the question's subject) next to resolution language
  ("won the <question's target>", "was elected <target>", "<subject> <question verb, past tense>
  <target>"), with no preview or modal cue in the sentence.

Previews and schedules ("the vote scheduled for March 14", "is expected to win", "will resolve
Yes if ...") are not counted. The check FAILs when the share of scheduled observations (event-dates)
with at least one finding exceeds `max_text_share` (1%), and lists examples.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from forecast_env.eval.audit.inputs import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    AuditInputs,
    AuditSettings,
    CheckResult,
    as_day,
)

# ---------------------------------------------------------------------------------------------
# dates
# ---------------------------------------------------------------------------------------------

_MONTHS = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
           "oct": 10, "nov": 11, "dec": 12}
_MON = (r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
        r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?")
_DATE_RES = (
    re.compile(r"\b(?P<y>20\d\d)-(?P<m>\d\d)-(?P<d>\d\d)\b"),
    re.compile(rf"\b{_MON}\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(?P<y>20\d\d)\b)?", re.IGNORECASE),
    re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MON}(?:,?\s+(?P<y>20\d\d)\b)?", re.IGNORECASE),
)


def find_dates(text: str, anchor: date) -> list[tuple[date, int, int]]:
    """Dates written in `text` as (date, start, end); a date without a year takes the year that puts
    it nearest to `anchor` (the day the text was published or shown)."""
    found: list[tuple[date, int, int]] = []
    taken: list[tuple[int, int]] = []
    for rx in _DATE_RES:
        for m in rx.finditer(text):
            if any(a <= m.start() < b or a < m.end() <= b for a, b in taken):
                continue
            g = m.groupdict()
            try:
                month = _MONTHS[g["mon"].lower()[:3]] if g.get("mon") else int(g["m"])
                day = int(g["d"])
                if g.get("y"):
                    d = date(int(g["y"]), month, day)
                else:
                    options = []
                    for y in (anchor.year - 1, anchor.year, anchor.year + 1):
                        try:
                            options.append(date(y, month, day))
                        except ValueError:
                            pass
                    if not options:
                        continue
                    d = min(options, key=lambda c: abs((c - anchor).days))
            except (ValueError, KeyError):
                continue
            found.append((d, m.start(), m.end()))
            taken.append((m.start(), m.end()))
    return sorted(found, key=lambda x: x[1])


# ---------------------------------------------------------------------------------------------
# cue lexicons
# ---------------------------------------------------------------------------------------------

#: A future, modal, conditional or scheduling cue: the clause is a preview, not a report.
_PREVIEW = re.compile(
    r"(?:\bmay\b(?!\s+\d)(?-i:(?<=may))|\b(?:will|won't|would|shall|'ll|could|might|must|should|can|if|unless|whether|expected|expects|expect|"
    r"scheduled|schedule|reschedul\w*|slated|set\s+(?:to|for)|due\s+(?:to|on|by|for)|planned|plans?|planning|"
    r"upcoming|ahead\s+of|forthcoming|aims?\s+to|hopes?\s+to|seeks?\s+to|intends?\s+to|likely|unlikely|"
    r"poised|projected|projection|forecasts?|predict\w*|odds|chances?|bid\s+to|race\s+to|next|until|"
    r"deadline|by\s+the\s+end|no\s+later\s+than|tentative\w*|proposed|anticipat\w*|preview|postponed|"
    r"delayed|pushed\s+back|moved\s+to|to\s+be\s+held|is\s+to|are\s+to|was\s+to|were\s+to|resolves?\s+to|"
    r"would\s+resolve|favou?rites?|frontrunner|front-runner|leads?|leading|polling|survey|"
    r"resolution\s+source|this\s+market|before|target\w*|timetable|timeline|fixed\s+for|key\s+date|"
    r"calendar|window|confirmed\s+for|local\s+time)\b)",
    re.IGNORECASE,
)
#: Past-tense reporting of an event (irregular forms and common regular ones).
_PAST_VERBS = (
    "won|lost|beat|defeated|passed|approved|rejected|signed|resolved|closed|ended|finished|concluded|voted|"
    "elected|held|happened|occurred|took\\s+place|completed|launched|released|confirmed|declared|conceded|"
    "secured|clinched|raised|cut|hiked|lowered|reported|recorded|scored|reached|fell|rose|died|resigned|"
    "ruled|sentenced|acquired|merged|collapsed|crashed|announced|named|appointed|chose|chosen|crowned|"
    "awarded|claimed|took|finalized|finalised|ratified|enacted|vetoed|struck|agreed|settled|filed|"
    "unveiled|opened|broke|hit|topped|surpassed|dropped|climbed|jumped|slumped|plunged|tumbled|soared|"
    "announced|became|made|gave|won\\s+out|went|came|left|joined|was|were|had"
)
_PAST = re.compile(rf"\b(?:{_PAST_VERBS})\b|\b(?:has|have|had)\s+(?:been\s+)?\w+(?:ed|en)\b", re.IGNORECASE)
_STAMP = re.compile(r"\b(?:update[sd]?|last\s+(?:updated|modified)|modified|edited|correction|clarification)\b"
                    r"[\s(\[:,\-\u2013\u2014]*(?:on|at|as\s+of)?[\s(\[:]*$", re.IGNORECASE)
_WINNER = re.compile(r"\s*(?:the\s+)?(?:winner|victor|champion)s?\b(?P<of>\s+(?:of|in|at)\b)?", re.IGNORECASE)
#: Resolution language after an option or subject.
_RESOLUTION = re.compile(
    r"\b(?:won|wins|has\s+won|have\s+won|clinched|clinches|captured|"
    r"was\s+(?:elected|declared|named|chosen|crowned|confirmed|appointed|awarded)|"
    r"were\s+(?:elected|declared|named|chosen|crowned|confirmed|appointed|awarded)|"
    r"has\s+been\s+(?:elected|declared|named|chosen|crowned|confirmed|appointed|awarded)|"
    r"(?:is|was)\s+the\s+winner\s+of|emerged\s+(?:as\s+)?(?:the\s+)?winner\s+of|triumphed\s+in|prevailed\s+in)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
#: words right before a date that make it a deadline, not the day something happened ("results reported by
#: 2026-03-10", "completed before May 3", "no later than 12 June"): questions and their criteria name deadlines after
#: the forecast date
DEADLINE = re.compile(r"(?:\bby|\bbefore|\buntil|\btill|\bthrough|\bno\s+later\s+than|\bon\s+or\s+before|\bahead\s+of|"
                      r"\bprior\s+to|\bwithin)\s*(?:the\s+end\s+of\s+)?$", re.IGNORECASE)
_CLAUSE = re.compile(r";|\s[\u2013\u2014-]\s|:\s")
_WORD = re.compile(r"[A-Za-z][A-Za-z'&.-]*")
_STOP = frozenset(
    ["a", "an", "the", "of", "to", "in", "on", "for", "by", "at", "be", "is", "are", "was", "were", "will", "would", "who", "what", "which", "when", "whether", "or", "and", "with", "from", "as", "its", "it", "this", "that", "than", "their", "his", "her", "there", "do", "does", "did", "has", "have", "had", "before", "after", "into", "over", "under", "more", "less", "least", "most", "any", "win", "wins", "won", "happen", "occur", "take", "place", "get", "become", "end", "finish", "next", "new", "yes", "no", "out", "up", "his", "her", "they", "them", "he", "she", "we", "our", "us"]
)
#: Event nouns that many questions share: a target match needs at least one word outside this set
#: ("took the best film award at the guild awards" is a precursor, not the question's award).
_GENERIC = frozenset((
    "best", "top", "award", "awards", "prize", "prizes", "winner", "winners", "champion", "champions",
    "championship", "title", "titles", "cup", "league", "final", "finals", "semifinal", "game", "games",
    "match", "matches", "series", "season", "race", "races", "contest", "election", "elections", "vote",
    "round", "tournament", "trophy", "medal", "first", "place", "2024", "2025", "2026", "2027", "year",
    "month", "week", "day",
))
_CALENDAR = frozenset((
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
))
_IRREGULAR = {"win": "won", "lose": "lost", "beat": "beat", "hold": "held", "take": "took", "become": "became",
              "make": "made", "cut": "cut", "hit": "hit", "set": "set", "leave": "left", "fall": "fell",
              "rise": "rose", "choose": "chose", "break": "broke", "strike": "struck", "go": "went",
              "come": "came", "get": "got", "give": "gave", "run": "ran", "sell": "sold", "buy": "bought",
              "meet": "met", "keep": "kept", "say": "said", "reach": "reached", "pass": "passed"}


def _stem(w: str) -> str:
    return w.lower().strip(".'-")


def _matches(a: str, b: str) -> bool:
    """Same word, or one a prefix of the other with >= 5 letters in common (mayor/mayoral)."""
    a, b = _stem(a), _stem(b)
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= 5 and long_.startswith(short)


def _past_forms(verb: str) -> set[str]:
    v = verb.lower()
    out = {v + "ed", v + "d" if v.endswith("e") else v + "ed"}
    if v.endswith("y") and len(v) > 2 and v[-2] not in "aeiou":
        out.add(v[:-1] + "ied")
    if v in _IRREGULAR:
        out.add(_IRREGULAR[v])
    return out


# ---------------------------------------------------------------------------------------------
# the question's anatomy
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionCues:
    """What the detector looks for about one event: names (options or the binary subject), the past
    forms of the question's verb, and its target words (what is won, passed, reached)."""

    names: tuple[str, ...]
    verbs: frozenset[str]
    targets: frozenset[str]
    start: date | None = None
    #: the question's own proper names (capitalized words other than a leading question word, an option,
    #: a month or a generic event noun): a resolution statement must name one of them, capitalized,
    #: when there are any
    proper: frozenset[str] = frozenset()


_YES_NO = {"yes", "no"}
_QUESTION_WORDS = frozenset(("will", "who", "which", "what", "when", "whether", "does", "did", "is", "are", "can",
                             "has", "have", "would", "should", "how"))


def question_cues(question: str, options: Sequence[str], kind: str, start: date | None = None) -> QuestionCues:
    """Names, verb forms and target words of a question (see `QuestionCues`)."""
    words = _WORD.findall(question or "")
    names: list[str] = []
    verbs: set[str] = set()
    subject_end = 0
    is_yes_no = {str(o).strip().lower() for o in options} == _YES_NO
    if kind == "multi" or not is_yes_no:
        names = [str(o).strip() for o in options if str(o).strip() and str(o).strip().lower() not in _YES_NO]
    if is_yes_no and words and words[0].lower() in ("will", "does", "did", "is", "can", "has", "would"):
        # the subject: the capitalized run after the auxiliary ("Will the Central Bank cut ...")
        i = 1
        if i < len(words) and words[i].lower() == "the":
            i += 1
        j = i
        while j < len(words) and (words[j][0].isupper() or words[j].lower() in ("of", "and", "&")):
            j += 1
        while j > i and words[j - 1].lower() in ("of", "and", "&"):
            j -= 1
        if j > i:
            names.append(" ".join(words[i:j]))
            subject_end = j
            if j < len(words) and words[j][0].islower():
                verbs |= _past_forms(words[j])
                subject_end = j + 1
    names_words = {_stem(w) for n in names for w in _WORD.findall(n)}
    names_words |= {_stem(w) for o in options for w in _WORD.findall(str(o))}
    targets = {_stem(w) for w in words[subject_end:] if len(w) > 2 and _stem(w) not in _STOP
               and _stem(w) not in names_words and not w[0].isdigit()}
    lead = 1 if words and words[0].lower() in _QUESTION_WORDS else 0
    proper = {_stem(w) for w in words[lead:] if w[0].isupper() and len(w) > 2 and _stem(w) not in names_words
              and _stem(w) not in _GENERIC and _stem(w) not in _STOP and _stem(w) not in _CALENDAR}
    return QuestionCues(tuple(n for n in names if len(n) >= 2), frozenset(verbs), frozenset(targets), start,
                        frozenset(proper))


# ---------------------------------------------------------------------------------------------
# the detector
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One flagged statement."""

    kind: str  # post_date_fact | update_stamp | resolution
    sentence: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "sentence": self.sentence[:400], "detail": self.detail}


def sentences(text: str) -> list[str]:
    """Sentences of a text (split after . ! ? before a capital or digit, and at line breaks)."""
    return [s.strip() for s in _SENTENCE.split(text or "") if s and s.strip()]


def _target_after(sentence: str, end: int, targets: frozenset[str], window: int = 6) -> str | None:
    """A target word within `window` words after position `end`, before a preposition that starts
    another phrase ("won the endorsement of the Springfield union" names no target)."""
    for i, w in enumerate(_WORD.findall(sentence[end:])):
        lw = w.lower()
        if i >= window or lw in ("of", "from", "with", "for", "at", "after", "against", "over", "among"):
            return None
        if any(_matches(w, t) for t in targets) and _stem(w) not in _GENERIC:
            return w
    return None


def _name_at(sentence: str, name: str) -> list[int]:
    """End offsets of whole-word occurrences of `name` in `sentence` (case-sensitive for short names)."""
    flags = 0 if len(name) <= 4 else re.IGNORECASE
    return [m.end() for m in re.finditer(rf"(?<![\w]){re.escape(name)}(?![\w])", sentence, flags)]


def detect(text: str, shown_on: date, cues: QuestionCues | None = None, written_on: date | None = None) -> list[Finding]:
    """Flagged statements in `text` shown on `shown_on` (`written_on`: the text's own day, which
    anchors dates written without a year; default `shown_on`)."""
    anchor = written_on or shown_on
    out: list[Finding] = []
    for sent in sentences(text):
        dates = find_dates(sent, anchor)
        # update stamps dated after the forecast date
        for d, a, _ in dates:
            if d > shown_on:
                before = sent[max(0, a - 30):a]
                if _STAMP.search(before):
                    out.append(Finding("update_stamp", sent, f"stamp {d.isoformat()} after {shown_on.isoformat()}"))
                    break
        else:
            for clause in _CLAUSE.split(sent):
                cd = [d for d, a, _ in find_dates(clause, anchor)
                      if d > shown_on and not DEADLINE.search(clause[max(0, a - 40):a])]
                if cd and not _PREVIEW.search(clause) and _PAST.search(clause):
                    out.append(Finding("post_date_fact", sent,
                                       f"reports {max(cd).isoformat()} as past on {shown_on.isoformat()}"))
                    break
        if cues is None or not cues.names or _PREVIEW.search(sent):
            continue
        if cues.start is not None and any(d < cues.start - timedelta(days=1) for d, _, _ in dates):
            continue  # about something before the question opened
        if cues.proper and not any(w[0].isupper() and _matches(w, p) for w in _WORD.findall(sent) for p in cues.proper):
            continue  # a resolution names the question's event (its capitalized names); this sentence does not
        for name in cues.names:
            hit = None
            for end in _name_at(sent, name):
                rest = sent[end:end + 80]
                m = _RESOLUTION.match(rest.lstrip()) or (
                    re.match(rf"\s*(?:{'|'.join(re.escape(v) for v in sorted(cues.verbs))})\b", rest, re.IGNORECASE)
                    if cues.verbs else None)
                if m is None:
                    continue
                offset = end + (len(rest) - len(rest.lstrip()) if m.re is _RESOLUTION else 0) + m.end()
                target = _target_after(sent, offset, cues.targets)
                w = _WINNER.match(sent, offset)
                if target is None and w is not None:
                    # "X was declared the winner" names the outcome; "... the winner of <other thing>" does not
                    target = _target_after(sent, w.end(), cues.targets) if w.group("of") else w.group(0).strip()
                if target is not None:
                    hit = f"{name!r} + {m.group(0).strip()!r} + target {target!r}"
                    break
            if hit:
                out.append(Finding("resolution", sent, hit))
                break
    return out


# ---------------------------------------------------------------------------------------------
# the check
# ---------------------------------------------------------------------------------------------


def observation_texts(seen: Iterable[dict[str, Any]]) -> list[tuple[str, str, date | None]]:
    """(source, text, day written) of everything one scheduled observation showed."""
    out: list[tuple[str, str, date | None]] = []
    for info in seen:
        if info.get("_first"):
            out.append(("question", str(info.get("question") or ""), None))
            out.append(("description", str(info.get("description") or ""), None))
            out.append(("options", "; ".join(str(o) for o in info.get("options") or []), None))
        tr = info.get("tool_result")
        if isinstance(tr, dict):
            for h in tr.get("hits") or []:
                if isinstance(h, dict):
                    out.append((f"hit {h.get('doc_id')}", f"{h.get('title') or ''}. {h.get('summary') or ''}",
                                as_day(h.get("day"))))
            if "body" in tr:
                out.append((f"article {tr.get('doc_id')}",
                            f"{tr.get('title') or ''}. {tr.get('summary') or ''}\n{tr.get('body') or ''}",
                            as_day(tr.get("day"))))
    return out


def screen_agreement(inputs: AuditInputs, seed: int, sample: int = 500) -> dict[str, Any]:
    """The detector against the corpus build's own leakage screen (informational): of the articles
    the build flagged `leak_flag`, how many the detector flags when each is shown on its own
    visibility day; and of a seeded sample of unflagged articles, how many it flags."""
    import numpy as np
    import polars as pl

    shards = inputs.workspace.article_shards()
    if not shards:
        return {}
    cols = ["title", "summary", "body", "day", "leak_flag"]
    store = pl.concat([pl.read_parquet(p, columns=cols) for p in shards])

    def hits(df: pl.DataFrame) -> int:
        return sum(bool(detect(f"{r['title'] or ''}. {r['summary'] or ''}\n{r['body'] or ''}", r["day"]))
                   for r in df.iter_rows(named=True))

    flagged = store.filter(pl.col("leak_flag").fill_null(False))
    clean = store.filter(~pl.col("leak_flag").fill_null(False))
    if clean.height > sample:
        idx = np.sort(np.random.default_rng(seed).choice(clean.height, sample, replace=False))
        clean = clean[idx.tolist()]
    return {"screen_flagged_articles": flagged.height, "screen_flagged_detected": hits(flagged),
            "screen_clean_sampled": clean.height, "screen_clean_detected": hits(clean)}


def check_text(inputs: AuditInputs, settings: AuditSettings, progress: bool = False) -> CheckResult:
    """Check 4: run the scripted reader over every event of the split and scan what it was shown."""
    from forecast_env.eval.audit.replay import ScriptedReader, play_events

    events = inputs.split_events.sort("event_id")
    meta = {r["event_id"]: r for r in events.iter_rows(named=True)}
    reader = ScriptedReader(open_per_date=settings.open_per_date, record=True,
                            second_mode=None if settings.encoder else "bm25")
    play_events(inputs, events["event_id"].to_list(), lambda seed: reader, settings.seed, progress=progress,
                desc="audit text")
    n_obs = 0
    flagged: dict[tuple[str, date], list[dict[str, Any]]] = {}
    kinds: dict[str, int] = {}
    for (eid, day), seen in reader.seen.items():
        n_obs += 1
        r = meta[eid]
        cues = question_cues(r["question"], list(r["options"] or []), r["type"], as_day(r.get("start_day")))
        for source, text, written in observation_texts(seen):
            for f in detect(text, day, cues, written):
                kinds[f.kind] = kinds.get(f.kind, 0) + 1
                flagged.setdefault((eid, day), []).append({"event_id": eid, "date": day.isoformat(),
                                                            "source": source, **f.to_dict()})
    share = len(flagged) / n_obs if n_obs else 0.0
    calibration = screen_agreement(inputs, settings.seed)
    examples = [ex for key in sorted(flagged) for ex in flagged[key][:2]][:30]
    figures = {"scheduled_observations": n_obs, "flagged_observations": len(flagged), "flagged_share": share,
               "max_share": settings.max_text_share, "findings": sum(kinds.values()), "by_kind": kinds,
               "texts_read": reader.texts_seen, "articles_opened": reader.opened, **calibration}
    if n_obs == 0:
        return CheckResult("text", INCONCLUSIVE, "no scheduled observation was played", figures)
    if share > settings.max_text_share:
        return CheckResult("text", FAIL,
                           f"{len(flagged)} of {n_obs} scheduled observations ({share:.1%}) show post-date facts or "
                           f"resolutions (limit {settings.max_text_share:.0%})", figures,
                           [f"flagged_share: {share:.4f} > {settings.max_text_share}"], examples)
    return CheckResult("text", PASS, f"{len(flagged)} of {n_obs} scheduled observations ({share:.1%}) flagged "
                                     f"(limit {settings.max_text_share:.0%})", figures, [], examples)
