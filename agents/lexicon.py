"""The cue lexicon of the `retrieval` agent: a general-purpose English sentiment lexicon from PyPI.

The agent must read the news the way any reader would, not with words copied from the sample
world's generator (`docs/design.md §7`). Its cues are the single-word entries of VADER's lexicon
(`vader_lexicon.txt`, shipped in the `vaderSentiment` wheel; Hutto & Gilbert 2014, MIT licence):
7,500 tokens rated by ten people each on -4..+4 for social-media and news text. A word is a cue when
the mean rating is at least `MIN_VALENCE` in size; its sign says which way it points. Negators are
left out (the agent flips the cue that follows one instead).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from forecast_env.errors import ConfigError

#: Resource that ships the lexicon: (package, file).
SOURCE = ("vaderSentiment", "vader_lexicon.txt")
#: Smallest |mean rating| (scale -4..+4) for a word to count: VADER's "weak" band (|v| < 1) is left out.
MIN_VALENCE = 1.0
#: Words that negate what follows; never cues themselves.
NEGATORS = ("not", "no", "never", "no longer", "hardly", "nor", "n't", "without", "unlikely to", "failed to")

_WORD = re.compile(r"[a-z][a-z'-]*")


def read_vader(text: str) -> dict[str, float]:
    """`token -> mean rating` of a VADER lexicon file's text (tab-separated: token, mean, sd, ratings)."""
    out: dict[str, float] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        try:
            out[parts[0]] = float(parts[1])
        except (IndexError, ValueError) as exc:
            raise ConfigError(f"{SOURCE[1]} line {n}: expected 'token<TAB>mean rating...', got {line[:60]!r}") from exc
    return out


@cache
def vader_lexicon() -> dict[str, float]:
    """Every entry of the installed VADER lexicon (token -> mean rating)."""
    package, name = SOURCE
    try:
        text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    except ModuleNotFoundError as exc:
        raise ConfigError(f"the retrieval agent's lexicon needs the {package} package "
                          f"(pip install -c constraints.txt {package})") from exc
    return read_vader(text)


@cache
def cue_lexicon(min_valence: float = MIN_VALENCE) -> dict[str, float]:
    """Cue word -> +1.0 (points up) or -1.0 (points down): VADER's single words with |rating| >= min_valence."""
    negators = {n for n in NEGATORS if " " not in n}  # "failed to" negates, yet "failed" stays a cue
    return {w: (1.0 if v > 0 else -1.0) for w, v in vader_lexicon().items()
            if _WORD.fullmatch(w) and abs(v) >= min_valence and w not in negators}
