"""Phrasing banks: the words the sample world's news uses to say which way an event is going.

An article's directional evidence ("the bill cleared its last obstacle", "Vera Novak faded badly")
is what the `retrieval` agent reads. If the agent's cue words were copied from the generator's own
sentences, "retrieval beats uniform" would partly measure the generator and the agent agreeing. So
every world writes its directional evidence from one of two banks whose wording shares no content
word (`docs/design.md §7`):

* bank ``a``: the scenarios' own sentence pools (`scenarios.Scenario.yes/no/pro`) and headlines;
* bank ``b``: the cue phrases and frames below, written apart from bank ``a`` and from any agent.

A world's bank follows from its seed (`default_bank`: even seeds ``a``, odd seeds ``b``) unless
`synthesize(..., phrasing=...)` names one; `truth.json` records it. The agents' cue lexicons come from
a general-purpose resource (the Pattern polarity lexicon shipped in TextBlob, see `forecast_env.agents.lexicon`), and a test checks
that none of them holds a cue phrase of these banks.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass

BANK_NAMES: tuple[str, ...] = ("a", "b")


@dataclass(frozen=True)
class CueBank:
    """Directional cue phrases and the sentence frames that carry them (``${cue}`` in a frame).

    Named options: an `up` cue follows the option it favours (``${opt}``), a `down` cue the option it
    disfavours. Yes/No events: the cue follows the event's short name (``${subj_short}``)."""

    name: str
    named_up: tuple[str, ...]
    named_down: tuple[str, ...]
    named_frames: tuple[str, ...]
    yes_up: tuple[str, ...]
    yes_down: tuple[str, ...]
    yes_frames: tuple[str, ...]
    headlines: tuple[str, ...]

    def cue_phrases(self) -> set[str]:
        """Every cue phrase of the bank, with its ``{a|b}`` choices spelled out, lower-cased."""
        out: set[str] = set()
        for t in self.named_up + self.named_down + self.yes_up + self.yes_down:
            out |= expansions(t)
        return out


BANK_B = CueBank(
    name="b",
    named_up=(
        "surged to the head of the queue",
        "built a commanding advantage",
        "gathered steam",
        "created daylight over the chasing group",
        "emerged as the favourite to beat",
        "picked up a string of high-profile endorsements",
        "went to the head of the queue",
        "edged into pole position",
    ),
    named_down=(
        "slid down the pecking order",
        "tumbled out of contention",
        "faded badly",
        "sank into the chasing group",
        "endured a rough patch",
        "was written off by many insiders",
        "drifted off the pace",
        "encountered serious headwinds",
    ),
    named_frames=(
        "${opt} ${cue} {over the past fortnight|in the past fortnight}, {in the view of|going by} ${institute}.",
        "{By many accounts|On balance}, ${opt} ${cue} {since the turn of the quarter|as the decisive moment comes into view}.",
        "{Insiders|Seasoned watchers} in ${city} {agree|reckon} that ${opt} ${cue}.",
        "{Over the holiday|On Friday evening}, ${opt} ${cue}, {those keeping score|seasoned watchers} noted.",
        "{Talk in ${city}|Chatter in insider circles} {implies|holds} that ${opt} ${cue}.",
        "{Bluntly|Simply stated}, ${opt} ${cue}, {an assessment|a reading} shared by ${institute}.",
    ),
    yes_up=(
        "seems on course to happen as timetabled",
        "appears to be on a smooth path",
        "got past its toughest barrier",
        "is now broadly assumed to happen",
        "edged a decisive stage closer",
        "persuaded the lingering holdouts",
    ),
    yes_down=(
        "seems increasingly in doubt",
        "encountered fresh trouble",
        "appears to have stalled",
        "is now broadly assumed to slide",
        "suffered a serious blow",
        "is facing mounting difficulties",
    ),
    yes_frames=(
        "${subj_short} ${cue}, {in the view of|going by} ${institute}.",
        "{Those kept informed|Well-placed insiders} let it be known that ${subj_short} ${cue}.",
        "{By many accounts|On balance}, ${subj_short} ${cue} {over the past fortnight|in the past fortnight}.",
        "{Insiders|Seasoned watchers} in ${city} {agree|reckon} that ${subj_short} ${cue}.",
        "{Talk in ${city}|Chatter in insider circles} {implies|holds} that ${subj_short} ${cue}.",
        "{Bluntly|Simply stated}, ${subj_short} ${cue}, {an assessment|a reading} shared by ${institute}.",
    ),
    headlines=(
        "{Update|Explainer}: ${subj_short} {up to now|in brief}",
        "${subj_short}: {the fortnight in brief|a fortnight in brief}",
        "{Understanding|Unpacking} ${subj_short}",
    ),
)

#: Content words shared by any English sentence; they never count as phrasing (bank disjointness).
FUNCTION_WORDS = frozenset((
    "a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "from", "with", "into", "over", "off",
    "up", "out", "as", "and", "or", "but", "that", "this", "these", "those", "is", "are", "was", "were",
    "be", "been", "being", "has", "have", "had", "do", "does", "did", "will", "would", "can", "could",
    "may", "might", "must", "shall", "it", "its", "their", "his", "her", "they", "them", "he", "she", "we",
    "our", "you", "your", "i", "me", "my", "not", "no", "so", "than", "then", "there", "here", "when",
    "while", "after", "before", "since", "until", "about",
))

_SLOT = re.compile(r"\$\{\w+\}")
_WORD = re.compile(r"[a-z][a-z'-]*")


def expansions(template: str) -> set[str]:
    """Every text `template` can produce, its ``{a|b}`` choices spelled out (slots left as written)."""
    m = re.search(r"(?<!\$)\{([^{}]*)\}", template)
    if not m:
        return {re.sub(r"\s+", " ", template).strip().lower()}
    out: set[str] = set()
    for alt in m.group(1).split("|"):
        out |= expansions(template[: m.start()] + alt + template[m.end():])
    return out


def content_words(templates: tuple[str, ...] | list[str]) -> set[str]:
    """The content words of `templates` (slots and FUNCTION_WORDS left out), lower-cased."""
    words: set[str] = set()
    for t in templates:
        for text in expansions(t):
            words |= {w for w in _WORD.findall(_SLOT.sub(" ", text)) if w not in FUNCTION_WORDS}
    return words


def default_bank(seed: int) -> str:
    """The bank a world of `seed` writes its evidence with (even seeds ``a``, odd seeds ``b``)."""
    return BANK_NAMES[seed % len(BANK_NAMES)]


def check_bank(name: str) -> str:
    """`name` if it is a bank, else a ValueError naming the banks."""
    if name not in BANK_NAMES:
        raise ValueError(f"unknown phrasing bank {name!r}; choose one of {', '.join(BANK_NAMES)}")
    return name


class CueDeck:
    """Evidence templates of one bank for one article, drawn without replacement (refilled when spent),
    so an article repeats neither a frame nor a cue before it has used them all."""

    def __init__(self, rng: random.Random, bank: CueBank, yes_no: bool) -> None:
        self._rng = rng
        self._pools = {
            "frame": bank.yes_frames if yes_no else bank.named_frames,
            True: bank.yes_up if yes_no else bank.named_up,
            False: bank.yes_down if yes_no else bank.named_down,
        }
        self._left: dict[object, list[str]] = {k: [] for k in self._pools}

    def _pop(self, key: object) -> str:
        if not self._left[key]:
            self._left[key] = list(self._pools[key])
            self._rng.shuffle(self._left[key])
        return self._left[key].pop()

    def draw(self, up: bool) -> str:
        """A frame with an `up` (or down) cue filled in; the other slots are left for the caller."""
        return self._pop("frame").replace("${cue}", self._pop(up))


def all_cue_templates(bank: CueBank) -> list[str]:
    """Every (frame, cue) sentence template of `bank` (for tests and inspection)."""
    named = [f.replace("${cue}", c) for f, c in itertools.product(bank.named_frames, bank.named_up + bank.named_down)]
    yes = [f.replace("${cue}", c) for f, c in itertools.product(bank.yes_frames, bank.yes_up + bank.yes_down)]
    return named + yes


__all__ = ["BANK_B", "BANK_NAMES", "FUNCTION_WORDS", "CueBank", "CueDeck", "all_cue_templates", "check_bank",
           "content_words", "default_bank", "expansions"]
