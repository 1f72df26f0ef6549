"""BM25 tokenization (docs/design.md §3): lower-cased Unicode `\\w+` tokens minus a fixed English stop-word list."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

TOKEN_RE = re.compile(r"\w+")


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    """The fixed stop-word list shipped in `stopwords.txt` (no stemming anywhere)."""
    text = resources.files("forecast_env.retrieval").joinpath("stopwords.txt").read_text()
    return frozenset(w.strip() for w in text.splitlines() if w.strip() and not w.startswith("#"))


def tokenize(text: str | None) -> list[str]:
    """Lower-cased `\\w+` tokens of `text`, stop words removed, order kept."""
    if not text:
        return []
    stop = stopwords()
    return [t for t in TOKEN_RE.findall(text.lower()) if t not in stop]
