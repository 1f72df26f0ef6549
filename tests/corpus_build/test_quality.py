"""Stage 5 quality filters (ports of datatrove's Gopher / C4 / FineWeb): each reason fires, news passes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecast_env.config import load_config
from forecast_env.corpus_build import quality as _q
from forecast_env.corpus_build.quality import (
    C4Filter,
    FineWebFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    apply_filters,
    build_filters,
    sent_tokenize,
    word_tokenize,
)
from forecast_env.errors import ConfigError
from forecast_env.schema import CORPUS_REASONS

NEWS = "\n\n".join(
    [
        "The city council voted on Tuesday to approve a new budget that raises spending on schools and roads by four percent.",
        "Mayor Jane Smith said the plan was the result of months of negotiation with residents, unions and local businesses.",
        "Critics argued that the increase would place a heavy burden on taxpayers at a time when many families are struggling with high prices.",
        "The budget includes funding for 40 new teachers, repairs to three bridges and an expansion of the city's bus network.",
        "Council member Robert Lee, who voted against the measure, warned that revenue forecasts were too optimistic.",
        "Officials expect the new spending to take effect at the start of the fiscal year in July, pending a final review.",
        "Residents will have a chance to comment on the details at a public hearing scheduled for next month at city hall.",
    ]
)


def _reason(f, text: str) -> str | None:
    return f.filter(text).reason


def test_clean_news_article_passes_every_filter() -> None:
    filters = build_filters(load_config("corpus")["quality"])
    assert [type(f).__name__ for f in filters] == [
        "PageRule",  # the default profile, news, judges the page first
        "GopherQualityFilter",
        "GopherRepetitionFilter",
        "C4Filter",
        "FineWebFilter",
    ]
    res = apply_filters(NEWS, filters)
    assert res.keep and res.reason is None
    assert res.text.count("\n") == 6  # C4 rejoins kept lines with single newlines


def test_gopher_quality_reasons() -> None:
    g = GopherQualityFilter()
    assert _reason(g, "Too short a text with the words.") == "gopher_short_doc"
    assert _reason(GopherQualityFilter(max_doc_words=60), NEWS) == "gopher_long_doc"
    assert _reason(g, " ".join(["a of to it is an be"] * 20)) == "gopher_mean_word_length"
    assert _reason(g, " ".join(["internationalization"] * 60)) == "gopher_mean_word_length"
    assert _reason(g, NEWS + " " + " ".join(["#tag"] * 40)) == "gopher_symbol_ratio"
    assert _reason(g, NEWS + " " + " ".join(["wait..."] * 40)) == "gopher_ellipsis_ratio"
    bullets = "\n".join(f"- item number {i} with the words of that list" for i in range(30))
    assert _reason(g, bullets) == "gopher_bullet_lines"
    ell = "\n".join(f"{s[:80]}..." if i % 2 else s for i, s in enumerate(NEWS.split("\n\n")))
    assert _reason(GopherQualityFilter(max_symbol_word_ratio=None), ell) == "gopher_ellipsis_lines"
    nums = NEWS + " " + " ".join(str(i) for i in range(100, 200))
    assert _reason(g, nums) == "gopher_alpha_words"
    no_stop = " ".join(["Markets rallied strongly during afternoon trading sessions yesterday"] * 8)
    assert _reason(g, no_stop) == "gopher_stop_words"
    assert g.filter(NEWS).keep


def test_gopher_repetition_reasons() -> None:
    r = GopherRepetitionFilter()
    paras = NEWS.split("\n\n")
    assert _reason(r, "\n\n".join(paras + paras[:4])) == "gopher_dup_para_frac"
    long_dup = "\n\n".join(paras + [paras[2] + " " + paras[3]] * 3)
    assert _reason(GopherRepetitionFilter(dup_para_frac=None), long_dup) == "gopher_dup_para_char_frac"
    lines = "\n".join(paras + paras[:4])
    assert (
        _reason(GopherRepetitionFilter(dup_para_frac=None, dup_para_char_frac=None), lines)
        == "gopher_dup_line_frac"
    )
    assert (
        _reason(
            GopherRepetitionFilter(dup_para_frac=None, dup_para_char_frac=None, dup_line_frac=None), lines
        )
        == "gopher_dup_line_char_frac"
    )
    base = {
        "dup_line_frac": None,
        "dup_para_frac": None,
        "dup_line_char_frac": None,
        "dup_para_char_frac": None,
    }
    spam = NEWS + " " + " ".join(["buy now"] * 120)
    assert _reason(GopherRepetitionFilter(**base), spam) == "gopher_top_2_gram"
    for n in (3, 4):
        only = GopherRepetitionFilter(**base, top_n_grams=[(n, [0, 0, 0.18, 0.16][n - 1])], dup_n_grams=[])
        assert _reason(only, NEWS + " " + " ".join(["very big sale today"] * 80)) == f"gopher_top_{n}_gram"
    for n in range(5, 11):
        only = GopherRepetitionFilter(**base, top_n_grams=[], dup_n_grams=[(n, 0.10)])
        assert _reason(only, NEWS + " " + paras[1] + " " + paras[2]) == f"gopher_dup_{n}_gram"
    assert r.filter(NEWS).keep


def test_c4_line_cleanup_and_document_reasons() -> None:
    c4 = C4Filter()
    noisy = (
        "\n".join(
            [
                "Please enable JavaScript to view this page correctly today.",
                "Read our privacy policy and terms of use before you continue.",
                "Share",
                "x" * 1001 + " is a very long token line",
                "The mayor said[1] the plan[edit] was approved[citation needed] by the council today.",
            ]
        )
        + "\n"
        + NEWS
    )
    res = c4.filter(noisy)
    assert res.keep
    assert "JavaScript" not in res.text and "privacy" not in res.text and "Share" not in res.text
    assert "xxxx" not in res.text and "[1]" not in res.text and "[edit]" not in res.text
    assert "The mayor said the plan was approved by the council today." in res.text
    assert _reason(c4, NEWS + "\nLorem ipsum dolor sit amet, consectetur.") == "c4_lorem_ipsum"
    assert _reason(c4, NEWS + "\nThe function returns {a: 1} as the value.") == "c4_curly_bracket"
    assert (
        _reason(c4, "One sentence here only.\nTwo sentences there. Yes indeed it is.")
        == "c4_too_few_sentences"
    )
    # The terminal-punctuation line rule is off by default (FineWeb), on when asked.
    no_punct = NEWS + "\nA line without any terminal punctuation mark"
    assert "without any terminal" in c4.filter(no_punct).text
    assert "without any terminal" not in C4Filter(filter_no_terminal_punct=True).filter(no_punct).text


def test_fineweb_reasons() -> None:
    fw = FineWebFilter()
    assert (
        _reason(
            fw,
            "\n".join(
                ["A headline without a stop"] * 3 + [f"Item {i} of the list without stop" for i in range(30)]
            ),
        )
        == "fineweb_punct_lines"
    )
    short = "\n".join(["Short line here."] * 1 + [f"Tiny {i}." for i in range(10)] + NEWS.split("\n\n")[:2])
    assert _reason(fw, short) == "fineweb_short_lines"
    dup = "\n".join(NEWS.split("\n\n") + [NEWS.split("\n\n")[0]])
    assert _reason(fw, dup) == "fineweb_dup_line_chars"
    listy = "\n".join(f"Go {i}." for i in range(40))
    assert (
        _reason(FineWebFilter(short_line_thr=1.1, char_duplicates_ratio=1.0), listy)
        == "fineweb_newline_ratio"
    )
    assert fw.filter(NEWS.replace("\n\n", "\n")).keep


def test_every_reason_is_a_schema_code() -> None:
    allowed = set(CORPUS_REASONS["quality"])
    assert {f"gopher_top_{n}_gram" for n in (2, 3, 4)} <= allowed
    assert {f"gopher_dup_{n}_gram" for n in range(5, 11)} <= allowed


def test_build_filters_config() -> None:
    cfg = load_config("corpus")["quality"]
    cfg = {**cfg, "c4": {**cfg["c4"], "enabled": False}}
    assert [f.name for f in build_filters(cfg)] == ["page", "gopher_quality", "gopher_repetition", "fineweb"]
    with pytest.raises(ConfigError, match="quality.fineweb"):
        build_filters({"fineweb": {"bogus": 1}})
    with pytest.raises(ConfigError, match="unknown filter"):
        build_filters({"gopherr": {}})
    with pytest.raises(ConfigError, match="top_n_grams"):
        build_filters({"gopher_repetition": {"top_n_grams": [[7, 0.1]]}})


def test_apply_filters_first_failure_and_text_flow() -> None:
    filters = build_filters(load_config("corpus")["quality"])
    res = apply_filters("Too short.", filters)
    assert (res.keep, res.reason) == (False, "gopher_short_doc")
    res = apply_filters(NEWS + "\n\nPlease enable JavaScript in your browser to continue.", filters)
    assert res.keep and "JavaScript" not in res.text


def test_tokenizers() -> None:
    assert word_tokenize("I don't think it's 3.5% of U.S. sales...") == [
        "I",
        "do",
        "n't",
        "think",
        "it",
        "'s",
        "3.5",
        "%",
        "of",
        "U.S",
        ".",
        "sales",
        "...",
    ]
    assert sent_tokenize(
        'Mr. Smith went to Washington. He met John F. Kennedy. The U.S. Senate voted! Why? "Yes." Then'
    ) == [
        "Mr. Smith went to Washington.",
        "He met John F. Kennedy.",
        "The U.S. Senate voted!",
        "Why?",
        '"Yes."',
        "Then",
    ]


# ---------------------------------------------------------------------------------------------
# the fast n-gram statistics equal datatrove's walks (the reference loops kept in quality.py)
# ---------------------------------------------------------------------------------------------


_TOKENS = st.lists(st.sampled_from(["a", "bb", "the", "of", "ccc", ".", "x", "yy"]), max_size=160)


@settings(max_examples=400, deadline=None)
@given(words=_TOKENS, n=st.integers(min_value=1, max_value=10))
def test_ngram_index_equals_the_reference_walks(words: list[str], n: int) -> None:
    index = _q._NgramIndex(words)
    assert index.dup_chars(n) == _q._all_dup_ngram_chars(words, [len(w) for w in words], n)
    assert index.top_chars(n) == _q._top_ngram_chars(words, n)


@settings(max_examples=200, deadline=None)
@given(blocks=st.lists(st.lists(st.sampled_from(["w1", "w2", "w3", "w4", "w5", "w6"]), min_size=1, max_size=12),
                       max_size=12), reps=st.lists(st.integers(min_value=0, max_value=4), max_size=12))
def test_ngram_index_on_repeated_passages(blocks: list[list[str]], reps: list[int]) -> None:
    """Bodies made of repeated passages (captions, boilerplate) hit the skip-after-repeat rule often."""
    words: list[str] = []
    for i, block in enumerate(blocks):
        words += block * (1 + (reps[i] if i < len(reps) else 0))
    index = _q._NgramIndex(words)
    for n in range(2, 11):
        assert index.dup_chars(n) == _q._all_dup_ngram_chars(words, [len(w) for w in words], n), n
        assert index.top_chars(n) == _q._top_ngram_chars(words, n), n


def test_cached_tokens_are_not_shared_between_texts() -> None:
    a, b = "One two three. Four five.", "Six seven eight."
    assert word_tokenize(a) != word_tokenize(b)
    toks = word_tokenize(a)
    toks.append("mutated")  # callers get a fresh list: the cache cannot be changed from outside
    assert word_tokenize(a)[-1] == "."
