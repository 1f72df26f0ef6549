"""Stage 5 quality filters (ports of datatrove's Gopher / C4 / FineWeb): each reason fires, news passes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecast_env.config import load_config
from forecast_env.corpus_build import quality_text as _q
from forecast_env.corpus_build.quality import (
    PROFILE_NAMES,
    PROFILES,
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
from tests.support import quality_reference as _ref

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
# the fast n-gram statistics equal datatrove's walks (the reference loops in tests/support/quality_reference.py)
# ---------------------------------------------------------------------------------------------


_TOKENS = st.lists(st.sampled_from(["a", "bb", "the", "of", "ccc", ".", "x", "yy"]), max_size=160)


@settings(max_examples=400, deadline=None)
@given(words=_TOKENS, n=st.integers(min_value=1, max_value=10))
def test_ngram_index_equals_the_reference_walks(words: list[str], n: int) -> None:
    index = _q._NgramIndex(words)
    assert index.dup_chars(n) == _ref.all_dup_ngram_chars(words, [len(w) for w in words], n)
    assert index.top_chars(n) == _ref.top_ngram_chars(words, n)


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
        assert index.dup_chars(n) == _ref.all_dup_ngram_chars(words, [len(w) for w in words], n), n
        assert index.top_chars(n) == _ref.top_ngram_chars(words, n), n


def test_cached_tokens_are_not_shared_between_texts() -> None:
    a, b = "One two three. Four five.", "Six seven eight."
    assert word_tokenize(a) != word_tokenize(b)
    toks = word_tokenize(a)
    toks.append("mutated")  # callers get a fresh list: the cache cannot be changed from outside
    assert word_tokenize(a)[-1] == "."


# ---------------------------------------------------------------------------------------------
# the shared per-text passes (tokens, Gopher's counts, C4's line pass, FineWeb's word count, the
# abbreviation test) equal the plain ports they replaced
# ---------------------------------------------------------------------------------------------

_PIECES = ["the", "of", "and", "don", "n't", "'s", "'re", "John's", "can't", "rock'n'roll", "I'm", "N'T",
           "3.5", "U.S.", "Mr.", "e.g.", "approx.", "x.", "...", "…", "#", "$", "%", "(", ")", "•", "-", "_",
           "__", "a-b", "'", "’s", "don’t", "café", "naïve", "日本", "١٢", "[1]", "[edit]", "[citation needed]",
           "lorem ipsum", "JavaScript", "{", "}", "privacy policy", "uses cookies", "Hello!", "Why?", '"Yes."',
           "A", "Word", "verylongwordverylongword"]
_SEPS = [" ", " ", " ", "\n", "\n\n", "\t", "\r\n", "\x85", "\u2028", "  \n  ", ""]
_TEXTS = st.lists(st.tuples(st.sampled_from(_PIECES), st.sampled_from(_SEPS)), max_size=120).map(
    lambda parts: "".join(p + s for p, s in parts))


@settings(max_examples=400, deadline=None)
@given(text=_TEXTS)
def test_tokens_equal_the_word_regex(text: str) -> None:
    assert _q._tokens.__wrapped__(text) == tuple(_q._WORD_RE.findall(text))


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS)
def test_gopher_counts_equal_the_token_by_token_reference(text: str) -> None:
    _q._ngram_index.cache_clear()
    assert _q._gopher_stats.__wrapped__(text) == _ref.gopher_stats(text)


def _sent_tokenize_reference(text: str) -> list[str]:
    """sent_tokenize searching the whole sentence for an abbreviation (before the tail search)."""
    saved = _q._ABBREV_TAIL
    _q._ABBREV_TAIL = 10**9
    try:
        return sent_tokenize(text)
    finally:
        _q._ABBREV_TAIL = saved


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS)
def test_sentence_split_reads_only_the_tail_and_agrees(text: str) -> None:
    assert sent_tokenize(text) == _sent_tokenize_reference(text)


def _c4_reference(f: C4Filter, text: str) -> tuple[bool, str | None, str | None, str]:
    """C4Filter.filter as it was before the shared line pass (a line-by-line port of datatrove's)."""
    n_sentences = 0
    kept: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        words = line.split()
        if f.max_word_length != -1 and any(len(w) > f.max_word_length for w in words):
            continue
        if f.remove_citations:
            line = _q._CITATION_RE.sub("", line)
        if f.filter_no_terminal_punct and (not line.endswith(_q._END_PUNCT) or line.endswith("...")):
            continue
        if len(words) < f.min_words_per_line:
            continue
        low = line.lower()
        if f.filter_lorem_ipsum and "lorem ipsum" in low:
            return False, "c4_lorem_ipsum", None, text
        if f.filter_javascript and "javascript" in low:
            continue
        if f.filter_curly_bracket and "{" in line:
            return False, "c4_curly_bracket", None, text
        if f.filter_policy and any(p in low for p in _q.POLICY_SUBSTRINGS):
            continue
        n_sentences += len(_sent_tokenize_reference(line))
        kept.append(line)
    if n_sentences < f.min_sentences:
        return False, "c4_too_few_sentences", f"sentences={n_sentences}", text
    return True, None, None, "\n".join(kept).strip()


_C4_VARIANTS = [
    {**PROFILES["paper"]["c4"]}, {**PROFILES["news"]["c4"]},
    {**PROFILES["paper"]["c4"], "filter_no_terminal_punct": True, "max_word_length": 12, "min_sentences": 1},
    {**PROFILES["news"]["c4"], "min_words_per_line": 0, "remove_citations": False, "filter_policy": False},
    {**PROFILES["news"]["c4"], "filter_javascript": False, "max_word_length": -1, "min_sentences": 0},
]


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS)
def test_c4_shared_line_pass_equals_the_line_by_line_port(text: str) -> None:
    """Every profile's C4 verdict and text, over one shared line pass, equal the plain port's; the word
    count C4 hands to FineWeb is the count of the text it returns."""
    _q._c4_lines.cache_clear()
    for params in _C4_VARIANTS:
        f = C4Filter(**{k: v for k, v in params.items() if k != "enabled"})
        got = f.filter(text)
        assert (got.keep, got.reason, got.detail, got.text) == _c4_reference(f, text), params
        if got.keep:
            assert _q._token_count(got.text) == len(_q._WORD_RE.findall(got.text))


@settings(max_examples=200, deadline=None)
@given(blocks=st.lists(st.lists(st.sampled_from(["w1", "w2", "w3"]), min_size=1, max_size=8), max_size=10),
       order=st.permutations(list(range(5, 11))))
def test_dup_ngrams_in_any_order_equal_the_reference(blocks: list[list[str]], order: list[int]) -> None:
    """The index skips n-grams longer than one known to have no repeat; asked in any order, it agrees."""
    words = [w for block in blocks for w in block] + [w for block in blocks[:2] for w in block]
    index = _q._NgramIndex(words)
    lengths = [len(w) for w in words]
    for n in order:
        assert index.dup_chars(n) == _ref.all_dup_ngram_chars(words, lengths, n), n


def test_profiles_share_the_per_text_passes_and_judge_as_without() -> None:
    """Both profiles on the same bodies, with the shared passes and with every cache cleared before each
    filter: the same verdicts (a cache keyed wrongly would hand one profile's or text's result to
    another)."""
    bodies = [NEWS, NEWS + "\n\nPlease enable JavaScript.\n\nShort.", "Too short.", NEWS.replace(".", " {x}.", 2),
              "lorem ipsum dolor sit amet " * 20, NEWS + "\n\n" + "Advertisement\n\n" * 8]
    filters = {p: build_filters({"profile": p}) for p in PROFILE_NAMES}
    shared = [[apply_filters(b, fs) for fs in filters.values()] for b in bodies]
    for fn in (_q._tokens, _q._gopher_stats, _q._c4_lines, _q._ngram_index):
        fn.cache_clear()
    _q._TOKEN_COUNTS.clear()
    cold = []
    for b in bodies:
        row = []
        for fs in filters.values():
            for fn in (_q._tokens, _q._gopher_stats, _q._c4_lines, _q._ngram_index):
                fn.cache_clear()
            _q._TOKEN_COUNTS.clear()
            row.append(apply_filters(b, fs))
        cold.append(row)
    assert shared == cold


def test_shared_passes_give_the_same_verdicts_from_many_threads() -> None:
    """The per-text caches are shared by threads (a caller may judge bodies from a thread pool): every
    thread's verdicts equal the sequential ones."""
    from concurrent.futures import ThreadPoolExecutor

    bodies = [NEWS + f"\n\nParagraph number {i} adds a sentence about the council's vote. " * (1 + i % 3)
              for i in range(40)] + ["Too short.", "lorem ipsum dolor sit amet " * 30]
    filters = {p: build_filters({"profile": p}) for p in PROFILE_NAMES}

    def judge(body: str) -> list:
        return [(r.keep, r.reason, r.detail, r.text) for r in (apply_filters(body, fs) for fs in filters.values())]

    expected = [judge(b) for b in bodies]
    with ThreadPoolExecutor(8) as pool:
        for _ in range(3):
            assert list(pool.map(judge, bodies * 2)) == expected * 2
