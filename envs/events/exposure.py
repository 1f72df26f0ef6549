"""Cross-question exposure (docs/design.md §4 "Cross-question exposure"): one question's text must not
give away another's answer.

Several questions are visible together (world mode lists every open question; a release or a
training export publishes them all). Question q' *exposes* q on day D when q' is visible on D and its
text as shown on D (title, description cut as of D, option labels) presupposes an outcome of q or
states q's event as settled:

* **option rule** (q has distinctive options: not Yes/No/Other, words shared by every option
  stripped): q' names a strict subset of q's options, each next to a presupposing or settled cue
  ("President-elect X", "after X's win", "X, the winner of", "new CEO X", "X won", "X confirmed as the
  winner of", "X took the title race");
* **event rule** (q is a Yes/No question): one sentence of q' holds every key term of q (its
  content words, deadline phrase removed) and one of q's own words in a past form ("agree" ->
  "agreed", "win" -> "won"), with no conditional ("if", "whether", "would") before it.

A mention without a cue ("Will X attend the debate?") is not exposure. Matching is on whole words
of a folded text (HTML stripped, entities decoded, accents removed, case folded), so "Al" never
matches inside "Alan" and "Müller" matches "Muller". The rule never reads a label: it sees texts
and the days they are shown, so an event's exposure day is the same whatever its answer.

Speed: option names and Yes/No questions' rarest key terms are indexed (one dict lookup per word of
each text), so the cost grows with the total text length, not with the number of question pairs.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from typing import TYPE_CHECKING, cast, overload

import polars as pl
import pyarrow as pa

from forecast_env import schema
from forecast_env.envs.events.descriptions import description_as_of, find_date
from forecast_env.envs.events.tables import SOURCE_PREFIX
from forecast_env.store import EVENT_TABLES, Workspace, atomic_write_table, read_table

if TYPE_CHECKING:
    from forecast_env.envs.events.candidate import Candidate
    from forecast_env.envs.events.funnel import BuildRun
    from forecast_env.envs.events.schedule import Schedule

__all__ = ["Exposure", "ExposureReport", "QuestionText", "apply_cut", "cut_exposed", "find_exposures", "fold",
           "recut_stored", "tokens"]

#: Options that never count as distinctive (every Yes/No or bundle has them).
GENERIC_OPTIONS = frozenset({"yes", "no", "other", "others", "none", "none of the above", "neither", "tie", "draw",
                             "another", "someone else", "anyone else", "field"})
#: Function words: never a whole option key, never a key term of a Yes/No question.
STOP = frozenset({
    "a", "an", "the", "of", "to", "in", "on", "for", "by", "at", "be", "is", "are", "was", "were",
    "will", "would", "who", "what", "which", "when", "where", "whether", "or", "and", "with", "from",
    "as", "its", "it", "this", "that", "than", "their", "his", "her", "there", "do", "does", "did",
    "has", "have", "had", "into", "over", "under", "more", "less", "most", "any", "next", "new",
    "these", "those", "then", "between", "before", "after", "during", "until", "end", "out", "up",
    "all", "each", "every", "one", "two", "our", "your", "they", "them", "he", "she", "we", "you", "i",
    "me", "my", "not", "no", "yes"
})
MONTHS = frozenset({"january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
                    "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct",
                    "nov", "dec"})
#: Words after which the rest of a question is its deadline (removed from the key terms).
_DEADLINE_WORDS = frozenset({"by", "before", "until", "through", "till"})
#: Words that make what follows hypothetical, not settled.
CONDITIONAL = frozenset({"if", "whether", "unless", "would", "could", "should", "might", "will", "can",
                         "suppose", "assuming", "hypothetically"})
#: Words of resolution criteria: a sentence that defines how a question resolves states nothing as settled
#: (tuned on the design split of the real texts: "... resolves Yes if the PRC has launched an invasion").
RESOLUTION_WORDS = frozenset({"resolve", "resolves", "resolution", "qualify", "qualifies", "considered", "counts"})
#: The conditionals that make even a noun cue hypothetical ("if X's win is confirmed"); "will" does not
#: ("Will President-elect X ...?" presupposes the election).
HYPOTHETICAL = frozenset({"if", "whether", "unless", "suppose", "assuming", "hypothetically"})

# --- the option rule's cues -------------------------------------------------------------------
#: Nouns naming an outcome: "the winner X", "X, the champion".
RESULT_NOUNS = frozenset({"winner", "winners", "champion", "champions", "victor", "nominee", "laureate",
                          "titleholder", "elect", "successor", "frontrunner-elect"})
#: Nouns of an office: they presuppose only with a marker of novelty ("new CEO X", "incoming PM X").
ROLE_NOUNS = frozenset({"ceo", "president", "minister", "pm", "chancellor", "chair", "chairman", "chairwoman",
                        "speaker", "mayor", "governor", "pope", "leader", "coach", "manager", "director", "head",
                        "secretary", "premier", "captain", "commissioner", "prime", "chief", "king", "queen",
                        "owner", "boss", "senator", "host", "nominee"})
NOVELTY = frozenset({"new", "incoming", "newly", "freshly", "elected", "appointed", "named", "designated",
                     "victorious", "winning", "reigning", "confirmed", "crowned"})
#: Nouns after "X's": "X's win", "X's election".
WIN_NOUNS = frozenset({"win", "victory", "triumph", "election", "reelection", "appointment", "nomination",
                       "inauguration", "coronation", "selection", "confirmation", "landslide", "title",
                       "championship", "takeover", "swearing"})
#: Settled verbs after the name: "X won", "X was elected", "X has been named".
WIN_VERBS = frozenset({"won", "elected", "reelected", "appointed", "named", "chosen", "selected", "confirmed",
                       "crowned", "inaugurated", "defeated", "clinched", "secured", "became", "triumphed",
                       "prevailed", "succeeded", "nominated", "installed", "sworn", "declared", "picked"})
_AUX = frozenset({"has", "have", "had", "was", "were", "been", "being", "officially", "already",
                  "just", "recently", "formally", "finally"})
#: Verbs that name X chosen only in the passive ("X was appointed"); "X appointed a minister" is X acting.
_PASSIVE_ONLY = frozenset({"named", "selected", "picked", "chosen", "nominated", "declared", "appointed", "installed",
                           "confirmed", "elected", "reelected", "sworn", "inaugurated", "crowned"})
_BE = frozenset({"was", "were", "been", "being"})
#: Verbs that settle a contest only with the contest as their object: "X took the title race", "X captured the
#: nomination"; "X took part in", "X took the lead in the race", "X took questions on the election" do not.
TAKE_VERBS = frozenset({"took", "captured", "seized", "grabbed", "bagged"})
#: The contests (and their prizes) such a verb settles when one is its object.
TAKE_OBJECTS = frozenset({"title", "titles", "crown", "championship", "cup", "trophy", "pennant", "prize", "medal",
                          "gold", "race", "contest", "election", "presidency", "nomination", "primary", "victory",
                          "seat", "throne", "office", "final", "series", "award", "search", "league", "premiership"})
#: Words that end the object before a contest is reached: "took the lead in ...", "took part in ...".
_TAKE_STOP = frozenset({"lead", "part", "step", "steps", "aim", "stake", "share", "look", "note", "questions",
                        "question", "place", "advantage", "time", "break", "stage", "on", "at", "about", "in", "to",
                        "for", "from", "with", "over", "toward", "towards", "into", "of", "against", "after",
                        "before", "during", "ahead", "and", "or", "but"})


def _takes_contest(post: Sequence[str], k: int) -> bool:
    """Whether post[k] is a TAKE verb whose object (the next few words, up to a preposition) is a contest."""
    if post[k] not in TAKE_VERBS:
        return False
    for w in post[k + 1: k + 6]:
        if w in TAKE_OBJECTS:
            return True
        if w in _TAKE_STOP:
            return False
    return False
#: Connectives that state what follows as settled: "after X's win", "following X's election".
SETTLED_LEAD = frozenset({"after", "following", "since", "post", "now"})

# --- the event rule's past forms --------------------------------------------------------------
IRREGULAR_PAST = {
    "won": "win", "fell": "fall", "rose": "rise", "became": "become", "lost": "lose", "took": "take",
    "held": "hold", "sold": "sell", "left": "leave", "ran": "run", "met": "meet", "struck": "strike",
    "went": "go", "gave": "give", "made": "make", "said": "say", "beat": "beat", "bought": "buy",
    "broke": "break", "chose": "choose", "drew": "draw", "drove": "drive", "froze": "freeze", "grew": "grow",
    "hit": "hit", "kept": "keep", "led": "lead", "paid": "pay", "quit": "quit", "sent": "send", "shot": "shoot",
    "spent": "spend", "stood": "stand", "sank": "sink", "threw": "throw", "wrote": "write", "came": "come",
    "began": "begin", "told": "tell", "fought": "fight", "caught": "catch", "brought": "bring", "sought": "seek",
    "overtook": "overtake", "withdrew": "withdraw", "undertook": "undertake", "signed": "sign",
}

_TAG = re.compile(r"<[^>]{0,400}>")
_TOKEN = re.compile(r"[^\W_]+|'s_", re.UNICODE)
_POSSESSIVE = re.compile(r"[’'`]s\b")
#: Sentence and clause ends; a period after an initial or an abbreviation ("U.S.", "Dr.", "Dec.") ends nothing.
_SENTENCE = re.compile(r"[.?!;:\n]+(?:\s|$)|\s[-–—]\s")
_ABBREV = frozenset({"mr", "mrs", "ms", "dr", "st", "vs", "jr", "sr", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
                     "sep", "sept", "oct", "nov", "dec", "no", "inc", "corp", "co", "ltd"})


def fold(text: str) -> str:
    """`text` as the detector compares it: HTML tags dropped, entities decoded, accents removed, case folded."""
    t = text or ""
    if "<" in t:
        t = _TAG.sub(" ", t)
    if "&" in t:
        t = html.unescape(t)
    if not t.isascii():
        t = "".join(ch for ch in unicodedata.normalize("NFKD", t) if not unicodedata.combining(ch))
    return t.casefold()


def tokens(text: str) -> list[str]:
    """The whole words of a folded text ("X's" -> "x", "'s"); hyphens and punctuation separate words."""
    out = []
    for w in _TOKEN.findall(_POSSESSIVE.sub(" 's_ ", text)):
        out.append("'s" if w == "'s_" else w)
    return out


def sentences(text: str) -> list[list[str]]:
    """The folded `text` cut into sentences and clauses, each a list of words."""
    t = fold(text)
    out: list[list[str]] = []
    start = 0
    for m in _SENTENCE.finditer(t):
        if t[m.start()] == ".":
            before = t[max(0, m.start() - 5): m.start()]
            last = re.split(r"[^\w]", before)[-1]
            if (len(last) == 1 and last.isalpha()) or last in _ABBREV:
                continue
        part = tokens(t[start: m.start()])
        if part:
            out.append(part)
        start = m.end()
    part = tokens(t[start:])
    if part:
        out.append(part)
    return out


@functools.lru_cache(maxsize=1 << 18)
def stem(word: str) -> str:
    """A crude stem that makes a verb's past and present meet ("agreed"/"agrees"/"agree" -> "agr",
    "topped" -> "top", "won" -> "win")."""
    w = IRREGULAR_PAST.get(word, word)
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            w = w[: -len(suffix)]
            break
    while len(w) > 3 and w[-1] in "es":
        w = w[:-1]
    if len(w) > 2 and w[-1] == w[-2] and w[-1] not in "aeiou":
        w = w[:-1]
    return w


#: Word pairs before a base verb that state its event did not happen ("did not pass", "failed to launch").
NEGATED = frozenset({("did", "not"), ("didn", "t"), ("failed", "to"), ("did", "never"), ("was", "not"),
                     ("were", "not")})


def is_past_of(word: str, base: str) -> bool:
    """Whether `word` is a past form of `base` ("agreed" of "agree", "won" of "win", "cut" never)."""
    if word == base:
        return False
    if IRREGULAR_PAST.get(word) == base:
        return True
    return word.endswith("ed") and stem(word) == stem(base) and not base.endswith("ed")


# ---------------------------------------------------------------------------------------------
# inputs and outputs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionText:
    """What the detector sees of one visible question: its texts and the days it is visible."""

    event_id: str
    question: str
    description: str  # the stored description; cut as of each day with `description_as_of`
    options: tuple[str, ...]
    first_day: date  # first eligible day (max(start day, t_all))
    last_day: date  # t_end day - buffer: the last day world mode lists it
    opened: date | None = None  # the day the question was asked (its start day; None: `first_day`)

    @property
    def asked(self) -> date:
        return self.opened if self.opened is not None else self.first_day


@dataclass(frozen=True)
class Exposure:
    """The first day some visible question exposes event `event_id`, and why."""

    event_id: str
    day: date
    by: str  # the exposing question's event id
    rule: str  # option | event
    where: str  # title | description | options
    words: str  # the triggering words, as folded text
    options: tuple[str, ...] = ()  # option rule: q's options it named with a cue


@dataclass
class ExposureReport:
    """Every event's first exposure, the questions the detector skipped (and why), and counts."""

    exposures: dict[str, Exposure] = field(default_factory=dict)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (event id, what, why)
    candidate_pairs: int = 0  # (q', q) pairs where q' named an option or q's rarest key term
    texts: int = 0

    def skipped_counts(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for _, _, why in self.skipped:
            out[why] += 1
        return dict(sorted(out.items()))


# ---------------------------------------------------------------------------------------------
# what each question offers to be matched
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _OptionKey:
    event_id: str
    option: str
    words: tuple[str, ...]


def option_keys(q: QuestionText, skipped: list[tuple[str, str, str]]) -> tuple[list[_OptionKey], int]:
    """The distinctive options of `q` as word sequences (generic, empty, duplicate and shared words
    dropped), and how many named options it has (the size a strict subset is measured against)."""
    raw = [(o, tuple(tokens(fold(o)))) for o in q.options]
    named = []
    for o, w in raw:
        if not w:
            skipped.append((q.event_id, o, "empty_label"))
        elif " ".join(w) in GENERIC_OPTIONS:
            continue
        else:
            named.append((o, w))
    if len(named) < 2 and not (len(named) == 1 and len(q.options) > 2):
        return [], len(named)  # a Yes/No question (or one named option against generic ones): the event rule's
    # words every named option shares ("Party", "FC") are not distinctive: strip a common prefix and suffix
    pre = 0
    while all(len(w) > pre + 1 for _, w in named) and len({w[pre] for _, w in named}) == 1:
        pre += 1
    suf = 0
    while all(len(w) > pre + suf + 1 for _, w in named) and len({w[-1 - suf] for _, w in named}) == 1:
        suf += 1
    keys: list[_OptionKey] = []
    seen: dict[tuple[str, ...], int] = defaultdict(int)
    for _, w in named:
        seen[w[pre: len(w) - suf]] += 1
    for o, w in named:
        k = w[pre: len(w) - suf]
        if seen[k] > 1:
            skipped.append((q.event_id, o, "identical_labels"))
        elif all(x in STOP or x.isdigit() for x in k) or (len(k) == 1 and len(k[0]) < 2):
            skipped.append((q.event_id, o, "label_not_distinctive"))
        else:
            keys.append(_OptionKey(q.event_id, o, k))
    return keys, len(named)


def _deadline_stripped(words: list[str]) -> list[str]:
    """The question's words without its deadline ("by March 31", "before 2027", "in 2026")."""
    for i, w in enumerate(words):
        if w in _DEADLINE_WORDS and i > 1:
            rest = words[i + 1:]
            if rest and all(x in MONTHS or x.isdigit() or x in STOP or x in {"end", "st", "nd", "rd", "th", "et",
                                                                                "utc", "year", "month", "week"}
                            for x in rest):
                return words[:i]
    if len(words) > 2 and words[-2] in {"in", "during"} and words[-1].isdigit() and len(words[-1]) == 4:
        return words[:-2]
    return words


@dataclass(frozen=True)
class _EventKey:
    event_id: str
    terms: tuple[str, ...]  # the question's key words (surface forms)
    stems: frozenset[str]


def event_key(q: QuestionText, skipped: list[tuple[str, str, str]]) -> _EventKey | None:
    """A Yes/No question's key terms: its content words, deadline removed (None: too few to tell)."""
    opts = {" ".join(tokens(fold(o))) for o in q.options}
    if not opts <= {"yes", "no"}:
        return None
    words = _deadline_stripped(tokens(fold(q.question)))
    terms = tuple(dict.fromkeys(w for w in words if w not in STOP and w != "'s" and len(w) > 1))
    if len(terms) < 3:
        skipped.append((q.event_id, q.question[:80], "too_few_key_terms"))
        return None
    return _EventKey(q.event_id, terms, frozenset(stem(t) for t in terms))


# ---------------------------------------------------------------------------------------------
# cues
# ---------------------------------------------------------------------------------------------


def hypothetical(words: Sequence[str], pos: int, conditionals: frozenset[str] = CONDITIONAL, reach: int = 6) -> bool:
    """Whether a conditional governs words[pos]: the nearest of a conditional and a settled connective
    ("after", "following", "since") within `reach` words before it is the conditional."""
    for w in reversed(words[max(0, pos - reach): pos]):
        if w in SETTLED_LEAD:
            return False
        if w in conditionals:
            return True
    return False


def option_cue(words: Sequence[str], i: int, j: int) -> str | None:
    """The presupposing or settled cue around the name at words[i:j], as text (None: a neutral mention)."""
    pre = list(words[max(0, i - 4): i])
    post = list(words[j: j + 5])
    if hypothetical(words, i, HYPOTHETICAL, 4):
        return None
    # before the name: "president-elect X", "the winner X", "new CEO X", "newly elected X"
    if pre:
        w1 = pre[-1]
        if w1 in RESULT_NOUNS:
            return " ".join(pre[-2:] + ["<name>"])
        if w1 in ROLE_NOUNS and any(w in NOVELTY for w in pre[-3:-1]):
            return " ".join(pre[-3:] + ["<name>"])
        if w1 in NOVELTY and w1 not in {"new", "winning", "named", "confirmed"}:
            # bare "new X" is a name ("New England", "New Mexico"); "new CEO X" is the role branch above
            return " ".join(pre[-2:] + ["<name>"])
    # after the name: "X's win", "X won", "X has been named", "X, the winner of"
    if post:
        if post[0] == "'s" and len(post) > 1 and (post[1] in WIN_NOUNS or (len(post) > 2 and post[2] in WIN_NOUNS)):
            lead = next((w for w in pre if w in SETTLED_LEAD), None)
            return " ".join(([lead] if lead else []) + ["<name>"] + post[:3])
        k = 0
        while k < len(post) and post[k] in _AUX:
            k += 1
        if k < len(post) and post[k] in WIN_VERBS and not hypothetical(words, i):
            # "X appointed a minister" / "X is elected via two rounds" is X acting or a rule, not X chosen:
            # those verbs count in the passive of a past ("X was elected", "X has been named") or in a
            # headline's reduced passive with "as" ("X confirmed as the winner of", "X named as CEO")
            passive = bool(_BE & set(post[:k])) or post[k + 1: k + 2] == ["as"]
            acting = post[k] in _PASSIVE_ONLY and not passive
            if not acting or any(w in SETTLED_LEAD for w in pre):
                return " ".join(["<name>"] + post[: k + 2])
        if k < len(post) and _takes_contest(list(words[j: j + k + 7]), k) and not hypothetical(words, i):
            return " ".join(["<name>"] + post[: k + 4])
        if post[0] == "the" and len(post) > 1 and (post[1] in RESULT_NOUNS or post[1] in NOVELTY
                                                   or post[1] in {"reigning", "defending"}):
            return " ".join(["<name>"] + post[:3])
    return None


def event_settled(sent: Sequence[str], key: _EventKey, have: set[str] | None = None) -> str | None:
    """The words stating Yes/No question `key`'s event as happened in sentence `sent` (None: it does not);
    `have`: the sentence's stems, when already known."""
    if have is None:
        have = {stem(w) for w in sent}
    if not key.stems <= have:
        return None
    have_words = set(sent)
    for pos, w in enumerate(sent):
        for t in key.terms:
            if is_past_of(w, t) or (w == t and pos >= 2 and (sent[pos - 2], sent[pos - 1]) in NEGATED):
                if hypothetical(sent, pos, CONDITIONAL, 10) or RESOLUTION_WORDS & have_words:
                    return None
                lo, hi = max(0, pos - 6), min(len(sent), pos + 6)
                return " ".join(sent[lo:hi])
    return None


# ---------------------------------------------------------------------------------------------
# the detector
# ---------------------------------------------------------------------------------------------


def _segments(q: QuestionText, day: date) -> list[tuple[str, list[list[str]]]]:
    """The texts of `q` as shown on `day`: (where, its sentences)."""
    return [("title", _cached_sentences(q.question)),
            ("description", _cached_sentences(description_as_of(q.description, day))),
            ("options", [tokens(fold(o)) for o in q.options])]


#: A text is cut into sentences once, however many days it is read on (the lists are never modified).
_cached_sentences = functools.lru_cache(maxsize=1 << 14)(sentences)


def _change_days(q: QuestionText) -> list[date]:
    """The days on which `q`'s shown text may change: its first day and each dated appendix inside its window."""
    days = {q.first_day}
    for line in (q.description or "").split("\n"):
        found = find_date(line[:80])
        if found is not None and q.first_day < found[0] + timedelta(days=1) <= q.last_day:
            days.add(found[0] + timedelta(days=1))  # description_as_of shows a paragraph dated d from day d
            days.add(found[0])
    return sorted(d for d in days if q.first_day <= d <= q.last_day)


class _Index:
    """Option names by first word; Yes/No questions by their rarest key stem."""

    def __init__(self, questions: Sequence[QuestionText], report: ExposureReport) -> None:
        self.by_words: dict[tuple[str, ...], list[_OptionKey]] = defaultdict(list)
        self.n_keys: dict[str, int] = {}
        self.asked: dict[str, date] = {q.event_id: q.asked for q in questions}
        self.event_by_stem: dict[str, list[_EventKey]] = defaultdict(list)
        event_keys = []
        for q in questions:
            keys, n_named = option_keys(q, report.skipped)
            self.n_keys[q.event_id] = n_named
            for k in keys:
                self.by_words[k.words].append(k)
            ek = event_key(q, report.skipped)
            if ek is not None:
                event_keys.append(ek)
        self.lengths = sorted({len(w) for w in self.by_words}, reverse=True)
        df: dict[str, int] = defaultdict(int)
        for ek in event_keys:
            for s in ek.stems:
                df[s] += 1
        for ek in event_keys:
            rarest = min(ek.stems, key=lambda s: (df[s], s))
            self.event_by_stem[rarest].append(ek)

    def option_matches(self, words: Sequence[str]) -> list[tuple[int, int, _OptionKey]]:
        """Whole-word matches of option names in `words`, a name inside a longer matched name dropped."""
        found: list[tuple[int, int, _OptionKey]] = []
        n_words = len(words)
        taken_to = 0  # end of the longest name matched so far: shorter names inside it are dropped
        for i in range(n_words):
            for n in self.lengths:  # longest first
                if i + n > n_words:
                    continue
                ks = self.by_words.get(tuple(words[i: i + n]))
                if ks:
                    if i + n <= taken_to:
                        break  # inside a longer name that started earlier
                    found.extend((i, i + n, k) for k in ks)
                    taken_to = max(taken_to, i + n)
                    break  # at one position only the longest name counts
        return found


_FB_ROUND = re.compile(r"^fb-\d{4}-\d{2}-\d{2}-(.+?)(?:-h\d+)?$")


def same_question(a: str, b: str) -> bool:
    """Whether two event ids are one question: the same id, or ForecastBench events of one (source, id) in
    different rounds or horizons (ids `fb-DUE-source-id[-hH]`): a round's copy restates the same background,
    which is not another question giving the answer away."""
    if a == b:
        return True
    ma, mb = _FB_ROUND.match(a), _FB_ROUND.match(b)
    return ma is not None and mb is not None and ma.group(1) == mb.group(1)


def _exposures_in(qp: QuestionText, day: date, index: _Index, pairs: set[tuple[str, str]]
                  ) -> dict[str, tuple[str, str, str, tuple[str, ...]]]:
    """{q: (rule, where, words, options)} for every q that `qp`'s text as shown on `day` exposes."""
    named: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)  # q -> option -> (where, cue)
    mentioned: set[str] = set()
    out: dict[str, tuple[str, str, str, tuple[str, ...]]] = {}
    for where, sents in _segments(qp, day):
        for sent in sents:
            for i, j, k in index.option_matches(sent):
                if same_question(k.event_id, qp.event_id):
                    continue
                mentioned.add(k.event_id)
                if where == "options":
                    continue  # a bare option label carries no cue
                cue = option_cue(sent, i, j)
                if cue is not None:
                    named[k.event_id].setdefault(k.option, (where, cue.replace("<name>", " ".join(k.words))))
            if where == "options":
                continue
            seen_stems = {stem(w) for w in sent}
            for s in seen_stems:
                for ek in index.event_by_stem.get(s, ()):
                    if same_question(ek.event_id, qp.event_id) or ek.event_id in out:
                        continue
                    pairs.add((qp.event_id, ek.event_id))
                    if any(w.isdigit() and len(w) == 4 and 1900 <= int(w) < index.asked[ek.event_id].year
                           for w in sent):
                        continue  # the sentence dates what it recounts before the question was asked: history
                    words = event_settled(sent, ek, seen_stems)
                    if words is not None:
                        out[ek.event_id] = ("event", where, words, ())
    for q in mentioned:
        pairs.add((qp.event_id, q))
    for q, opts in named.items():
        if q in out:
            continue
        if 0 < len(opts) < index.n_keys.get(q, 0):
            first = next(iter(opts.values()))
            out[q] = ("option", first[0], first[1], tuple(sorted(opts)))
    return out


def find_exposures(questions: Iterable[QuestionText], progress: bool = False) -> ExposureReport:
    """Each event's first exposure by another visible question (see the module docstring).

    Label-free: only the texts and the days they are shown enter. An exposing question's text is
    read as of each day its description can change; the first day it exposes q counts, provided that
    text was first shown on or after the day q was asked (`QuestionText.asked`): a text older than
    the question recounts history ("no country has ever left NATO"), not the question's outcome.
    """
    qs = list(questions)
    report = ExposureReport(texts=len(qs))
    index = _Index(qs, report)
    pairs: set[tuple[str, str]] = set()
    items: Iterable[QuestionText] = qs
    if progress:
        from tqdm import tqdm

        items = tqdm(qs, desc="exposure", unit="question")
    for qp in items:
        if qp.last_day < qp.first_day:
            continue
        final = _exposures_in(qp, qp.last_day, index, pairs)
        if not final:
            continue
        # each distinct text the exposer shows, from the first day it is shown; a text shown before q was asked
        # recounts history, not q's outcome (q's event lies after its question was asked), so it never counts
        prev: str | None = None
        done: set[str] = set()
        older: dict[str, set[tuple[str, str]]] = defaultdict(set)  # q -> what the exposer said before q was asked
        for day in _change_days(qp):
            desc = description_as_of(qp.description, day)
            if desc == prev:
                continue
            prev = desc
            now = _exposures_in(qp, day, index, set())
            for q in now:
                rule, where, words, opts = now[q]
                if q in done or (where, words) in older[q]:
                    continue
                if day < index.asked[q]:
                    older[q].add((where, words))
                    continue
                done.add(q)
                e = Exposure(q, day, qp.event_id, rule, where, words, opts)
                old = report.exposures.get(q)
                if old is None or (e.day, e.by) < (old.day, old.by):
                    report.exposures[q] = e
    report.candidate_pairs = len(pairs)
    return report


# ---------------------------------------------------------------------------------------------
# the rule: the exposure day joins the schedule cut
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExposureCut:
    """What the rule did to one event: its cut before and after, and the exposure behind it."""

    event_id: str
    exposure: Exposure
    cut_before: date | None
    cut_after: date
    steps_before: int
    steps_after: int

    @property
    def steps_cut(self) -> int:
        return self.steps_before - self.steps_after


@overload
def apply_cut(cut: date | None, exposure_day: date) -> date: ...
@overload
def apply_cut(cut: date | None, exposure_day: None) -> date | None: ...
@overload
def apply_cut(cut: date | None, exposure_day: date | None) -> date | None: ...
def apply_cut(cut: date | None, exposure_day: date | None) -> date | None:
    """`cut = min(d_known, t_close day - 1, exposure day)`: the exposure day joins the existing cut."""
    if exposure_day is None:
        return cut
    return exposure_day if cut is None else min(cut, exposure_day)


def exposure_record(e: Exposure | None) -> dict[str, object]:
    """The per-event columns of an exposure (all None when the event is not exposed)."""
    if e is None:
        return {"exposure_day": None, "exposed_by": None, "exposure_words": None}
    return {"exposure_day": e.day, "exposed_by": e.by, "exposure_words": f"{e.rule}/{e.where}: {e.words}"[:300]}


def report_dict(report: ExposureReport, cuts: Sequence[ExposureCut], excluded: Sequence[str],
                max_rows: int = 50) -> dict[str, object]:
    """The `cross_question` row of the schedule rules (JSON-able): counts, the rows, what was skipped."""
    rows = sorted(cuts, key=lambda c: (c.exposure.day, c.event_id))
    skipped = report.skipped
    return {
        "visible_questions": report.texts,
        "candidate_pairs": report.candidate_pairs,
        "events_exposed": len(report.exposures),
        "events_cut": sum(1 for c in cuts if c.steps_cut > 0),
        "steps_cut": sum(c.steps_cut for c in cuts),
        "events_excluded": len(excluded),
        "exposures": [{"event_id": c.event_id, "day": c.exposure.day.isoformat(), "by": c.exposure.by,
                       "rule": c.exposure.rule, "where": c.exposure.where, "words": c.exposure.words,
                       "options": list(c.exposure.options), "steps_cut": c.steps_cut}
                      for c in rows[:max_rows]],
        "skipped": report.skipped_counts(),
        "skipped_examples": [{"event_id": e, "what": w, "why": y} for e, w, y in skipped[:20]],
    }


def _frame(table: pa.Table) -> pl.DataFrame:
    # `pl.from_arrow` is typed DataFrame | Series; a Table always gives a DataFrame
    return cast(pl.DataFrame, pl.from_arrow(table))


def _stored_visible(ws: Workspace, prefix: str, buffer_days: int) -> tuple[list[QuestionText], pl.DataFrame | None]:
    """The other source's kept events already in the workspace, as visible questions (and their rows)."""
    path = ws.events_table("events")
    if not path.exists():
        return [], None
    ev = _frame(read_table(path, schema.EVENTS)).filter(~pl.col("event_id").str.starts_with(prefix))
    out = []
    for r in ev.iter_rows(named=True):
        first = max(d for d in (r["start_day"], r["t_all"]) if d is not None) if r["start_day"] else None
        if first is None or r["end_day"] is None:
            continue
        out.append(QuestionText(r["event_id"], r["question"] or "", r["description"] or "", tuple(r["options"] or []),
                                first, r["end_day"] - timedelta(days=buffer_days), r["start_day"]))
    return out, ev


def cut_exposed(run: BuildRun, ws: Workspace, kept: list[tuple[Candidate, Schedule]], progress: bool = False
                ) -> tuple[list[tuple[Candidate, Schedule]], dict[str, Exposure]]:
    """The last global pass of the events build: each kept event's exposure day joins its cut.

    The visible set is every kept event of this build plus the other source's stored events (all
    splits). Returns the events still offered (an event left with no bin is excluded,
    `exposed_early`) and the exposures of the other source's stored events (`recut_stored` applies them
    after the tables are written). Records the `cross_question` schedule rule on `run`.
    """
    sc = run.cfg["schedule"]
    if not sc.get("cross_question", True):
        run.cross_question = {"enabled": False}
        return kept, {}
    buffer = int(sc["buffer_days"])
    prefix = SOURCE_PREFIX[run.source]
    own = [QuestionText(c.event_id, c.question, c.description or "", tuple(c.options), s.grid[0], s.grid[-1],
                        c.start_day) for c, s in kept if s.grid]
    others, _ = _stored_visible(ws, prefix, buffer)
    report = find_exposures(own + others, progress=progress)
    out: list[tuple[Candidate, Schedule]] = []
    cuts: list[ExposureCut] = []
    excluded: list[str] = []
    for c, s in kept:
        e = report.exposures.get(c.event_id)
        c.metrics.update(exposure_record(e))
        rec = run.cuts.setdefault(c.event_id, {})
        rec.update({k: v for k, v in exposure_record(e).items()}, steps_cut_by_exposure=0)
        if e is None or (s.cut is not None and e.day >= s.cut):
            out.append((c, s))
            continue
        before = len(s.steps)
        new_cut = apply_cut(s.cut, e.day)
        s2 = replace(s, cut=new_cut)
        after = len(s2.steps)
        c.metrics.update(cut=s2.cut, cut_by="cross_question", steps_offered=after)
        rec.update(cut=s2.cut, cut_by="cross_question", steps_offered=after, steps_cut_by_exposure=before - after)
        cuts.append(ExposureCut(c.event_id, e, s.cut, new_cut, before, after))
        if not s2.steps:
            run.exclude(c.event_id, "schedule", "exposed_early",
                        f"exposed on {e.day} by {e.by} ({e.rule}/{e.where}: {e.words[:120]}), on or before the last "
                        f"day {s.uncut[0].bin_last} of the first bin")
            excluded.append(c.event_id)
            continue
        out.append((c, s2))
    other_ids = {q.event_id for q in others}
    foreign = {k: v for k, v in report.exposures.items() if k in other_ids}
    run.cross_question = {"enabled": True, **report_dict(report, cuts, excluded),
                          "other_source_exposed": sorted(foreign)}
    return out, foreign


def recut_stored(ws: Workspace, exposures: dict[str, Exposure]) -> list[str]:
    """Apply exposures to stored events of the other source (whole bins from the exposure day on are
    dropped; an event left with no date moves to `excluded`). Only ever cuts more, so a rebuild of
    that source recomputes its exposures from scratch. Returns the event ids whose dates changed."""
    if not exposures:
        return []
    ev = _frame(read_table(ws.events_table("events"), schema.EVENTS))
    sched = _frame(read_table(ws.events_table("schedule"), schema.SCHEDULE))
    changed: list[str] = []
    drop: list[str] = []
    new_rows = []
    for r in ev.iter_rows(named=True):
        e = exposures.get(r["event_id"])
        if e is not None and (r["cut"] is None or e.day < r["cut"]):
            rows = sched.filter(pl.col("event_id") == r["event_id"])
            keep = rows.filter(pl.col("bin_last") < e.day).height
            r.update(exposure_record(e), cut=e.day, cut_by="cross_question", steps_offered=keep)
            if keep < rows.height:
                changed.append(r["event_id"])
            if keep == 0:
                drop.append(r["event_id"])
                continue
        elif e is not None:
            r.update(exposure_record(e))
        new_rows.append(r)
    if not changed and not drop:
        atomic_write_table(ws.events_table("events"),
                           pa.Table.from_pylist(new_rows, schema=schema.EVENTS), schema.EVENTS)
        return []
    cut_of = {k: exposures[k].day for k in changed}
    sched = sched.filter(~pl.col("event_id").is_in(list(cut_of))
                         | (pl.col("bin_last") < pl.col("event_id").replace_strict(cut_of, default=None,
                                                                                    return_dtype=pl.Date)))
    atomic_write_table(ws.events_table("events"), pa.Table.from_pylist(new_rows, schema=schema.EVENTS), schema.EVENTS)
    atomic_write_table(ws.events_table("schedule"), sched.to_arrow(), schema.SCHEDULE)
    if drop:
        for name in ("legs", "beliefs", "trades_daily"):
            t = _frame(read_table(ws.events_table(name), EVENT_TABLES[name]))
            atomic_write_table(ws.events_table(name), t.filter(~pl.col("event_id").is_in(drop)).to_arrow(),
                               EVENT_TABLES[name])
        exc = _frame(read_table(ws.events_table("excluded"), schema.EXCLUDED))
        add = pl.DataFrame([{"event_id": k, "stage": "schedule", "reason": "exposed_early",
                             "detail": f"exposed on {exposures[k].day} by {exposures[k].by} (a later build of the "
                                       "other source)"} for k in drop])
        atomic_write_table(ws.events_table("excluded"), pl.concat([exc, add], how="diagonal_relaxed").to_arrow(),
                           schema.EXCLUDED)
    return changed
