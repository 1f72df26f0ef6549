"""The cue lexicon of the `retrieval` agent: a general-purpose English polarity lexicon from PyPI.

The agent must read the news the way any reader would, not with words copied from the sample
world's generator (`docs/design.md §7`). Its cues are the single-word entries of the Pattern
subjectivity lexicon (De Smedt & Daelemans 2012) as shipped in the `textblob` wheel
(`textblob/en/en-sentiment.xml`, released into the public domain, PDDL): about 2,900 word senses,
mostly adjectives, each with a polarity on -1..+1 hand-tagged or inferred from WordNet. A word's
weight is the mean polarity of its senses; a word counts as a cue when that mean is at least
`MIN_POLARITY` in size. Negators are left out (the agent flips the cue that follows one instead).

The lexicon file is read from the installed package without importing `textblob` (whose import
pulls in NLTK); nothing is copied into this repository.

Chosen by measurement on phrasing-bank-a worlds only (benchmarks/log/2026-11-30-acceptance.md): against
VADER's lexicon (the previous source), AFINN-165, Loughran-McDonald's and Harvard-IV's lists.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from functools import cache
from importlib.util import find_spec
from pathlib import Path

from forecast_env.errors import ConfigError

#: Resource that ships the lexicon: (package, path inside the package).
SOURCE = ("textblob", "en/en-sentiment.xml")
#: Smallest |mean polarity| (scale -1..+1) for a word to count: near-neutral words say nothing.
MIN_POLARITY = 0.1
#: Words that negate what follows; never cues themselves.
NEGATORS = ("not", "no", "never", "no longer", "hardly", "nor", "n't", "without", "unlikely to", "failed to")

_WORD = re.compile(r"[a-z][a-z'-]*")


def read_pattern(text: str, where: str = SOURCE[1]) -> dict[str, float]:
    """`word form -> mean polarity over its senses` of a Pattern sentiment XML file's text."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ConfigError(f"{where}: not a Pattern sentiment lexicon ({exc}); reinstall the package "
                          f"(pip install -c constraints.txt --force-reinstall {SOURCE[0]})") from exc
    senses: dict[str, list[float]] = defaultdict(list)
    for n, word in enumerate(root.iter("word"), 1):
        form, polarity = word.get("form"), word.get("polarity")
        try:
            senses[str(form).lower()].append(float(str(polarity)))
        except ValueError as exc:
            raise ConfigError(f"{where}: <word> {n} ({form!r}) has polarity {polarity!r}, expected a number") from exc
    if not senses:
        raise ConfigError(f"{where}: no <word> entries; reinstall the package "
                          f"(pip install -c constraints.txt --force-reinstall {SOURCE[0]})")
    return {form: sum(v) / len(v) for form, v in senses.items()}


def lexicon_path() -> Path:
    """Where the installed package keeps the lexicon (found without importing the package)."""
    package, name = SOURCE
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"the retrieval agent's lexicon needs the {package} package "
                          f"(pip install -c constraints.txt {package})")
    path = Path(next(iter(spec.submodule_search_locations))) / name
    if not path.is_file():
        raise ConfigError(f"{path} is missing from the installed {package}; reinstall it "
                          f"(pip install -c constraints.txt --force-reinstall {package})")
    return path


@cache
def pattern_lexicon() -> dict[str, float]:
    """Every word form of the installed Pattern lexicon (form -> mean polarity over its senses)."""
    path = lexicon_path()
    return read_pattern(path.read_text(encoding="utf-8"), str(path))


@cache
def cue_lexicon(min_polarity: float = MIN_POLARITY) -> dict[str, float]:
    """Cue word -> weight in [-1, 1]: the lexicon's single words whose |mean polarity| >= min_polarity."""
    negators = {n for n in NEGATORS if " " not in n}  # "failed to" negates, yet "failed" stays a cue
    return {w: v for w, v in pattern_lexicon().items()
            if _WORD.fullmatch(w) and abs(v) >= min_polarity and w not in negators}
