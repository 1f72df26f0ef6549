"""The language gate: a page whose title + paragraph sample is confidently not English is dropped at
stage lang (`not_english_page`) before its body is extracted, and only such a page: English pages,
pages with too little sample text and builds with the gate off go through the body path."""

from __future__ import annotations

import pytest

from forecast_env.config import load_config
from forecast_env.corpus_build import body as body_mod
from forecast_env.corpus_build.extract import _parse, extract_page
from forecast_env.corpus_build.langid import GATE_MIN_CHARS, LanguageGate, LanguageIdentifier, page_sample
from forecast_env.corpus_build.pipeline import process_warc
from forecast_env.errors import CorpusError
from tests.support.warc_data import Page, english_body, write_warc

# self-written German news text (a council budget story), three paragraphs
GERMAN = "\n\n".join([
    "Der Stadtrat hat am Dienstagabend nach einer langen Debatte den neuen Haushaltsplan für das kommende "
    "Jahr beschlossen. Die Mehrheit der Abgeordneten stimmte für die Vorlage der Verwaltung.",
    "Nach Angaben der Kämmerin steigen die Ausgaben für Schulen und Kindergärten um knapp zwölf Prozent, "
    "während bei der Straßenunterhaltung gespart werden soll. Die Opposition kritisierte die Pläne scharf.",
    "Die Bürgerinnen und Bürger können den Entwurf bis Ende des Monats im Rathaus einsehen und schriftlich "
    "Stellung nehmen. Eine endgültige Entscheidung des Landes wird im Frühjahr erwartet.",
])


@pytest.fixture(scope="module")
def lid() -> LanguageIdentifier:
    return LanguageIdentifier()


def _count_body_calls(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = body_mod.trafilatura_body

    def counting(html: str, url: str) -> str:
        calls.append(url)
        return real(html, url)

    monkeypatch.setattr(body_mod, "trafilatura_body", counting)
    return calls


def test_sample_is_title_description_and_first_paragraphs() -> None:
    html = ("<html><head><title>Budget passed</title><meta name='description' content='The council voted.'>"
            "</head><body><div>navigation text</div><p>First paragraph.</p><p></p><p>Second one.</p></body></html>")
    assert page_sample(_parse(html)) == "Budget passed The council voted. First paragraph. Second one."
    long = "<html><body>" + "".join(f"<p>{'word ' * 100}{i}</p>" for i in range(20)) + "</body></html>"
    sample = page_sample(_parse(long), max_chars=1000)
    assert 1000 < len(sample) < 1600  # stops after the paragraph that passes max_chars


def test_gate_scores_only_confident_non_english_samples(lid) -> None:
    gate = LanguageGate(lid, 0.05)
    german = _parse("<html><head><title>Haushalt beschlossen</title></head><body>"
                    + "".join(f"<p>{p}</p>" for p in GERMAN.split("\n\n")) + "</body></html>")
    english = _parse("<html><body>" + "".join(f"<p>{p}</p>" for p in english_body(5).split("\n\n")) + "</body></html>")
    short = _parse("<html><head><title>Haushalt beschlossen</title></head><body><p>Der Stadtrat stimmte zu.</p></body></html>")
    score = gate(german)
    assert score is not None and score < 0.05
    assert gate(english) is None
    assert len(page_sample(short)) < GATE_MIN_CHARS and gate(short) is None  # too little text: no evidence
    assert LanguageGate(lid, 0.0)(german) is None  # nothing scores below 0
    with pytest.raises(CorpusError, match="gate_max_score"):
        LanguageGate(lid, 1.5)


def test_extract_page_skips_the_body_of_a_gated_page(lid, monkeypatch) -> None:
    calls = _count_body_calls(monkeypatch)
    html = Page("https://zeitung.example.de/haushalt", title="Haushalt beschlossen", body=GERMAN,
                published="2025-04-12T09:00:00Z").payload().decode()
    ext = extract_page(html, "https://zeitung.example.de/haushalt", gate=LanguageGate(lid, 0.05))
    assert ext.body is None and ext.gate_score is not None and not calls
    assert ext.title == "Haushalt beschlossen" and ext.pub_candidates  # the metadata is still read
    ungated = extract_page(html, "https://zeitung.example.de/haushalt")
    assert ungated.body and ungated.gate_score is None and calls


def test_build_drops_gated_pages_at_lang_without_extracting_them(tmp_path, monkeypatch) -> None:
    calls = _count_body_calls(monkeypatch)
    warc = write_warc(tmp_path / "w.warc.gz", [
        Page("https://zeitung.example.de/haushalt", title="Haushalt beschlossen", body=GERMAN,
             published="2025-04-12T09:00:00Z"),
        Page("https://news.example.com/budget", title="Council approves the budget plan",
             body=english_body(77), published="2025-04-12T09:00:00Z"),
    ])
    articles, dropped, _, _ = process_warc(warc, load_config("corpus"))
    assert articles["url"].to_pylist() == ["https://news.example.com/budget"]
    rows = dropped.to_pylist()
    assert [(r["url"], r["stage"], r["reason"]) for r in rows] == [
        ("https://zeitung.example.de/haushalt", "lang", "not_english_page")]
    assert float(rows[0]["detail"]) < 0.05
    assert calls == ["https://news.example.com/budget"]  # the gated page's body was never extracted

    # gate off: the German page's body is extracted and the language stage drops it on the body
    calls.clear()
    off = load_config("corpus", overrides=["language.gate_max_score=null"])
    articles, dropped, _, _ = process_warc(warc, off)
    assert articles.num_rows == 1
    assert [(r["stage"], r["reason"]) for r in dropped.to_pylist()] == [("lang", "not_english")]
    assert len(calls) == 2


def test_bad_gate_setting_is_refused(tmp_path) -> None:
    from forecast_env.errors import ConfigError

    with pytest.raises(ConfigError, match="gate_max_score"):
        load_config("corpus", overrides=["language.gate_max_score=high"])
    warc = write_warc(tmp_path / "w.warc.gz", [Page("https://news.example.com/a", body=english_body(1))])
    with pytest.raises(CorpusError, match="gate_max_score"):
        process_warc(warc, load_config("corpus", overrides=["language.gate_max_score=2"]))
